/* grpo/loss.c — the GRPO policy loss of one micro-batch and its gradient with
 * respect to the per-token log-probabilities (see loss.h for the formulas and
 * the normaliser rule that makes micro-batching exact).
 *
 * Is: per-token arithmetic in double, written as the hand-derived backward of
 * TRL's _compute_loss and checked against torch autograd in float64
 * (tests/grpo/make_loss_reference.py). Is not: the model forward/backward
 * (the caller turns dlogp into parameter gradients), nor advantages. */
#include "grpo/loss.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/options.h"
#include "grpo/is_correction.h"
#include "ops/token_objective.h"

const char *const grpo_loss_type_names[] = {"dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo",
                                             NULL};
static const char *const is_level_names[] = {"token", "sequence", NULL};

#define L(f) offsetof(GrpoLossConfig, f)
const OptSpec grpo_loss_options[] = {
    {"loss_type", OPT_ENUM, L(loss_type), GRPO_LOSS_DAPO, NULL, OPT_NO_RANGE, grpo_loss_type_names, NULL, 0,
     "the loss's normalisation and clipping (TRL's loss_type)"},
    {"importance_sampling_level", OPT_ENUM, L(is_level), GRPO_IS_TOKEN, NULL, OPT_NO_RANGE, is_level_names, NULL, 0,
     "token, or sequence (GSPO)"},
    {"beta", OPT_F64, L(beta), 0.0, NULL, 0, 1e300, NULL, NULL, 0, "KL coefficient; > 0 keeps a frozen reference model"},
    {"epsilon", OPT_F64, L(epsilon_low), 0.2, NULL, 1e-300, 1e300, NULL, NULL, 0, "clipping epsilon"},
    {"epsilon_high", OPT_F64, L(epsilon_high), NAN, NULL, 1e-300, 1e300, NULL, NULL, OPT_UNSET_NAN,
     "upper clipping epsilon (unset: epsilon)"},
    {"delta", OPT_F64, L(delta), 0.0, NULL, 0, 1e300, NULL, NULL, 0,
     "upper bound of the ratio in two-sided clipping, > 1 + epsilon_high (0 = none)"},
    {"mask_truncated_completions", OPT_BOOL, L(mask_truncated_completions), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "leave truncated completions out of the loss"},
    {"top_entropy_quantile", OPT_F64, L(top_entropy_quantile), 1.0, NULL, 1e-300, 1, NULL, NULL, 0,
     "train only on the top-entropy tokens (1 = all)"},
    {"sapo_temperature_pos", OPT_F64, L(sapo_temperature_pos), 1.0, NULL, 1e-300, 1e300, NULL, NULL, 0,
     "SAPO's gate temperature for positive advantages (loss_type sapo)"},
    {"sapo_temperature_neg", OPT_F64, L(sapo_temperature_neg), 1.05, NULL, 1e-300, 1e300, NULL, NULL, 0,
     "SAPO's gate temperature for negative advantages (loss_type sapo)"},
    {"entropy_coef", OPT_F64, L(entropy_coef), 0.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "entropy bonus: the loss minus entropy_coef x the mean token entropy (0 = off)"},
    {"use_adaptive_entropy", OPT_BOOL, L(use_adaptive_entropy), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "move entropy_coef up by entropy_coef_delta when the step's entropy is <= entropy_target, else down"},
    {"entropy_coef_min", OPT_F64, L(entropy_coef_min), 0.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "adaptive entropy control: lower bound of entropy_coef"},
    {"entropy_coef_max", OPT_F64, L(entropy_coef_max), 1.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "adaptive entropy control: upper bound of entropy_coef"},
    {"entropy_coef_delta", OPT_F64, L(entropy_coef_delta), 0.005, NULL, 0, 1e300, NULL, NULL, 0,
     "adaptive entropy control: the step of entropy_coef"},
    {"entropy_target", OPT_F64, L(entropy_target), 0.2, NULL, -1e300, 1e300, NULL, NULL, 0,
     "adaptive entropy control: the bonus applies while the entropy is <= this"},
    {"vespo_k_pos", OPT_F64, L(vespo_k_pos), 2.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "VESPO's power exponent for advantages >= 0 (loss_type vespo)"},
    {"vespo_lambda_pos", OPT_F64, L(vespo_lambda_pos), 3.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "VESPO's decay for advantages >= 0 (clamped to >= 1e-4, as TRL does)"},
    {"vespo_k_neg", OPT_F64, L(vespo_k_neg), 3.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "VESPO's power exponent for negative advantages"},
    {"vespo_lambda_neg", OPT_F64, L(vespo_lambda_neg), 2.0, NULL, -1e300, 1e300, NULL, NULL, 0,
     "VESPO's decay for negative advantages (clamped to >= 1e-4)"},
    /* TRL's names; no vLLM is involved: the mismatch is between grpo.c's decoder and its training pass */
    {"vllm_importance_sampling_correction", OPT_BOOL, L(is_correction), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "weigh each token's loss by exp(trainer log-prob - sampler log-prob), truncated or masked, to correct "
     "the sampler/trainer mismatch (TRL's name; no vLLM here), and log sampling/* metrics"},
    {"vllm_importance_sampling_mode", OPT_ENUM, L(is_mode), GRPO_ISC_SEQUENCE_MASK, NULL, OPT_NO_RANGE,
     grpo_is_mode_names, NULL, 0, "the correction's ratios per token or per sequence, clamped (truncate) or "
     "zeroed (mask) outside [clip_min, clip_max]"},
    {"vllm_importance_sampling_clip_max", OPT_F64, L(is_clip_max), 3.0, NULL, 0, 1e300, NULL, NULL, 0,
     "the correction's upper bound C_max"},
    {"vllm_importance_sampling_clip_min", OPT_F64, L(is_clip_min), 0.0, NULL, 0, 1e300, NULL, NULL, 0,
     "the correction's lower bound C_min (0: none, TRL's None)"},
};
const int grpo_loss_n_options = sizeof grpo_loss_options / sizeof grpo_loss_options[0];

