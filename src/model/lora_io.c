/* model/lora_io.c — trainable adapters to and from PEFT's adapter directories
 * (lora.h): adapter_config.json as LoraConfig.save_pretrained writes it, and
 * adapter_model.safetensors with the names get_peft_model_state_dict gives
 * (base_model.model.MODULE.lora_A.weight, no adapter name). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "io/hf_cache.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "model/model_io.h"

/* "model.layers.L.self_attn.q_proj.weight" -> L and the module; 0 if not such a name. */
static int weight_site(const char *name, int *layer, int *mod) {
    int l, used = 0;
    char part[16], proj[16];
    if (sscanf(name, "model.layers.%d.%15[a-z_].%15[a-z_].weight%n", &l, part, proj, &used) != 3 || name[used]) return 0;
    for (int m = 0; m < LORA_N_MODULES; m++)
        if (!strcmp(proj, lora_module_names[m])) {
            *layer = l;
            *mod = m;
            return 1;
        }
    return 0;
}

int lora_layers_load(LoraLayers *lo, const char *dir, const Model *m, uint64_t dropout_seed, GrpoErr *err) {
    LoraAdapter ad;
    if (lora_load(&ad, dir, m, err)) return -1;
    char *path = fs_join(dir, "adapter_model.safetensors");
    int L = m->cfg.n_layers, rc = 0;
    int *have = xcalloc((size_t)L * LORA_N_MODULES, sizeof(int));
    unsigned targets = 0;
    for (int i = 0; i < ad.n && !rc; i++) {
        int l, mod;
        const char *wname = m->table.entries[ad.pairs[i].param].name;
        if (!weight_site(wname, &l, &mod)) rc = err_set(err, "%s: adapts %s, which cannot be trained here", path, wname);
        else have[l * LORA_N_MODULES + mod] = i + 1, targets |= 1u << mod;
    }
    /* one LoraSpec: every layer adapts the same modules */
    for (int l = 0; l < L && !rc; l++)
        for (int mod = 0; mod < LORA_N_MODULES && !rc; mod++)
            if ((targets & 1u << mod) && !have[l * LORA_N_MODULES + mod])
                rc = err_set(err, "%s: adapts %s in some layers but not in layer %d; training needs the same modules "
                             "in every layer (merge it with grpo merge instead)", path, lora_module_names[mod], l);
    if (!rc) {
        LoraSpec spec = {ad.r, ad.alpha, ad.dropout, ad.use_rslora, targets};
        lora_layers_create(lo, &m->cfg, &spec, dropout_seed);
        for (int l = 0; l < L; l++)
            for (int mod = 0; mod < LORA_N_MODULES; mod++) {
                int e = lo->entry[l][mod];
                if (e < 0) continue;
                const LoraPair *q = &ad.pairs[have[l * LORA_N_MODULES + mod] - 1];
                memcpy(lo->params + lo->table.entries[e].offset, q->A, sizeof(float) * lo->table.entries[e].numel);
                memcpy(lo->params + lo->table.entries[e + 1].offset, q->B,
                       sizeof(float) * lo->table.entries[e + 1].numel);
            }
    }
    free(have);
    free(path);
    lora_free(&ad);
    return rc;
}

/* The modules (a LoraSpec.targets mask) a's target_modules adapts in layer 0. */
static unsigned config_targets(const LoraAdapter *a) {
    unsigned mask = 0;
    for (int m = 0; m < LORA_N_MODULES; m++) {
        char name[80];
        snprintf(name, sizeof name, "model.layers.0.%s.%s", m < LORA_GATE ? "self_attn" : "mlp", lora_module_names[m]);
        if (lora_config_targets(a, name)) mask |= 1u << m;
    }
    return mask;
}

static void targets_text(unsigned mask, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int m = 0; m < LORA_N_MODULES && n < cap; m++)
        if (mask & 1u << m) n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? " " : "", lora_module_names[m]);
}

int lora_layers_check_config(const LoraLayers *lo, const char *dir, GrpoErr *err) {
    LoraAdapter ck;
    memset(&ck, 0, sizeof ck);
    if (lora_config_read(&ck, dir, err)) return -1;
    char *path = fs_join(dir, "adapter_config.json");
    const LoraSpec *s = &lo->spec;
    unsigned targets = config_targets(&ck);
    char was[120], now[120];
    int rc = 0;
    if (ck.r != s->r) rc = err_set(err, "%s: lora_r %d in the checkpoint, %d in this run", path, ck.r, s->r);
    else if (fabs(ck.alpha - s->alpha) > 1e-13 * fabs(s->alpha)) /* the file holds 15 significant digits */
        rc = err_set(err, "%s: lora_alpha %.15g in the checkpoint, %.15g in this run", path, ck.alpha, s->alpha);
    else if (ck.use_rslora != s->use_rslora)
        rc = err_set(err, "%s: use_rslora %s in the checkpoint, %s in this run", path, ck.use_rslora ? "true" : "false",
                     s->use_rslora ? "true" : "false");
    else if ((float)ck.dropout != (float)s->dropout) /* likewise */
        rc = err_set(err, "%s: lora_dropout %.7g in the checkpoint, %.7g in this run", path, ck.dropout, s->dropout);
    else if (targets != s->targets) {
        targets_text(targets, was, sizeof was);
        targets_text(s->targets, now, sizeof now);
        rc = err_set(err, "%s: lora_target_modules %s in the checkpoint (target_modules %s), %s in this run", path, was,
                     ck.target.shown, now);
    }
    if (rc) { /* what to do, on the same line */
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, ": resume with the LoRA options the checkpoint was trained with");
    }
    lora_config_free(&ck);
    free(path);
    return rc;
}

