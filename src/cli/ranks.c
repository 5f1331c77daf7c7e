/* cli/ranks.c — what the ranks of a data-parallel run compare at start-up
 * (ranks.h), built from the command's option table: one item per option (its
 * exact value: numbers by their bits, so 1e-6 and 1.0000001e-6 differ), one per
 * input an option names (its contents), and the checkpoint a resume starts
 * from. No option is left out: a data-parallel run is one command line run N
 * times, and even the options that only rank 0 acts on (output_dir, logging,
 * quiet) would say that the ranks were started as parts of different runs.
 *
 * Is not: the comparison itself (dist/agree.c), nor loading anything (an input
 * that cannot be read is compared as no opinion here and reported by the
 * loading, with its rank, as before). */
#include "cli/ranks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "dist/dist.h"
#include "io/digest.h"
#include "io/fsutil.h"
#include "train/checkpoint.h"

static const char *g_cmd;

static void report_timeout(const char *msg) {
    fprintf(stderr, "grpo %s: %s\n", g_cmd, msg);
    fflush(stderr);
}

typedef struct {
    DistItem *v;
    int n, cap;
} Items;

static DistItem *add_item(Items *it) {
    if (it->n == it->cap) it->v = xrealloc(it->v, sizeof(DistItem) * (size_t)(it->cap = it->cap ? 2 * it->cap : 64));
    DistItem *d = &it->v[it->n++];
    memset(d, 0, sizeof *d);
    return d;
}

/* The shortest %g that reads back as x (as a float when is_f32). */
static void shortest(char *buf, size_t cap, double x, int is_f32) {
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (is_f32 ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x) return;
    }
}

/* The exact value of o (at v) into d. */
static void value_digest(Digest *d, const OptSpec *o, const void *v) {
    switch (o->type) {
    case OPT_BOOL: case OPT_INT: case OPT_ENUM: digest_add(d, v, sizeof(int)); break;
    case OPT_LONG: digest_add(d, v, sizeof(long)); break;
    case OPT_U64: digest_add(d, v, sizeof(uint64_t)); break;
    case OPT_F64: digest_add(d, v, sizeof(double)); break;
    case OPT_F32: digest_add(d, v, sizeof(float)); break;
    case OPT_MIB: digest_add(d, v, sizeof(size_t)); break;
    case OPT_STR: case OPT_CONFIG: case OPT_JSON: digest_add_str(d, *(const char *const *)v); break;
    case OPT_LIST: {
        const StrList *l = v;
        digest_add_u64(d, (uint64_t)l->n);
        for (int i = 0; i < l->n; i++) digest_add_str(d, l->v[i]);
        break;
    }
    case OPT_F64_LIST: {
        const F64List *l = v;
        digest_add_u64(d, (uint64_t)l->n);
        if (l->n) digest_add(d, l->v, sizeof(double) * (size_t)l->n);
        break;
    }
    }
}

static void set_digest(DistItem *it, const Digest *d) { it->digest[0] = d->h[0], it->digest[1] = d->h[1]; }

/* An input's contents as an item named "WHAT PATH"; a path that cannot be read
 * is no opinion (digest 0): the loading reports it. */
static void add_input(Items *it, const char *what, const char *path) {
    DistItem *d = add_item(it);
    char shown[100];
    snprintf(d->name, sizeof d->name, "%s %s", what, text_escaped(shown, sizeof shown, path, 80));
    Digest h;
    digest_init(&h);
    GrpoErr err;
    if (digest_path(&h, path, &err) == 0) set_digest(d, &h);
}

static int is_input(const OptSpec *o) {
    return o->type == OPT_CONFIG || (o->type == OPT_STR && (o->flags & (OPT_MODEL_PATH | OPT_DATA_PATH | OPT_INPUT)));
}

/* The string value of the option called name, or NULL. */
static const char *option_text(const OptGroup *g, int ng, const void *obj, const char *name) {
    size_t base;
    const OptSpec *o = opts_find(g, ng, name, strlen(name), &base);
    return o && o->type == OPT_STR ? *(const char *const *)opt_value(o, obj, base) : NULL;
}

/* The checkpoint a resume starts from: latest resolved (the path compared: the
 * ranks' output_dir may hold different checkpoints), and its files. */
static void add_resume(Items *it, const OptGroup *g, int ng, const void *obj) {
    const char *spec = option_text(g, ng, obj, "resume_from_checkpoint"),
               *out = option_text(g, ng, obj, "output_dir");
    if (!spec || !out) return;
    GrpoErr err;
    char *dir = ckpt_resolve(out, spec, &err);
    if (!strcmp(spec, "latest")) {
        DistItem *d = add_item(it);
        snprintf(d->name, sizeof d->name, "--resume_from_checkpoint latest");
        char shown[120];
        snprintf(d->shown, sizeof d->shown, "%s", dir ? text_escaped(shown, sizeof shown, dir, 100) : "none");
        Digest h;
        digest_init(&h);
        digest_add_str(&h, dir);
        set_digest(d, &h);
    }
    if (dir) add_input(it, "checkpoint", dir);
    free(dir);
}

static void build_items(Items *it, const char *cmd, const OptGroup *g, int ng, const void *obj) {
    DistItem *d = add_item(it);
    snprintf(d->name, sizeof d->name, "the command");
    snprintf(d->shown, sizeof d->shown, "grpo %s", cmd);
    Digest h;
    digest_init(&h);
    digest_add_str(&h, cmd);
    set_digest(d, &h);
    char *text = xmalloc(1 << 16);
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            const void *v = opt_value(o, obj, g[k].base);
            d = add_item(it);
            snprintf(d->name, sizeof d->name, "--%s", o->name);
            if (o->type == OPT_F64 || o->type == OPT_F32) {
                double x = o->type == OPT_F64 ? *(const double *)v : *(const float *)v;
                if (isnan(x) && (o->flags & OPT_UNSET_NAN)) text[0] = 0;
                else shortest(text, 64, x, o->type == OPT_F32);
            } else {
                opt_format(o, v, text, 1 << 16);
            }
            if (!text[0]) snprintf(d->shown, sizeof d->shown, "unset");
            else text_escaped(d->shown, sizeof d->shown, text, 100);
            digest_init(&h);
            value_digest(&h, o, v);
            set_digest(d, &h);
        }
    free(text);
    for (int k = 0; k < ng; k++) /* then the inputs' contents: a value that differs is named first */
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            const char *path = is_input(o) ? *(const char *const *)opt_value(o, obj, g[k].base) : NULL;
            if (path && *path) add_input(it, o->name, path);
        }
    add_resume(it, g, ng, obj);
}

int cli_ranks_agree(const char *cmd, int parse_rc, const OptGroup *g, int ng, const void *obj) {
    if (dist_size() == 1) return parse_rc;
    g_cmd = cmd;
    size_t base;
    const OptSpec *t = opts_find(g, ng, "ddp_timeout", strlen("ddp_timeout"), &base);
    dist_set_timeout(t && !parse_rc ? (double)*(const int *)opt_value(t, obj, base) : 0, report_timeout);
    Items it = {0};
    if (!parse_rc) build_items(&it, cmd, g, ng, obj);
    int rc;
    GrpoErr err;
    int agreed = dist_agree(parse_rc, it.v, it.n, &rc, &err);
    free(it.v);
    if (agreed >= 0) return agreed ? rc : parse_rc;
    if (dist_rank() == 0) fprintf(stderr, "grpo %s: %s\n", cmd, err.msg);
    return 2;
}
