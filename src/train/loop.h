/* train/loop.h — the one training loop. It owns what every training algorithm
 * shares: the gradient buffer, AdamW and its decay mask, the learning-rate
 * schedule, gradient clipping, the non-finite policy (skip the update, log a
 * `nonfinite` event, stop after max_nonfinite_steps in a row), metrics.jsonl and
 * its cadence, checkpoints and their cadence, resuming, and the final save.
 *
 * An algorithm (GRPO, SFT, ...) plugs in with a TrainAlgo: what one optimizer
 * step's micro-batches hold, and for each micro-batch its loss and the gradient
 * with respect to its log-probs, through the trainable model (train/model.h) —
 * plus, optionally, what happens after each update and the state it adds to a
 * checkpoint. The loop hands each process its part of every global micro-batch
 * and sums gradients, losses and statistics over the processes; an algorithm has
 * no rank of its own (train/world.h).
 *
 * The loop does not print: it reports events through a callback, and the
 * caller (cli/) decides what a person sees. */
#ifndef GRPO_TRAIN_LOOP_H
#define GRPO_TRAIN_LOOP_H

#include <jansson.h>
#include <signal.h>

#include "core/check.h"
#include "log/metrics.h"
#include "model/model_io.h"
#include "train/args.h"
#include "train/hf_state.h"
#include "train/model.h"
#include "train/world.h"

/* One optimizer step as an algorithm sees it. Its gradient is a sum over
 * micro_batches global micro-batches of micro_size sequences each, every process
 * training on its part of each; `shares` is how many such parts the step sums
 * (micro_batches x processes). */
typedef struct {
    long step;          /* 0-based */
    int micro_batches;  /* gradient_accumulation_steps */
    int micro_size;     /* sequences in a global micro-batch: per_device_train_batch_size x processes */
    int shares;
    const TrainWorld *world; /* the run's processes, for the algorithm's own shared data (train/world.h) */
    const HfStateInfo *state; /* transformers' TrainerState as the step begins (global_step == step, the
                                 epochs done so far, this process's is_world_process_zero): a reward's
                                 trainer_state */
} TrainStep;

#define TRAIN_MAX_STATS 16

/* What a step's micro-batches sum, on each process; the loop then sums it over the
 * processes (in process order) before end_step. */
typedef struct {
    double loss;        /* the micro-batches' loss contributions */
    double loss_norm;   /* begin_step may set it: the step's loss is loss / loss_norm (1 unless set) */
    long tokens;        /* tokens processed (num_tokens, tokens/s) */
    double stats[TRAIN_MAX_STATS]; /* the algorithm's own sums (n_stats of them) */
} TrainStepSums;

typedef struct {
    const char *name;   /* "grpo", "sft": recorded in trainer_state.json, checked on resume */
    void *self;
    long n_examples;    /* examples in the data (the epoch length) */
    long examples_per_step; /* examples one optimizer step consumes (>= 1) */
    int n_stats;        /* <= TRAIN_MAX_STATS */
    /* Prepares step s: what its micro-batches hold (over every process), and the
     * algorithm's metrics of that. Returns 0, or -1 with err (the run stops) and
     * the algorithm's state as the call found it: the loop then saves the last
     * completed step. An error reaches every process (train_world_check). */
    int (*begin_step)(void *self, const TrainStep *s, TrainStepSums *sums, MetricAcc *m, GrpoErr *err);
    /* This process's part of global micro-batch k: its sequences first ..
     * first + count - 1 of the step (over every process, in the algorithm's
     * order). Their loss, its gradient through tm (train/model.h), into sums. */
    void (*micro_batch)(void *self, TrainModel *tm, const TrainStep *s, int k, int first, int count,
                        TrainStepSums *sums);
    /* NULL, or after the micro-batches, with sums over every process: the step's
     * metrics (the loop adds loss, grad_norm, learning_rate, num_tokens, epoch and
     * step_time itself). */
    void (*end_step)(void *self, const TrainStep *s, const TrainStepSums *sums, MetricAcc *m);
    /* NULL, or called after optimizer step `step` (1-based) was applied or skipped. */
    void (*after_update)(void *self, long step);
    /* NULL, or adds the algorithm's fields to the checkpoint's trainer_state.json
     * (state) and writes its own files into dir (the checkpoint being written). */
    int (*save)(void *self, const char *dir, json_t *state, GrpoErr *err);
    /* NULL, or restores them from checkpoint dir (called before the loop starts). */
    int (*load)(void *self, const char *dir, const json_t *state, GrpoErr *err);
    /* NULL, or evaluates the model after optimizer step state->global_step (1-based),
     * adding eval_* metrics to m; called every eval_steps steps and after the last,
     * on the process that writes the run's files. state: TrainerState after the step. */
    int (*evaluate)(void *self, const HfStateInfo *state, MetricAcc *m, GrpoErr *err);
    long eval_steps;    /* with evaluate: steps between evaluations (> 0) */
    const char *eval_text; /* with evaluate: how its numbers are made ("3 prompts x 8 completions sampled at
                              temperature 1"), shown with them; or NULL */
    const char *log_file; /* NULL, or a JSON-lines file of the algorithm's in output_dir, cut back with
                             metrics.jsonl to the checkpoint's step on resume */
    /* The plan: the algorithm's line of it, its memory beyond the model's and what it is */
    const char *plan_line;
    double plan_bytes;
    const char *plan_memory; /* ", generation 947 (256 completions at a time)", or "" */
} TrainAlgo;

