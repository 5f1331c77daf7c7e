/* grpo/loss.h — the GRPO policy loss of one micro-batch and its exact
 * gradient with respect to the per-token log-probabilities, for every
 * loss_type of TRL's GRPOTrainer._compute_loss (TRL main as of early 2026:
 * dapo, grpo, dr_grpo, bnpo, cispo, sapo, luspo; vespo is not implemented).
 *
 * Micro-batching is exact. TRL divides each micro-batch's loss by a
 * normaliser; we compute every normaliser ONCE over all the sequences of the
 * optimizer step (grpo_loss_normalizer) and pass it to each micro-batch, so
 * that the sum over micro-batches of loss and gradient equals the full-batch
 * loss and gradient, whatever the split. The per-token loss l_it is TRL's
 * (clipped surrogate, CISPO, SAPO gate; times the high-entropy mask; plus
 * beta * KL) and the micro-batch contributes
 *     sum_i sum_{t < len_i} w_i * l_it,   with
 *   dapo, cispo   w = 1 / N_tok     N_tok = completion tokens of the whole step,
 *                                    counted AFTER truncation masking (TRL's
 *                                    num_items_in_batch since 1.9, with steps_per_generation ==
 *                                    gradient_accumulation_steps; 1.0-1.8 counted them before)
 *   grpo, sapo    w = 1 / (N_seq * max(len'_i, 1))   len' = length after truncation masking;
 *                                    TRL: per-micro-batch mean over sequences / GA steps,
 *                                    identical when micro-batches have equal sizes
 *   dr_grpo       w = 1 / (N_seq * max_completion_length)
 *   luspo         w = 1 / N_seq     TRL: (l * mask).sum(-1).mean() / GA (TRL >= 1.1
 *                                    form; older TRL multiplied an unmasked (B,T) loss)
 *   bnpo          w = 1 / (max(N'_tok(micro-batch), 1) * GA)  TRL's definition is local to
 *                                    the micro-batch, so bnpo is NOT split-invariant:
 *                                    we keep TRL's definition and document it.
 * N_seq counts every sequence of the step, truncated ones included.
 *
 * Per token (r = importance ratio, A = the sequence's advantage):
 *   token level    r_t = exp(logp_t - old_t)   (old = logp.detach() when old_logp is NULL:
 *                                               r = 1, gradient 1, as TRL with num_iterations 1)
 *   sequence level r = exp(mean_t(logp_t - old_t)) over the sequence (GSPO); dr/dlogp_t = r/len
 *   grpo-family    l = -min(min(r, delta) A, clamp(r, 1-eps_low, 1+eps_high) A)  (delta optional)
 *   cispo          l = -sg(min(r, eps_high)) A logp_t
 *   sapo           l = -sigmoid(tau (r - 1)) * 4 / tau * A,  tau = tau_pos if A > 0 else tau_neg
 *   KL (beta != 0) + beta (exp(ref - logp) - (ref - logp) - 1)   (k3 estimator, Schulman)
 * With the sampler/trainer correction (is_correction.h: weights rho_t, constants)
 * the policy term (after the high-entropy mask) is multiplied by rho_t before the
 * KL term is added, as TRL's _compute_loss does; VESPO instead adds
 * sum_t clamp(log rho_t, log 1e-8, 20) to the log of its sequence ratio w.
 * Ties in min() split the gradient evenly, as torch.minimum's backward. */
#ifndef GRPO_GRPO_LOSS_H
#define GRPO_GRPO_LOSS_H

#include "core/options.h"
#include "ops/token_objective.h"

#include <stdint.h>

typedef enum {
    GRPO_LOSS_DAPO,      /* TRL default */
    GRPO_LOSS_GRPO,
    GRPO_LOSS_DR_GRPO,
    GRPO_LOSS_BNPO,
    GRPO_LOSS_CISPO,
    GRPO_LOSS_SAPO,
    GRPO_LOSS_LUSPO,
    GRPO_LOSS_VESPO,     /* -phi(w) A logp, phi a gamma weight of the sequence ratio w (detached) */
    GRPO_LOSS_COUNT
} GrpoLossType;

typedef enum {
    GRPO_IS_TOKEN,       /* importance_sampling_level="token" (TRL default) */
    GRPO_IS_SEQUENCE,    /* "sequence" (GSPO) */
} GrpoIsLevel;

