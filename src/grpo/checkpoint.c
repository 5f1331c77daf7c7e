/* grpo/checkpoint.c — output_dir/checkpoint-N/: the model in the HF layout (fp32,
 * so training resumes from the exact weights), optimizer.safetensors (AdamW's
 * exp_avg / exp_avg_sq per parameter), ref_model.safetensors when the reference
 * moves (sync_ref_model), rollout.json (the generation batch still being used, if
 * any) and trainer_state.json (step, data position, random-stream state). Written
 * into a temporary directory and renamed, so a crash never leaves a half
 * checkpoint; save_total_limit prunes the oldest. Resuming restores all of it, so
 * the continued run equals one never interrupted. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/trainer_internal.h"
#include "io/fsutil.h"
#include "io/safetensors.h"

#define STATE_VERSION 1

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
            if (!t) rc = err_set(err, "%s: missing tensor '%s'", path, name);
            else if ((size_t)t->numel != e->numel) rc = err_set(err, "%s: tensor '%s' has %lld values, expected %zu", path, name, (long long)t->numel, e->numel);
            else rc = st_read_f32(&f, t, bufs[b] + e->offset, err);
        }
    st_close(&f);
    return rc;
}

/* ---- the rollout still in use ---- */

static json_t *floats_json(const float *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(x[i]));
    return a;
}

static json_t *doubles_json(const double *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, isnan(x[i]) ? json_null() : json_real(x[i]));
    return a;
}

static json_t *rollout_json(const Rollout *r, int F) {
    json_t *o = json_pack("{s:I, s:i, s:i, s:i, s:i}", "index", (json_int_t)r->index, "n", r->n, "P", r->P, "G", r->G,
                          "uses", r->uses);
    json_t *ex = json_array(), *ord = json_array(), *comps = json_array();
    for (int p = 0; p < r->P; p++) json_array_append_new(ex, json_integer(r->example[p]));
    for (int i = 0; i < r->n; i++) json_array_append_new(ord, json_integer(r->order[i]));
    for (int i = 0; i < r->n; i++) {
        json_t *ids = json_array();
        for (int k = 0; k < r->comp[i].n; k++) json_array_append_new(ids, json_integer(r->comp[i].ids[k]));
        json_t *c = json_pack("{s:o, s:b, s:s}", "ids", ids, "stopped", r->comp[i].stopped, "text", r->text[i]);
        if (r->old_logp) json_object_set_new(c, "old_logp", floats_json(r->old_logp[i], r->comp[i].n));
        if (r->ref_logp) json_object_set_new(c, "ref_logp", floats_json(r->ref_logp[i], r->comp[i].n));
        json_array_append_new(comps, c);
    }
    json_object_set_new(o, "example", ex);
    json_object_set_new(o, "order", ord);
    json_object_set_new(o, "completions", comps);
    json_object_set_new(o, "per_func", doubles_json(r->per_func, F * r->n));
    json_object_set_new(o, "rewards", doubles_json(r->rewards, r->n));
    json_object_set_new(o, "advantages", doubles_json(r->adv, r->n));
    return o;
}

static int ints_from(json_t *a, int *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        if (!json_is_integer(json_array_get(a, i))) return -1;
        out[i] = (int)json_integer_value(json_array_get(a, i));
    }
    return 0;
}

static int doubles_from(json_t *a, double *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (json_is_null(v)) out[i] = NAN;
        else if (json_is_number(v)) out[i] = json_number_value(v);
        else return -1;
    }
    return 0;
}

static float *floats_from(json_t *a, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return NULL;
    float *x = xmalloc(sizeof(float) * (n ? n : 1));
    for (int i = 0; i < n; i++) x[i] = (float)json_number_value(json_array_get(a, i));
    return x;
}

