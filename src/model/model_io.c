/* model/model_io.c — loading and saving HF model directories (see model_io.h).
 * Not here: the safetensors format itself (io/safetensors.c). */
#include "model/model_io.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/safetensors.h"

const char *const model_side_files[] = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json",
    "chat_template.jinja", NULL,
};

/* Every tensor the config's table names is in the files with a supported dtype
 * and the shape the config implies. Checked before the parameters are
 * allocated: a config.json that promises more than model.safetensors holds is
 * refused without allocating what it promises. Fills tensors[i] and files[i]
 * for table entry i. */
static int check_tensors(const ParamTable *table, const ModelConfig *cfg, const StSet *set, const char *where,
                         const StTensor **tensors, const StFile **files, GrpoErr *err) {
    for (int i = 0; i < table->n; i++) {
        const ParamEntry *e = &table->entries[i];
        const StFile *f = NULL;
        const StTensor *t = tensors[i] = stset_find(set, e->name, &f);
        files[i] = f;
        if (!t)
            return err_set(err, "%s: missing tensor '%s' (needed by config.json's %s architecture)", where, e->name,
                           config_model_type_name(cfg->type));
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
            return err_set(err, "%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", f->path, e->name,
                           st_dtype_name(t->dtype));
        int same = t->ndim == e->ndim;
        for (int d = 0; same && d < e->ndim; d++) same = t->shape[d] == e->shape[d];
        if (!same) {
            char want[64], got[160];
            int64_t ws[2] = {e->shape[0], e->shape[1]};
            return err_set(err, "%s: tensor '%s' has shape %s; config.json implies %s", f->path, e->name,
                           st_shape_str(got, sizeof got, t->ndim, t->shape),
                           st_shape_str(want, sizeof want, e->ndim, ws));
        }
    }
    return 0;
}

int model_load(Model *m, const char *dir, GrpoErr *err) { return model_load_ex(m, dir, WEIGHTS_FP32, err); }

/* Entry e as loaded, every value finite: fp32 values, or the upper halves (bf16
 * values; mixed precision's carry the exponent) — a NaN or an Inf has every exponent
 * bit set. The first one found is named with its tensor and index. */
static int check_finite(const Model *m, const ParamEntry *e, const char *path, GrpoErr *err) {
    size_t bad = e->numel;
    if (m->params && !e->half) {
        const uint32_t *u = (const uint32_t *)(m->params + e->offset);
        uint32_t all = 0;
#pragma omp parallel for simd reduction(| : all) schedule(static)
        for (size_t i = 0; i < e->numel; i++) all |= (u[i] & 0x7f800000u) == 0x7f800000u;
        for (size_t i = 0; all && i < e->numel && bad == e->numel; i++)
            if ((u[i] & 0x7f800000u) == 0x7f800000u) bad = i;
    } else {
        const uint16_t *h = m->mixed ? m->mixed->hi + e->offset : m->half->params16 + e->offset;
        uint32_t all = 0;
#pragma omp parallel for simd reduction(| : all) schedule(static)
        for (size_t i = 0; i < e->numel; i++) all |= (h[i] & 0x7f80u) == 0x7f80u;
        for (size_t i = 0; all && i < e->numel && bad == e->numel; i++)
            if ((h[i] & 0x7f80u) == 0x7f80u) bad = i;
    }
    if (bad == e->numel) return 0;
    return err_set(err, "%s: tensor '%s' holds a NaN or Inf (value %zu of %zu): the weights are damaged", path, e->name,
                   bad, e->numel);
}

/* A tensor's fp32 values into mixed precision's two halves at offset, a chunk at a
 * time (the same split model_use_bf16_compute makes of a whole fp32 buffer). */
enum { SPLIT_CHUNK = 1 << 16 };
static int read_split(const StFile *f, const StTensor *t, ModelMixed *x, size_t offset, float *chunk, GrpoErr *err) {
    for (int64_t i = 0; i < t->numel; i += SPLIT_CHUNK) {
        int64_t n = t->numel - i < SPLIT_CHUNK ? t->numel - i : SPLIT_CHUNK;
        if (st_read_f32_range(f, t, i, n, chunk, err)) return -1;
        f32_split_n(x->hi + offset + i, x->lo + offset + i, chunk, (size_t)n);
    }
    st_release(f, t);
    return 0;
}

