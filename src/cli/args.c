/* cli/args.c — the command line and YAML files over declared options (args.h). */
#include "cli/args.h"

#include "cli/trl_keys.h"
#include "core/text.h"
#include "core/version.h"
#include "gen/options.h"
#include "io/fsutil.h"
#include "io/hf_cache.h"
#include "train/args.h"

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <yaml.h>

#include "ops/gemm.h"

/* Strings and lists allocated while parsing (YAML values, list arrays). */
static void **arena;
static int arena_n, arena_cap;

static void *keep(void *p) {
    if (arena_n == arena_cap) arena = xrealloc(arena, sizeof(void *) * (arena_cap = arena_cap ? arena_cap * 2 : 32));
    arena[arena_n++] = p;
    return p;
}

/* Keys collected over the YAML files and the command line of one args_parse:
 * TRL keys accepted without effect (one warning at the end) and unknown names
 * (one error listing them all). */
typedef struct {
    const char *name, *where; /* where: "FILE:LINE", or NULL for the command line */
    const TrlKey *trl;        /* NULL for an unknown name */
} SeenKey;
static SeenKey *seen;
static int n_seen, cap_seen;

/* Usage errors of one args_parse (bad values, refused TRL values, missing values),
 * each a line, printed together with the unknown keys at the end. */
static char **errors;
static int n_errors, cap_errors;

/* The other command whose settings a --config file may hold (args_config_also). */
static const char *also_cmd;
static const OptGroup *also_g;
static int also_ng;

static void usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1600];
    int k = snprintf(msg, sizeof msg, "grpo %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    char line[1024]; /* one line whatever a value held (text_one_line) */
    text_one_line(line, sizeof line, msg, n < 0 || (size_t)n >= sizeof msg - (size_t)k);
    if (n_errors == cap_errors) errors = xrealloc(errors, sizeof(char *) * (cap_errors = cap_errors ? 2 * cap_errors : 8));
    errors[n_errors++] = keep(xstrdup(line));
}

void args_free(void) {
    for (int i = 0; i < arena_n; i++) free(arena[i]);
    free(arena);
    arena = NULL;
    arena_n = arena_cap = 0;
    free(seen);
    seen = NULL;
    free(errors);
    errors = NULL;
    n_errors = cap_errors = 0;
    n_seen = cap_seen = 0;
    also_cmd = NULL, also_g = NULL, also_ng = 0;
}

void args_config_also(const char *cmd, const OptGroup *g, int ng) {
    also_cmd = cmd, also_g = g, also_ng = ng;
}

/* key is a setting of also_cmd's: one of its options or TRL keys. */
static int also_setting(const char *key) {
    size_t base;
    return also_cmd && (opts_find(also_g, also_ng, key, strlen(key), &base) || trl_key_find(also_cmd, key, strlen(key)));
}

static void note_key(const char *name, const char *where, const TrlKey *trl) {
    for (int i = 0; trl && i < n_seen; i++)
        if (seen[i].trl == trl) return; /* listed once (a YAML file may repeat a key) */
    if (n_seen == cap_seen) seen = xrealloc(seen, sizeof *seen * (cap_seen = cap_seen ? 2 * cap_seen : 16));
    seen[n_seen++] = (SeenKey){keep(xstrdup(name)), where ? keep(xstrdup(where)) : NULL, trl};
}

/* One error naming every unknown key, each with where it was and a likely
 * intended name; returns 2 if there was any. */
