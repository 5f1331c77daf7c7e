/* log/completions.h — completions.jsonl, the record of what a GRPO run sampled
 * (log_completions, as TRL's completions table): one JSON object per completion,
 *   {"step", "prompt", "completion", "completion_ids", "rewards": {NAME: value or
 *    null}, "reward", "advantage"}
 * and with tool calling "tool_spans": [[start, end], ...], the token ranges of
 * completion_ids (end exclusive) that tool turns appended (the tool mask's 0s);
 * appended in the order the completions were drawn; a value that is no finite
 * number (NaN, +-inf) is null, so every line is JSON and keeps every key. */
#ifndef GRPO_LOG_COMPLETIONS_H
#define GRPO_LOG_COMPLETIONS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    long step;                    /* the optimizer step it trains (1-based) */
    const char *prompt, *completion;
    const int32_t *ids;           /* [n] the completion's tokens */
    int n;
    const char *const *reward_names; /* [n_rewards] */
    const double *rewards;        /* [n_rewards] each function's reward (NaN: null), stride apart */
    long stride;
    int n_rewards;
    double reward, advantage;
    const uint8_t *mask;          /* [n] with tool calling: 1 the model's token, 0 a tool turn's; NULL: none */
} CompletionRecord;

/* One line for r into f. */
void completion_record_write(FILE *f, const CompletionRecord *r);

#endif
