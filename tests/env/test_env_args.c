/* tests/env/test_env_args.c — the environment options (env/env_args.h): their
 * declared defaults (no environment, reward_timeout's 600 s, no turn limit), the
 * rules (no environment with tools; environment_reward needs an environment), and env_loop_open: nothing
 * started without a command, the process and the limit set up with one. */
#include <string.h>

#include "env/env_args.h"
#include "env/env_loop.h"
#include "testutil.h"

int main(void) {
    EnvArgs a;
    memset(&a, 0xff, sizeof a);
    OptGroup g = ENV_OPTIONS_GROUP(0);
    opts_defaults(&g, 1, &a);
    T_CHECK(a.command == NULL && a.timeout_s == 600 && a.max_turns == -1, "defaults: %p %g %d", (void *)a.command,
            a.timeout_s, a.max_turns);
    GrpoErr err;
    const char *specs[] = {"reward_len", "game=environment_reward"};
    StrList funcs = {1, specs};
    T_CHECK(env_args_check(&a, NULL, NULL, &err) == 0 && env_args_check(&a, "tools.json", &funcs, &err) == 0,
            "no environment");
    funcs.n = 2;
    T_CHECK(env_args_check(&a, NULL, &funcs, &err) == -1 &&
                strstr(err.msg, "environment_reward, which needs environment_command"),
            "environment_reward without an environment: %s", err.msg);
    a.command = "python3 game.py";
    T_CHECK(env_args_check(&a, NULL, &funcs, &err) == 0, "an environment alone, its reward read");
    T_CHECK(env_args_check(&a, "tools.json", NULL, &err) == -1 &&
                strstr(err.msg, "environment_command and tools together"),
            "with tools: %s", err.msg);

    EnvLoop l;
    a.command = NULL;
    memset(&l, 0xff, sizeof l);
    T_CHECK(env_loop_open(&l, &a, NULL, NULL, &err) == 0 && l.proc == NULL && l.tok == NULL, "no command: nothing");
    env_loop_close(&l);
    a.command = "cat", a.max_turns = 2;
    T_CHECK(env_loop_open(&l, &a, NULL, "{\"enable_thinking\": false}", &err) == 0 && l.proc && l.max_turns == 2 &&
                json_is_false(json_object_get(l.kwargs, "enable_thinking")),
            "a command: started, %d turns, the kwargs (%s)", l.max_turns, err.msg);
    env_loop_close(&l);
    T_CHECK(l.proc == NULL && l.kwargs == NULL, "closed");
    return t_summary("test_env_args");
}