static int report_unknown(const char *cmd, const OptGroup *g, int ng) {
    int n_unknown = 0;
    for (int i = 0; i < n_seen; i++) n_unknown += !seen[i].trl;
    if (!n_unknown) return 0;
    const char *cands[1024];
    int nc = 0;
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n && nc < 512; i++)
            if (g[k].specs[i].type != OPT_CONFIG) cands[nc++] = g[k].specs[i].name;
    nc += trl_key_names(cmd, cands + nc, 1024 - nc);
    if (n_unknown > 1) fprintf(stderr, "grpo %s: %d unknown options (see grpo %s --help):", cmd, n_unknown, cmd);
    int shown = 0;
    for (int i = 0; i < n_seen; i++) {
        if (seen[i].trl) continue;
        if (++shown > 50) { /* a file of nothing but unknown keys: the first 50 say enough */
            fprintf(stderr, "\n  ... and %d more", n_unknown - 50);
            break;
        }
        /* a did-you-mean for the first 10: a typo or two, not a file of strangers */
        const char *near = shown <= 10 ? closest_name(seen[i].name, cands, nc) : NULL, *dashes = seen[i].where ? "" : "--";
        fprintf(stderr, n_unknown > 1 ? "\n  " : "grpo %s: ", cmd);
        if (seen[i].where) fprintf(stderr, "%s: ", seen[i].where);
        char name[200]; /* a --config file's key is the file's text */
        fprintf(stderr, "unknown option '%s%s'", dashes, text_escaped(name, sizeof name, seen[i].name, 80));
        if (near) fprintf(stderr, "; did you mean '%s%s'?", dashes, near);
        if (n_unknown == 1) fprintf(stderr, " (see grpo %s --help)", cmd);
    }
    fputc('\n', stderr);
    return 2;
}

/* The precision keys' reason (torch_dtype, fp16, tf32, ...) for this run: what
 * bf16 makes of it, resolved as train/model.c resolves auto. */
static const char *precision_reason(const OptGroup *g, int ng, const void *obj) {
    size_t base;
    const OptSpec *o = opts_find(g, ng, "bf16", strlen("bf16"), &base);
    int bf16 = o && o->type == OPT_BOOL ? *(const int *)opt_value(o, obj, base) : 0, given = bf16 >= 0;
    if (bf16 < 0) bf16 = gemm_bf16_native();
    if (bf16) return given ? "precision is bf16's: bf16 products with fp32 sums on fp32 master weights"
                           : "precision is bf16's, true by default on this CPU: bf16 products with fp32 sums on fp32 "
                             "master weights";
    return given ? "precision is bf16's: bf16 false computes in fp32"
                 : "precision is bf16's, false by default on a CPU without bf16 matrix instructions: fp32";
}

/* One warning line for the TRL keys that have no effect here, grouped by reason. */
static void warn_ignored(const char *cmd, const OptGroup *g, int ng, const void *obj) {
    int any = 0;
    for (int i = 0; i < n_seen; i++) any |= seen[i].trl != NULL;
    if (!any) return;
    fprintf(stderr, "grpo %s: warning: TRL options without effect here:", cmd);
    int groups = 0;
    for (int i = 0; i < n_seen; i++) {
        if (!seen[i].trl) continue;
        int first = 1;
        for (int j = 0; j < i && first; j++) first = !(seen[j].trl && seen[j].trl->reason == seen[i].trl->reason);
        if (!first) continue;
        fprintf(stderr, "%s ", groups++ ? ";" : "");
        int n = 0;
        for (int j = i; j < n_seen; j++) {
            if (!seen[j].trl || seen[j].trl->reason != seen[i].trl->reason) continue;
            int dup = 0;
            for (int k = i; k < j && !dup; k++) dup = seen[k].trl == seen[j].trl;
            if (!dup) fprintf(stderr, "%s%s", n++ ? ", " : "", seen[j].name);
        }
        const char *reason = seen[i].trl->reason;
        fprintf(stderr, " (%s)", reason == trl_reason_precision ? precision_reason(g, ng, obj) : reason);
    }
    fputc('\n', stderr);
}

/* A TRL key restricted to some values (TRL_ONLY): value is NULL when not a
 * scalar. Returns 0 when accepted, else collects why (usage_error) and returns 2. */
static int apply_trl_only(const char *cmd, const char *where, const TrlKey *k, const char *value) {
    if (value && trl_value_accepted(k, value)) return 0;
    usage_error(cmd, "%s%s '%s' is not supported: %s", where, k->name, value ? value : "(a list or mapping)", k->reason);
    return 2;
}

/* --help: the version, the synopsis, then the options under their headings, wrapped
 * to $COLUMNS, else the terminal's width, else 100 columns. */
