/* grpo/is_correction.h — the sampler/trainer mismatch: TRL's truncated or masked
 * importance-sampling correction (GRPOTrainer._generate_and_score_completions with
 * vllm_importance_sampling_correction, TRL main of mid 2026) and its metrics.
 *
 * The generator records each completion token's log-probability under the
 * distribution it was drawn from (Completion.logp: TRL's sampling_per_token_logps,
 * vLLM's processed_logprobs); the trainer's own log-probability of the same token
 * under the same weights (old_t: TRL's old_per_token_logps) differs by the two
 * programs' arithmetic (decode kernels against the training pass, bf16 most) and by
 * top_k / top_p / min_p / repetition_penalty, which the sampler applies and the
 * loss does not. Per completion, over its tokens t (all zero when the completion is
 * masked out by mask_truncated_completions, as TRL's completion_mask makes them):
 *   token_*      rho_t = exp(old_t - samp_t)
 *   sequence_*   rho_t = exp(sum_t (old_t - samp_t)) for every t
 *   *_truncate   rho <- clamp(rho, C_min, C_max)
 *   *_mask       rho <- 0 where rho < C_min or rho > C_max
 * and the loss multiplies each token's policy term by rho_t, after the clipped
 * surrogate and the high-entropy mask, before the KL term is added (loss.h); VESPO
 * adds log rho_t to its sequence log-ratio instead. The weights are constants (no
 * gradient flows through them). The names are TRL's vllm_* ones, though grpo.c
 * samples with its own decoder and no vLLM is involved. */
#ifndef GRPO_GRPO_IS_CORRECTION_H
#define GRPO_GRPO_IS_CORRECTION_H

#include "grpo/loss.h"

/* vllm_importance_sampling_mode's choices, in GrpoIsMode order, NULL-terminated. */
extern const char *const grpo_is_mode_names[];

/* The correction's weights of one completion: rho[len] as above, from the trainer's
 * log-probs old_logp[len] and the sampler's sampling_logp[len]; masked: the
 * completion is left out of the loss (mask_truncated_completions), its weights
 * then exp(0) clamped or masked. */
void grpo_is_weights(double *rho, const float *old_logp, const float *sampling_logp, int len, int masked,
                     const GrpoLossConfig *c);

/* TRL's metrics of one process's completions, as it computes them before gathering:
 * over the tokens the loss keeps, |old - samp| (mean, max) and rho (min, mean, max;
 * at sequence level one rho per completion, every completion counted). 0 where
 * there is nothing to count, as TRL. */
typedef struct {
    double diff_mean, diff_max, ratio_min, ratio_mean, ratio_max;
} GrpoIsMetrics;

/* The metrics of completions [lo, hi) of a rollout: completion i's len[i] tokens
 * have old_logp[i], sampling_logp[i] and their weights rho[i]; masked[i] as above
 * (or NULL); tool_mask[i] (tool_mask or its entry NULL: none) 0 for the tokens a
 * tool turn appended, left out of the differences and the token-level ratios as
 * TRL takes them over completion_mask * tool_mask. */
void grpo_is_metrics(GrpoIsMetrics *m, const float *const *old_logp, const float *const *sampling_logp,
                     const double *const *rho, const int *len, const uint8_t *masked,
                     const uint8_t *const *tool_mask, int lo, int hi, const GrpoLossConfig *c);

/* TRL's gathering of the processes' metrics m[n]: mean of the means, max of the
 * maxima, min of the minima. */
void grpo_is_metrics_gather(GrpoIsMetrics *out, const GrpoIsMetrics *m, int n);

#endif
