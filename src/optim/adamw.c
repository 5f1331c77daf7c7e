/* optim/adamw.c — AdamW (torch.optim.AdamW semantics) over one flat fp32
 * buffer, and the weight-decay mask of transformers' Trainer.
 *
 * Is: the element-wise update and the per-element decay mask built from the
 * parameter table's HF names. Is not: the learning-rate schedule (sched.c),
 * clipping (grad.c) or checkpoint I/O (the trainer saves m, v and step). */
#include "optim/optim.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "core/check.h"

void adamw_config_default(AdamWConfig *c) {
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->weight_decay = 0.0;
}

void adamw_init(AdamW *opt, size_t n) {
    opt->n = n;
    size_t bytes = (n ? n : 1) * sizeof(float);
    opt->m = xaligned(bytes);
    opt->v = xaligned(bytes);
    memset(opt->m, 0, bytes);
    memset(opt->v, 0, bytes);
    opt->step = 0;
}

void adamw_free(AdamW *opt) {
    free(opt->m);
    free(opt->v);
    memset(opt, 0, sizeof *opt);
}

void adamw_step(AdamW *opt, float *params, const float *grads, const uint8_t *decay_mask,
                double lr, const AdamWConfig *c) {
    opt->step++;
    /* Scalars in double, as torch computes them in Python floats. */
    const double bc1 = 1.0 - pow(c->beta1, (double)opt->step);
    const double bc2 = 1.0 - pow(c->beta2, (double)opt->step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float decay = (float)(1.0 - lr * c->weight_decay);
    const float one_minus_b1 = (float)(1.0 - c->beta1);
    const float b2 = (float)c->beta2, one_minus_b2 = (float)(1.0 - c->beta2);
    const float eps = (float)c->eps;
    const int use_decay = c->weight_decay != 0.0;
    float *m = opt->m, *v = opt->v;
    const long long n = (long long)opt->n;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < n; i++) {
        float p = params[i], g = grads[i];
        if (use_decay && (!decay_mask || decay_mask[i])) p *= decay;
        float mi = m[i] + one_minus_b1 * (g - m[i]);
        float vi = b2 * v[i] + one_minus_b2 * g * g;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p -= step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
        params[i] = p;
    }
}

/* Does the lower-cased name contain `pat` such that the character before is
 * the start or '.' (when need_dot_before) and the one after is the end or '.'? */
static int has_norm_segment(const char *s, const char *pat, int need_dot_before) {
    size_t k = strlen(pat);
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat)) {
        int before_ok = !need_dot_before || p == s || p[-1] == '.';
        int after_ok = p[k] == '\0' || p[k] == '.';
        if (before_ok && after_ok) return 1;
    }
    return 0;
}

int adamw_decays(const char *hf_name) {
    char s[256];
    size_t i = 0;
    for (; hf_name[i] && i + 1 < sizeof s; i++) s[i] = (char)tolower((unsigned char)hf_name[i]);
    s[i] = '\0';
    if (strstr(s, "bias") || strstr(s, "layernorm") || strstr(s, "rmsnorm")) return 0;
    if (has_norm_segment(s, "norm", 1)) return 0;     /* (^|\.)norm($|\.) */
    if (has_norm_segment(s, "_norm", 0)) return 0;    /* _norm($|\.) */
    return 1;
}

void adamw_decay_mask_build(uint8_t *mask, const ParamTable *t) {
    memset(mask, 0, t->total);
    for (int i = 0; i < t->n; i++) {
        const ParamEntry *e = &t->entries[i];
        memset(mask + e->offset, adamw_decays(e->name), e->numel);
    }
}