static void print_help(FILE *out, const char *cmd, const char *synopsis, const OptGroup *g, int ng, const void *obj) {
    struct winsize ws;
    const char *cols = getenv("COLUMNS");
    int width = cols && atoi(cols) > 0 ? atoi(cols) : !ioctl(fileno(out), TIOCGWINSZ, &ws) && ws.ws_col ? ws.ws_col : 100;
    char *text = opts_help_text(g, ng, obj, width);
    fprintf(out, "grpo %s\nusage: grpo %s %s\n\n%s", grpo_version(), cmd, synopsis, text);
    free(text);
}

/* Sets a list option from values v[n] (kept alive by the caller or the arena). */
static int set_list(const OptSpec *o, void *value, const char *const *v, int n, GrpoErr *err) {
    if (o->type == OPT_LIST) {
        StrList *l = value;
        l->v = keep(xmalloc(sizeof(char *) * (n ? n : 1)));
        for (l->n = 0; l->n < n; l->n++) l->v[l->n] = v[l->n];
        return 0;
    }
    F64List *l = value;
    l->v = keep(xmalloc(sizeof(double) * (n ? n : 1)));
    for (l->n = 0; l->n < n; l->n++) {
        char *end;
        l->v[l->n] = strtod(v[l->n], &end);
        if (end == v[l->n] || *end) return err_set(err, "%s: '%s' is not a number", o->name, v[l->n]);
    }
    return 0;
}

static int is_list(const OptSpec *o) {
    return o->type == OPT_LIST || o->type == OPT_F64_LIST;
}

/* A YAML null as PyYAML's safe_load reads one: a plain ~, null, Null, NULL or nothing. */
static int yaml_is_null(const yaml_node_t *v) {
    const char *t = (const char *)v->data.scalar.value;
    return v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL"));
}

/* A YAML node as JSON: plain scalars typed as YAML reads them (booleans, null,
 * numbers), quoted ones as strings; sequences and mappings as arrays and objects. */
static json_t *yaml_to_json(yaml_document_t *doc, yaml_node_t *v, int depth) {
    if (depth > 64) return NULL;
    if (v->type == YAML_SCALAR_NODE) {
        const char *t = (const char *)v->data.scalar.value;
        if (v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return json_string(t);
        int b;
        if (yaml_is_null(v)) return json_null();
        if (strlen(t) > 1 && opt_parse_bool(t, &b) == 0) return json_boolean(b);
        char *end;
        long long i = strtoll(t, &end, 10);
        if (end != t && !*end) return json_integer(i);
        double d = strtod(t, &end);
        /* nan, inf and 1e400 are no YAML numbers (YAML writes .nan, .inf), and JSON has
         * none: they stay text, as PyYAML's safe_load reads nan and inf */
        if (end != t && !*end && isfinite(d)) return json_real(d);
        return json_string(t);
    }
    json_t *out = v->type == YAML_SEQUENCE_NODE ? json_array() : json_object();
    if (v->type == YAML_SEQUENCE_NODE)
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
            json_t *e = yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1);
            if (!e) return json_decref(out), NULL;
            json_array_append_new(out, e);
        }
    else
        for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            json_t *e = k->type == YAML_SCALAR_NODE ? yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1) : NULL;
            if (!e) return json_decref(out), NULL;
            json_object_set_new(out, (const char *)k->data.scalar.value, e);
        }
    return out;
}

