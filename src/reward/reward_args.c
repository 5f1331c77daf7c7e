/* reward/reward_args.c — the reward options, declared once (reward.h), open-r1's
 * reward parameters among them, and the check of the reward names up front. */
#include <limits.h>
#include <stddef.h>

#include "reward/reward.h"

#define P(field) offsetof(RewardArgs, openr1.field)
const OptSpec reward_options[REWARD_N_OPTIONS] = {
    {"reward_funcs", OPT_LIST, offsetof(RewardArgs, funcs), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED,
     "reward function specs (docs/rewards.md)"},
    {"reward_weights", OPT_F64_LIST, offsetof(RewardArgs, weights), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "one weight per reward function (default 1.0 each)"},
    {"reward_timeout", OPT_F64, offsetof(RewardArgs, timeout_s), REWARD_DEFAULT_TIMEOUT_S, NULL, 0, 1e300, NULL, NULL, 0,
     "seconds to wait for a cmd: reward process's reply"},
    /* open-r1's reward parameters (GRPOScriptArguments), its names and defaults */
    {"cosine_min_value_wrong", OPT_F64, P(cosine_min_value_wrong), 0.0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "cosine reward: the reward of a wrong completion of length 0"},
    {"cosine_max_value_wrong", OPT_F64, P(cosine_max_value_wrong), -0.5, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "cosine reward: the reward of a wrong completion of cosine_max_len characters"},
    {"cosine_min_value_correct", OPT_F64, P(cosine_min_value_correct), 0.5, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "cosine reward: the reward of a correct completion of cosine_max_len characters"},
    {"cosine_max_value_correct", OPT_F64, P(cosine_max_value_correct), 1.0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "cosine reward: the reward of a correct completion of length 0"},
    {"cosine_max_len", OPT_INT, P(cosine_max_len_chars), 1000, NULL, 1, INT_MAX, NULL, NULL, 0,
     "cosine reward: the length in characters where the cosine reaches its other end"},
    {"repetition_n_grams", OPT_INT, P(repetition_n_grams), 3, NULL, 1, INT_MAX, NULL, NULL, 0,
     "repetition_penalty reward: words per n-gram"},
    {"repetition_max_penalty", OPT_F64, P(repetition_max_penalty), -1.0, NULL, -1e300, 0, NULL, NULL, 0,
     "repetition_penalty reward: the penalty when every n-gram repeats"},
    {"max_completion_len", OPT_INT, P(max_completion_len_tokens), 16384, NULL, 0, INT_MAX, NULL, NULL, 0,
     "soft_overlong_punishment reward: completion tokens where the penalty reaches -1"},
    {"soft_punish_cache", OPT_INT, P(soft_punish_cache_tokens), 4096, NULL, 0, INT_MAX, NULL, NULL, 0,
     "soft_overlong_punishment reward: tokens before max_completion_len where the penalty starts"},
};
#undef P

int reward_args_check(const RewardArgs *a, GrpoErr *err) {
    for (int i = 0; i < a->funcs.n; i++)
        if (reward_spec_check(a->funcs.v[i], err)) return -1;
    if (a->weights.n && a->weights.n != a->funcs.n)
        return err_set(err, "reward_weights has %d values but reward_funcs has %d functions", a->weights.n, a->funcs.n);
    return 0;
}

int reward_set_from_args(RewardSet *s, const RewardArgs *a, GrpoErr *err) {
    if (reward_args_check(a, err)) return -1;
    RewardOptions ro = {.timeout_s = a->timeout_s, .openr1 = &a->openr1};
    return reward_set_init(s, a->funcs.v, a->funcs.n, a->weights.n ? a->weights.v : NULL, a->weights.n, &ro, err);
}