void grpo_loss_config_default(GrpoLossConfig *c) {
    memset(c, 0, sizeof *c);
    OptGroup g = {grpo_loss_options, grpo_loss_n_options, 0, OPT_SEC_LOSS};
    opts_defaults(&g, 1, c);
    c->epsilon_high = c->epsilon_low;
    c->grad_accum_steps = 1;
    c->max_completion_length = 256;
}

/* Is sequence i's completion masked out (mask_truncated_completions)? */
static int seq_masked(const GrpoLossConfig *c, const uint8_t *truncated, int i) {
    return c->mask_truncated_completions && truncated && truncated[i];
}

/* Is token t the model's (TRL's tool_mask 1), not one a tool turn appended? */
static inline int model_token(const uint8_t *tool_mask, int t) { return !tool_mask || tool_mask[t]; }

/* The model's tokens among [t0, t1). */
static int model_tokens(const uint8_t *tool_mask, int t0, int t1) {
    if (!tool_mask) return t1 - t0;
    int n = 0;
    for (int t = t0; t < t1; t++) n += tool_mask[t] != 0;
    return n;
}

double grpo_loss_normalizer(const GrpoLossConfig *c, const int *offsets, const uint8_t *truncated,
                            const uint8_t *tool_mask, int S, int grad_accum_steps) {
    long long kept_tokens = 0;
    for (int i = 0; i < S; i++) {
        int len = model_tokens(tool_mask, offsets[i], offsets[i + 1]); /* TRL: completion_mask * tool_mask */
        if (!seq_masked(c, truncated, i)) kept_tokens += len;
    }
    switch (c->loss_type) {
    case GRPO_LOSS_DAPO:
    case GRPO_LOSS_CISPO:
    case GRPO_LOSS_VESPO:
        /* num_items_in_batch: the loss mask's tokens, truncated completions zeroed (TRL >= 1.9;
         * 1.0-1.8 summed them before the masking); clamp(min=1) */
        return kept_tokens > 0 ? (double)kept_tokens : 1.0;
    case GRPO_LOSS_GRPO:
    case GRPO_LOSS_SAPO:
    case GRPO_LOSS_LUSPO:
        return S > 0 ? (double)S : 1.0;
    case GRPO_LOSS_DR_GRPO:
        return (double)(S > 0 ? S : 1) * (double)c->max_completion_length;
    case GRPO_LOSS_BNPO:
        CHECK(grad_accum_steps >= 1);
        return (kept_tokens > 0 ? (double)kept_tokens : 1.0) * grad_accum_steps;
    default:
        DIE("unknown loss type %d", (int)c->loss_type);
    }
}