/* One YAML value into option o; src is "file:line: " for messages. */
static int apply_yaml_value(const char *cmd, const char *src, yaml_document_t *doc, yaml_node_t *v, const OptSpec *o,
                            void *value) {
    GrpoErr err;
    if (o->type == OPT_JSON && v->type == YAML_MAPPING_NODE) {
        json_t *j = yaml_to_json(doc, v, 0);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text) {
            usage_error(cmd, "%s%s: a mapping of plain values, nested at most 64 deep, expected", src, o->name);
            return 2;
        }
        *(const char **)value = keep(text);
        return 0;
    }
    if (yaml_is_null(v)) { /* what TRL's dataclass makes of None (trl_null_is_default) */
        if (trl_null_is_default(o->name)) return 0;
        usage_error(cmd, "%s%s: null is not a value of this option (TRL's field is not Optional with default None); "
                    "give a value, or leave the key out for the default", src, o->name);
        return 2;
    }
    if (v->type == YAML_SCALAR_NODE) {
        const char *val = (const char *)v->data.scalar.value;
        val = keep(xstrdup(val));
        if (is_list(o) ? set_list(o, value, &val, 1, &err) : opt_set_text(o, value, val, &err)) {
            usage_error(cmd, "%s%s", src, err.msg);
            return 2;
        }
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE || !is_list(o)) {
        usage_error(cmd, "%s%s: expected a %s", src, o->name, is_list(o) ? "list or a single value" : "single value");
        return 2;
    }
    int cnt = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
    const char **vals = xmalloc(sizeof(char *) * (cnt ? cnt : 1));
    int rc = 0;
    for (int i = 0; i < cnt && !rc; i++) {
        yaml_node_t *e = yaml_document_get_node(doc, v->data.sequence.items.start[i]);
        if (e->type != YAML_SCALAR_NODE) {
            usage_error(cmd, "%s%s: list entries must be scalars", src, o->name);
            rc = 2;
        } else {
            vals[i] = keep(xstrdup((const char *)e->data.scalar.value));
        }
    }
    if (!rc && set_list(o, value, vals, cnt, &err)) {
        usage_error(cmd, "%s%s", src, err.msg);
        rc = 2;
    }
    free(vals);
    return rc;
}

/* The first node under n (n included) with a tag YAML's core schema does not have
 * (`!!python/object:...`, `!custom`): what PyYAML's safe_load refuses. NULL: none. */
static yaml_node_t *foreign_tag(yaml_document_t *doc, yaml_node_t *n, int depth) {
    static const char *const core[] = {YAML_STR_TAG, YAML_INT_TAG, YAML_FLOAT_TAG, YAML_BOOL_TAG, YAML_NULL_TAG,
                                       YAML_SEQ_TAG, YAML_MAP_TAG, NULL};
    if (!n || depth > 64) return NULL;
    int ok = 0;
    for (int i = 0; core[i] && !ok; i++) ok = n->tag && !strcmp((const char *)n->tag, core[i]);
    if (!ok) return n;
    yaml_node_t *bad = NULL;
    if (n->type == YAML_SEQUENCE_NODE)
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top && !bad; it++)
            bad = foreign_tag(doc, yaml_document_get_node(doc, *it), depth + 1);
    if (n->type == YAML_MAPPING_NODE)
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top && !bad; p++)
            if (!(bad = foreign_tag(doc, yaml_document_get_node(doc, p->key), depth + 1)))
                bad = foreign_tag(doc, yaml_document_get_node(doc, p->value), depth + 1);
    return bad;
}

/* The option a --config key sets, under its own name or a TRL alias (NULL: none);
 * *t the TRL key it is, when it is not an option's own name. */
static const OptSpec *yaml_key_option(const char *cmd, const OptGroup *g, int ng, const char *key, size_t *base,
                                      const TrlKey **t) {
    const OptSpec *o = opts_find(g, ng, key, strlen(key), base);
    *t = o ? NULL : trl_key_find(cmd, key, strlen(key));
    if (!o && !*t && also_cmd) { /* the other command's alias of one of ours (model_name_or_path) */
        const TrlKey *a = trl_key_find(also_cmd, key, strlen(key));
        *t = a && a->kind == TRL_ALIAS ? a : NULL;
    }
    if (*t && (*t)->kind == TRL_ALIAS) o = opts_find(g, ng, (*t)->target, strlen((*t)->target), base);
    return o;
}

/* A --config key: the option it sets (or the key itself), as written, where. */
typedef struct {
    const char *id, *key;
    size_t line;
    int index;
} KeyAt;

static int key_order(const void *a, const void *b) {
    const KeyAt *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* A --config file is one YAML document, a mapping of option names, each option
 * once (under any of its names: model and model_name_or_path are one option), with
 * the core schema's tags only: anything else is refused with FILE:LINE (and the
 * first place, for a repeat), as transformers' HfArgumentParser would refuse it or
 * PyYAML's safe_load would. */
