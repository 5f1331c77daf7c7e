/* train/loop.c — the training loop every algorithm runs on (see loop.h): per
 * optimizer step, the algorithm's gradient, clipping, the schedule, AdamW or the
 * non-finite policy, metrics, checkpoints; resume before the first step, the
 * final save after the last, and the completed steps kept in a checkpoint when the
 * run fails after them (keep_steps). Not here: what a step's gradient is (grpo/, sft/),
 * or how checkpoint directories are laid out (checkpoint.c). */
#include "train/loop.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/text.h"
#include "core/timer.h"
#include "io/fsutil.h"
#include "io/run_lock.h"
#include "log/tensorboard.h"
#include "train/checkpoint.h"
#include "train/hf_state.h"
#include "train/world.h"

#define STATE_VERSION 2

/* Rank 0 alone writes files and reports; every rank learns how it went. */
#define RANK0_OF(l, expr) (train_world_writes((l)->world) ? (expr) : 0)
#define RANK0(expr) RANK0_OF(lp, expr)

typedef struct {
    const TrainLoop *L;
    char *out_dir;             /* output_dir with symlinks resolved */
    RunLock lock;              /* on out_dir, for the run (the process that writes files) */
    long total_steps;
    Schedule sched;            /* the learning rate's, over total_steps */
    long save_every;           /* save_strategy steps: steps between checkpoints (0: none) */
    TrainModel *tm;            /* what trains (L->model) */
    const TrainWorld *world;   /* L->world, or the run's processes */
    json_t *options;           /* every option of the run, bf16 as resolved: recorded in checkpoints */
    long step;                 /* optimizer steps done */
    long start_step;           /* where this run's steps began (after a resume) */
    long saved_step;           /* the step of the last checkpoint written; -1: none */
    long num_tokens;
    double loss_sum;           /* the finite step losses summed, and their count: train_loss */
    long loss_steps;
    double start_s;            /* when this process's steps began (with start_step: the speed) */
    int nonfinite_streak;
    FILE *metrics_f;
    MetricAcc acc;
    TbWriter tb;               /* report_to tensorboard: open when tb.f */
    json_t *log_history;       /* the logged dicts so far, for trainer_state.json (train/hf_state.h) */
} Loop;

long train_loop_total_steps(const TrainingArgs *a, long n_examples, long examples_per_step) {
    if (a->max_steps > 0) return a->max_steps;
    long total = (long)ceil(a->num_train_epochs * n_examples / (double)(examples_per_step > 0 ? examples_per_step : 1));
    return total < 1 ? 1 : total;
}

static void emit(const Loop *lp, TrainEvent e) {
    const TrainHooks *h = &lp->L->hooks;
    if (!h->on_event || (lp->L->args->quiet && e.kind != TRAIN_EVENT_KEPT) || !train_world_writes(lp->world)) return;
    e.step = e.step ? e.step : lp->step;
    e.total_steps = lp->total_steps;
    h->on_event(&e, h->event_ctx);
}

/* Epochs done: the examples the steps consumed over the examples in the data. */
static double epochs_done(const Loop *lp, long steps) {
    const TrainAlgo *algo = lp->L->algo;
    return algo->n_examples > 0 ? (double)steps * algo->examples_per_step / algo->n_examples : 0;
}

/* transformers' TrainerState after `steps` optimizer steps, on this process. */
static HfStateInfo state_info(const Loop *lp, long steps) {
    const TrainingArgs *a = lp->L->args;
    const TrainAlgo *algo = lp->L->algo;
    int zero = train_world_writes(lp->world); /* rank 0; a run's processes are taken as one machine's */
    return (HfStateInfo){steps, lp->total_steps, epochs_done(lp, steps), (long)ceil(epochs_done(lp, lp->total_steps)),
                         a->logging_steps, algo->evaluate ? algo->eval_steps : a->logging_steps,
                         training_args_save_every(a, lp->total_steps), /* a fraction made steps, as compute_steps */
                         a->per_device_train_batch_size, lp->num_tokens, zero, zero};
}

/* ---- checkpoints ---- */

/* What the model and the algorithm add to a checkpoint. */
static int add_state(void *ctx, const char *dir, json_t *state, GrpoErr *err) {
    const TrainLoop *L = ctx;
    if (train_model_save_state(L->model, dir, err)) return -1;
    return L->algo->save ? L->algo->save(L->algo->self, dir, state, err) : 0;
}

/* trainer_state.json at lp->step, flat (train/hf_state.h nests it for the file):
 * the loop's own fields, the options, TrainerState's with the log_history so far. */
