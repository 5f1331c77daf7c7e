/* reward/reward_env.c — environment_reward: the reward an environment gave a
 * completion's trajectory (env/env_loop.h: the last "reward" among its
 * replies), as a reward function, so that reward_weights, the weighted nansum
 * and the rewards/NAME metrics treat it as any other. TRL adds an
 * environment's get_reward as an extra reward function of weight 1; here it is
 * named in reward_funcs. Not the environment (env/). */
#include <math.h>

#include "reward/reward_internal.h"

static int environment_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    for (int i = 0; i < b->n; i++) {
        const double *r = b->items[i].env_reward;
        if (!r)
            return err_set(err, "reward '%s': the completions have no environment (environment_reward needs "
                                "environment_command)", f->name);
        out[i] = *r;
    }
    return 0;
}

int reward_environment_init(RewardFunc *f, GrpoErr *err) {
    (void)err;
    f->compute = environment_compute;
    return 0;
}
