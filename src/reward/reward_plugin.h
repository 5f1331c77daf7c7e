/* reward/reward_plugin.h — the C ABI of reward plugins (spec plugin:PATH.so[:SYMBOL]).
 *
 * A plugin is a shared library exporting one function (default name
 * grpo_reward) of type GrpoRewardFn. It is self-contained: include this header
 * only, build with `cc -shared -fPIC -O2 my_reward.c -o my_reward.so`.
 *
 * The function is called once per batch from one thread. It fills out[0..n)
 * with a reward per completion, or NAN for "no value" (TRL's None), and
 * returns 0; on failure it writes a one-line message into err (err_size bytes,
 * NUL-terminated) and returns non-zero, which stops training with that message.
 * Every pointer is borrowed for the duration of the call. */
#ifndef GRPO_REWARD_PLUGIN_H
#define GRPO_REWARD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define GRPO_REWARD_DEFAULT_SYMBOL "grpo_reward"

typedef struct {
    const char *prompt_text;       /* the rendered prompt (chat template applied) */
    const char *completion;        /* the completion text, UTF-8, NUL-terminated */
    size_t completion_bytes;       /* strlen(completion) */
    const int32_t *completion_ids; /* [n_completion_ids] token ids */
    int n_completion_ids;
    const char *row_json;          /* the example's line as compact JSON: every column,
                                      incl. the original "prompt" */
} GrpoRewardItem;

typedef int (*GrpoRewardFn)(const GrpoRewardItem *items, int n, double *out, char *err,
                            size_t err_size);

#endif