static json_t *trainer_state(const Loop *lp) {
    const TrainLoop *L = lp->L;
    json_t *state = json_pack("{s:i, s:s, s:I, s:I, s:I, s:i, s:I, s:i, s:i, s:O}", "version", STATE_VERSION,
                              "algorithm", L->algo->name, "global_step", (json_int_t)lp->step, "max_steps",
                              (json_int_t)lp->total_steps, "adam_step", (json_int_t)train_model_optimizer(lp->tm)->step,
                              "nonfinite_streak", lp->nonfinite_streak, "num_tokens", (json_int_t)lp->num_tokens,
                              "threads", omp_get_max_threads(), "world_size", train_world_size(lp->world), "args", lp->options);
    /* exact: jansson writes 17 digits; a sum past a double is null (json_real gives NULL for it) */
    json_object_set_new(state, "loss_sum", isfinite(lp->loss_sum) ? json_real(lp->loss_sum) : json_null());
    json_object_set_new(state, "loss_steps", json_integer((json_int_t)lp->loss_steps));
    const char *digest = train_model_base_digest(lp->tm);
    if (digest) /* the base the adapters were trained on, which a resume compares with its own */
        json_object_set_new(state, "base_model", json_pack("{s:s, s:s}", "name_or_path", L->args->model_dir,
                                                           "weights_digest", digest));
    HfStateInfo hf = state_info(lp, lp->step);
    hf_state_add(state, &hf, lp->log_history);
    return state;
}

/* output_dir/checkpoint-STEP, on every process together; *path (rank 0's) may be NULL. */
static int write_checkpoint(Loop *lp, char **path, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    const TrainingArgs *a = L->args;
    json_t *state = trainer_state(lp);
    CkptWrite w = {lp->out_dir, lp->step, train_model_weights(lp->tm), a->model_dir, train_model_optimizer(lp->tm),
                   state, add_state, (void *)L, a->save_total_limit, L->save_meta};
    int rc = train_world_check(lp->world, RANK0(ckpt_write(&w, path, err)), err);
    json_decref(state);
    if (!rc) lp->saved_step = lp->step;
    return rc;
}

static int save_checkpoint(Loop *lp, GrpoErr *err) {
    char *path = NULL;
    int rc = write_checkpoint(lp, &path, err);
    if (!rc) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_CHECKPOINT, .path = path});
    free(path);
    return rc;
}

/* A run failing after it completed steps keeps them: a checkpoint of the last
 * completed step, unless one was written at it, and KEPT saying where (or why it
 * could not be written; err keeps the failure). The state is whole here: a step
 * fails before its update (its micro-batches: begin_step leaves the algorithm as
 * it was, and a non-finite step counts as done) or after it (logs, evaluation,
 * checkpoint, final save), never in between. Every such error went through the
 * world's check, so every process is here and they write together. */
static void keep_steps(Loop *lp) {
    if (lp->step <= lp->start_step) return;
    GrpoErr why;
    int rc = lp->saved_step == lp->step ? 0 : write_checkpoint(lp, NULL, &why);
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", lp->step);
    char *path = fs_join(lp->out_dir, name);
    emit(lp, (TrainEvent){.kind = TRAIN_EVENT_KEPT, .step = lp->step, .path = rc ? NULL : path,
                          .text = rc ? why.msg : NULL});
    free(path);
}

/* A LoRA checkpoint's adapters were trained on the base this run loads: the
 * weights digests agree (a checkpoint that recorded none, from before, is taken
 * as it is). TRL would load the adapter onto whatever base it is given. */
static int check_base(const Loop *lp, const char *dir, const json_t *st, GrpoErr *err) {
    const char *now = train_model_base_digest(lp->tm);
    const json_t *base = json_object_get(st, "base_model");
    const char *was = json_string_value(json_object_get(base, "weights_digest"));
    const char *path = json_string_value(json_object_get(base, "name_or_path"));
    if (!now || !was || !strcmp(now, was)) return 0;
    char shown[200];
    return err_set(err, "%s: its adapters were trained on the base %s (weights digest %.16s); this run's --model %s "
                   "has weights digest %s: resume with the base the checkpoint was trained on", dir,
                   text_escaped(shown, sizeof shown, path ? path : "?", 120), was, lp->L->args->model_dir, now);
}

