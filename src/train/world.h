/* train/world.h — the processes of a training run, as the training loop and an
 * algorithm see them.
 *
 * The loop (loop.h) shards the gradient itself: it hands an algorithm this
 * process's part of each global micro-batch and sums the gradients, the loss and
 * the algorithm's statistics over the processes. What an algorithm still spreads
 * over the processes is work on its own data that every process then needs whole
 * — a GRPO rollout's generation, scoring and recorded log-probs: each process
 * computes the items of its range (train_world_range), and train_world_share
 * gives every process all of them. No algorithm needs a rank.
 *
 * A TrainWorld is an interface: the run's processes (train_world_processes: MPI
 * under mpirun, a world of one otherwise; dist/dist.h), or a test's own. Every
 * collective is called by all processes in the same order; sums are taken in
 * process order, the same on every process. */
#ifndef GRPO_TRAIN_WORLD_H
#define GRPO_TRAIN_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

typedef struct TrainWorld TrainWorld;
struct TrainWorld {
    int (*size)(const TrainWorld *w);
    int (*rank)(const TrainWorld *w);
    /* x[n] = the sum over processes of x[n], added in process order */
    void (*sum_f32)(const TrainWorld *w, float *x, size_t n);
    void (*sum_f64)(const TrainWorld *w, double *x, int n);
    /* all[size * n] = every process's mine[n], in process order */
    void (*gather_i64)(const TrainWorld *w, int64_t *all, const int64_t *mine, int n);
    /* items[i] (len[i] elements of elem bytes) computed by process owner[i]: afterwards every process holds
     * all of them (with_len: len[i] known to its owner only; received items malloc'd) */
    void (*share_items)(const TrainWorld *w, void **items, int *len, const int *owner, int n, size_t elem,
                        int with_len);
    /* every process's rc: when any failed, each gets -1 and the same err (the first failing one's message) */
    int (*check)(const TrainWorld *w, int rc, GrpoErr *err);
    void *ctx;
};

/* The run's processes (dist/dist.h). */
const TrainWorld *train_world_processes(void);

int train_world_size(const TrainWorld *w);
/* 1 on the process that writes the run's files and reports. */
int train_world_writes(const TrainWorld *w);
/* Items [*lo, *hi) of n: this process's range, contiguous, the ranges in process
 * order covering [0, n). */
void train_world_range(const TrainWorld *w, int n, int *lo, int *hi);
/* The range of process `process` (0 .. size - 1), for a statistic gathered per process. */
void train_world_range_of(const TrainWorld *w, int n, int process, int *lo, int *hi);
/* After each process computed the items of its range: every process holds all n
 * (share_items with the ranges as owners). */
void train_world_share(const TrainWorld *w, void **items, int *len, int n, size_t elem, int with_len);
/* check: a failure on any process fails every one. */
int train_world_check(const TrainWorld *w, int rc, GrpoErr *err);
/* fn(ctx) on the process that writes the run's files; its result reaches every
 * process. */
int train_world_once(const TrainWorld *w, int (*fn)(void *ctx, GrpoErr *err), void *ctx, GrpoErr *err);

#endif
