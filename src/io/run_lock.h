/* io/run_lock.h — a run's hold on its output directory: one run writes a directory
 * at a time.
 *
 * The lock is an flock(2) on DIR/.grpo-run.lock, which records the holder (pid,
 * host, start time) for the message a second run gets. The kernel drops the lock
 * when its process ends however it ends, so the file of a run that died is no
 * obstacle: the next run takes it over. Released, the file is removed. */
#ifndef GRPO_IO_RUN_LOCK_H
#define GRPO_IO_RUN_LOCK_H

#include "core/check.h"

typedef struct {
    int fd;     /* -1: not held */
    char *path;
} RunLock;

#define RUN_LOCK_FILE ".grpo-run.lock"

/* Creates dir (and its parents) when missing and takes its lock; 0, or -1 with err
 * ("DIR is in use by another grpo run (pid P on HOST since TIME): ...") when another
 * process holds it, or when it cannot be created. *l is left not held on error. */
int run_lock_take(RunLock *l, const char *dir, GrpoErr *err);
/* Removes the lock file and drops the lock; a lock not held is left alone. */
void run_lock_release(RunLock *l);

#endif