static int resume(Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    char *dir = ckpt_resolve(lp->out_dir, L->args->resume_from_checkpoint, err);
    json_t *st = NULL;
    int rc = dir ? ckpt_read(dir, train_model_weights(lp->tm), train_model_optimizer(lp->tm), &st, err) : -1;
    json_int_t step = 0, astep = 0, tokens = 0;
    int version = 0;
    const char *algo = "";
    if (!rc && (json_unpack(st, "{s:i, s:s, s:I, s:I, s:i, s:I}", "version", &version, "algorithm", &algo, "global_step",
                            &step, "adam_step", &astep, "nonfinite_streak", &lp->nonfinite_streak, "num_tokens",
                            &tokens) ||
                version != STATE_VERSION))
        rc = err_set(err, "%s/trainer_state.json: malformed (expected global_step, and " HF_STATE_OURS " with "
                     "version %d, algorithm, adam_step, nonfinite_streak, num_tokens)", dir, STATE_VERSION);
    const char *base = dir ? strrchr(dir, '/') : NULL;
    base = base ? base + 1 : dir;
    char *end = NULL;
    long named = base && !strncmp(base, "checkpoint-", 11) ? strtol(base + 11, &end, 10) : -1;
    if (!rc && (step < 0 || astep < 0 || astep > step || lp->nonfinite_streak < 0 || tokens < 0))
        rc = err_set(err, "%s/trainer_state.json: global_step %lld, adam_step %lld, nonfinite_streak %d, num_tokens %lld: "
                     "expected 0 <= adam_step <= global_step, none negative", dir, (long long)step, (long long)astep,
                     lp->nonfinite_streak, (long long)tokens);
    if (!rc && end && !*end && named != step)
        rc = err_set(err, "%s/trainer_state.json: global_step %lld, but the directory is checkpoint-%ld", dir,
                     (long long)step, named);
    if (!rc && strcmp(algo, L->algo->name))
        rc = err_set(err, "%s: a checkpoint of the %s trainer; this run is %s", dir, algo, L->algo->name);
    json_t *world = json_object_get(st, "world_size");
    int saved_world = json_is_integer(world) ? (int)json_integer_value(world) : 1;
    int world_size = train_world_size(lp->world);
    if (!rc && saved_world != world_size)
        rc = err_set(err, "%s: written by a run of %d process(es), this one has %d: resume with the same number "
                     "(mpirun -np %d) — the completions each process draws and trains on follow it", dir, saved_world,
                     world_size, saved_world);
    if (!rc) rc = check_base(lp, dir, st, err);
    json_t *history = rc ? NULL : hf_state_read_history(st, (long)step, dir, err);
    if (!rc && !history) rc = -1;
    if (!rc) {
        json_decref(lp->log_history);
        lp->log_history = history;
        lp->step = step;
        train_model_optimizer(lp->tm)->step = astep;
        lp->num_tokens = tokens;
        /* train_loss's sums; a checkpoint written before they were kept leaves it unknown (null) */
        json_t *sum = json_object_get(st, "loss_sum"), *count = json_object_get(st, "loss_steps");
        int known = json_is_number(sum) && json_is_integer(count) && json_integer_value(count) >= 0;
        lp->loss_sum = known ? json_number_value(sum) : NAN;
        lp->loss_steps = known ? (long)json_integer_value(count) : 0;
        rc = train_model_load_state(lp->tm, dir, err);
        if (!rc && L->algo->load) rc = L->algo->load(L->algo->self, dir, st, err);
    }
    char later[400] = "";
    if (!rc) rc = RANK0(ckpt_check_later(lp->out_dir, lp->step, L->args->overwrite_output_dir, later, sizeof later, err));
    if (!rc && later[0]) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = later});
    const char *logs[2] = {"metrics.jsonl", L->algo->log_file};
    for (int i = 0; i < 2 && !rc && logs[i]; i++) {
        char dropped[1200] = "";
        rc = RANK0(ckpt_truncate_log(lp->out_dir, logs[i], lp->step, dropped, sizeof dropped, err));
        if (!rc && dropped[0]) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = dropped});
    }
    if (!rc) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_RESUMED, .path = dir});
    json_t *threads = json_object_get(st, "threads");
    if (!rc && json_is_integer(threads) && json_integer_value(threads) != omp_get_max_threads()) {
        char text[300];
        snprintf(text, sizeof text, "the checkpoint was written with %d thread(s), this run has %d: results will "
                 "differ from an uninterrupted run in the last bits (GEMM blocking follows the thread count)",
                 (int)json_integer_value(threads), omp_get_max_threads());
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = text});
    }
    json_t *bf16 = json_object_get(json_object_get(st, "args"), "bf16");
    int was = json_is_true(bf16), now = train_model_bf16(lp->tm);
    if (!rc && json_is_boolean(bf16) && was != now) {
        const char *was_text = was ? "true" : "false";
        char text[300];
        snprintf(text, sizeof text, "the checkpoint was trained with bf16 %s, this run has bf16 %s (auto follows "
                 "the CPU): results will differ from an uninterrupted run; --bf16 %s continues as it was",
                 was_text, now ? "true" : "false", was_text);
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = text});
    }
    json_decref(st);
    free(dir);
    return rc;
}

/* ---- one optimizer step ---- */

