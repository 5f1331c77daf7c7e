/* reward/reward_args.c — the reward options, declared once (reward.h). */
#include <stddef.h>

#include "reward/reward.h"

const OptSpec reward_options[3] = {
    {"reward_funcs", OPT_LIST, offsetof(RewardArgs, funcs), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED,
     "reward function specs (docs/rewards.md)"},
    {"reward_weights", OPT_F64_LIST, offsetof(RewardArgs, weights), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "one weight per reward function (default 1.0 each)"},
    {"reward_timeout", OPT_F64, offsetof(RewardArgs, timeout_s), REWARD_DEFAULT_TIMEOUT_S, NULL, 0, 1e300, NULL, NULL, 0,
     "seconds to wait for a cmd: reward process's reply"},
};

int reward_args_check(const RewardArgs *a, GrpoErr *err) {
    if (a->weights.n && a->weights.n != a->funcs.n)
        return err_set(err, "reward_weights has %d values but reward_funcs has %d functions", a->weights.n, a->funcs.n);
    return 0;
}

int reward_set_from_args(RewardSet *s, const RewardArgs *a, GrpoErr *err) {
    if (reward_args_check(a, err)) return -1;
    RewardOptions ro = {a->timeout_s};
    return reward_set_init(s, a->funcs.v, a->funcs.n, a->weights.n ? a->weights.v : NULL, a->weights.n, &ro, err);
}