static int yaml_strict(const char *cmd, const char *path, yaml_parser_t *parser, yaml_document_t *doc,
                       const OptGroup *g, int ng) {
    char shown[200], tag[200], at[300];
    path = text_escaped(at, sizeof at, path, 200); /* the file's name as messages show it */
    yaml_node_t *root = yaml_document_get_root_node(doc), *bad = foreign_tag(doc, root, 0);
    if (bad) {
        const char *t = bad->tag ? (const char *)bad->tag : "?", *core = "tag:yaml.org,2002:";
        int short_form = !strncmp(t, core, strlen(core)); /* shown as written: !!python/object:... */
        fprintf(stderr, "grpo %s: %s:%zu: the YAML tag '%s%s' is not supported (plain values, lists and mappings "
                "only)\n", cmd, path, bad->start_mark.line + 1, short_form ? "!!" : "",
                text_escaped(tag, sizeof tag, short_form ? t + strlen(core) : t, 80));
        return 2;
    }
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next)) {
        fprintf(stderr, "grpo %s: %s:%zu: invalid YAML: %s\n", cmd, path, parser->problem_mark.line + 1,
                parser->problem ? parser->problem : "?");
        return 2;
    }
    yaml_node_t *second = yaml_document_get_root_node(&next);
    size_t line = second ? second->start_mark.line + 1 : 0;
    yaml_document_delete(&next);
    if (second) {
        fprintf(stderr, "grpo %s: %s:%zu: a second YAML document; a --config file is one mapping of options\n", cmd,
                path, line);
        return 2;
    }
    if (!root || root->type != YAML_MAPPING_NODE) return 0;
    /* each key under the option it sets (or as written, when it sets none), sorted:
     * a repeat is two neighbours; the one reported is the first repeat in the file */
    int n = (int)(root->data.mapping.pairs.top - root->data.mapping.pairs.start), k = 0;
    KeyAt *keys = xmalloc(sizeof(KeyAt) * (n ? n : 1));
    for (int i = 0; i < n; i++) {
        yaml_node_t *kn = yaml_document_get_node(doc, root->data.mapping.pairs.start[i].key);
        if (kn->type != YAML_SCALAR_NODE) continue;
        const char *key = (const char *)kn->data.scalar.value;
        size_t b;
        const TrlKey *t;
        const OptSpec *o = yaml_key_option(cmd, g, ng, key, &b, &t);
        keys[k++] = (KeyAt){o ? o->name : key, key, kn->start_mark.line + 1, i};
    }
    qsort(keys, (size_t)k, sizeof(KeyAt), key_order);
    const KeyAt *first = NULL, *again = NULL;
    for (int i = 1; i < k; i++)
        if (!strcmp(keys[i].id, keys[i - 1].id) && (!again || keys[i].index < again->index))
            first = &keys[i - 1], again = &keys[i]; /* the earliest second place: i - 1 is the first */
    int rc = 0;
    if (again) {
        char first_key[200];
        text_escaped(shown, sizeof shown, again->key, 80);
        text_escaped(first_key, sizeof first_key, first->key, 80);
        if (!strcmp(again->key, first->key))
            fprintf(stderr, "grpo %s: %s:%zu: '%s' is given twice (first at line %zu); give each option once\n", cmd, path,
                    again->line, shown, first->line);
        else
            fprintf(stderr, "grpo %s: %s:%zu: '%s' is the option %s, given already as '%s' at line %zu; give it once\n",
                    cmd, path, again->line, shown, again->id, first_key, first->line);
        rc = 2;
    }
    free(keys);
    return rc;
}