static int metrics_failed(const Loop *lp, GrpoErr *err) {
    return err_set(err, "%s/metrics.jsonl: write failed: %s; stopping (the checkpoints are untouched)", lp->out_dir,
                   strerror(errno));
}

/* The step's micro-batches: this process's part of each global one, into sums. */
static int step_micro_batches(Loop *lp, TrainStepSums *sums, GrpoErr *err) {
    const TrainAlgo *algo = lp->L->algo;
    const TrainingArgs *a = lp->L->args;
    const TrainWorld *w = lp->world;
    int B = a->per_device_train_batch_size, N = train_world_size(w), GA = a->gradient_accumulation_steps;
    HfStateInfo state = state_info(lp, lp->step);
    TrainStep s = {lp->step, GA, B * N, GA * N, w, &state};
    train_model_begin_step(lp->tm, lp->step);
    if (algo->begin_step(algo->self, &s, sums, &lp->acc, err)) return -1;
    for (int k = 0; k < GA; k++) algo->micro_batch(algo->self, lp->tm, &s, k, k * B * N + w->rank(w) * B, B, sums);
    double t_sum = time_now_s();
    if (sums->loss_norm != 0) sums->loss /= sums->loss_norm;
    if (N > 1) { /* the step over every process: gradients, loss, tokens and statistics summed in rank order */
        size_t P;
        float *grads = train_model_gradient(lp->tm, &P);
        w->sum_f32(w, grads, P);
        double v[2 + TRAIN_MAX_STATS] = {sums->loss, (double)sums->tokens};
        memcpy(v + 2, sums->stats, sizeof(double) * algo->n_stats);
        w->sum_f64(w, v, 2 + algo->n_stats);
        sums->loss = v[0], sums->tokens = (long)v[1];
        memcpy(sums->stats, v + 2, sizeof(double) * algo->n_stats);
    }
    t_sum = time_now_s() - t_sum;
    if (algo->end_step) algo->end_step(algo->self, &s, sums, &lp->acc);
    if (N > 1) metric_add(&lp->acc, "step_time/allreduce", t_sum);
    return 0;
}

static int train_step(Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    const TrainingArgs *a = L->args;
    double t0 = time_now_s();
    TrainStepSums out = {.loss_norm = 0};
    if (step_micro_batches(lp, &out, err)) return -1;
    lp->num_tokens += out.tokens;
    double gnorm = train_model_clip(lp->tm, a->max_grad_norm);
    double lr = sched_lr(&lp->sched, a->learning_rate, lp->step);
    int finite = isfinite(out.loss) && isfinite(gnorm);
    if (finite) {
        train_model_update(lp->tm, lr, &a->adam);
        lp->nonfinite_streak = 0;
    } else {
        lp->nonfinite_streak++;
    }
    lp->step++; /* done, its update applied or skipped: a failure from here on keeps it */
    if (L->algo->after_update) L->algo->after_update(L->algo->self, lp->step);
    if (!finite) {
        int rc = RANK0(metric_write_nonfinite(lp->metrics_f, lp->step, out.loss, gnorm)) ? metrics_failed(lp, err) : 0;
        if (train_world_check(lp->world, rc, err)) return -1;
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_NONFINITE, .step = lp->step});
    }
    metric_add(&lp->acc, "loss", out.loss);
    if (isfinite(out.loss)) lp->loss_sum += out.loss, lp->loss_steps++;
    metric_add(&lp->acc, "grad_norm", gnorm);
    metric_add(&lp->acc, "learning_rate", lr);
    /* the count and the epochs at this step, not means over the interval: TRL logs
     * state.num_input_tokens_seen, transformers state.epoch, as they stand at the logging step */
    metric_set(&lp->acc, "num_tokens", (double)lp->num_tokens);
    metric_set(&lp->acc, "epoch", epochs_done(lp, lp->step));
    metric_add(&lp->acc, "step_time", time_now_s() - t0);
    if (!finite && lp->nonfinite_streak >= a->max_nonfinite_steps) { /* alike on every rank */
        err_set(err, "the loss or gradient was NaN/Inf in %d consecutive steps (last: step %ld); stopping. "
                "Lower learning_rate or check the data and reward functions", lp->nonfinite_streak, lp->step);
        return train_world_check(lp->world, -1, err);
    }
    return 0;
}

/* ---- the run ---- */

/* output_dir may not be an input, hold one or lie inside one (resolved through
 * symlinks): every option that names an input (OPT_MODEL_PATH, OPT_DATA_PATH,
 * OPT_INPUT, OPT_CONFIG) and exists; the checkpoint resumed from lies inside it as a
 * rule, but output_dir may not lie inside the checkpoint. */
