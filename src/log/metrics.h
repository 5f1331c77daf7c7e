/* log/metrics.h — what a training run tells: metrics.jsonl (one JSON object per
 * logging interval, TRL's metric names), and the progress line on stderr (redrawn
 * in place on a terminal, plain lines otherwise).
 *
 * A MetricAcc accumulates named values over the steps of an interval and writes
 * their means; names keep the order of first appearance, any number of them (one
 * mean and std per reward function), and any bytes (escaped in the JSON). */
#ifndef GRPO_LOG_METRICS_H
#define GRPO_LOG_METRICS_H

#include <stdio.h>

#include "core/check.h"

typedef struct {
    char *name;
    char *json_name;   /* name as a JSON string literal, quotes included */
    double sum;
    long count;
} Metric;

typedef struct {
    int n, cap;
    Metric *m;         /* [cap], the first n in use */
} MetricAcc;

void metric_acc_init(MetricAcc *a);
void metric_acc_free(MetricAcc *a);
/* Adds one observation of name (NaN observations are skipped, as nanmean). */
void metric_add(MetricAcc *a, const char *name, double value);
/* Replaces name's observations with value alone (NaN: none), so that its mean is
 * the value at the logging step rather than a mean over the interval (the epoch,
 * as transformers logs state.epoch); a new name takes its place in the order. */
void metric_set(MetricAcc *a, const char *name, double value);
/* The mean so far of name, NaN when none. */
double metric_mean(const MetricAcc *a, const char *name);
/* Writes {"step": step, name: mean, ...} as one line and resets the sums.
 * Returns -1 when the write failed (errno says why). */
int metric_write_line(MetricAcc *a, FILE *f, long step);
void metric_reset(MetricAcc *a);
/* Writes {"step": step, "event": "nonfinite", "loss": ..., "grad_norm": ...}: a
 * step whose update was skipped; each value is "finite" or null (NaN/Inf). */
int metric_write_nonfinite(FILE *f, long step, double loss, double grad_norm);

/* Progress. On a terminal, a bar redrawn in place (\r) at every step:
 *   "[#######.............]  35%  7/20  0m12s<0m22s  512 tok/s  reward 0.42  loss 0.0012"
 * (elapsed<remaining); otherwise one line per logging step (logged):
 *   "step 7/20 (35%)  reward 0.42  loss 0.0012  512 tok/s  elapsed 12s  ETA 22s".
 * A NaN reward is left out (SFT). */
typedef struct {
    long step, total;
    double reward, loss, tokens_per_s, elapsed_s, eta_s;
    int logged;
} Progress;
void progress_print(const Progress *p, int is_tty);
void progress_done(int is_tty);

#endif
