/* model/lora.c — PEFT LoRA adapters: read, checked, merged (lora.h). */
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "ops/gemm.h"

void lora_free(LoraAdapter *a) {
    for (int i = 0; i < a->n; i++) free(a->pairs[i].A), free(a->pairs[i].B);
    free(a->pairs);
    memset(a, 0, sizeof *a);
}

/* A field PEFT may set that this does not implement: absent, null, false, "none",
 * an empty list or mapping are fine. */
static int refuse_feature(const json_t *cfg, const char *key, const char *path, GrpoErr *err) {
    const json_t *v = json_object_get(cfg, key);
    int unset = !v || json_is_null(v) || json_is_false(v) || (json_is_string(v) && !strcmp(json_string_value(v), "none")) ||
                (json_is_array(v) && json_array_size(v) == 0) || (json_is_object(v) && json_object_size(v) == 0);
    if (unset) return 0;
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    err_set(err, "%s: %s %.60s is not supported (plain LoRA only: no DoRA, biases, fan_in_fan_out, modules_to_save, "
            "rank or alpha patterns)", path, key, text ? text : "?");
    free(text);
    return -1;
}

static int read_config(LoraAdapter *a, const char *dir, GrpoErr *err) {
    char *path = fs_join(dir, "adapter_config.json");
    json_t *cfg = fs_load_json(path, 0, err);
    int rc = cfg ? 0 : -1;
    const json_t *pt = cfg ? json_object_get(cfg, "peft_type") : NULL, *r = cfg ? json_object_get(cfg, "r") : NULL;
    const json_t *alpha = cfg ? json_object_get(cfg, "lora_alpha") : NULL, *rs = cfg ? json_object_get(cfg, "use_rslora") : NULL;
    if (!rc && !json_is_object(cfg)) rc = err_set(err, "%s: expected a JSON object", path);
    if (!rc && !(json_is_string(pt) && !strcmp(json_string_value(pt), "LORA")))
        rc = err_set(err, "%s: peft_type must be \"LORA\"", path);
    if (!rc && !(json_is_integer(r) && json_integer_value(r) > 0 && json_integer_value(r) <= 65536))
        rc = err_set(err, "%s: r must be an integer in [1, 65536]", path);
    if (!rc && !(json_is_number(alpha) && isfinite(json_number_value(alpha))))
        rc = err_set(err, "%s: lora_alpha must be a number", path);
    if (!rc && rs && !json_is_boolean(rs)) rc = err_set(err, "%s: use_rslora must be true or false", path);
    const json_t *dr = cfg ? json_object_get(cfg, "lora_dropout") : NULL;
    if (!rc && dr && !json_is_null(dr) && !(json_is_number(dr) && json_number_value(dr) >= 0 && json_number_value(dr) < 1))
        rc = err_set(err, "%s: lora_dropout must be a number in [0, 1)", path);
    static const char *const unsupported[] = {"use_dora", "fan_in_fan_out", "modules_to_save", "rank_pattern",
                                              "alpha_pattern", "layers_to_transform", "use_qalora", "lora_bias"};
    for (int i = 0; !rc && i < (int)(sizeof unsupported / sizeof *unsupported); i++)
        rc = refuse_feature(cfg, unsupported[i], path, err);
    if (!rc && refuse_feature(cfg, "bias", path, err)) rc = -1;
    if (!rc) {
        a->r = (int)json_integer_value(r);
        a->alpha = json_number_value(alpha);
        a->use_rslora = json_is_true(rs);
        a->dropout = json_is_number(dr) ? json_number_value(dr) : 0.0;
        a->scaling = a->use_rslora ? a->alpha / sqrt(a->r) : a->alpha / a->r;
    }
    json_decref(cfg);
    free(path);
    return rc;
}

/* "base_model.model.MODULE.lora_X[.ADAPTER].weight" -> MODULE and X ('A'/'B'); 0 if not such a name. */
static int parse_name(const char *name, char *module, size_t cap, char *which) {
    static const char prefix[] = "base_model.model.";
    if (strncmp(name, prefix, sizeof prefix - 1)) return 0;
    const char *m = name + sizeof prefix - 1, *l = strstr(m, ".lora_");
    if (!l || (l[6] != 'A' && l[6] != 'B') || (strcmp(l + 7, ".weight") && !(l[7] == '.' && strchr(l + 8, '.') &&
                                                                                   !strcmp(strchr(l + 8, '.'), ".weight"))))
        return 0;
    if ((size_t)(l - m) + 1 > cap) return 0;
    memcpy(module, m, (size_t)(l - m));
    module[l - m] = 0;
    *which = l[6];
    return 1;
}