static int check_inputs(const Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    char *out = fs_canonical(lp->out_dir);
    int rc = 0;
    for (int gi = 0; gi < L->n_groups && !rc; gi++)
        for (int k = 0; k < L->groups[gi].n && !rc; k++) {
            const OptSpec *o = &L->groups[gi].specs[k];
            int input = o->type == OPT_CONFIG ||
                        (o->type == OPT_STR && o->flags & (OPT_MODEL_PATH | OPT_DATA_PATH | OPT_INPUT));
            const char *v = input ? *(const char *const *)opt_value(o, L->config, L->groups[gi].base) : NULL;
            if (!v || !fs_exists(v)) continue;
            char *in = fs_canonical(v);
            if (fs_within(out, in) || fs_within(in, out))
                rc = err_set(err, "output_dir %s %s the %s given (%s): the run would write over it; choose another "
                             "--output_dir", L->args->output_dir,
                             !strcmp(out, in) ? "is" : fs_within(out, in) ? "lies inside" : "holds", o->name, v);
            free(in);
        }
    const char *ck = L->args->resume_from_checkpoint;
    if (!rc && ck && strcmp(ck, "latest") && fs_exists(ck)) {
        char *in = fs_canonical(ck);
        if (fs_within(out, in))
            rc = err_set(err, "output_dir %s %s the checkpoint resumed from (%s): choose another --output_dir",
                         L->args->output_dir, !strcmp(out, in) ? "is" : "lies inside", ck);
        free(in);
    }
    free(out);
    return rc;
}

/* output_dir (lp->out_dir) checked against the inputs, locked for this run
 * (io/run_lock.h), cleaned of this program's dead temporary directories, and (for a
 * new run) checked for an earlier run's files. */
static int prepare_output(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    if (check_inputs(lp, err) || run_lock_take(&lp->lock, lp->out_dir, err)) return -1;
    ckpt_remove_leftovers(lp->out_dir);
    if (!a->resume_from_checkpoint && ckpt_prepare_output_dir(lp->out_dir, a->overwrite_output_dir, err)) return -1;
    return 0;
}

/* report_to: "tensorboard" (or "all") opens an event file in logging_dir, by
 * default output_dir/runs/MonDD_HH-MM-SS_HOST as transformers names it; "none"
 * nothing; any other integration is named in a warning. */
static int open_reporting(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    int tensorboard = 0;
    for (int i = 0; i < a->report_to.n; i++) {
        const char *v = a->report_to.v[i];
        if (!strcmp(v, "tensorboard") || !strcmp(v, "all")) {
            tensorboard = 1;
        } else if (strcmp(v, "none")) {
            char msg[300];
            snprintf(msg, sizeof msg, "report_to '%s' is not supported: metrics go to %s/metrics.jsonl (and to "
                     "TensorBoard with report_to tensorboard)", v, lp->out_dir);
            emit(lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = msg});
        }
    }
    if (!tensorboard) return 0;
    char *dir;
    if (a->logging_dir) {
        dir = xstrdup(a->logging_dir);
    } else {
        char name[400], host[256] = "localhost", when[64];
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        time_t now = time(NULL);
        strftime(when, sizeof when, "%b%d_%H-%M-%S", localtime(&now));
        snprintf(name, sizeof name, "runs/%s_%s", when, host);
        dir = fs_join(lp->out_dir, name);
    }
    int rc = tb_open(&lp->tb, dir, err);
    free(dir);
    return rc;
}

static int open_metrics(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    if (fs_mkdir_p(lp->out_dir, err)) return -1;
    char *p = fs_join(lp->out_dir, "metrics.jsonl");
    lp->metrics_f = fopen(p, a->resume_from_checkpoint ? "a" : "w");
    int rc = lp->metrics_f ? 0 : err_set(err, "%s: cannot open for writing", p);
    free(p);
    return rc ? rc : open_reporting(lp, err);
}

/* The logging step's means as TensorBoard scalars, before metric_write_line
 * resets them: "eval/NAME" for an evaluation's "eval_NAME", "train/NAME" for the
 * rest (an evaluation's epoch too), as transformers' rewrite_logs names them. */
static int write_tensorboard(Loop *lp, const MetricAcc *acc, GrpoErr *err) {
    char **names = xmalloc(sizeof(char *) * (acc->n + 1));
    double *values = xmalloc(sizeof(double) * (acc->n + 1));
    for (int i = 0; i < acc->n; i++) {
        const char *name = acc->m[i].name;
        int eval = !strncmp(name, "eval_", 5);
        names[i] = xmalloc(strlen(name) + 8);
        sprintf(names[i], "%s%s", eval ? "eval/" : "train/", name + (eval ? 5 : 0));
        values[i] = acc->m[i].count ? acc->m[i].sum / acc->m[i].count : NAN;
    }
    int rc = tb_write_scalars(&lp->tb, lp->step, 0, "", (const char *const *)names, values, acc->n, err);
    for (int i = 0; i < acc->n; i++) free(names[i]);
    free(names);
    free(values);
    return rc;
}

