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
#include "ops/ops.h"

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

AdamWStep adamw_step_scalars(long long step, double lr, const AdamWConfig *c) {
    const double bc1 = 1.0 - pow(c->beta1, (double)step);
    const double bc2 = 1.0 - pow(c->beta2, (double)step);
    return (AdamWStep){(float)(lr / bc1), (float)sqrt(bc2), (float)(1.0 - lr * c->weight_decay),
                       (float)(1.0 - c->beta1), (float)c->beta2, (float)(1.0 - c->beta2), (float)c->eps,
                       c->weight_decay != 0.0};
}

typedef AdamWStep StepConsts;

static StepConsts step_begin(AdamW *opt, double lr, const AdamWConfig *c) {
    opt->step++;
    return adamw_step_scalars(opt->step, lr, c);
}

/* Element i's update: its parameter p in, the updated one out; keep: the decay
 * factor, 1 where the element does not decay (p * 1 is p, bit for bit). */
static inline float update(const StepConsts *k, float *restrict m, float *restrict v, size_t i, float p, float g,
                           float keep) {
    p *= keep;
    float mi = m[i] + k->one_minus_b1 * (g - m[i]);
    float vi = k->b2 * v[i] + k->one_minus_b2 * g * g;
    float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
    p -= k->step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    return p;
}

/* The loop over every element, SIMD within each thread's share, once per form of
 * the decay (none, every element, per the mask), so that the loop has no branch.
 * BODY(keep) updates element i. */
#define EACH_ELEMENT(k, n, mask, BODY)                                                                    \
    do {                                                                                                  \
        const float decay_ = (k).decay;                                                                   \
        if (!(k).use_decay) {                                                                             \
            _Pragma("omp parallel for simd schedule(static)") for (long long i = 0; i < (n); i++) BODY(1.0f); \
        } else if (!(mask)) {                                                                             \
            _Pragma("omp parallel for simd schedule(static)") for (long long i = 0; i < (n); i++) BODY(decay_); \
        } else {                                                                                          \
            _Pragma("omp parallel for simd schedule(static)") for (long long i = 0; i < (n); i++)        \
                BODY((mask)[i] ? decay_ : 1.0f);                                                          \
        }                                                                                                 \
    } while (0)

void adamw_step(AdamW *opt, float *params, const float *grads, const uint8_t *decay_mask,
                double lr, const AdamWConfig *c) {
    const StepConsts k = step_begin(opt, lr, c);
    const long long n = (long long)opt->n;
    float *restrict m = opt->m, *restrict v = opt->v, *restrict p = params;
    const float *restrict g = grads;
#define BODY(keep) p[i] = update(&k, m, v, (size_t)i, p[i], g[i], keep)
    EACH_ELEMENT(k, n, decay_mask, BODY);
#undef BODY
}

void adamw_step_split(AdamW *opt, uint16_t *hi, uint16_t *lo, const float *grads, const uint8_t *decay_mask,
                      double lr, const AdamWConfig *c) {
    const StepConsts k = step_begin(opt, lr, c);
    const long long n = (long long)opt->n;
    float *restrict m = opt->m, *restrict v = opt->v;
    uint16_t *restrict h = hi, *restrict l = lo;
    const float *restrict g = grads;
#define BODY(keep) f32_split(update(&k, m, v, (size_t)i, f32_join(h[i], l[i]), g[i], keep), h + i, l + i)
    EACH_ELEMENT(k, n, decay_mask, BODY);
#undef BODY
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
