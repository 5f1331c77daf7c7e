/* train/world.h — the processes of a training run as an algorithm sees them.
 *
 * The training loop (loop.h) shards the gradient itself: it hands an algorithm
 * this process's part of each global micro-batch and sums the gradients, the loss
 * and the algorithm's statistics over the processes. What an algorithm still
 * spreads over the processes is work on its own data that every process then
 * needs whole — a GRPO rollout's generation, scoring and recorded log-probs: each
 * process computes the items of its range, and train_world_share gives every
 * process all of them. Nothing here needs a rank; a run of one process is a world
 * of one (dist/dist.h). */
#ifndef GRPO_TRAIN_WORLD_H
#define GRPO_TRAIN_WORLD_H

#include <stddef.h>

#include "core/check.h"

/* The processes of the run (1 without mpirun). */
int train_world_size(void);

/* Items [*lo, *hi) of n: this process's range, contiguous, the ranges in process
 * order covering [0, n). */
void train_world_range(int n, int *lo, int *hi);

/* After each process computed the items of its range: every process holds all n.
 * items[i] is an array of len[i] elements of elem bytes; with_len: len[i] is known
 * only to the process that computed item i. Received items are malloc'd. */
void train_world_share(void **items, int *len, int n, size_t elem, int with_len);

/* rc of every process: when any failed, each gets -1 and the same err (the first
 * failing process's message). Returns 0 when none failed. */
int train_world_check(int rc, GrpoErr *err);

/* fn(ctx) on the one process that writes the run's files; its result reaches every
 * process (train_world_check). */
int train_world_once(int (*fn)(void *ctx, GrpoErr *err), void *ctx, GrpoErr *err);

#endif