/* The run writes checkpoints at all (save_strategy epoch, or steps with save_steps > 0). */
static int keeps_checkpoints(const Loop *lp) {
    int strategy = lp->L->args->save_strategy;
    return strategy == TRAIN_SAVE_EPOCH || (strategy == TRAIN_SAVE_STEPS && lp->save_every > 0);
}

/* The step just done is a checkpoint's: save_strategy steps, every save_every steps
 * and the last step (transformers' DefaultFlowCallback.on_step_end saves when training
 * stops under save_strategy steps); epoch, the step that finishes a pass over the data
 * (its examples reach a multiple of n_examples) and the last step, as transformers'
 * on_epoch_end also fires for an epoch that max_steps cut short. */
static int save_due(const Loop *lp) {
    const TrainAlgo *algo = lp->L->algo;
    if (lp->L->args->save_strategy == TRAIN_SAVE_STEPS)
        return lp->save_every > 0 && (lp->step % lp->save_every == 0 || lp->step == lp->total_steps);
    if (lp->L->args->save_strategy != TRAIN_SAVE_EPOCH) return 0;
    long long n = algo->n_examples > 0 ? algo->n_examples : 1, per = algo->examples_per_step > 0 ? algo->examples_per_step : 1;
    return lp->step == lp->total_steps || (long long)lp->step * per / n > (long long)(lp->step - 1) * per / n;
}

/* A requested stop after a finished step: a checkpoint when the run keeps them. */
static int stop_here(Loop *lp, int saved, GrpoErr *err) {
    if (keeps_checkpoints(lp) && !saved && save_checkpoint(lp, err)) return -1;
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", lp->step);
    char *path = keeps_checkpoints(lp) ? fs_join(lp->out_dir, name) : NULL;
    emit(lp, (TrainEvent){.kind = TRAIN_EVENT_STOPPED, .path = path});
    if (path) err_set(err, "stopped at step %ld of %ld; resume with --resume_from_checkpoint %s", lp->step,
                      lp->total_steps, path);
    else err_set(err, "stopped at step %ld of %ld; no checkpoint was written (save_strategy no, or save_steps 0)", lp->step,
                 lp->total_steps);
    free(path);
    return TRAIN_STOPPED;
}

/* Rank 0's files for a logging step (or an evaluation): TensorBoard and metrics.jsonl. */
static int write_logs(Loop *lp, MetricAcc *acc, GrpoErr *err) {
    if (!train_world_writes(lp->world)) {
        metric_reset(acc);
        return 0;
    }
    /* the epochs done, in every line: transformers' log() adds state.epoch to each dict,
     * an evaluation's included (a training line has it already, the same number) */
    metric_set(acc, "epoch", epochs_done(lp, lp->step));
    if (lp->tb.f && write_tensorboard(lp, acc, err)) return -1;
    hf_state_log_append(lp->log_history, acc, lp->step);
    if (metric_write_line(acc, lp->metrics_f, lp->step)) return metrics_failed(lp, err);
    return 0;
}

/* Every process must hold the same weights; a mismatch stops the run naming the ranks. */
static int check_same_weights(Loop *lp, GrpoErr *err) {
    const TrainWorld *w = lp->world;
    int N = train_world_size(w);
    if (N == 1) return 0;
    int64_t mine = (int64_t)train_model_hash(lp->tm), *all = xmalloc(sizeof(int64_t) * N);
    w->gather_i64(w, all, &mine, 1);
    char ranks[200] = "";
    size_t k = 0;
    for (int j = 1; j < N && k + 12 < sizeof ranks; j++)
        if (all[j] != all[0]) k += (size_t)snprintf(ranks + k, sizeof ranks - k, "%s%d", k ? ", " : "", j);
    free(all);
    if (!k) return 0;
    err_set(err, "after step %ld the weights of rank(s) %s differ from rank 0's (checksums compared at each logging "
            "step); stopping: the processes no longer train the same model", lp->step, ranks);
    return train_world_check(w, -1, err);
}

/* A stop requested on any process stops them all after the same step. */
static int stop_requested(const Loop *lp) {
    double v = lp->L->hooks.stop && *lp->L->hooks.stop;
    lp->world->sum_f64(lp->world, &v, 1);
    return v > 0;
}

/* The step just done has an evaluation (eval_strategy steps): every eval_steps
 * steps and the last. */
static int eval_due(const Loop *lp) {
    return lp->L->algo->evaluate && (lp->step % lp->L->algo->eval_steps == 0 || lp->step == lp->total_steps);
}