/* Applies a YAML mapping file to the options. */
static int apply_yaml(const char *cmd, const char *path, const OptGroup *g, int ng, void *obj) {
    GrpoErr err;
    char at[300]; /* the file's name as messages show it */
    text_escaped(at, sizeof at, path, 200);
    FILE *f = fs_fopen_regular(path, &err);
    if (!f) {
        fprintf(stderr, "grpo %s: %s (the --config file)\n", cmd, err.msg);
        return 2;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        fprintf(stderr, "grpo %s: %s:%zu: invalid YAML: %s\n", cmd, at, parser.problem_mark.line + 1,
                parser.problem ? parser.problem : "?");
        yaml_parser_delete(&parser);
        fclose(f);
        return 2;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    int rc = yaml_strict(cmd, path, &parser, &doc, g, ng);
    if (!rc && root && root->type != YAML_MAPPING_NODE) {
        fprintf(stderr, "grpo %s: %s: expected a mapping of option names to values\n", cmd, at);
        rc = 2;
    }
    for (yaml_node_pair_t *p = root && !rc ? root->data.mapping.pairs.start : NULL;
         p && p < root->data.mapping.pairs.top && !rc; p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
        if (k->type != YAML_SCALAR_NODE) continue;
        const char *key = (const char *)k->data.scalar.value;
        char where[600];
        snprintf(where, sizeof where, "%s:%zu", at, k->start_mark.line + 1);
        size_t base;
        const TrlKey *t;
        const OptSpec *o = yaml_key_option(cmd, g, ng, key, &base, &t);
        if (!o && also_setting(key)) continue; /* the other command's setting (args_config_also) */
        /* a TRL key's value as text: "" for null (None, which "" stands for among the
         * accepted values) and for an empty list or mapping, NULL for another one */
        const char *val = yaml_is_null(v) ? ""
                          : v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value
                          : (v->type == YAML_MAPPING_NODE && v->data.mapping.pairs.top == v->data.mapping.pairs.start) ||
                                    (v->type == YAML_SEQUENCE_NODE && v->data.sequence.items.top == v->data.sequence.items.start)
                              ? ""
                              : NULL;
        if (t && t->kind == TRL_IGNORE) {
            if (!(t->target && val && trl_value_accepted(t, val))) note_key(key, where, t); /* TRL's default: silent */
            continue;
        }
        char src[620];
        snprintf(src, sizeof src, "%s: ", where);
        if (t && t->kind == TRL_ONLY) {
            apply_trl_only(cmd, src, t, val); /* a refusal is collected */
            continue;
        }
        if (!o || o->type == OPT_CONFIG) {
            note_key(key, where, NULL);
            continue;
        }
        apply_yaml_value(cmd, src, &doc, v, o, opt_value(o, obj, base)); /* a bad value is collected */
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

/* Reads every --config FILE (OPT_CONFIG options) before the command line. */
static int apply_config_files(const char *cmd, int argc, char **argv, const OptGroup *g, int ng, void *obj) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) continue;
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2), base;
        const OptSpec *o = opts_find(g, ng, a + 2, len, &base);
        if (!o || o->type != OPT_CONFIG) continue;
        const char *path = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        if (!path) continue; /* reported by the command-line pass */
        int rc = apply_yaml(cmd, path, g, ng, obj);
        if (rc) return rc;
    }
    return 0;
}

static int has_data_extension(const char *s) {
    static const char *const ext[] = {".jsonl", ".json", ".parquet", ".csv", ".arrow", ".txt"};
    size_t n = strlen(s);
    for (int i = 0; i < 6; i++)
        if (n >= strlen(ext[i]) && !strcmp(s + n - strlen(ext[i]), ext[i])) return 1;
    return 0;
}

/* The string value of the option called name among the groups, or def. */
static const char *option_text(const OptGroup *g, int ng, const void *obj, const char *name, const char *def) {
    size_t base;
    const OptSpec *o = opts_find(g, ng, name, strlen(name), &base);
    const char *v = o && o->type == OPT_STR ? *(const char *const *)opt_value(o, obj, base) : NULL;
    return v ? v : def;
}

/* A dataset directory (a Hub dataset repository downloaded, or TRL's
 * dataset_name pointing at a folder): its SPLIT.jsonl or SPLIT.json, also under
 * data/. Returns the file (kept) or NULL. */
static const char *split_file(const char *dir, const char *split) {
    static const char *const forms[] = {"%s/%s.jsonl", "%s/%s.json", "%s/data/%s.jsonl", "%s/data/%s.json"};
    for (int k = 0; k < 4; k++) {
        char *p = xmalloc(strlen(dir) + strlen(split) + 16);
        sprintf(p, forms[k], dir, split);
        if (fs_exists(p) && !fs_is_dir(p)) return keep(p);
        free(p);
    }
    return NULL;
}

