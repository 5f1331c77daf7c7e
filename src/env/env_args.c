/* env/env_args.c — the environment options (env_args.h) and the rules between
 * them. Not the process (env_proc.c) nor the loop (env_loop.c). */
#include "env/env_args.h"

#include <stddef.h>

#include "reward/reward.h"

#define A(f) offsetof(EnvArgs, f)
const OptSpec env_options[ENV_N_OPTIONS] = {
    {"environment_command", OPT_STR, A(command), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "multi-turn rollouts with an environment: the command (run with /bin/sh -c) of the process that reads the "
     "conversation after each model turn and answers the next user message, or done with an optional reward "
     "(docs/environment-protocol.md)"},
    {"environment_timeout", OPT_F64, A(timeout_s), REWARD_DEFAULT_TIMEOUT_S, NULL, 0, 1e300, NULL, NULL, 0,
     "seconds to wait for the environment's reply to one turn"},
    {"max_environment_turns", OPT_INT, A(max_turns), -1, NULL, -1, 1 << 30, NULL, NULL, 0,
     "environment messages per completion (-1 = no limit); at the limit the environment is asked once more, for "
     "its reward"},
};
#undef A

int env_args_check(const EnvArgs *a, const char *tools_path, const StrList *reward_funcs, GrpoErr *err) {
    if (a->command && tools_path)
        return err_set(err, "environment_command and tools together: a completion's turns go to the environment or "
                            "to the tools, not both; give one");
    for (int i = 0; !a->command && reward_funcs && i < reward_funcs->n; i++)
        if (reward_spec_is(reward_funcs->v[i], "environment_reward"))
            return err_set(err, "reward_funcs has environment_reward, which needs environment_command (the "
                                "environment whose rewards it reads)");
    return 0;
}
