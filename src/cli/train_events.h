/* cli/train_events.h — what a person sees of a training run and how they stop it:
 * the training loop's events (train/loop.h) as the start-up plan, the progress
 * line (redrawn in place on a terminal) and one line per evaluation (its eval_*
 * values and how they were made), non-finite step, warning, resume, checkpoint
 * and final save (--quiet: the loop sends none); and
 * SIGINT/SIGTERM as a request to stop after the current step, with a checkpoint —
 * a cmd or Python reward that does not answer within a few seconds of it ends the
 * step unfinished (the completed steps kept) — a second signal ends the process at
 * once. */
#ifndef GRPO_CLI_TRAIN_EVENTS_H
#define GRPO_CLI_TRAIN_EVENTS_H

#include "train/loop.h"

typedef struct {
    const char *cmd;    /* "train", "sft": the prefix of messages */
    int tty;            /* stderr is a terminal: the progress line is redrawn */
    int line_open;      /* a progress line is on the screen without its newline */
    char kept[1400];    /* after a failure: where the completed steps are kept (TRAIN_EVENT_KEPT), or "" */
} TrainEvents;

/* Starts following a run of command cmd: the hooks to pass to the trainer
 * (events printed, the signal flag installed). */
TrainHooks train_events_start(TrainEvents *e, const char *cmd);

/* The command's exit status from the trainer's result: 0; 1 with err printed
 * (and a line on where the steps done are kept, when the run kept them);
 * 128 + the signal after a requested stop (with where to resume). */
int train_events_end(TrainEvents *e, int rc, const GrpoErr *err);

#endif
