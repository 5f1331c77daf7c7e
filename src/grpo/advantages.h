/* grpo/advantages.h — group-relative advantages from per-function rewards,
 * as TRL's GRPOTrainer._generate_and_score_completions computes them
 * (TRL main, 2025-26: scale_rewards group|batch|none,
 * multi_objective_aggregation sum_then_normalize|normalize_then_sum).
 *
 * Layout: n completions, groups of G contiguous completions of one prompt
 * (n a multiple of G); rewards_per_func is [F][n] (function-major), NAN where
 * a reward function returned None. Computed in double (TRL: float32). */
#ifndef GRPO_GRPO_ADVANTAGES_H
#define GRPO_GRPO_ADVANTAGES_H

typedef enum {
    GRPO_SCALE_GROUP,   /* divide by the group's std (TRL default) */
    GRPO_SCALE_BATCH,   /* divide by the whole batch's std */
    GRPO_SCALE_NONE,    /* no division (Dr. GRPO) */
} GrpoScaleRewards;

typedef enum {
    GRPO_AGG_SUM_THEN_NORMALIZE,   /* TRL default */
    GRPO_AGG_NORMALIZE_THEN_SUM,
} GrpoRewardAggregation;

/* The names, by value, NULL-terminated (the scale_rewards and
 * multi_objective_aggregation options). */
extern const char *const grpo_scale_rewards_names[];
extern const char *const grpo_aggregation_names[];

/* The statistics TRL logs for one batch. */
typedef struct {
    double reward_mean;           /* "reward": mean over n of the UNweighted nansum over functions */
    double reward_std;            /* "reward_std": Bessel std of that sum (NaN when n == 1) */
    double frac_reward_zero_std;  /* "frac_reward_zero_std": fraction of completions whose
                                     std_rewards (group, batch or post-sum batch std) isclose 0 */
    double *func_mean;            /* [F] caller-owned or NULL: "rewards/<name>/mean" (nanmean) */
    double *func_std;             /* [F] caller-owned or NULL: "rewards/<name>/std" (nanstd) */
} GrpoRewardStats;


/* Computes advantages (and the aggregated rewards and logged statistics).
 *   sum_then_normalize: r = nansum_f(w_f r_f); A = r - mean_group(r), then
 *     / (std + 1e-4) unless scale none, std = Bessel std of the group
 *     (torch.std) or of the whole batch (scale batch); G == 1 gives std 0.
 *   normalize_then_sum: per function and group z_f = (r_f - nanmean) /
 *     (nanstd + 1e-4) (nanstd Bessel-corrected; NaN for < 2 values, which
 *     nansum then drops); r = nansum_f(w_f z_f); A = (r - mean(r)) /
 *     (std_batch(r) + 1e-4) (scale_rewards is not consulted, as in TRL).
 * advantages: [n] out; rewards: [n] out (the aggregated r) or NULL;
 * stats: out or NULL; rewards_per_func: [F][n], NAN = None; weights: [F]
 * (reward_weights) or NULL for all 1; F >= 1; n > 0 with n % G == 0.
 * Programmer errors (bad n, G, F) abort via CHECK. */
void grpo_advantages(double *advantages, double *rewards, GrpoRewardStats *stats,
                     const double *rewards_per_func, const double *weights, int F, int n, int G,
                     GrpoScaleRewards scale, GrpoRewardAggregation agg);

/* The aggregated reward each completion's advantage is computed from, as
 * grpo_advantages takes it (its `rewards` output): sum_then_normalize, the
 * weighted nansum over functions; normalize_then_sum, the nansum of each
 * function's group z-scores. Either is a group's own: it never depends on the
 * other groups of the batch. r: [n] out; the rest as grpo_advantages. */
void grpo_aggregate_rewards(double *r, const double *rewards_per_func, const double *weights, int F, int n, int G,
                            GrpoRewardAggregation agg);

/* DAPO's dynamic sampling (arXiv 2503.14476; verl's filter_groups): 1 when the
 * G aggregated rewards r[0..G) of a group are all equal (==, so a NaN is never
 * equal), i.e. the group has no signal: its advantages are all zero
 * (sum_then_normalize) or all the same (normalize_then_sum). */
int grpo_group_rewards_equal(const double *r, int G);

#endif