/* torch.quantile(x, q) ('linear' interpolation, torch's lerp) of k sorted values. */
static double quantile_sorted(const double *x, int k, double q) {
    double rank = q * (k - 1);
    int lo = (int)floor(rank), hi = (int)ceil(rank);
    double w = rank - lo, a = x[lo], b = x[hi];
    return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* TRL's get_gamma_weights: phi(w) = e^lambda w^k e^(-lambda w), w the sequence's
 * ratio exp(sum_t clamp(logp_t - old_t, -20, 20)) clamped to [1e-8, e^20], k and
 * lambda by the advantage's sign (A >= 0: the _pos pair), lambda >= 1e-4;
 * computed in log space, NaN/Inf as 0. Without old log-probs w = 1. */
static double vespo_phi(const GrpoLossConfig *c, const float *logp, const float *old_logp, const double *isw,
                        const uint8_t *tool_mask, int t0, int t1, double A) {
    double s = 0.0;
    const double lo = log(1e-8);
    if (old_logp)
        for (int t = t0; t < t1; t++) {
            if (!model_token(tool_mask, t)) continue;
            double d = (double)logp[t] - (double)old_logp[t];
            s += d < -20.0 ? -20.0 : d > 20.0 ? 20.0 : d;
        }
    if (isw) /* the sampler correction, token-level only (TRL: log(pi_old / pi_sampler) added) */
        for (int t = t0; t < t1; t++) {
            if (!model_token(tool_mask, t)) continue;
            double l = log(isw[t]);
            s += l < lo ? lo : l > 20.0 ? 20.0 : l;
        }
    double log_w = s < lo ? lo : s > 20.0 ? 20.0 : s, w = exp(log_w);
    double k = A >= 0 ? c->vespo_k_pos : c->vespo_k_neg, lam = A >= 0 ? c->vespo_lambda_pos : c->vespo_lambda_neg;
    if (!(lam >= 1e-4)) lam = 1e-4;
    double phi = exp(lam + k * log_w - lam * w);
    return isfinite(phi) ? phi : 0.0;
}

/* Clip metrics of TRL for one ratio (token or sequence). */
static void clip_stats(GrpoLossStats *st, const GrpoLossConfig *c, double r, double A) {
    if (!st) return;
    if (c->loss_type == GRPO_LOSS_CISPO) {
        st->cispo_clip_sum += (r > c->epsilon_high && A > 0);
        return;
    }
    if (c->loss_type == GRPO_LOSS_SAPO || c->loss_type == GRPO_LOSS_VESPO) return; /* TRL logs no clip ratio for them */
    double rr = (c->delta > 0 && r > c->delta) ? c->delta : r;  /* TRL tests the delta-clamped coef */
    int low = rr < 1.0 - c->epsilon_low && A < 0;
    int high = rr > 1.0 + c->epsilon_high && A > 0;
    st->clip_low_sum += low;
    st->clip_high_sum += high;
    st->clip_region_sum += low || high;
}

static double token_ratio(float logp, const float *old_logp) {
    return old_logp ? exp((double)logp - (double)*old_logp) : 1.0;
}

TokenObjectiveParams grpo_loss_objective_params(const GrpoLossConfig *c) {
    int kind = c->loss_type == GRPO_LOSS_CISPO ? TOKOBJ_CISPO : c->loss_type == GRPO_LOSS_SAPO ? TOKOBJ_SAPO : TOKOBJ_CLIP;
    return (TokenObjectiveParams){kind,           c->epsilon_low,          c->epsilon_high,         c->delta,
                                  c->beta,        c->sapo_temperature_pos, c->sapo_temperature_neg};
}

int grpo_loss_token_local(const GrpoLossConfig *c) {
    return c->is_level == GRPO_IS_TOKEN && c->loss_type != GRPO_LOSS_VESPO && c->top_entropy_quantile >= 1.0 &&
           c->entropy_coef == 0.0;
}

double grpo_loss_seq_weight(const GrpoLossConfig *c, const uint8_t *truncated, const uint8_t *tool_mask, int i,
                            const int *offsets, double normalizer) {
    int len = seq_masked(c, truncated, i) ? 0 : model_tokens(tool_mask, offsets[i], offsets[i + 1]);
    if (len == 0) return 0.0;
    int per_seq_mean = c->loss_type == GRPO_LOSS_GRPO || c->loss_type == GRPO_LOSS_SAPO;
    return per_seq_mean ? 1.0 / (normalizer * len) : 1.0 / normalizer;
}

double grpo_loss_token_grad(const GrpoLossConfig *c, double w, double A, float logp, const float *old_logp,
                            const float *ref_logp, double is_weight) {
    TokenObjectiveParams p = grpo_loss_objective_params(c);
    return tokobj_grad(&p, w, A, logp, old_logp, ref_logp, is_weight);
}

/* get_high_entropy_mask: threshold = quantile(entropies of this micro-batch's
 * masked tokens, 1 - top_entropy_quantile); keep entropy >= threshold. INFINITY
 * (no token kept) when no token is masked in. */
static double entropy_threshold(const GrpoLossConfig *c, const float *entropy, const uint8_t *truncated,
                                const uint8_t *tool_mask, const int *offsets, int S, int *have) {
    long long k = 0;
    for (int i = 0; i < S; i++)
        if (!seq_masked(c, truncated, i)) k += model_tokens(tool_mask, offsets[i], offsets[i + 1]);
    *have = k > 0;
    if (k == 0) return INFINITY;
    double *vals = xmalloc((size_t)k * sizeof(double));
    long long j = 0;
    for (int i = 0; i < S; i++)
        if (!seq_masked(c, truncated, i))
            for (int t = offsets[i]; t < offsets[i + 1]; t++)
                if (model_token(tool_mask, t)) vals[j++] = entropy[t];
    qsort(vals, (size_t)k, sizeof(double), cmp_double);
    double threshold = quantile_sorted(vals, (int)k, 1.0 - c->top_entropy_quantile);
    free(vals);
    return threshold;
}

/* What one micro-batch's loss reads, and where it writes. */
typedef struct {
    const GrpoLossConfig *c;
    TokenObjectiveParams p; /* c's per-token constants */
    const float *logp, *old_logp, *ref_logp, *entropy;
    const double *isw;     /* the sampler correction's weights, or NULL */
    const uint8_t *truncated;
    const uint8_t *tool_mask; /* [T] 0: a tool turn's token, out of the loss (NULL: none) */
    const int *offsets;
    double normalizer;
    int use_emask, have_threshold;
    double threshold;
    double *dlogp, loss;   /* loss: the running sum, token after token */
    GrpoLossStats *stats;
} LossPass;

/* 1 when token t is kept by the high-entropy mask (every token without it). */
static double kept(const LossPass *q, int t) {
    return (!q->use_emask || (q->have_threshold && (double)q->entropy[t] >= q->threshold)) ? 1.0 : 0.0;
}

/* Sequence i's tokens: the loss, dlogp, the statistics. */
static void sequence_loss(LossPass *q, int i, double A) {
    const GrpoLossConfig *c = q->c;
    GrpoLossStats *stats = q->stats;
    const float *logp = q->logp, *old_logp = q->old_logp;
    const int seq_level = c->is_level == GRPO_IS_SEQUENCE;
    const int cispo = c->loss_type == GRPO_LOSS_CISPO, vespo = c->loss_type == GRPO_LOSS_VESPO;
    const int t0 = q->offsets[i], t1 = q->offsets[i + 1];
    const int len = seq_masked(c, q->truncated, i) ? 0 : model_tokens(q->tool_mask, t0, t1);
    /* a masked sequence's mask is all zeros: TRL's phi sees a ratio of 1 */
    const double phi = vespo ? vespo_phi(c, logp, old_logp, q->isw, q->tool_mask, t0, len ? t1 : t0, A) : 0.0;
    if (stats) {
        stats->sequences++;
        stats->vespo_phi_sum += phi;
    }
    if (len == 0) {
        /* Fully masked: contributes nothing; at sequence level TRL's clip
         * metrics still average over it with ratio exp(0/1) = 1. */
        if (stats && seq_level) {
            stats->clip_count++;
            clip_stats(stats, c, 1.0, A);
        }
        return;
    }
    const double w = grpo_loss_seq_weight(c, q->truncated, q->tool_mask, i, q->offsets, q->normalizer);
    double r_seq = 1.0;
    if (seq_level) {
        double s = 0.0;
        if (old_logp)
            for (int t = t0; t < t1; t++)
                if (model_token(q->tool_mask, t)) s += (double)logp[t] - (double)old_logp[t];
        r_seq = exp(s / len);
        if (stats) {
            stats->clip_count++;
            clip_stats(stats, c, r_seq, A);
        }
    }
    double dl_dr_seq_total = 0.0; /* sequence level: sum_t w e_t dl/dr */
    for (int t = t0; t < t1; t++) {
        if (!model_token(q->tool_mask, t)) continue; /* a tool's token: no loss, no gradient, not counted */
        const double e = kept(q, t);
        const double ew = q->isw ? e * q->isw[t] : e;   /* the policy term's factor: mask, then correction */
        const double r = seq_level ? r_seq : token_ratio(logp[t], old_logp ? &old_logp[t] : NULL);
        if (stats) {
            stats->tokens++;
            stats->entropy_kept += e != 0.0;
            if (q->entropy) stats->entropy_sum += q->entropy[t], stats->kept_entropy_sum += e * q->entropy[t];
            stats->kept_tokens += e;
            if (!seq_level) {
                stats->clip_count++;
                clip_stats(stats, c, r, A);
            }
        }
        double g = 0.0;
        if (vespo) {
            q->loss += w * e * (-phi * A * (double)logp[t]); /* phi detached */
            g += w * e * (-phi * A);
        } else if (seq_level && !cispo) {
            double l, dl_dr;
            tokobj_surrogate(&q->p, r, A, &l, &dl_dr);
            q->loss += w * ew * l;
            dl_dr_seq_total += w * ew * dl_dr;
        } else {
            g = tokobj_term(&q->p, w, ew, A, r, logp[t], &q->loss);
        }
        if (q->ref_logp) {
            double kl;
            g = tokobj_kl(&q->p, w, logp[t], q->ref_logp[t], g, &q->loss, &kl);
            if (stats) stats->kl_sum += kl;
        }
        q->dlogp[t] += g;
    }
    if (seq_level && !cispo && !vespo) {
        /* r = exp(mean_t(logp_t - old_t)): dr/dlogp_t = r / len for every token */
        const double gt = dl_dr_seq_total * r_seq / len;
        for (int t = t0; t < t1; t++)
            if (model_token(q->tool_mask, t)) q->dlogp[t] += gt;
    }
}

/* TRL's entropy bonus: minus coef x the mean entropy of the kept tokens
 * (truncation and high-entropy masks), the mean over the step's tokens for
 * the token-normalised losses (dapo, cispo, vespo: the same normaliser),
 * else this micro-batch's mean over gradient_accumulation_steps. */
static void entropy_bonus(LossPass *q, double *dentropy, int S) {
    const GrpoLossConfig *c = q->c;
    CHECK(q->entropy && dentropy);
    double n_kept = 0.0, sum = 0.0;
    for (int i = 0; i < S; i++)
        for (int t = q->offsets[i]; !seq_masked(c, q->truncated, i) && t < q->offsets[i + 1]; t++) {
            if (!model_token(q->tool_mask, t)) continue;
            const double e = kept(q, t);
            n_kept += e, sum += e * q->entropy[t];
        }
    const int token_norm = c->loss_type == GRPO_LOSS_DAPO || c->loss_type == GRPO_LOSS_CISPO ||
                           c->loss_type == GRPO_LOSS_VESPO;
    const double denom = token_norm ? q->normalizer : (n_kept > 1.0 ? n_kept : 1.0) * c->grad_accum_steps;
    q->loss -= c->entropy_coef * sum / denom;
    if (q->stats) q->stats->entropy_bonus += c->entropy_coef * sum / denom;
    for (int i = 0; i < S; i++)
        for (int t = q->offsets[i]; !seq_masked(c, q->truncated, i) && t < q->offsets[i + 1]; t++)
            if (model_token(q->tool_mask, t)) dentropy[t] -= c->entropy_coef * kept(q, t) / denom;
}

double grpo_loss_accumulate(double *dlogp, double *dentropy, GrpoLossStats *stats, const float *logp,
                            const float *old_logp, const float *ref_logp, const float *entropy,
                            const double *is_weight, const double *advantages, const uint8_t *truncated,
                            const uint8_t *tool_mask, const int *offsets, int S, double normalizer,
                            const GrpoLossConfig *c) {
    CHECK(normalizer > 0);
    CHECK(c->beta == 0.0 || ref_logp);
    LossPass q = {c, grpo_loss_objective_params(c), logp, old_logp, ref_logp, entropy, is_weight, truncated, tool_mask, offsets, normalizer,
                  c->top_entropy_quantile < 1.0, 0, INFINITY, dlogp, 0.0, stats};
    CHECK(!q.use_emask || entropy);
    if (q.use_emask) q.threshold = entropy_threshold(c, entropy, truncated, tool_mask, offsets, S, &q.have_threshold);
    for (int i = 0; i < S; i++) sequence_loss(&q, i, advantages[i]);
    if (c->entropy_coef != 0.0) entropy_bonus(&q, dentropy, S);
    return q.loss;
}

void grpo_token_means(double *mean_entropy, double *mean_kl, const float *entropy,
                      const float *logp, const float *ref_logp, const uint8_t *truncated,
                      const uint8_t *tool_mask, const int *offsets, int S, int mask_truncated) {
    double es = 0.0, ks = 0.0;
    long long n = 0;
    for (int i = 0; i < S; i++) {
        if (mask_truncated && truncated && truncated[i]) continue;
        for (int t = offsets[i]; t < offsets[i + 1]; t++) {
            if (!model_token(tool_mask, t)) continue;
            if (entropy) es += entropy[t];
            if (ref_logp) {
                double d = (double)ref_logp[t] - (double)logp[t];
                ks += exp(d) - d - 1.0;
            }
            n++;
        }
    }
    if (mean_entropy) *mean_entropy = (entropy && n) ? es / n : NAN;
    if (mean_kl) *mean_kl = (ref_logp && n) ? ks / n : NAN;
}
