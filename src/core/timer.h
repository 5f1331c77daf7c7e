/* core/timer.h — wall-clock timing for logs and benchmarks. */
#ifndef GRPO_CORE_TIMER_H
#define GRPO_CORE_TIMER_H

#include <time.h>

/* Seconds on a monotonic clock (CLOCK_MONOTONIC): only differences mean anything. */
static inline double time_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
