/* reward/reward_internal.h — constructors of the built-in reward functions,
 * shared by the files of reward/. Each fills f->compute, f->destroy and
 * f->state (the name is set by reward_new) or returns -1 with err. */
#ifndef GRPO_REWARD_INTERNAL_H
#define GRPO_REWARD_INTERNAL_H

#include "reward/reward.h"

int reward_exact_match_init(RewardFunc *f, const char *column, GrpoErr *err);
/* TRL's accuracy_reward over a column ("solution" when NULL) and
 * think_format_reward (reward_math.c). */
int reward_accuracy_init(RewardFunc *f, const char *column, GrpoErr *err);
int reward_think_format_init(RewardFunc *f, GrpoErr *err);
/* accuracy_reward's pieces, for tests: the completion's answer (NULL if none)
 * and whether two answers are equal. */
char *math_completion_answer(const char *completion);
int math_answers_equal(const char *answer, const char *gold);
/* name: what the reward's stderr lines are prefixed with ("[reward NAME] "). */
int reward_cmd_init(RewardFunc *f, const char *command, const char *name, double timeout_s, GrpoErr *err);
int reward_plugin_init(RewardFunc *f, const char *path, const char *symbol, GrpoErr *err);

/* The text of an example's column for answer checks: a string as it is, a
 * number printed (num holds it). 0 with *text; 1 when the column is null (no
 * value); -1 with err when it is missing or neither. */
int reward_column_text(const RewardFunc *f, const RewardItem *it, int i, const char *column, char num[64],
                       const char **text, GrpoErr *err);

/* "file:line" of an item for messages, or "batch item i" when unknown. */
void reward_item_where(const RewardItem *it, int i, char *buf, size_t size);

#endif
