/* model/lora.c — PEFT LoRA adapters: the tensors read and checked against the
 * model and the config, merged (lora.h). Not here: adapter_config.json itself
 * (lora_config.c). */
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
    lora_config_free(a);
    free(a->dir);
    memset(a, 0, sizeof *a);
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

static int check_finite(const float *x, size_t n, const char *path, const char *name, GrpoErr *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return err_set(err, "%s: tensor '%s' holds a NaN or Inf (value %zu of %zu): expected finite values", path,
                           name, i, n);
    return 0;
}

/* The modules with tensors are those target_modules names (less exclude_modules)
 * among m's weights: what PEFT would adapt and load, nothing left at its
 * initialisation, nothing in the file that it would skip. */
static int check_targets(const LoraAdapter *a, const Model *m, const char *dir, GrpoErr *err) {
    const ParamTable *tab = &m->table;
    char *has = xcalloc((size_t)tab->n, 1);
    for (int i = 0; i < a->n; i++) has[a->pairs[i].param] = 1;
    int rc = 0;
    for (int p = 0; p < tab->n && !rc; p++) {
        const char *name = tab->entries[p].name;
        size_t len = strlen(name);
        if (tab->entries[p].ndim != 2 || len < 7 || strcmp(name + len - 7, ".weight")) continue;
        char module[200];
        snprintf(module, sizeof module, "%.*s", (int)(len - 7), name);
        int targeted = lora_config_targets(a, module);
        if (targeted && !has[p]) {
            char *path = fs_join(dir, "adapter_config.json");
            rc = err_set(err, "%s: target_modules %s names %s, which has no lora_A/lora_B tensors in "
                         "adapter_model.safetensors: expected the modules with tensors", path, a->target.shown, module);
            free(path);
        } else if (!targeted && has[p]) {
            char *path = fs_join(dir, "adapter_model.safetensors");
            rc = err_set(err, "%s: holds tensors for %s, which target_modules %s%s%s does not name (PEFT would not "
                         "load them)", path, module, a->target.shown, a->exclude.kind ? " less exclude_modules " : "",
                         a->exclude.kind ? a->exclude.shown : "");
            free(path);
        }
    }
    free(has);
    return rc;
}

int lora_load(LoraAdapter *a, const char *dir, const Model *m, GrpoErr *err) {
    memset(a, 0, sizeof *a);
    if (lora_config_read(a, dir, err)) return -1;
    a->dir = xstrdup(dir);
    char *path = fs_join(dir, "adapter_model.safetensors");
    StFile f;
    if (st_open(&f, path, err)) {
        free(path);
        lora_free(a);
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
            if (!rc) rc = check_finite(q->A, (size_t)a->r * in, path, t->name, err);
            if (!rc) rc = check_finite(q->B, (size_t)out * a->r, path, bname, err);
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
    if (!rc) rc = check_targets(a, m, dir, err);
    st_close(&f);
    free(path);
    if (rc) lora_free(a);
    return rc;
}

int lora_apply_dir(Model *m, const char *dir, GrpoErr *err) {
    LoraAdapter a;
    if (lora_load(&a, dir, m, err)) return -1;
    int rc = lora_merge(&a, m, err);
    lora_free(&a);
    return rc;
}

int lora_merge(const LoraAdapter *a, Model *m, GrpoErr *err) {
    for (int i = 0; i < a->n; i++) {
        const LoraPair *q = &a->pairs[i];
        const ParamEntry *e = &m->table.entries[q->param];
        float *W = m->params + e->offset;
        /* W[out, in] += scaling · B[out, r] A[r, in] */
        gemm_f32(0, 0, q->out, q->in, a->r, (float)a->scaling, q->B, a->r, q->A, q->in, 1.0f, W, q->in);
        for (size_t k = 0; k < e->numel; k++)
            if (!isfinite(W[k]))
                return err_set(err, "%s: merged into '%s', the adapter gives a non-finite weight (value %zu of "
                               "%zu): W + %g · B A overflows fp32 (lora_alpha %g, r %d)", a->dir ? a->dir : "adapter",
                               e->name, k, e->numel, a->scaling, a->alpha, a->r);
    }
    return 0;
}