static int params_finite(const float *x, size_t n, const char *path, const char *name, GrpoErr *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return err_set(err, "%s: tensor '%s' holds a NaN or Inf (value %zu of %zu): expected finite values", path,
                           name, i, n);
    return 0;
}

int lora_layers_read_params(LoraLayers *lo, const char *dir, GrpoErr *err) {
    char *path = fs_join(dir, "adapter_model.safetensors");
    StFile f;
    if (st_open(&f, path, err)) {
        free(path);
        return -1;
    }
    int rc = 0;
    if (f.n_tensors != lo->table.n)
        rc = err_set(err, "%s: %d tensors; this run's adapters have %d (r %d, the same target modules expected)", path,
                     f.n_tensors, lo->table.n, lo->spec.r);
    for (int i = 0; !rc && i < lo->table.n; i++) {
        const ParamEntry *e = &lo->table.entries[i];
        const StTensor *t = st_find(&f, e->name);
        if (!t) rc = err_set(err, "%s: missing tensor '%s'", path, e->name);
        else if (t->ndim != 2 || t->shape[0] != e->shape[0] || t->shape[1] != e->shape[1])
            rc = err_set(err, "%s: '%s' is not [%lld, %lld]", path, e->name, e->shape[0], e->shape[1]);
        else rc = st_read_f32(&f, t, lo->params + e->offset, err);
        if (!rc) rc = params_finite(lo->params + e->offset, e->numel, path, e->name, err);
    }
    st_close(&f);
    free(path);
    return rc;
}

/* PEFT's adapter_config.json. base_model_name_or_path is the model as the user
 * named it: a Hub id resolved in the local cache is recorded as the id (as PEFT
 * records model.name_or_path, which AutoPeftModelForCausalLM and sharing need),
 * a path as given. */
static json_t *adapter_config(const LoraLayers *lo, const char *base_model) {
    const char *id = base_model ? hf_cache_repo_id_of(base_model) : NULL;
    if (id) base_model = id;
    json_t *targets = json_array();
    for (int m = 0; m < LORA_N_MODULES; m++)
        if (lo->spec.targets & 1u << m) json_array_append_new(targets, json_string(lora_module_names[m]));
    double a = lo->spec.alpha;
    json_t *alpha = a == floor(a) && fabs(a) < 1e15 ? json_integer((json_int_t)a) : json_real(a);
    return json_pack("{s:o, s:n, s:s?, s:s, s:b, s:b, s:b, s:n, s:n, s:o, s:f, s:n, s:s, s:i, s:o, s:n, s:o, s:s, "
                     "s:b, s:b}",
                     "alpha_pattern", json_object(), "auto_mapping", "base_model_name_or_path", base_model, "bias",
                     "none", "fan_in_fan_out", 0, "inference_mode", 1, "init_lora_weights", 1, "layers_pattern",
                     "layers_to_transform", "lora_alpha", alpha, "lora_dropout", lo->spec.dropout, "modules_to_save",
                     "peft_type", "LORA", "r", lo->spec.r, "rank_pattern", json_object(), "revision", "target_modules",
                     targets, "task_type", "CAUSAL_LM", "use_dora", 0, "use_rslora", lo->spec.use_rslora);
}

int lora_layers_save(const LoraLayers *lo, const char *out_dir, const LoraSaveOpts *o, GrpoErr *err) {
    char *tmp = NULL;
    if (fs_tmpdir_for(out_dir, &tmp, err)) return -1;
    json_t *cfg = adapter_config(lo, o->base_model);
    char *path = fs_join(tmp, "adapter_config.json");
    int rc = cfg && json_dump_file(cfg, path, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) == 0 ? 0 : err_set(err, "%s: cannot write", path);
    json_decref(cfg);
    free(path);
    StWriteTensor *wt = xcalloc(lo->table.n + 1, sizeof *wt);
    for (int i = 0; i < lo->table.n; i++) {
        const ParamEntry *e = &lo->table.entries[i];
        wt[i] = (StWriteTensor){.name = e->name, .dtype = ST_F32, .ndim = 2, .data = lo->params + e->offset};
        wt[i].shape[0] = e->shape[0];
        wt[i].shape[1] = e->shape[1];
    }
    path = fs_join(tmp, "adapter_model.safetensors");
    if (!rc) rc = st_write_file(path, wt, lo->table.n, err);
    free(path);
    free(wt);
    /* the tokenizer, as the trainer's save_model writes it beside the adapter */
    if (!rc && o->copy_from) rc = model_copy_side_files(o->copy_from, tmp, 0, err);
    if (!rc) rc = fs_commit_dir(tmp, out_dir, err);
    if (rc) fs_rm_rf(tmp);
    free(tmp);
    return rc;
}