/* vllm_importance_sampling_mode (grpo/is_correction.h) */
typedef enum {
    GRPO_ISC_TOKEN_TRUNCATE,
    GRPO_ISC_TOKEN_MASK,
    GRPO_ISC_SEQUENCE_TRUNCATE,
    GRPO_ISC_SEQUENCE_MASK,      /* TRL default */
} GrpoIsMode;

typedef struct {
    GrpoLossType loss_type;       /* loss_type */
    GrpoIsLevel is_level;         /* importance_sampling_level */
    double epsilon_low;           /* epsilon (0.2) */
    double epsilon_high;          /* epsilon_high (defaults to epsilon; cispo: the cap, 5.0 recommended) */
    double delta;                 /* delta: upper clamp of r in the unclipped term; 0 = None */
    double beta;                  /* beta (0.0): KL coefficient */
    double sapo_temperature_pos;  /* 1.0 */
    double sapo_temperature_neg;  /* 1.05 */
    double vespo_k_pos, vespo_lambda_pos;  /* 2.0, 3.0: phi's power and decay for A >= 0 */
    double vespo_k_neg, vespo_lambda_neg;  /* 3.0, 2.0: for A < 0 */
    double top_entropy_quantile;  /* 1.0 = off; else keep tokens with entropy >= the
                                     (1 - q) quantile of the micro-batch's entropies */
    int mask_truncated_completions; /* 0 (TRL default False) */
    double entropy_coef;          /* 0.0: TRL's entropy bonus, loss - coef * (mean token entropy) */
    int use_adaptive_entropy;     /* the trainer moves entropy_coef by entropy_coef_delta each step */
    double entropy_coef_min, entropy_coef_max, entropy_coef_delta, entropy_target; /* 0, 1, 0.005, 0.2 */
    int grad_accum_steps;         /* the bonus's divisor for the per-sequence loss types (1) */
    int max_completion_length;    /* for dr_grpo's normaliser (256) */
    int is_correction;            /* vllm_importance_sampling_correction (0 here; TRL's True acts with vLLM only) */
    GrpoIsMode is_mode;           /* vllm_importance_sampling_mode (sequence_mask) */
    double is_clip_min, is_clip_max; /* vllm_importance_sampling_clip_min (0: TRL's None), _clip_max (3.0) */
} GrpoLossConfig;

/* Sums over a micro-batch, to be added up over the micro-batches of a step.
 * A mean is sum / count. Token-level quantities count the completion tokens
 * after truncation masking; TRL's clip ratios are per token at token level
 * and per sequence at sequence level ("masked_batch_mean"). TRL averages
 * per-micro-batch means; sum/count over the step is the token-weighted mean. */
typedef struct {
    double kl_sum;                /* sum of per-token KL over masked tokens (when ref_logp) */
    double entropy_sum;           /* sum of entropy over masked tokens (when entropy) */
    double clip_low_sum;          /* clip_ratio/low_mean: r < 1 - eps_low and A < 0 */
    double clip_high_sum;         /* clip_ratio/high_mean: r > 1 + eps_high and A > 0 */
    double clip_region_sum;       /* clip_ratio/region_mean: either */
    double cispo_clip_sum;        /* cispo_clip_ratio: r > eps_high and A > 0 */
    double vespo_phi_sum;         /* vespo/phi_seq_mean: phi per sequence, over `sequences` */
    double entropy_bonus;         /* the entropy term subtracted from the loss (its sum over micro-batches) */
    double kept_entropy_sum;      /* entropy over the tokens the loss keeps (truncation and high-entropy masks) */
    double kept_tokens;           /* their count: adaptive entropy control's window */
    double tokens;                /* masked completion tokens: denominator of kl, entropy */
    double clip_count;            /* denominator of the clip sums: tokens, or sequences */
    double sequences;             /* sequences in the micro-batch */
    double entropy_kept;          /* tokens kept by the high-entropy mask */
} GrpoLossStats; /* every field a double: a step sums them over micro-batches and processes as one vector */

/* TRL's defaults, from grpo_loss_options (epsilon_high = epsilon). */
void grpo_loss_config_default(GrpoLossConfig *c);

/* The loss options of `grpo train` (core/options.h rows over GrpoLossConfig);
 * epsilon_high's default is NaN there: unset, resolved to epsilon by the trainer. */
extern const char *const grpo_loss_type_names[];
extern const OptSpec grpo_loss_options[];
extern const int grpo_loss_n_options;

