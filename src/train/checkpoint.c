/* train/checkpoint.c — checkpoint directories (see checkpoint.h). Not here: what a
 * particular trainer adds (grpo/checkpoint.c: the generation batch in use). */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/jsonl.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "model/model_io.h"
#include "train/hf_state.h"

/* ---- tensors keyed by the parameter table ---- */

static int write_table(const char *path, const ParamTable *tab, const char *const *prefix,
                       float *const *bufs, int nb, GrpoErr *err) {
    StWriteTensor *wt = xcalloc((size_t)tab->n * nb, sizeof *wt);
    char **names = xcalloc((size_t)tab->n * nb, sizeof(char *));
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < tab->n; i++) {
            const ParamEntry *e = &tab->entries[i];
            StWriteTensor *w = &wt[b * tab->n + i];
            size_t len = strlen(prefix[b]) + strlen(e->name) + 1;
            names[b * tab->n + i] = xmalloc(len);
            snprintf(names[b * tab->n + i], len, "%s%s", prefix[b], e->name);
            w->name = names[b * tab->n + i];
            w->dtype = ST_F32;
            w->ndim = e->ndim;
            w->shape[0] = e->shape[0];
            w->shape[1] = e->shape[1];
            w->data = bufs[b] + e->offset;
        }
    int rc = st_write_file(path, wt, tab->n * nb, err);
    for (int i = 0; i < tab->n * nb; i++) free(names[i]);
    free(names), free(wt);
    return rc;
}

/* A state tensor as read: every value finite, and (second moments) none negative:
 * a NaN, an Inf or a negative exp_avg_sq would train to NaN from the first step. */
static int check_values(const float *x, size_t n, int nonnegative, const char *path, const char *name, GrpoErr *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonnegative && x[i] < 0))
            return err_set(err, "%s: tensor '%s' holds %s (value %zu of %zu): the optimizer state is damaged", path, name,
                           isfinite(x[i]) ? "a negative second moment" : "a NaN or Inf", i, n);
    return 0;
}

static int read_table(const char *path, const ParamTable *tab, const char *const *prefix, float *const *bufs,
                      int nb, GrpoErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return -1;
    int rc = 0;
    char name[200];
    for (int b = 0; b < nb && !rc; b++)
        for (int i = 0; i < tab->n && !rc; i++) {
            const ParamEntry *e = &tab->entries[i];
            snprintf(name, sizeof name, "%s%s", prefix[b], e->name);
            const StTensor *t = st_find(&f, name);
            int same = t && t->ndim == e->ndim;
            for (int d = 0; same && d < e->ndim; d++) same = t->shape[d] == e->shape[d];
            if (!t) {
                rc = err_set(err, "%s: missing tensor '%s'", path, name);
            } else if (!same) {
                char got[160], want[64];
                int64_t ws[2] = {e->shape[0], e->shape[1]};
                rc = err_set(err, "%s: tensor '%s' has shape %s, expected %s", path, name,
                             st_shape_str(got, sizeof got, t->ndim, t->shape), st_shape_str(want, sizeof want, e->ndim, ws));
            } else if (!(rc = st_read_f32(&f, t, bufs[b] + e->offset, err))) {
                rc = check_values(bufs[b] + e->offset, e->numel, !strncmp(prefix[b], "exp_avg_sq.", 11), path, name, err);
            }
        }
    st_close(&f);
    return rc;
}

/* ---- checkpoint directories ---- */

/* N of "checkpoint-N", N digits only (transformers' ^checkpoint-(\d+)$), else -1. */
static long checkpoint_number(const char *name) {
    if (strncmp(name, "checkpoint-", 11) || !name[11] || strspn(name + 11, "0123456789") != strlen(name + 11))
        return -1;
    errno = 0;
    long n = strtol(name + 11, NULL, 10);
    return errno ? -1 : n;
}

/* Lists the numbers of dir's checkpoint-N directories, ascending (what
 * transformers' get_last_checkpoint looks at: a file of that name is none). */