/* The evaluation after the step just done: its own metrics.jsonl line, as TRL
 * logs an evaluation; rank 0 evaluates. */
static int evaluate(Loop *lp, GrpoErr *err) {
    MetricAcc eacc;
    metric_acc_init(&eacc);
    HfStateInfo state = state_info(lp, lp->step);
    int rc = RANK0(lp->L->algo->evaluate(lp->L->algo->self, &state, &eacc, err));
    if (!rc) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_EVAL, .metrics = &eacc, .text = lp->L->algo->eval_text});
    if (!rc) rc = write_logs(lp, &eacc, err);
    metric_acc_free(&eacc);
    return train_world_check(lp->world, rc, err);
}

/* log_history holds an evaluation's entry (an eval_* key) at the step just done. */
static int evaluated_here(const Loop *lp) {
    for (size_t i = 0; i < json_array_size(lp->log_history); i++) {
        const json_t *e = json_array_get(lp->log_history, i);
        if (json_integer_value(json_object_get(e, "step")) != lp->step) continue;
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)e, key, v) if (!strncmp(key, "eval_", 5)) return 1;
    }
    return 0;
}

static int run_steps(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    double start = lp->start_s = time_now_s();
    lp->save_every = training_args_save_every(a, lp->total_steps);
    long step0 = lp->start_step = lp->step, tokens0 = lp->num_tokens;
    /* a resume from the checkpoint a failed evaluation left (nothing lost after
     * step 1 writes it) runs that evaluation first, as the run would have */
    if (lp->step > 0 && eval_due(lp) && !evaluated_here(lp) && evaluate(lp, err)) return -1;
    while (lp->step < lp->total_steps) {
        if (train_step(lp, err)) return -1;
        double el = time_now_s() - start;
        int logged = lp->step % a->logging_steps == 0 || lp->step == lp->total_steps ||
                     (a->logging_first_step && lp->step == 1);
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_STEP, .loss = metric_mean(&lp->acc, "loss"),
                              .reward = metric_mean(&lp->acc, "reward"),
                              .tokens_per_s = (lp->num_tokens - tokens0) / (el > 0 ? el : 1e-9),
                              .eta_s = el / (lp->step - step0) * (lp->total_steps - lp->step), .elapsed_s = el,
                              .logged = logged});
        if (logged && (check_same_weights(lp, err) || train_world_check(lp->world, write_logs(lp, &lp->acc, err), err)))
            return -1;
        if (eval_due(lp) && evaluate(lp, err)) return -1;
        int saved = save_due(lp);
        if (saved && save_checkpoint(lp, err)) return -1;
        if (lp->step < lp->total_steps && stop_requested(lp)) return stop_here(lp, saved, err);
    }
    return 0;
}

/* The closing log entry, as transformers' Trainer logs it when training ends:
 * train_runtime (s), train_samples_per_second and train_steps_per_second (this
 * process's steps since it started, a resume's not counting those before it, where
 * transformers divides the whole run's max_steps), total_flos (0: not counted, as
 * TrainerState's), train_loss (the mean loss of the run's steps with a finite loss,
 * a resume's included) and the epoch: a metrics.jsonl line, a log_history entry and
 * TensorBoard's train/NAME, as transformers' on_log hands it to every logger. The
 * timings are the run's only numbers that differ between identical runs. */
static int log_end_of_training(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    double runtime = time_now_s() - lp->start_s, steps = (double)(lp->step - lp->start_step);
    double samples = steps * a->per_device_train_batch_size * a->gradient_accumulation_steps * train_world_size(lp->world);
    MetricAcc acc;
    metric_acc_init(&acc);
    metric_set(&acc, "train_runtime", round(runtime * 1e4) / 1e4); /* rounded as transformers' speed_metrics */
    metric_set(&acc, "train_samples_per_second", runtime > 0 ? round(samples / runtime * 1e3) / 1e3 : NAN);
    metric_set(&acc, "train_steps_per_second", runtime > 0 ? round(steps / runtime * 1e3) / 1e3 : NAN);
    metric_set(&acc, "total_flos", 0);
    metric_set(&acc, "train_loss", lp->loss_steps ? lp->loss_sum / lp->loss_steps : NAN);
    int rc = write_logs(lp, &acc, err);
    metric_acc_free(&acc);
    return train_world_check(lp->world, rc, err);
}

/* output_dir/trainer_state.json beside the final model, as TRL's and open-r1's
 * scripts call trainer.save_state() after training: TrainerState at the last step
 * with the whole log_history, and the loop's fields. Not a checkpoint: without the
 * optimizer or the algorithm's state, nothing resumes from it. Written atomically. */
