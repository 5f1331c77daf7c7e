/* tests/reward/test_reward_env.c — environment_reward (reward/reward_env.c): each
 * completion's environment reward, NAN (none given) kept as none; in a reward set
 * its weight applies and the nansum skips a none; without an environment it is
 * -1 naming environment_command; it takes no argument, is a known name (a
 * misspelling gets a did-you-mean) and reward_spec_is finds it behind NAME=. */
#include <math.h>
#include <string.h>

#include "reward/reward.h"
#include "testutil.h"

int main(void) {
    GrpoErr err;
    RewardFunc *f;
    T_CHECK(reward_new(&f, "environment_reward", NULL, &err) == 0, "built: %s", err.msg);
    double r[3] = {1.5, NAN, -2};
    RewardItem items[3];
    memset(items, 0, sizeof items);
    for (int i = 0; i < 3; i++) items[i].completion = "x", items[i].env_reward = &r[i];
    RewardBatch b = {items, 3, NULL, NULL, 0};
    double out[3];
    T_CHECK(reward_compute(f, &b, out, &err) == 0 && out[0] == 1.5 && isnan(out[1]) && out[2] == -2,
            "values: %g %g %g", out[0], out[1], out[2]);
    T_CHECK(!strcmp(f->name, "environment_reward"), "logged as %s", f->name);
    items[1].env_reward = NULL;
    T_CHECK(reward_compute(f, &b, out, &err) == -1 && strstr(err.msg, "environment_reward needs environment_command"),
            "no environment: %s", err.msg);
    reward_free(f);
    T_CHECK(reward_new(&f, "environment_reward:x", NULL, &err) == -1 && strstr(err.msg, "takes no argument"), "%s",
            err.msg);
    T_CHECK(reward_spec_check("environment_reward", &err) == 0, "a known name");
    T_CHECK(reward_spec_check("environment_rewards", &err) == -1 && strstr(err.msg, "did you mean 'environment_reward'"),
            "%s", err.msg);
    T_CHECK(reward_spec_is("environment_reward", "environment_reward") &&
                reward_spec_is("game=environment_reward", "environment_reward") &&
                !reward_spec_is("environment_rewardx", "environment_reward") &&
                !reward_spec_is("cmd:environment_reward", "environment_reward"),
            "reward_spec_is");
    /* in a set: weight 2 on the environment, 1 on reward_len; a none is skipped by the nansum */
    items[1].env_reward = &r[1];
    const char *specs[] = {"environment_reward", "reward_len:1"};
    double w[] = {2, 1}, per[6], total[3];
    RewardSet s;
    T_CHECK(reward_set_init(&s, specs, 2, w, 2, NULL, &err) == 0, "set: %s", err.msg);
    T_CHECK(reward_set_compute(&s, &b, per, total, &err) == 0 && total[0] == 3 && total[1] == 0 && total[2] == -4,
            "weighted nansum: %g %g %g", total[0], total[1], total[2]);
    reward_set_free(&s);
    return t_summary("test_reward_env");
}