typedef enum {
    TRAIN_EVENT_PLAN,       /* text: the run's plan (sizes, steps, memory), before the first step */
    TRAIN_EVENT_RESUMED,    /* path: the checkpoint; step: where training continues */
    TRAIN_EVENT_STEP,       /* an optimizer step is done: step, loss, reward, tokens_per_s, eta_s, elapsed_s, logged */
    TRAIN_EVENT_NONFINITE,  /* step: the loss or gradient was NaN/Inf; the update was not applied */
    TRAIN_EVENT_CHECKPOINT, /* path: a checkpoint was written */
    TRAIN_EVENT_SAVED,      /* path: the final model was written; text: what (NULL: the model) */
    TRAIN_EVENT_WARNING,    /* text: something the user should know (e.g. a resume that cannot be bit-exact) */
    TRAIN_EVENT_STOPPED,    /* step: stopped on request; path: the checkpoint to resume from, or NULL */
    TRAIN_EVENT_EVAL,       /* step: an evaluation's results, metrics (eval_*); text: how they were made, or NULL */
    TRAIN_EVENT_KEPT,       /* the run is failing after completing steps (err says why): step, the last completed;
                               path: its checkpoint, to resume from; or NULL and text: why none could be written.
                               Sent with quiet too: it completes the error message */
} TrainEventKind;

typedef struct {
    TrainEventKind kind;
    long step, total_steps;
    const char *text;       /* PLAN, WARNING, SAVED */
    const char *path;       /* RESUMED, CHECKPOINT, SAVED */
    double loss;            /* STEP: mean over the current logging interval */
    double reward;          /* STEP: mean reward of the interval, NaN when the algorithm has none */
    double tokens_per_s;    /* STEP: since this run started */
    double eta_s;           /* STEP */
    double elapsed_s;       /* STEP: since this run started */
    int logged;             /* STEP: a metrics.jsonl line was written for it (every logging_steps, and the last) */
    const MetricAcc *metrics; /* EVAL: the evaluation's eval_* values (their means) */
} TrainEvent;

typedef void (*TrainEventFn)(const TrainEvent *e, void *ctx);

/* How the caller follows and steers a run. */
typedef struct {
    TrainEventFn on_event;  /* NULL: silent */
    void *event_ctx;
    /* NULL, or a flag (set by a signal handler) checked after every step: when
     * set, the loop writes a checkpoint (if the run keeps them: save_strategy epoch, or steps with save_steps > 0), reports STOPPED and
     * returns TRAIN_STOPPED. A run that fails while it is set (a step abandoned
     * because its reward did not answer) keeps its steps as any failure does and
     * returns TRAIN_STOPPED too. */
    const volatile sig_atomic_t *stop;
} TrainHooks;

typedef struct {
    const TrainingArgs *args;
    TrainModel *model;      /* what trains (train/model.h) */
    const TrainAlgo *algo;
    const OptGroup *groups; /* the run's options, recorded in checkpoints (bf16 as resolved) */
    int n_groups;
    const void *config;     /* the struct they are placed in */
    TrainHooks hooks;
    const ModelSaveMeta *save_meta; /* what the saved directories add to the model's files, or NULL */
    const TrainWorld *world; /* NULL: the run's processes (train_world_processes) */
} TrainLoop;

/* train_loop_run's result when it stopped on request (err says where to resume). */
#define TRAIN_STOPPED 1

/* The number of optimizer steps: max_steps when > 0, else
 * ceil(num_train_epochs * n_examples / examples_per_step), at least 1. */
long train_loop_total_steps(const TrainingArgs *a, long n_examples, long examples_per_step);

/* Runs (or resumes) training to the end and saves the model in output_dir.
 * Returns 0; TRAIN_STOPPED when *stop was set (after a step, or failing with it set); or -1 with err (bad input, the
 * algorithm's failure, repeated NaN). A failure after this run completed a step
 * first writes a checkpoint of the last completed step (unless one was written at
 * it) and reports TRAIN_EVENT_KEPT: no completed step is lost. */
int train_loop_run(const TrainLoop *L, GrpoErr *err);

#endif
