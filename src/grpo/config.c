/* grpo/config.c — the options of `grpo train`, declared once: GRPO's own rows
 * here, placed beside the shared groups (training arguments, rewards,
 * generation, the loss); defaults, and the rules between options. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "gen/options.h"
#include "grpo/is_correction.h"
#include "grpo/trainer.h"
#include "train/world.h"

#define C(f) offsetof(TrainConfig, f)
#define BIG 1e300

static const char *const eval_strategy_names[] = {"no", "steps", NULL};
static const char *const scale_aliases[] = {"true", "group", "True", "group", "false", "none", "False", "none", NULL};

static const OptSpec grpo_options[] = {
    {"num_generations", OPT_INT, C(num_generations), 8, NULL, 2, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_GENERATION),
     "completions per prompt, the group size G (advantages compare completions within a group)"},
    {"steps_per_generation", OPT_INT, C(steps_per_generation), 0, NULL, 0, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "micro-batches per generation batch (0 = gradient_accumulation_steps)"},
    {"generation_batch_size", OPT_INT, C(generation_batch_size), 0, NULL, 0, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "completions per generation batch (0 = derived; exclusive with steps_per_generation)"},
    {"filter_groups", OPT_BOOL, C(filter_groups), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "DAPO's dynamic sampling: drop the groups whose rewards are all equal and generate more prompts until the "
     "generation batch is full of groups that differ (verl's algorithm.filter_groups.enable)"},
    {"max_num_gen_batches", OPT_INT, C(max_num_gen_batches), 0, NULL, 0, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "with filter_groups: generation rounds one generation batch may take; when they leave it short the run "
     "stops with an error, as verl's (0 = no bound)"},
    {"num_iterations", OPT_INT, C(num_iterations), 1, NULL, 1, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "uses of each generation batch (mu)"},
    {"scale_rewards", OPT_ENUM, C(scale_rewards), GRPO_SCALE_GROUP, NULL, OPT_NO_RANGE, grpo_scale_rewards_names,
     scale_aliases, OPT_IN(OPT_SEC_REWARDS), "advantage scaling (true = group, false = none)"},
    {"multi_objective_aggregation", OPT_ENUM, C(aggregation), GRPO_AGG_SUM_THEN_NORMALIZE, NULL, OPT_NO_RANGE,
     grpo_aggregation_names, NULL, OPT_IN(OPT_SEC_REWARDS), "how several reward functions combine"},
    {"sync_ref_model", OPT_BOOL, C(sync_ref_model), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_LOSS),
     "mix the policy into the reference every ref_model_sync_steps"},
    {"ref_model_mixup_alpha", OPT_F64, C(ref_model_mixup_alpha), 0.6, NULL, 0, 1, NULL, NULL, OPT_IN(OPT_SEC_LOSS),
     "reference mix-up alpha"},
    {"ref_model_sync_steps", OPT_INT, C(ref_model_sync_steps), 512, NULL, 1, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_LOSS),
     "steps between reference syncs"},
    {"log_completions", OPT_BOOL, C(log_completions), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG), "write completions.jsonl"},
    {"eval_dataset", OPT_STR, C(eval_dataset), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_DATA_PATH | OPT_TEST_SPLIT | OPT_IN(OPT_SEC_EVAL),
     "prompts to evaluate on during training (with eval_strategy steps)"},
    {"eval_strategy", OPT_ENUM, C(eval_strategy), 0, NULL, OPT_NO_RANGE, eval_strategy_names, NULL,
     OPT_IN(OPT_SEC_EVAL), "steps: evaluate on eval_dataset every eval_steps steps and after the last"},
    {"eval_steps", OPT_INT, C(eval_steps), 0, NULL, 0, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_EVAL),
     "steps between evaluations (0 = logging_steps)"},
    {"num_generations_eval", OPT_INT, C(num_generations_eval), 0, NULL, 0, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_EVAL),
     "completions per eval prompt (0 = num_generations)"},
    {"pass_threshold", OPT_F64, C(pass_threshold), 1.0, NULL, -BIG, BIG, NULL, NULL, OPT_IN(OPT_SEC_EVAL),
     "an eval completion passes (eval_pass@1) when its reward is >= this"},
};

void train_config_groups(OptGroup g[TRAIN_CONFIG_N_GROUPS]) {
    /* in this order, so that --help lists max_prompt_length before max_completion_length
     * and the loss's rows before the reference model's */
    g[0] = TRAINING_ARGS_GROUP(C(train));
    g[1] = SEED_OPTION_GROUP(C(train.seed), OPT_SEC_OPTIM);
    g[2] = REWARD_OPTIONS_GROUP(C(rewards));
    g[3] = PROMPT_LENGTH_GROUP(C(max_prompt_length));
    g[4] = GEN_OPTIONS_GROUP(C(gen));
    g[5] = (OptGroup){grpo_loss_options, grpo_loss_n_options, C(loss), OPT_SEC_LOSS};
    g[6] = OPT_GROUP(grpo_options, 0);
    g[7] = PROMPT_OPTIONS_GROUP(C(prompts)); /* open-r1's, shared with eval and generate */
    g[8] = TOOL_OPTIONS_GROUP(C(tools));     /* shared with eval */
    g[9] = ENV_OPTIONS_GROUP(C(env));        /* shared with eval */
}

