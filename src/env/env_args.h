/* env/env_args.h — the environment options of `grpo train` and `grpo eval`,
 * declared once (TRL's GRPOTrainer takes an environment as Python —
 * environment_factory, rollout_func; here it is a process):
 *   environment_command    the process that answers each model turn
 *                          (docs/environment-protocol.md); unset: no environment
 *   environment_timeout    seconds to wait for one reply
 *   max_environment_turns  environment messages per completion (-1: no limit;
 *                          verl's multi_turn.max_user_turns)
 * Not the process (env_proc.h) nor the loop (env_loop.h). */
#ifndef GRPO_ENV_ENV_ARGS_H
#define GRPO_ENV_ENV_ARGS_H

#include "core/check.h"
#include "core/options.h"

typedef struct {
    const char *command;   /* environment_command: NULL = no environment */
    double timeout_s;      /* environment_timeout */
    int max_turns;         /* max_environment_turns; -1: no limit */
} EnvArgs;

#define ENV_N_OPTIONS 3
extern const OptSpec env_options[ENV_N_OPTIONS];
#define ENV_OPTIONS_GROUP(base) ((OptGroup){env_options, ENV_N_OPTIONS, (base), OPT_SEC_GENERATION})

/* The rules between the options: an environment and tools (tools_path, the
 * `tools` option; NULL: none) are not run together — each is the whole of a
 * completion's turns; the environment_reward function among reward_funcs (NULL:
 * none) needs an environment. -1 with err naming the options. */
int env_args_check(const EnvArgs *a, const char *tools_path, const StrList *reward_funcs, GrpoErr *err);

#endif