/* Hub ids and directories in place of files, as a TRL user writes them: a
 * model found in the local Hub cache is used from there (said on stderr); a
 * dataset directory gives its split's file; a model or dataset that is neither
 * a local path nor cached is refused with how to get it. */
static int resolve_paths(const char *cmd, const OptGroup *g, int ng, void *obj) {
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            const char **v = opt_value(o, obj, g[k].base);
            if (o->type != OPT_STR || !(o->flags & (OPT_MODEL_PATH | OPT_DATA_PATH)) || !*v) continue;
            if ((o->flags & OPT_DATA_PATH) && fs_is_dir(*v)) {
                const char *split_opt = o->flags & OPT_TEST_SPLIT ? "dataset_test_split" : "dataset_train_split";
                const char *split = option_text(g, ng, obj, split_opt, o->flags & OPT_TEST_SPLIT ? "test" : "train");
                const char *file = split_file(*v, split);
                if (!file) {
                    size_t base;
                    int has_opt = opts_find(g, ng, split_opt, strlen(split_opt), &base) != NULL;
                    fprintf(stderr,
                            "grpo %s: --%s %s is a directory without %s.jsonl or %s.json (nor under data/); give the "
                            "file%s%s%s; a parquet split converts with python3 -c \"import pandas; "
                            "pandas.read_parquet('FILE.parquet').to_json('%s.jsonl', orient='records', lines=True)\"\n",
                            cmd, o->name, *v, split, split, has_opt ? ", or another split (--" : "",
                            has_opt ? split_opt : "", has_opt ? ")" : "", split);
                    return 2;
                }
                *v = file;
                continue;
            }
            if (!hf_is_repo_id(*v)) continue;
            if (o->flags & OPT_MODEL_PATH) {
                char *dir = hf_cache_model_dir(*v, NULL);
                if (dir) {
                    char id[200], at[300];
                    fprintf(stderr, "grpo %s: --%s %s: the Hugging Face cache's %s\n", cmd, o->name,
                            text_escaped(id, sizeof id, *v, 80), text_escaped(at, sizeof at, dir, 200));
                    *v = keep(dir);
                    continue;
                }
                char *cache = hf_cache_dir();
                fprintf(stderr,
                        "grpo %s: --%s '%s' is neither a directory nor a model in the Hugging Face cache (%s); "
                        "download it first (hf download %s), or give the model's directory\n",
                        cmd, o->name, *v, cache, *v);
                free(cache);
                return 2;
            }
            if (strchr(*v, '/') && !has_data_extension(*v)) {
                fprintf(stderr,
                        "grpo %s: --%s '%s' is not a local file; grpo.c reads JSON lines (or a JSON array): "
                        "convert a Hub dataset with python3 -c \"from datasets import load_dataset; "
                        "load_dataset('%s', split='train').to_json('data.jsonl')\" (docs/coming-from-trl.md)\n",
                        cmd, o->name, *v, *v);
                return 2;
            }
        }
    return 0;
}

/* Every option's range (and the required ones), then the shared training options'
 * rules (train/args.h: the schedule's kwargs, save_strategy best, ...), each failure
 * collected with the rest. */
static void check_values(const char *cmd, const OptGroup *g, int ng, const void *obj) {
    GrpoErr err;
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            OptGroup one = {&g[k].specs[i], 1, g[k].base, g[k].section};
            if (opts_check(&one, 1, obj, &err)) usage_error(cmd, "%s", err.msg);
        }
    for (int k = 0; k < ng; k++)
        if (g[k].specs == training_args_options && !n_errors &&
            training_args_check((const TrainingArgs *)((const char *)obj + g[k].base), &err))
            usage_error(cmd, "%s", err.msg);
}

/* report_to values other than tensorboard, all and none (wandb, trackio, ...) join the
 * keys without effect, and leave the list. */
static const TrlKey report_to_other = {"report_to", TRL_FOR_BOTH, TRL_IGNORE, 'l', NULL,
                                       "metrics go to output_dir/metrics.jsonl, and to TensorBoard with report_to "
                                       "tensorboard"};