static int list_checkpoints(const char *dir, long **out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 8;
    long *v = xmalloc(sizeof(long) * cap);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long k = checkpoint_number(e->d_name);
        if (k < 0) continue;
        char *p = fs_join(dir, e->d_name);
        int is_dir = fs_is_dir(p);
        free(p);
        if (!is_dir) continue;
        if (n == cap) v = xrealloc(v, sizeof(long) * (cap *= 2));
        v[n++] = k;
    }
    if (d) closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            long x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    *out = v;
    return n;
}

char *ckpt_resolve(const char *output_dir, const char *spec, GrpoErr *err) {
    if (strcmp(spec, "latest")) {
        if (!fs_is_dir(spec)) {
            err_set(err, "resume_from_checkpoint: %s is not a directory", spec);
            return NULL;
        }
        return xstrdup(spec);
    }
    long *v;
    int n = list_checkpoints(output_dir, &v);
    char *dir = NULL;
    if (n == 0) err_set(err, "resume_from_checkpoint latest: no checkpoint-N directory in %s", output_dir);
    else {
        char name[64];
        snprintf(name, sizeof name, "checkpoint-%ld", v[n - 1]);
        dir = fs_join(output_dir, name);
    }
    free(v);
    return dir;
}

int ckpt_check_later(const char *output_dir, long step, int overwrite, char *note, size_t note_bytes, GrpoErr *err) {
    long *v;
    int n = list_checkpoints(output_dir, &v), first = 0, rc = 0;
    while (first < n && v[first] <= step) first++;
    note[0] = 0;
    if (first < n) {
        char names[200];
        if (n - first == 1) snprintf(names, sizeof names, "checkpoint-%ld", v[first]);
        else snprintf(names, sizeof names, "%d checkpoints (checkpoint-%ld to checkpoint-%ld)", n - first, v[first],
                      v[n - 1]);
        if (!overwrite)
            rc = err_set(err, "%s holds %s, later than step %ld resumed from: a run went on past it, and resuming "
                         "here would cut its metrics.jsonl and leave %s for --resume_from_checkpoint latest to pick; "
                         "resume from the last one (--resume_from_checkpoint latest), or pass --overwrite_output_dir "
                         "true to remove %s", output_dir, names, step, n - first == 1 ? "it" : "them", n - first == 1 ? "it" : "them");
        for (int i = first; !rc && i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "checkpoint-%ld", v[i]);
            char *p = fs_join(output_dir, name);
            if (fs_rm_rf(p)) rc = err_set(err, "%s: cannot remove: %s", p, strerror(errno));
            free(p);
        }
        if (!rc)
            snprintf(note, note_bytes, "removed %s of %s, later than step %ld resumed from (--overwrite_output_dir)",
                     names, output_dir, step);
    }
    free(v);
    return rc;
}

/* Keeps the lines of a JSON-lines log whose "step" is <= step (drops what an
 * interrupted run wrote after the checkpoint), but a finished run's closing line
 * (train_runtime, ...: logged after its last checkpoint, and again by the resumed
 * run); the file is replaced atomically. A line that is not a JSON object with an
 * integer "step" is never dropped unsaid: the last one, unfinished (no newline:
 * a write the run's end interrupted), is dropped with a note; any other refuses
 * the resume, naming FILE:LINE. */
int ckpt_truncate_log(const char *dir, const char *file, long step, char *note, size_t note_bytes, GrpoErr *err) {
    char *p = fs_join(dir, file), *buf = NULL;
    size_t len, n = 0;
    int rc = 0;
    note[0] = 0;
    if (fs_exists(p) && !(rc = fs_read_file(p, &buf, &len, err))) {
        char *out = xmalloc(len + 1);
        long number = 0;
        for (char *line = buf, *next; !rc && line < buf + len; line = next) {
            char *nl = memchr(line, '\n', (size_t)(buf + len - line));
            next = nl ? nl + 1 : buf + len;
            if (nl) *nl = 0; /* the last line ends at fs_read_file's NUL */
            number++;
            if (!line[strspn(line, " \t\r")]) continue; /* a blank line */
            json_error_t je;
            json_t *o = json_loads(line, 0, &je);
            json_t *s = json_object_get(o, "step");
            if (!json_is_integer(s)) {
                char why[200];
                if (o) snprintf(why, sizeof why, "%s without an integer \"step\"", json_kind(o));
                else snprintf(why, sizeof why, "not JSON (%s)", je.text);
                if (!nl)
                    snprintf(note, note_bytes, "%s:%ld: an unfinished last line (%s), as an interrupted write "
                             "leaves it: dropped", p, number, why);
                else
                    rc = err_set(err, "%s:%ld: %s; the resume would drop it: repair or remove the line, then resume",
                                 p, number, why);
            } else if (json_integer_value(s) <= step && !json_object_get(o, "train_runtime")) {
                n += (size_t)sprintf(out + n, "%s\n", line);
            }
            json_decref(o);
        }
        if (!rc) rc = fs_write_file_atomic(p, out, n, err);
        free(out);
        free(buf);
    }
    free(p);
    return rc;
}