int model_load_ex(Model *m, const char *dir, WeightForm form, GrpoErr *err) {
    ModelConfig cfg;
    if (config_load(&cfg, dir, err)) return -1;
    char *cpath = fs_join(dir, "config.json");
    int rc = config_check_memory(&cfg, cpath, err);
    free(cpath);
    StSet set;
    if (!rc && stset_open_dir(&set, dir, err)) rc = -1;
    if (rc) {
        config_free(&cfg);
        return -1;
    }
    char *where = fs_join(dir, set.n_files == 1 ? "model.safetensors" : "model.safetensors.index.json");
    ParamTable table;
    params_build(&table, &cfg);
    const StTensor **tensors = xmalloc(sizeof *tensors * table.n);
    const StFile **files = xmalloc(sizeof *files * table.n);
    rc = check_tensors(&table, &cfg, &set, where, tensors, files, err);
    params_free(&table);
    free(where);
    if (rc) config_free(&cfg);
    else if (form == WEIGHTS_MIXED) model_create_mixed(m, &cfg); /* the same table again, in the same order */
    else if (form != WEIGHTS_FP32) model_create_half(m, &cfg, form);
    else model_create(m, &cfg);
    float *chunk = form == WEIGHTS_MIXED ? xmalloc(sizeof(float) * SPLIT_CHUNK) : NULL;
    for (int i = 0; !rc && i < m->table.n; i++) {
        ParamEntry *e = &m->table.entries[i];
        rc = m->mixed ? read_split(files[i], tensors[i], m->mixed, e->offset, chunk, err)
             : e->half ? st_read_bf16(files[i], tensors[i], m->half->params16 + e->offset, err)
                       : st_read_f32(files[i], tensors[i], m->params + e->offset, err);
        e->src_dtype = tensors[i]->dtype;
        if (!rc) rc = check_finite(m, e, files[i]->path, err);
        if (rc) model_free(m);
    }
    if (!rc && m->mixed) model_sync_bf16(m); /* the fp32 norms and biases the forward reads */
    free(chunk);
    free(tensors);
    free(files);
    stset_close(&set);
    return rc;
}

void model_save_opts_default(ModelSaveOpts *o) {
    o->dtype = -1;
    o->max_shard_bytes = (size_t)5000 * 1000 * 1000;
    o->copy_from = NULL;
    o->meta = NULL;
}

static int is_weight_file(const char *name) {
    size_t n = strlen(name);
    return !strcmp(name, "model.safetensors") || !strcmp(name, "model.safetensors.index.json") ||
           (!strncmp(name, "model-", 6) && n > 12 && !strcmp(name + n - 12, ".safetensors"));
}

/* After saving into an existing directory: weight files of an earlier save that
 * this save did not write (a sharded layout replaced by a single file, or more
 * shards than now) would confuse loaders; remove them. */
static void remove_stale_weights(const char *dir, int sharded) {
    DIR *d = opendir(dir);
    if (!d) return;
    char *index = fs_join(dir, "model.safetensors.index.json");
    json_t *idx = sharded ? json_load_file(index, 0, NULL) : NULL;
    json_t *wm = json_object_get(idx, "weight_map");
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (!is_weight_file(name)) continue;
        int keep = 0;
        if (!sharded) keep = !strcmp(name, "model.safetensors");
        else if (!strcmp(name, "model.safetensors.index.json")) keep = 1;
        else if (strcmp(name, "model.safetensors")) {
            /* a shard is current when the index names it */
            const char *k;
            json_t *v;
            json_object_foreach(wm, k, v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) keep = 1;
        }
        if (!keep) {
            char *p = fs_join(dir, name);
            unlink(p);
            free(p);
        }
    }
    json_decref(idx);
    free(index);
    closedir(d);
}

static const char *torch_dtype_of(int st) {
    return st == ST_BF16 ? "bfloat16" : st == ST_F16 ? "float16" : "float32";
}

int model_copy_side_files(const char *from, const char *to, int with_generation_config, GrpoErr *err) {
    int rc = 0;
    for (int i = 0; !rc && model_side_files[i]; i++) {
        if (!with_generation_config && !strcmp(model_side_files[i], "generation_config.json")) continue;
        char *src = fs_join(from, model_side_files[i]);
        if (fs_exists(src)) {
            char *dst = fs_join(to, model_side_files[i]);
            rc = fs_copy_file(src, dst, err);
            free(dst);
        }
        free(src);
    }
    return rc;
}

int model_set_chat_template(const char *dir, const char *template_text, GrpoErr *err) {
    char *path = fs_join(dir, "tokenizer_config.json");
    json_error_t je;
    json_t *cfg = fs_exists(path) ? json_load_file(path, 0, &je) : json_object();
    int rc = json_is_object(cfg) ? 0 : err_set(err, "%s: not a JSON object", path);
    char *text = NULL;
    if (!rc) {
        json_object_set_new(cfg, "chat_template", json_string(template_text));
        text = json_dumps(cfg, JSON_INDENT(2));
        rc = text ? fs_write_file_atomic(path, text, strlen(text), err) : err_set(err, "%s: cannot encode", path);
    }
    free(text);
    json_decref(cfg);
    free(path);
    path = fs_join(dir, "chat_template.jinja");
    if (!rc && fs_exists(path)) rc = fs_write_file_atomic(path, template_text, strlen(template_text), err);
    free(path);
    return rc;
}

static void fill_params(const void *m, size_t at, size_t k, float *out) { model_get_params(m, at, k, out); }