void train_config_default(TrainConfig *c) {
    memset(c, 0, sizeof *c);
    OptGroup g[TRAIN_CONFIG_N_GROUPS];
    train_config_groups(g);
    opts_defaults(g, TRAIN_CONFIG_N_GROUPS, c);
    gen_opts_default(&c->gen);
}

/* The batch rules of TRL's GRPOConfig.__post_init__: the generation batch is
 * global, per_device_train_batch_size x processes x steps_per_generation. */
static int check_batch(const TrainConfig *c, GrpoErr *err) {
    int B = c->train.per_device_train_batch_size, G = c->num_generations, N = train_world_size(train_world_processes());
    if (c->steps_per_generation > 0 && c->generation_batch_size > 0)
        return err_set(err, "generation_batch_size (%d) and steps_per_generation (%d) cannot both be set: "
                       "generation_batch_size = per_device_train_batch_size x processes x steps_per_generation",
                       c->generation_batch_size, c->steps_per_generation);
    int spg = c->steps_per_generation > 0 ? c->steps_per_generation : c->train.gradient_accumulation_steps;
    long gbs = (long)B * N * spg;
    if (c->generation_batch_size > 0) {
        if (c->generation_batch_size % ((long)B * N))
            return err_set(err, "generation_batch_size (%d) must be a multiple of per_device_train_batch_size (%d) x "
                           "processes (%d) = %ld", c->generation_batch_size, B, N, (long)B * N);
        gbs = c->generation_batch_size;
    }
    if (gbs > (1L << 30)) return err_set(err, "the generation batch (%ld completions) is too large", gbs);
    if (gbs % G) {
        if (N == 1)
            return err_set(err, "the generation batch (%ld = per_device_train_batch_size %d x steps_per_generation %ld) "
                           "must be divisible by num_generations (%d)", gbs, B, gbs / B, G);
        return err_set(err, "the generation batch (%ld = per_device_train_batch_size %d x processes %d x "
                       "steps_per_generation %ld) must be divisible by num_generations (%d)", gbs, B, N,
                       gbs / ((long)B * N), G);
    }
    return 0;
}

int train_config_check(const TrainConfig *c, GrpoErr *err) {
    OptGroup g[TRAIN_CONFIG_N_GROUPS];
    train_config_groups(g);
    if (opts_check(g, TRAIN_CONFIG_N_GROUPS, c, err) || training_args_check(&c->train, err) || check_batch(c, err))
        return -1;
    if (c->eval_strategy && !c->eval_dataset)
        return err_set(err, "eval_strategy steps needs an eval_dataset (a JSON lines file of prompts)");
    if (!(c->gen.sampler.temperature > 0))
        return err_set(err, "temperature must be > 0 for training (got %g): log-probs are computed at logits / temperature",
                       c->gen.sampler.temperature);
    const char *bad = sampler_opts_check(&c->gen.sampler);
    if (bad) return err_set(err, "%s", bad);
    double eps_high = isnan(c->loss.epsilon_high) ? c->loss.epsilon_low : c->loss.epsilon_high;
    if (c->loss.delta != 0 && !(c->loss.delta > 1 + eps_high))
        return err_set(err, "delta (%g) must be > 1 + epsilon_high (%g) when set", c->loss.delta, 1 + eps_high);
    if (reward_args_check(&c->rewards, err) || tool_args_check(&c->tools, err) ||
        env_args_check(&c->env, c->tools.tools_path, &c->rewards.funcs, err))
        return -1;
    const GrpoLossConfig *l = &c->loss;
    if (l->is_correction && !(l->is_clip_min < l->is_clip_max))
        return err_set(err, "vllm_importance_sampling_clip_min (%g) must be less than vllm_importance_sampling_clip_max "
                       "(%g)", l->is_clip_min, l->is_clip_max);
    if (l->is_correction && l->loss_type == GRPO_LOSS_VESPO && l->is_mode != GRPO_ISC_TOKEN_TRUNCATE &&
        l->is_mode != GRPO_ISC_TOKEN_MASK)
        return err_set(err, "loss_type vespo needs vllm_importance_sampling_mode token_truncate or token_mask (got %s), "
                       "as TRL", grpo_is_mode_names[l->is_mode]);
    if (c->sync_ref_model && c->loss.beta == 0)
        return err_set(err, "sync_ref_model needs a reference model: set beta > 0");
    if (c->sync_ref_model && (c->train.use_peft || c->train.adapter))
        return err_set(err, "sync_ref_model with use_peft: the reference is the frozen base with the adapters "
                       "switched off, which does not move (TRL does not support the combination either)");
    return 0;
}
