/* examples/reward_plugin_len.c — TRL's reward_len example as a grpo.c reward
 * plugin: -|20 - len(completion)|, len in Unicode code points.
 *
 *   cc -shared -fPIC -O2 -Isrc examples/reward_plugin_len.c -o reward_len.so
 *   grpo train ... --reward_funcs plugin:./reward_len.so
 *
 * The ABI is src/reward/reward_plugin.h. */
#include <math.h>
#include <stdio.h>

#include "reward/reward_plugin.h"

#define TARGET_LEN 20

int grpo_reward(const GrpoRewardItem *items, int n, double *out, char *err, size_t err_size) {
    for (int i = 0; i < n; i++) {
        if (!items[i].completion) {
            snprintf(err, err_size, "item %d has no completion", i);
            return 1;
        }
        long chars = 0; /* code points: bytes that do not continue a UTF-8 sequence */
        for (size_t k = 0; k < items[i].completion_bytes; k++)
            chars += ((unsigned char)items[i].completion[k] & 0xC0) != 0x80;
        out[i] = -fabs((double)(TARGET_LEN - chars));
    }
    return 0;
}
