/* reward/reward_internal.h — constructors of the built-in reward functions,
 * shared by the files of reward/. Each fills f->compute, f->destroy and
 * f->state (the name is set by reward_new) or returns -1 with err. */
#ifndef GRPO_REWARD_INTERNAL_H
#define GRPO_REWARD_INTERNAL_H

#include "reward/reward.h"

int reward_exact_match_init(RewardFunc *f, const char *column, GrpoErr *err);
int reward_cmd_init(RewardFunc *f, const char *command, double timeout_s, GrpoErr *err);
int reward_plugin_init(RewardFunc *f, const char *path, const char *symbol, GrpoErr *err);

/* "file:line" of an item for messages, or "batch item i" when unknown. */
void reward_item_where(const RewardItem *it, int i, char *buf, size_t size);

#endif
