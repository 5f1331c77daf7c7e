/* cli/train_events.c — the training loop's events on stderr (train_events.h). */
#include "cli/train_events.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void train_events_init(TrainEvents *e, const char *cmd) {
    e->cmd = cmd;
    e->tty = isatty(2);
    e->line_open = 0;
}

void train_events_finish(TrainEvents *e) {
    if (e->line_open) progress_done(e->tty);
    e->line_open = 0;
}

void train_events_print(const TrainEvent *ev, void *ctx) {
    TrainEvents *e = ctx;
    if (ev->kind != TRAIN_EVENT_STEP) train_events_finish(e);
    switch (ev->kind) {
    case TRAIN_EVENT_PLAN:
        for (const char *s = ev->text; *s;) {
            size_t n = strcspn(s, "\n");
            fprintf(stderr, "grpo %s: %.*s\n", e->cmd, (int)n, s);
            s += n + (s[n] == '\n');
        }
        break;
    case TRAIN_EVENT_RESUMED:
        fprintf(stderr, "grpo %s: resumed from %s at step %ld\n", e->cmd, ev->path, ev->step);
        break;
    case TRAIN_EVENT_STEP:
        progress_print(ev->step, ev->total_steps, ev->reward, ev->loss, ev->tokens_per_s, ev->eta_s, e->tty);
        e->line_open = e->tty;
        break;
    case TRAIN_EVENT_NONFINITE:
        fprintf(stderr, "grpo %s: step %ld: loss or gradient is NaN/Inf; the update was not applied\n", e->cmd, ev->step);
        break;
    case TRAIN_EVENT_CHECKPOINT:
        fprintf(stderr, "grpo %s: wrote %s\n", e->cmd, ev->path);
        break;
    case TRAIN_EVENT_WARNING:
        fprintf(stderr, "grpo %s: warning: %s\n", e->cmd, ev->text);
        break;
    case TRAIN_EVENT_SAVED:
        fprintf(stderr, "grpo %s: saved the trained model to %s\n", e->cmd, ev->path);
        break;
    }
}