/* Is name "<base>.tmp-<pid>-<n>" (fs_tmpdir_for's pattern) of a process that no
 * longer runs, with <base> equal to base, or a checkpoint-N when base is NULL?
 * The suffix may repeat ("checkpoint-3.tmp-41-0.tmp-41-1"): model_save into a
 * checkpoint's temporary directory makes its own beside it. */
static int dead_tmp(const char *name, const char *base) {
    const char *tmp = strstr(name, ".tmp-");
    if (!tmp) return 0;
    char head[256];
    snprintf(head, sizeof head, "%.*s", (int)(tmp - name), name);
    if (base ? strcmp(head, base) : checkpoint_number(head) < 0) return 0;
    for (const char *s = tmp; *s;) {
        if (strncmp(s, ".tmp-", 5)) return 0;
        char *end;
        long pid = strtol(s + 5, &end, 10);
        if (end == s + 5 || *end != '-' || pid <= 0) return 0;
        const char *n = end + 1;
        strtoul(n, &end, 10);
        if (end == n || !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) return 0;
        s = end;
    }
    return 1;
}

static void remove_dead_tmps(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (dead_tmp(e->d_name, base)) {
            char *p = fs_join(dir, e->d_name);
            fs_rm_rf(p);
            free(p);
        }
    if (d) closedir(d);
}

void ckpt_remove_leftovers(const char *output_dir) {
    remove_dead_tmps(output_dir, NULL);
    /* the final save's temporary directory sits beside output_dir */
    char *copy = xstrdup(output_dir);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    char *parent = slash ? (slash == copy ? xstrdup("/") : (*slash = 0, xstrdup(copy))) : xstrdup(".");
    char *name = xstrdup(base);
    remove_dead_tmps(parent, name);
    free(name), free(parent), free(copy);
}

/* What an earlier run leaves in output_dir. */
static const char *const RUN_FILES[] = {"metrics.jsonl", "completions.jsonl", "trainer_state.json", NULL};

int ckpt_prepare_output_dir(const char *output_dir, int overwrite, GrpoErr *err) {
    long *v;
    int n = list_checkpoints(output_dir, &v), earlier = n > 0;
    for (int i = 0; RUN_FILES[i] && !earlier; i++) {
        char *p = fs_join(output_dir, RUN_FILES[i]);
        struct stat sb;
        earlier = stat(p, &sb) == 0 && sb.st_size > 0; /* an empty file holds nothing to lose */
        free(p);
    }
    int rc = 0;
    if (earlier && !overwrite)
        rc = err_set(err, "%s holds an earlier run (metrics.jsonl or checkpoint-N): pass --overwrite_output_dir true "
                     "to replace it, or --resume_from_checkpoint latest to continue it", output_dir);
    for (int i = 0; earlier && overwrite && i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "checkpoint-%ld", v[i]);
        char *p = fs_join(output_dir, name);
        fs_rm_rf(p);
        free(p);
    }
    for (int i = 0; earlier && overwrite && RUN_FILES[i]; i++) {
        char *p = fs_join(output_dir, RUN_FILES[i]);
        unlink(p);
        free(p);
    }
    free(v);
    return rc;
}