static int save_final_state(const Loop *lp, GrpoErr *err) {
    json_t *state = trainer_state(lp), *file = hf_state_nest(state);
    char *text = json_dumps(file, JSON_INDENT(2)), *p = fs_join(lp->out_dir, "trainer_state.json");
    CHECK(text);
    int rc = fs_write_file_atomic(p, text, strlen(text), err);
    free(p);
    free(text);
    json_decref(file);
    json_decref(state);
    return rc;
}

static int save_final(Loop *lp, GrpoErr *err) {
    int rc = RANK0(train_model_save(lp->tm, lp->out_dir, lp->L->args->model_dir, lp->L->save_meta, err));
    if (!rc) rc = RANK0(save_final_state(lp, err));
    if (train_world_check(lp->world, rc, err)) return -1;
    emit(lp, (TrainEvent){.kind = TRAIN_EVENT_SAVED, .path = lp->out_dir,
                          .text = train_model_has_adapters(lp->tm) ? "LoRA adapter" : NULL});
    return 0;
}

/* The start-up plan: the model, the data, the steps, the processes (under mpirun);
 * the adapters; the algorithm's batches; and the memory, the model's and the
 * algorithm's. */
static char *plan_text(const Loop *lp) {
    const TrainLoop *L = lp->L;
    char adapters[800], memory[1024];
    train_model_describe(lp->tm, adapters, sizeof adapters, memory, sizeof memory);
    double mb = 1048576.0, total = train_model_bytes(lp->tm) + L->algo->plan_bytes;
    size_t n = 4096;
    char *s = xmalloc(n);
    int procs = train_world_size(lp->world);
    char on[48] = "";
    if (procs > 1) snprintf(on, sizeof on, ", on %d processes", procs);
    snprintf(s, n, "%s (%.3g M parameters), %ld examples, %ld steps%s\n%s%s\nmemory plan %.0f MB: %s%s",
             L->args->model_dir, config_param_count(train_model_config(lp->tm)) / 1e6, L->algo->n_examples,
             lp->total_steps, on, adapters, L->algo->plan_line ? L->algo->plan_line : "", total / mb, memory,
             L->algo->plan_memory ? L->algo->plan_memory : "");
    return s;
}

int train_loop_run(const TrainLoop *L, GrpoErr *err) {
    Loop lp;
    memset(&lp, 0, sizeof lp);
    lp.lock.fd = -1;
    lp.L = L;
    lp.saved_step = -1;
    lp.tm = L->model;
    lp.world = L->world ? L->world : train_world_processes();
    lp.total_steps = train_loop_total_steps(L->args, L->algo->n_examples, L->algo->examples_per_step);
    CHECK(L->algo->n_stats <= TRAIN_MAX_STATS);
    lp.options = opts_to_json(L->groups, L->n_groups, L->config);
    json_object_set_new(lp.options, "bf16", json_boolean(train_model_bf16(lp.tm))); /* what auto chose */
    metric_acc_init(&lp.acc);
    lp.log_history = json_array();
    const char *device = train_model_device_note(lp.tm);
    if (device) emit(&lp, (TrainEvent){.kind = TRAIN_EVENT_WARNING, .text = device});
    char *plan = plan_text(&lp);
    emit(&lp, (TrainEvent){.kind = TRAIN_EVENT_PLAN, .text = plan});
    free(plan);
    lp.out_dir = realpath(L->args->output_dir, NULL); /* symlinks resolved, when it exists */
    if (!lp.out_dir) lp.out_dir = xstrdup(L->args->output_dir);
    int rc = training_args_schedule(L->args, lp.total_steps, &lp.sched, err);
    if (!rc) rc = train_world_check(lp.world, RANK0_OF(&lp, prepare_output(&lp, err)), err); /* the others only read it */
    if (!rc && L->args->resume_from_checkpoint) rc = train_world_check(lp.world, resume(&lp, err), err);
    if (!rc) rc = train_world_check(lp.world, RANK0_OF(&lp, open_metrics(&lp, err)), err);
    if (!rc) {
        lp.start_step = lp.step;
        rc = run_steps(&lp, err);
        if (!rc) rc = log_end_of_training(&lp, err);
        if (!rc) rc = save_final(&lp, err);
        if (rc < 0) keep_steps(&lp);
        /* a step abandoned on a stop request (a reward that did not answer): a stop, its steps kept */
        if (rc < 0 && L->hooks.stop && *L->hooks.stop) rc = TRAIN_STOPPED;
    }
    if (lp.metrics_f) fclose(lp.metrics_f);
    tb_close(&lp.tb);
    run_lock_release(&lp.lock);
    free(lp.out_dir);
    metric_acc_free(&lp.acc);
    json_decref(lp.log_history);
    json_decref(lp.options);
    return rc;
}