int lora_load(LoraAdapter *a, const char *dir, const Model *m, GrpoErr *err) {
    memset(a, 0, sizeof *a);
    if (read_config(a, dir, err)) return -1;
    char *path = fs_join(dir, "adapter_model.safetensors");
    StFile f;
    if (st_open(&f, path, err)) {
        free(path);
        return -1;
    }
    int rc = 0;
    a->pairs = xcalloc(f.n_tensors / 2 + 1, sizeof *a->pairs);
    for (int i = 0; i < f.n_tensors && !rc; i++) {
        const StTensor *t = &f.tensors[i];
        char module[160], which;
        if (!parse_name(t->name, module, sizeof module, &which)) {
            rc = err_set(err, "%s: tensor '%s' is not a LoRA A or B matrix of a linear layer "
                         "(base_model.model.MODULE.lora_A.weight / lora_B.weight)", path, t->name);
            break;
        }
        if (which == 'B') continue; /* taken with its A */
        char wname[200], bname[220];
        snprintf(wname, sizeof wname, "%s.weight", module);
        int p = params_find(&m->table, wname);
        const ParamEntry *e = p >= 0 ? &m->table.entries[p] : NULL;
        if (!e || e->ndim != 2 || strstr(module, "embed") || strstr(module, "lm_head")) {
            rc = err_set(err, "%s: '%s' adapts '%s', which is not a linear layer of the model (q_proj, k_proj, v_proj, "
                         "o_proj, gate_proj, up_proj, down_proj)", path, t->name, module);
            break;
        }
        int out = (int)e->shape[0], in = (int)e->shape[1];
        snprintf(bname, sizeof bname, "%.*slora_B%s", (int)(strstr(t->name, "lora_A") - t->name), t->name,
                 strstr(t->name, "lora_A") + 6);
        const StTensor *tb = st_find(&f, bname);
        char sa[64], sb[64];
        if (!tb) {
            rc = err_set(err, "%s: '%s' has no '%s'", path, t->name, bname);
        } else if (t->ndim != 2 || t->shape[0] != a->r || t->shape[1] != in) {
            rc = err_set(err, "%s: '%s' has shape %s; r %d and %s [%d, %d] imply [%d, %d]", path, t->name,
                         st_shape_str(sa, sizeof sa, t->ndim, t->shape), a->r, wname, out, in, a->r, in);
        } else if (tb->ndim != 2 || tb->shape[0] != out || tb->shape[1] != a->r) {
            rc = err_set(err, "%s: '%s' has shape %s; r %d and %s [%d, %d] imply [%d, %d]", path, bname,
                         st_shape_str(sb, sizeof sb, tb->ndim, tb->shape), a->r, wname, out, in, out, a->r);
        } else {
            LoraPair *q = &a->pairs[a->n++];
            *q = (LoraPair){p, out, in, xmalloc(sizeof(float) * (size_t)a->r * in), xmalloc(sizeof(float) * (size_t)out * a->r)};
            rc = st_read_f32(&f, t, q->A, err) || st_read_f32(&f, tb, q->B, err) ? -1 : 0;
        }
    }
    /* every B has its A */
    for (int i = 0; i < f.n_tensors && !rc; i++) {
        const char *nm = f.tensors[i].name, *l = strstr(nm, ".lora_B");
        char an[220];
        if (!l) continue;
        snprintf(an, sizeof an, "%.*s.lora_A%s", (int)(l - nm), nm, l + 7);
        if (!st_find(&f, an)) rc = err_set(err, "%s: '%s' has no '%s'", path, nm, an);
    }
    if (!rc && a->n == 0) rc = err_set(err, "%s: no LoRA tensors", path);
    st_close(&f);
    free(path);
    if (rc) lora_free(a);
    return rc;
}

int lora_apply_dir(Model *m, const char *dir, GrpoErr *err) {
    LoraAdapter a;
    if (lora_load(&a, dir, m, err)) return -1;
    lora_merge(&a, m);
    lora_free(&a);
    return 0;
}

void lora_merge(const LoraAdapter *a, Model *m) {
    for (int i = 0; i < a->n; i++) {
        const LoraPair *q = &a->pairs[i];
        float *W = m->params + m->table.entries[q->param].offset;
        /* W[out, in] += scaling · B[out, r] A[r, in] */
        gemm_f32(0, 0, q->out, q->in, a->r, (float)a->scaling, q->B, a->r, q->A, q->in, 1.0f, W, q->in);
    }
}