static int rollout_from_json(Trainer *t, json_t *o, Rollout **out, const char *path, GrpoErr *err) {
    int F = t->rewards.n_funcs;
    Rollout *r = xcalloc(1, sizeof *r);
    json_int_t idx;
    if (json_unpack(o, "{s:I, s:i, s:i, s:i, s:i}", "index", &idx, "n", &r->n, "P", &r->P, "G", &r->G, "uses", &r->uses) ||
        r->n != t->gen_batch || r->G != t->c->num_generations || r->P * r->G != r->n) {
        free(r);
        return err_set(err, "%s: the saved generation batch does not match this run's batch settings", path);
    }
    r->index = idx;
    r->example = xmalloc(sizeof(int) * r->P);
    r->order = xmalloc(sizeof(int) * r->n);
    r->comp = xcalloc(r->n, sizeof(Completion));
    r->text = xcalloc(r->n, sizeof(char *));
    r->per_func = xmalloc(sizeof(double) * F * r->n);
    r->rewards = xmalloc(sizeof(double) * r->n);
    r->adv = xmalloc(sizeof(double) * r->n);
    json_t *comps = json_object_get(o, "completions");
    int bad = ints_from(json_object_get(o, "example"), r->example, r->P) ||
              ints_from(json_object_get(o, "order"), r->order, r->n) ||
              doubles_from(json_object_get(o, "per_func"), r->per_func, F * r->n) ||
              doubles_from(json_object_get(o, "rewards"), r->rewards, r->n) ||
              doubles_from(json_object_get(o, "advantages"), r->adv, r->n) || !json_is_array(comps) ||
              (int)json_array_size(comps) != r->n;
    for (int i = 0; i < r->n && !bad; i++) {
        json_t *c = json_array_get(comps, i), *ids = json_object_get(c, "ids");
        int n = json_is_array(ids) ? (int)json_array_size(ids) : -1;
        if (n < 1 || n > t->c->max_completion_length) {
            bad = 1;
            break;
        }
        r->comp[i].ids = xmalloc(sizeof(int32_t) * t->c->max_completion_length);
        r->comp[i].n = n;
        r->comp[i].stopped = json_is_true(json_object_get(c, "stopped"));
        int tmp[n];
        bad |= ints_from(ids, tmp, n);
        for (int k = 0; k < n; k++) r->comp[i].ids[k] = tmp[k];
        json_t *tx = json_object_get(c, "text");
        r->text[i] = xstrdup(json_is_string(tx) ? json_string_value(tx) : "");
        json_t *old = json_object_get(c, "old_logp"), *ref = json_object_get(c, "ref_logp");
        if (old) {
            if (!r->old_logp) r->old_logp = xcalloc(r->n, sizeof(float *));
            bad |= !(r->old_logp[i] = floats_from(old, n));
        }
        if (ref) {
            if (!r->ref_logp) r->ref_logp = xcalloc(r->n, sizeof(float *));
            bad |= !(r->ref_logp[i] = floats_from(ref, n));
        }
    }
    for (int p = 0; p < r->P && !bad; p++) bad |= r->example[p] < 0 || r->example[p] >= t->data.n;
    if (bad) {
        rollout_free(r);
        return err_set(err, "%s: malformed or from another dataset", path);
    }
    *out = r;
    return 0;
}

/* ---- checkpoint directories ---- */

static long checkpoint_number(const char *name) {
    if (strncmp(name, "checkpoint-", 11)) return -1;
    char *end;
    long n = strtol(name + 11, &end, 10);
    return *end || end == name + 11 ? -1 : n;
}

/* Lists checkpoint numbers in dir, ascending. */
static int list_checkpoints(const char *dir, long **out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 8;
    long *v = xmalloc(sizeof(long) * cap);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long k = checkpoint_number(e->d_name);
        if (k < 0) continue;
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

char *checkpoint_resolve(const char *output_dir, const char *spec, GrpoErr *err) {
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

int checkpoint_save(Trainer *t, GrpoErr *err) {
    const TrainConfig *c = t->c;
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", t->step);
    char *final = fs_join(c->output_dir, name), *tmp = NULL;
    if (fs_tmpdir_for(final, &tmp, err)) {
        free(final);
        return -1;
    }
    ModelSaveOpts so;
    model_save_opts_default(&so);
    so.dtype = ST_F32;
    so.copy_from = c->model_dir;
    int rc = model_save(&t->policy, tmp, &so, err);
    char *p = fs_join(tmp, "optimizer.safetensors");
    const char *pre[2] = {"exp_avg.", "exp_avg_sq."};
    float *bufs[2] = {t->opt.m, t->opt.v};
    if (!rc) rc = write_table(p, &t->policy.table, pre, bufs, 2, err);
    free(p);
    if (!rc && t->have_ref) {
        p = fs_join(tmp, "ref_model.safetensors");
        const char *rp[1] = {""};
        float *rb[1] = {t->ref.params};
        rc = write_table(p, &t->ref.table, rp, rb, 1, err);
        free(p);
    }
    int per_round = t->spg * c->num_iterations;
    json_t *state = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:{s:s, s:I, s:s}}", "version", STATE_VERSION,
                              "global_step", (json_int_t)t->step, "max_steps", (json_int_t)t->total_steps,
                              "generation_rounds", (json_int_t)t->rounds, "data_position",
                              (json_int_t)(t->rounds * (t->gen_batch / c->num_generations)), "num_tokens",
                              (json_int_t)t->num_tokens, "nonfinite_streak", t->nonfinite_streak, "adam_step",
                              (json_int_t)t->opt.step, "rng", "algorithm", "philox4x32-10", "seed",
                              (json_int_t)c->seed, "streams", "derived from (seed, data position, round index)");
    if (!rc && t->cur && t->cur->uses < per_round) {
        p = fs_join(tmp, "rollout.json");
        json_t *ro = rollout_json(t->cur, t->rewards.n_funcs);
        if (json_dump_file(ro, p, JSON_COMPACT)) rc = err_set(err, "%s: cannot write", p);
        json_decref(ro);
        free(p);
    }
    p = fs_join(tmp, "trainer_state.json");
    if (!rc && json_dump_file(state, p, JSON_INDENT(2))) rc = err_set(err, "%s: cannot write", p);
    free(p);
    json_decref(state);
    if (!rc) rc = fs_commit_dir(tmp, final, err);
    if (rc) fs_rm_rf(tmp);
    free(tmp);
    free(final);
    if (!rc && c->save_total_limit > 0) {
        long *v;
        int n = list_checkpoints(c->output_dir, &v);
        for (int i = 0; i < n - c->save_total_limit; i++) {
            snprintf(name, sizeof name, "checkpoint-%ld", v[i]);
            char *old = fs_join(c->output_dir, name);
            fs_rm_rf(old);
            free(old);
        }
        free(v);
    }
    return rc;
}

