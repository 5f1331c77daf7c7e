/* cli/train_events.h — what a person sees of a training run: the training loop's
 * events (train/loop.h) as the start-up plan, the progress line (redrawn in place
 * on a terminal), and one line per non-finite step, resume and final save.
 * --quiet silences all of it (the loop then sends no events). */
#ifndef GRPO_CLI_TRAIN_EVENTS_H
#define GRPO_CLI_TRAIN_EVENTS_H

#include "train/loop.h"

typedef struct {
    const char *cmd;    /* "train", "sft": the prefix of messages */
    int tty;            /* stderr is a terminal: the progress line is redrawn */
    int line_open;      /* a progress line is on the screen without its newline */
} TrainEvents;

void train_events_init(TrainEvents *e, const char *cmd);
/* The TrainEventFn: pass &e as the context. */
void train_events_print(const TrainEvent *ev, void *ctx);
/* Ends an open progress line (before an error message, or at the end). */
void train_events_finish(TrainEvents *e);

#endif