static void set_aside_report_to(const OptGroup *g, int ng, void *obj) {
    size_t base;
    const OptSpec *o = opts_find(g, ng, "report_to", strlen("report_to"), &base);
    if (!o || o->type != OPT_LIST) return;
    StrList *l = opt_value(o, obj, base);
    int kept = 0;
    for (int i = 0; i < l->n; i++) {
        const char *v = l->v[i];
        if (!strcmp(v, "tensorboard") || !strcmp(v, "all") || !strcmp(v, "none")) {
            l->v[kept++] = v;
            continue;
        }
        char name[200];
        snprintf(name, sizeof name, "report_to %s", v);
        note_key(name, NULL, &report_to_other);
    }
    l->n = kept;
}

int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const OptGroup *g, int ng, void *obj) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_help(stdout, cmd, synopsis, g, ng, obj);
            return 1;
        }
    int rc = apply_config_files(cmd, argc, argv, g, ng, obj);
    if (rc) return rc;
    GrpoErr err;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) {
            usage_error(cmd, "unexpected argument '%s' (see grpo %s --help)", a, cmd);
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name), base;
        const OptSpec *o = opts_find(g, ng, name, len, &base);
        const TrlKey *t = o ? NULL : trl_key_find(cmd, name, len);
        if (t && t->kind == TRL_ALIAS) o = opts_find(g, ng, t->target, strlen(t->target), &base);
        if (!o) {
            /* an ignored, restricted or unknown key: take its values (an unknown
             * key's: up to the next --option) so that every key gets reported */
            char key[200];
            snprintf(key, sizeof key, "%.*s", (int)(len < 190 ? len : 190), name);
            const char *val = eq ? eq + 1 : NULL;
            char arity = t ? t->arity : 'l';
            if (!eq && arity == 'b') {
                int b;
                if (i + 1 < argc && opt_parse_bool(argv[i + 1], &b) == 0)
                    val = argv[++i];
                else val = "true";
            } else if (!eq && arity == 'v' && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                val = argv[++i];
            } else if (!eq && arity == 'l') {
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) val = argv[++i];
            }
            if (t && t->kind == TRL_ONLY) apply_trl_only(cmd, "--", t, val ? val : ""); /* a refusal is collected */
            else if (!(t && t->target && trl_value_accepted(t, val ? val : ""))) note_key(key, NULL, t);
            continue;
        }
        void *value = opt_value(o, obj, base);
        int bad = 0;
        if (o->type == OPT_BOOL && !eq) {
            /* `--flag`, or `--flag true|false` as TRL's command line accepts */
            int b;
            if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && opt_set_text(o, &b, argv[i + 1], &err) == 0) i++;
            else b = 1;
            *(int *)value = b;
        } else if (is_list(o) && !eq) {
            int cnt = 0;
            while (i + 1 + cnt < argc && strncmp(argv[i + 1 + cnt], "--", 2)) cnt++;
            if (cnt == 0) {
                usage_error(cmd, "--%s needs at least one value", o->name);
                continue;
            }
            bad = set_list(o, value, (const char *const *)argv + i + 1, cnt, &err);
            i += cnt;
        } else {
            const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val) {
                usage_error(cmd, "--%s needs a value", o->name);
                continue;
            }
            bad = is_list(o) ? set_list(o, value, &val, 1, &err) : opt_set_text(o, value, val, &err);
        }
        if (bad) usage_error(cmd, "--%s", err.msg);
    }
    check_values(cmd, g, ng, obj);
    for (int i = 0; i < n_errors; i++) fprintf(stderr, "%s\n", errors[i]);
    if (report_unknown(cmd, g, ng) || n_errors) return 2;
    set_aside_report_to(g, ng, obj);
    warn_ignored(cmd, g, ng, obj);
    if (resolve_paths(cmd, g, ng, obj)) return 2;
    return 0;
}

int cli_fail(const char *cmd, const char *msg) {
    char line[1024];
    fprintf(stderr, "grpo %s: %s\n", cmd, text_one_line(line, sizeof line, msg, 0));
    return 1;
}

void cli_setup_threads(void) {
    const char *s = getenv("GRPO_THREADS");
    if (s && atoi(s) > 0) gemm_set_threads(atoi(s));
}