int model_save(const Model *m, const char *out_dir, const ModelSaveOpts *opts, GrpoErr *err) {
    CHECK(!m->half); /* a frozen model held in bf16 is never saved: its directory is where it came from */
    char *tmp = NULL;
    int rc = 0, n = m->table.n;
    StWriteTensor *wt = xcalloc(n, sizeof *wt);
    int counts[ST_DTYPE_COUNT] = {0}, common = ST_F32;
    for (int i = 0; i < n; i++) {
        const ParamEntry *e = &m->table.entries[i];
        wt[i].name = e->name;
        wt[i].dtype = opts->dtype >= 0 ? opts->dtype : e->src_dtype;
        wt[i].ndim = e->ndim;
        for (int d = 0; d < e->ndim; d++) wt[i].shape[d] = e->shape[d];
        if (m->params) {
            wt[i].data = m->params + e->offset;
        } else { /* mixed precision: the fp32 values from their two halves */
            wt[i].fill = fill_params;
            wt[i].ctx = m;
            wt[i].from = e->offset;
        }
        if (++counts[wt[i].dtype] > counts[common]) common = wt[i].dtype;
    }
    /* weights that the stored dtype cannot hold: refused before the directory is made */
    if (st_check_range(out_dir, wt, n, err) || fs_tmpdir_for(out_dir, &tmp, err)) {
        free(wt);
        return -1;
    }
    /* config.json: as read, with torch_dtype naming the stored dtype */
    json_t *cfg = m->cfg.raw ? json_deep_copy(m->cfg.raw) : json_object();
    json_object_set_new(cfg, "torch_dtype", json_string(torch_dtype_of(common)));
    if (opts->meta) { /* the special ids save_pretrained's config carries, where the source's lacks them */
        const char *keys[3] = {"bos_token_id", "eos_token_id", "pad_token_id"};
        const int32_t ids[3] = {opts->meta->bos, opts->meta->eos, opts->meta->pad};
        for (int k = 0; k < 3; k++) {
            json_t *have = json_object_get(cfg, keys[k]);
            if (ids[k] >= 0 && (!have || json_is_null(have))) json_object_set_new(cfg, keys[k], json_integer(ids[k]));
        }
    }
    char *path = fs_join(tmp, "config.json");
    if (json_dump_file(cfg, path, JSON_INDENT(2)) != 0)
        rc = err_set(err, "%s: cannot write", path);
    free(path);
    json_decref(cfg);
    if (!rc && opts->copy_from) rc = model_copy_side_files(opts->copy_from, tmp, 1, err);
    if (!rc && opts->meta && opts->meta->chat_template) rc = model_set_chat_template(tmp, opts->meta->chat_template, err);
    if (!rc && opts->meta && opts->meta->generation_config) {
        path = fs_join(tmp, "generation_config.json");
        if (!fs_exists(path) && json_dump_file(opts->meta->generation_config, path, JSON_INDENT(2)) != 0)
            rc = err_set(err, "%s: cannot write", path);
        free(path);
    }
    if (!rc) rc = st_write_dir(tmp, wt, n, opts->max_shard_bytes, err);
    int sharded = 0;
    if (!rc) {
        char *idx = fs_join(tmp, "model.safetensors.index.json");
        sharded = fs_exists(idx);
        free(idx);
        rc = fs_commit_dir(tmp, out_dir, err);
    }
    if (!rc) remove_stale_weights(out_dir, sharded);
    if (rc) fs_rm_rf(tmp);
    free(tmp);
    free(wt);
    return rc;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

int model_weights_digest(const Model *m, const char *dir, char hex[17], GrpoErr *err) {
    StSet set;
    if (stset_open_dir(&set, dir, err)) return -1;
    uint64_t h = 1469598103934665603ULL;
    int rc = 0;
    for (int i = 0; i < m->table.n && !rc; i++) {
        const StFile *f;
        const StTensor *t = stset_find(&set, m->table.entries[i].name, &f);
        if (!t) {
            rc = err_set(err, "%s: no tensor '%s'", dir, m->table.entries[i].name);
            break;
        }
        h = fnv1a(h, t->name, strlen(t->name) + 1);
        int32_t dtype = (int32_t)t->dtype, ndim = t->ndim;
        h = fnv1a(h, &dtype, sizeof dtype);
        h = fnv1a(h, &ndim, sizeof ndim);
        h = fnv1a(h, t->shape, sizeof(int64_t) * (size_t)t->ndim);
        const uint8_t *data = f->data + t->begin;
        size_t n = t->end - t->begin;
        if (n <= 512) h = fnv1a(h, data, n);
        else
            for (size_t k = 0; k < 64; k++) h = fnv1a(h, data + k * ((n - 8) / 63), 8);
    }
    stset_close(&set);
    if (!rc) snprintf(hex, 17, "%016llx", (unsigned long long)h);
    return rc;
}