int ckpt_write(const CkptWrite *w, char **path, GrpoErr *err) {
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", w->step);
    char *final = fs_join(w->output_dir, name), *tmp = NULL;
    if (fs_tmpdir_for(final, &tmp, err)) {
        free(final);
        return -1;
    }
    const LoraLayers *lo = w->model->lora;
    int rc;
    if (lo) { /* an adapter directory, which --adapter and PeftModel.from_pretrained load */
        LoraSaveOpts lso = {w->copy_from, w->copy_from};
        rc = lora_layers_save(lo, tmp, &lso, err);
    } else {
        ModelSaveOpts so;
        model_save_opts_default(&so);
        so.dtype = ST_F32;
        so.copy_from = w->copy_from;
        so.meta = w->meta;
        rc = model_save(w->model, tmp, &so, err);
    }
    char *p = fs_join(tmp, "optimizer.safetensors");
    const char *pre[2] = {"exp_avg.", "exp_avg_sq."};
    float *bufs[2] = {w->opt->m, w->opt->v};
    if (!rc) rc = write_table(p, lo ? &lo->table : &w->model->table, pre, bufs, 2, err);
    free(p);
    if (!rc && w->add) rc = w->add(w->add_ctx, tmp, w->state, err);
    p = fs_join(tmp, "trainer_state.json");
    json_t *file = hf_state_nest(w->state); /* our fields under stateful_callbacks: TrainerState loads the file */
    if (!rc && json_dump_file(file, p, JSON_INDENT(2))) rc = err_set(err, "%s: cannot write", p);
    json_decref(file);
    free(p);
    if (!rc) rc = fs_commit_dir(tmp, final, err);
    if (rc) fs_rm_rf(tmp);
    free(tmp);
    if (!rc && path) *path = final;
    else free(final);
    if (!rc && w->total_limit > 0) {
        long *v;
        int n = list_checkpoints(w->output_dir, &v);
        for (int i = 0; i < n - w->total_limit; i++) {
            snprintf(name, sizeof name, "checkpoint-%ld", v[i]);
            char *old = fs_join(w->output_dir, name);
            fs_rm_rf(old);
            free(old);
        }
        free(v);
    }
    return rc;
}

/* The trained weights of checkpoint dir into model (its adapters when it has them). */
static int read_weights(const char *dir, Model *model, GrpoErr *err) {
    char *cfg = fs_join(dir, "adapter_config.json");
    int adapter = fs_exists(cfg);
    free(cfg);
    if (model->lora || adapter) {
        if (!model->lora || !adapter)
            return err_set(err, "%s: a checkpoint of a %s run; this run %s", dir, adapter ? "LoRA" : "full fine-tuning",
                           adapter ? "trains every weight (set use_peft true to continue it)"
                                   : "trains LoRA adapters (use_peft)");
        if (lora_layers_check_config(model->lora, dir, err)) return -1;
        return lora_layers_read_params(model->lora, dir, err);
    }
    Model m;
    if (model_load(&m, dir, err)) return -1;
    if (m.table.total != model->table.total) {
        model_free(&m);
        return err_set(err, "%s: the checkpoint's model does not match the model being trained", dir);
    }
    model_set_params(model, 0, m.table.total, m.params); /* mixed precision: into its two halves */
    model_free(&m);
    return 0;
}

int ckpt_read(const char *dir, Model *model, AdamW *opt, json_t **state, GrpoErr *err) {
    if (read_weights(dir, model, err)) return -1;
    char *p = fs_join(dir, "optimizer.safetensors");
    const char *pre[2] = {"exp_avg.", "exp_avg_sq."};
    float *bufs[2] = {opt->m, opt->v};
    int rc = read_table(p, model->lora ? &model->lora->table : &model->table, pre, bufs, 2, err);
    free(p);
    if (rc) return -1;
    p = fs_join(dir, "trainer_state.json");
    *state = fs_load_json(p, 0, err);
    if (!*state || hf_state_unnest(*state, dir, err)) { /* the flat object the loop and the algorithms read */
        json_decref(*state);
        *state = NULL;
        rc = -1;
    }
    free(p);
    return rc;
}

int ckpt_write_params(const char *path, const ParamTable *tab, const float *params, GrpoErr *err) {
    const char *pre[1] = {""};
    float *bufs[1] = {(float *)params};
    return write_table(path, tab, pre, bufs, 1, err);
}

int ckpt_read_params(const char *path, const ParamTable *tab, float *params, GrpoErr *err) {
    const char *pre[1] = {""};
    float *bufs[1] = {params};
    return read_table(path, tab, pre, bufs, 1, err);
}