/* Keeps the lines of a JSON-lines log whose "step" is <= step (drops what an
 * interrupted run wrote after the checkpoint). */
static void truncate_log(const char *dir, const char *file, long step) {
    char *p = fs_join(dir, file), *buf = NULL;
    size_t len;
    GrpoErr e;
    if (fs_exists(p) && !fs_read_file(p, &buf, &len, &e)) {
        FILE *f = fopen(p, "w");
        for (char *line = strtok(buf, "\n"); f && line; line = strtok(NULL, "\n")) {
            json_t *o = json_loads(line, 0, NULL);
            json_t *s = json_object_get(o, "step");
            if (json_is_integer(s) && json_integer_value(s) <= step) fprintf(f, "%s\n", line);
            json_decref(o);
        }
        if (f) fclose(f);
        free(buf);
    }
    free(p);
}

int checkpoint_load(Trainer *t, const char *dir, GrpoErr *err) {
    Model m;
    if (model_load(&m, dir, err)) return -1;
    if (m.table.total != t->policy.table.total) {
        model_free(&m);
        return err_set(err, "%s: the checkpoint's model does not match %s", dir, t->c->model_dir);
    }
    memcpy(t->policy.params, m.params, sizeof(float) * m.table.total);
    model_free(&m);
    char *p = fs_join(dir, "optimizer.safetensors");
    const char *pre[2] = {"exp_avg.", "exp_avg_sq."};
    float *bufs[2] = {t->opt.m, t->opt.v};
    int rc = read_table(p, &t->policy.table, pre, bufs, 2, err);
    free(p);
    if (!rc && t->have_ref) {
        p = fs_join(dir, "ref_model.safetensors");
        if (fs_exists(p)) {
            const char *rp[1] = {""};
            float *rb[1] = {t->ref.params};
            rc = read_table(p, &t->ref.table, rp, rb, 1, err);
        }
        free(p);
    }
    p = fs_join(dir, "trainer_state.json");
    json_t *st = rc ? NULL : json_load_file(p, 0, NULL);
    json_int_t step, rounds, tokens, astep;
    int streak, version;
    if (!rc && (!st || json_unpack(st, "{s:i, s:I, s:I, s:I, s:i, s:I}", "version", &version, "global_step", &step,
                                   "generation_rounds", &rounds, "num_tokens", &tokens, "nonfinite_streak", &streak,
                                   "adam_step", &astep) || version != STATE_VERSION))
        rc = err_set(err, "%s: missing or malformed (expected global_step, generation_rounds, num_tokens, adam_step)", p);
    json_decref(st);
    free(p);
    if (rc) return -1;
    t->step = step;
    t->rounds = rounds;
    t->num_tokens = tokens;
    t->nonfinite_streak = streak;
    t->opt.step = astep;
    p = fs_join(dir, "rollout.json");
    if (fs_exists(p)) {
        json_error_t je;
        json_t *ro = json_load_file(p, 0, &je);
        rc = ro ? rollout_from_json(t, ro, &t->cur, p, err) : err_set(err, "%s: invalid JSON: %s", p, je.text);
        json_decref(ro);
    }
    free(p);
    truncate_log(t->c->output_dir, "metrics.jsonl", t->step);
    truncate_log(t->c->output_dir, "completions.jsonl", t->step);
    return rc;
}
