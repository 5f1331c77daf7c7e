/* eval/evaluate.h — a model's completions on a dataset, scored by reward
 * functions: what `grpo eval` reports and what training logs as eval_* metrics
 * (eval_strategy steps).
 *
 * Per example, G completions from stream rng_mix(stream_base, example index)
 * (so `grpo eval` and `grpo generate --dataset` with the same seed agree), the
 * text decoded as TRL's reward functions see it, scored by a RewardSet (TRL's
 * weighted nansum). pass@1 is the fraction of completions whose weighted reward
 * is >= pass_threshold: with the same G per example, the unbiased pass@1 estimate
 * of Chen et al. 2021 (the mean over problems of c/n). */
#ifndef GRPO_EVAL_EVALUATE_H
#define GRPO_EVAL_EVALUATE_H

#include "core/check.h"
#include "data/dataset.h"
#include "env/env_loop.h"
#include "gen/generate.h"
#include "log/metrics.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    long examples, completions, passed, tokens, stopped;
    double total_sum, total_sqsum;
    int n_funcs;
    double *func_sum; /* [n_funcs] over the non-NaN values */
    long *func_n;     /* [n_funcs] */
} EvalTotals;

void eval_totals_init(EvalTotals *t, int n_funcs);
void eval_totals_free(EvalTotals *t);

/* Before anything is generated: the first n examples of data (all when n <= 0)
 * against the columns rs's functions read (reward_set_check_row) — training's
 * dataset and its eval_dataset, and grpo eval's, through this one check, so a row
 * a reward cannot score stops a run before its first step, not when it is reached. */
int eval_check_columns(const RewardSet *rs, const Dataset *data, int n, GrpoErr *err);

/* Generates, decodes and scores examples p0 .. p0+n-1 of data (tokenized), their
 * groups decoded together (gen_groups; gen_groups_per_chunk says how many fill a
 * chunk), and adds them to t in order. trainer_state: what the reward functions
 * get as trainer_state (RewardBatch), one batch per example. With the generator's
 * turns (tool calling) n is 1, the rewards see the whole trajectory and the
 * lengths count the model's tokens; a turn that fails is -1 with a generic
 * message: the turns' owner (its ToolLoop.err) says why. env: the EnvLoop that is
 * the generator's turns (n 1: its group begun here with the example's prompt and
 * row, its rewards the items' env_reward), or NULL. */
int eval_examples(EvalTotals *t, Generator *gen, const Tokenizer *tok, const Dataset *data, int p0, int n, int G,
                  uint64_t stream_base, RewardSet *rs, const json_t *trainer_state, double pass_threshold,
                  EnvLoop *env, GrpoErr *err);

/* The numbers (NaN without completions): mean weighted reward, its sample
 * standard deviation, pass@1, mean completion length in tokens, the fraction
 * ended by eos, and function f's mean over its non-NaN values. */
double eval_reward(const EvalTotals *t);
double eval_reward_std(const EvalTotals *t);
double eval_pass_at_1(const EvalTotals *t);
double eval_mean_length(const EvalTotals *t);
double eval_frac_stopped(const EvalTotals *t);
double eval_func_mean(const EvalTotals *t, int f);

/* How the numbers were made, for the line that prints them: "3 prompts x 8
 * completions sampled at temperature 1" (with top_k, top_p, min_p and
 * repetition_penalty when they are on), or "3 prompts x 1 completion, greedy".
 * The same model scores differently under the two, so both `grpo eval` and
 * training's eval line say which. eval_describe_sampling: the part after the
 * counts ("greedy", "sampled at temperature 1, top_p 0.9"). */
void eval_describe(char *buf, size_t n, long prompts, int G, const SamplerOpts *s);
void eval_describe_sampling(char *buf, size_t n, const SamplerOpts *s);

/* The eval_* metrics of a training run into m: eval_reward, eval_reward_std,
 * eval_rewards/NAME/mean, eval_pass@1, eval_completions/mean_length. */
void eval_add_metrics(const EvalTotals *t, const RewardSet *rs, MetricAcc *m);

#endif
