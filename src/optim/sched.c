/* optim/sched.c — learning-rate schedules of transformers' get_scheduler
 * (linear, cosine, constant, constant_with_warmup) as pure functions of the
 * optimizer step. Is not: stateful; the caller passes the step. */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

const char *const sched_names[] = {"linear", "cosine", "constant", "constant_with_warmup", NULL};

int sched_parse(const char *name, SchedType *out) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, sched_names[i])) {
            *out = (SchedType)i;
            return 0;
        }
    return -1;
}

const char *sched_name(SchedType t) {
    return (unsigned)t < 4 ? sched_names[t] : "?";
}

long long sched_warmup_steps(long long warmup_steps, double warmup_ratio, long long total_steps) {
    if (warmup_steps > 0) return warmup_steps;
    return (long long)ceil((double)total_steps * warmup_ratio);
}

double sched_lr_factor(SchedType t, long long step, long long warmup, long long total) {
    if (t == SCHED_CONSTANT) return 1.0;
    if (step < warmup) return (double)step / (double)(warmup > 1 ? warmup : 1);
    long long span = total - warmup > 1 ? total - warmup : 1;
    switch (t) {
    case SCHED_LINEAR: {
        double f = (double)(total - step) / (double)span;
        return f > 0.0 ? f : 0.0;
    }
    case SCHED_COSINE: {
        const double num_cycles = 0.5;
        double progress = (double)(step - warmup) / (double)span;
        double f = 0.5 * (1.0 + cos(M_PI * num_cycles * 2.0 * progress));
        return f > 0.0 ? f : 0.0;
    }
    default:
        return 1.0;
    }
}

double sched_lr(SchedType t, double base_lr, long long step, long long warmup, long long total) {
    return base_lr * sched_lr_factor(t, step, warmup, total);
}