/* The normaliser N of the table above, from the sequences it spans.
 * For every loss type but bnpo pass ALL the sequences of the optimizer step
 * (every micro-batch), once, before the first micro-batch; for bnpo pass one
 * micro-batch's sequences, and call it per micro-batch.
 * offsets: [S+1] CSR offsets of completion tokens (length of i = offsets[i+1]
 * - offsets[i]); truncated: [S] 1 = no EOS (the completion hit
 * max_completion_length), or NULL; tool_mask: [offsets[S]] 1 for the model's
 * tokens, 0 for those a tool turn appended (TRL's tool_mask), or NULL (all the
 * model's): only the model's tokens are counted, as TRL's num_items_in_batch
 * and lengths are taken over completion_mask * tool_mask; grad_accum_steps: used
 * by bnpo only. */
double grpo_loss_normalizer(const GrpoLossConfig *c, const int *offsets, const uint8_t *truncated,
                            const uint8_t *tool_mask, int S, int grad_accum_steps);

/* One micro-batch: returns its loss contribution and ADDS d loss / d logp to
 * dlogp, and the metric sums to *stats.
 * Token arrays are indexed by the offsets' values: sequence i owns tokens
 * [offsets[i], offsets[i+1]) (so a micro-batch of a step-wide buffer is passed
 * as offsets + s0, advantages + s0, truncated + s0 with the same token arrays).
 * dlogp: [offsets[S]] += gradient;
 * dentropy: [offsets[S]] += gradient with respect to each token's entropy (TRL's
 *   entropy bonus, entropy_coef != 0; may be NULL otherwise);
 * stats: += or NULL;
 * logp: [T] current policy's log-probs of the completion tokens (temperature
 *   already applied by the caller);
 * old_logp: [T] the policy that generated them, or NULL (num_iterations 1);
 * ref_logp: [T] reference model's, or NULL (required when beta != 0);
 * entropy: [T] per-token entropy, or NULL (required when top_entropy_quantile
 *   < 1; TRL's get_high_entropy_mask thresholds over THIS micro-batch's
 *   tokens, so that option depends on the split, as in TRL);
 * advantages: [S]; truncated: [S] or NULL; offsets: [S+1];
 * tool_mask: [T] or NULL, as grpo_loss_normalizer's: a tool's token (0) has no
 *   loss, no gradient (dlogp and dentropy untouched), is in no statistic, no
 *   sequence-level mean and no entropy quantile (TRL's mask = completion_mask *
 *   tool_mask in _compute_loss);
 * is_weight: [T] the correction's weights rho (is_correction.h), or NULL (none);
 * normalizer: grpo_loss_normalizer(...) as documented above. */
double grpo_loss_accumulate(double *dlogp, double *dentropy, GrpoLossStats *stats, const float *logp,
                            const float *old_logp, const float *ref_logp, const float *entropy,
                            const double *is_weight, const double *advantages, const uint8_t *truncated,
                            const uint8_t *tool_mask, const int *offsets, int S, double normalizer,
                            const GrpoLossConfig *c);

/* Token-local losses: a token's gradient follows from its own log-prob (token-level
 * ratio, no vespo, no high-entropy mask, no entropy bonus), so it can be taken
 * while the log-probs are being computed (model_logprobs_train). */
int grpo_loss_token_local(const GrpoLossConfig *c);
/* c's per-token constants (ops/token_objective.h), for a token-local loss's objective. */
TokenObjectiveParams grpo_loss_objective_params(const GrpoLossConfig *c);
/* w of the table above for sequence i (0 when it is masked). */
double grpo_loss_seq_weight(const GrpoLossConfig *c, const uint8_t *truncated, const uint8_t *tool_mask, int i,
                            const int *offsets, double normalizer);
/* For a token-local loss: d loss / d logp of one token of a sequence with weight w
 * and advantage A; old_logp, ref_logp point to the token's values or are NULL;
 * is_weight: the token's correction weight rho (1 without the correction).
 * The same value grpo_loss_accumulate adds to dlogp. */
double grpo_loss_token_grad(const GrpoLossConfig *c, double w, double A, float logp, const float *old_logp,
                            const float *ref_logp, double is_weight);

/* For logging: mean entropy and mean KL (exp(ref-logp) - (ref-logp) - 1) over
 * the completion tokens (after truncation masking when mask_truncated), as
 * TRL's "entropy" and "kl". entropy or ref_logp may be NULL (result NAN);
 * NAN also when there are no tokens. Arguments as grpo_loss_accumulate. */
void grpo_token_means(double *mean_entropy, double *mean_kl, const float *entropy,
                      const float *logp, const float *ref_logp, const uint8_t *truncated,
                      const uint8_t *tool_mask, const int *offsets, int S, int mask_truncated);

#endif
