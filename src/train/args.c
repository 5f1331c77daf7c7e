/* train/args.c — defaults and checks of the shared training options (args.h). */
#include "train/args.h"

#include <string.h>

void training_args_default(TrainingArgs *a, double learning_rate) {
    memset(a, 0, sizeof *a);
    a->learning_rate = learning_rate;
    adamw_config_default(&a->adam);
    a->lr_scheduler_type = SCHED_LINEAR;
    a->max_grad_norm = 1.0;
    a->num_train_epochs = 3;
    a->seed = 42;
    a->gradient_checkpointing = 1;
    a->logprob_chunk_rows = 64;
    a->logging_steps = 10;
    a->save_steps = 500;
}

int training_args_check(const TrainingArgs *a, GrpoErr *err) {
    if (a->max_steps <= 0 && !(a->num_train_epochs > 0))
        return err_set(err, "set max_steps > 0 or num_train_epochs > 0");
    if (!(a->learning_rate >= 0)) return err_set(err, "learning_rate must be >= 0 (got %g)", a->learning_rate);
    if (a->logging_steps < 1) return err_set(err, "logging_steps must be >= 1 (got %d)", a->logging_steps);
    if (a->logprob_chunk_rows < 1) return err_set(err, "logprob_chunk_rows must be >= 1 (got %d)", a->logprob_chunk_rows);
    if (a->save_steps < 0 || a->save_total_limit < 0) return err_set(err, "save_steps and save_total_limit must be >= 0");
    if (a->warmup_ratio < 0 || a->warmup_ratio > 1 || a->warmup_steps < 0)
        return err_set(err, "warmup_ratio must be in [0, 1] and warmup_steps >= 0");
    return 0;
}
