/* train/loop.c — the training loop every algorithm runs on (see loop.h): per
 * optimizer step, the algorithm's gradient, clipping, the schedule, AdamW or the
 * non-finite policy, metrics, checkpoints; resume before the first step and the
 * final save after the last. Not here: what a step's gradient is (grpo/, sft/),
 * or how checkpoint directories are laid out (checkpoint.c). */
#include "train/loop.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timer.h"
#include "dist/dist.h"
#include "io/fsutil.h"
#include "log/tensorboard.h"
#include "model/lora.h"
#include "model/model_io.h"
#include "train/checkpoint.h"

#define STATE_VERSION 2

/* Rank 0 alone writes files and reports; every rank learns how it went. */
#define RANK0(expr) (dist_rank() == 0 ? (expr) : 0)

typedef struct {
    const TrainLoop *L;
    char *out_dir;             /* output_dir with symlinks resolved */
    long total_steps;
    const ParamTable *table;   /* what is trained: the model's table, or its adapters' */
    float *params;             /* [table->total], or NULL: the model's weights are held as two halves
                                  (mixed precision, model/transformer.h: ModelMixed) */
    float *grads;              /* [table->total] */
    ModelView gview;           /* over grads, when the model's weights are trained */
    ModelGrads g;
    int fresh;                 /* g.fresh's state: the step's first backward writes the gradients */
    AdamW opt;
    uint8_t *decay_mask;
    long step;                 /* optimizer steps done */
    long num_tokens;
    int nonfinite_streak;
    FILE *metrics_f;
    MetricAcc acc;
    TbWriter tb;               /* report_to tensorboard: open when tb.f */
} Loop;

long train_loop_total_steps(const TrainingArgs *a, long n_examples, long examples_per_step) {
    if (a->max_steps > 0) return a->max_steps;
    long total = (long)ceil(a->num_train_epochs * n_examples / (double)(examples_per_step > 0 ? examples_per_step : 1));
    return total < 1 ? 1 : total;
}

static void emit(const Loop *lp, TrainEvent e) {
    const TrainHooks *h = &lp->L->hooks;
    if (!h->on_event || lp->L->args->quiet || dist_rank() != 0) return;
    e.step = e.step ? e.step : lp->step;
    e.total_steps = lp->total_steps;
    h->on_event(&e, h->event_ctx);
}

/* ---- checkpoints ---- */

static int add_algo_state(void *ctx, const char *dir, json_t *state, GrpoErr *err) {
    const TrainAlgo *a = ctx;
    return a->save ? a->save(a->self, dir, state, err) : 0;
}

static int save_checkpoint(Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    const TrainingArgs *a = L->args;
    json_t *state = json_pack("{s:i, s:s, s:I, s:I, s:I, s:i, s:I, s:i, s:i, s:O}", "version", STATE_VERSION,
                              "algorithm", L->algo->name, "global_step", (json_int_t)lp->step, "max_steps",
                              (json_int_t)lp->total_steps, "adam_step", (json_int_t)lp->opt.step, "nonfinite_streak",
                              lp->nonfinite_streak, "num_tokens", (json_int_t)lp->num_tokens, "threads",
                              omp_get_max_threads(), "world_size", dist_size(), "args", L->options);
    CkptWrite w = {lp->out_dir, lp->step, L->model, a->model_dir, &lp->opt, state, add_algo_state, (void *)L->algo,
                   a->save_total_limit, L->save_meta};
    char *path = NULL;
    int rc = dist_check(RANK0(ckpt_write(&w, &path, err)), err);
    json_decref(state);
    if (!rc) emit(lp, (TrainEvent){.kind = TRAIN_EVENT_CHECKPOINT, .path = path});
    free(path);
    return rc;
}

static int resume(Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    char *dir = ckpt_resolve(lp->out_dir, L->args->resume_from_checkpoint, err);
    json_t *st = NULL;
    int rc = dir ? ckpt_read(dir, L->model, &lp->opt, &st, err) : -1;
    json_int_t step = 0, astep = 0, tokens = 0;
    int version = 0;
    const char *algo = "";
    if (!rc && (json_unpack(st, "{s:i, s:s, s:I, s:I, s:i, s:I}", "version", &version, "algorithm", &algo, "global_step",
                            &step, "adam_step", &astep, "nonfinite_streak", &lp->nonfinite_streak, "num_tokens",
                            &tokens) ||
                version != STATE_VERSION))
        rc = err_set(err, "%s/trainer_state.json: malformed (expected version %d with algorithm, global_step, "
                     "adam_step, nonfinite_streak, num_tokens)", dir, STATE_VERSION);
    if (!rc && strcmp(algo, L->algo->name))
        rc = err_set(err, "%s: a checkpoint of the %s trainer; this run is %s", dir, algo, L->algo->name);
    json_t *world = json_object_get(st, "world_size");
    int saved_world = json_is_integer(world) ? (int)json_integer_value(world) : 1;
    if (!rc && saved_world != dist_size())
        rc = err_set(err, "%s: written by a run of %d process(es), this one has %d: resume with the same number "
                     "(mpirun -np %d) — the completions each process draws and trains on follow it", dir, saved_world,
                     dist_size(), saved_world);
    if (!rc) {
        lp->step = step;
        lp->opt.step = astep;
        lp->num_tokens = tokens;
        if (L->algo->load) rc = L->algo->load(L->algo->self, dir, st, err);
    }
    if (!rc) rc = RANK0(ckpt_truncate_log(lp->out_dir, "metrics.jsonl", lp->step, err));
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
    int was = json_is_true(bf16), now = training_args_bf16(L->args);
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

static int train_step(Loop *lp, GrpoErr *err) {
    const TrainLoop *L = lp->L;
    const TrainingArgs *a = L->args;
    size_t P = lp->table->total;
    double t0 = time_now_s();
    if (lp->g.fresh) /* the step's first backward writes the weights' gradients: no pass over them here */
        lp->fresh = 1;
    else
        memset(lp->grads, 0, sizeof(float) * P);
    TrainStepOut out = {0, 0};
    if (L->algo->step(L->algo->self, &lp->g, lp->step, &out, &lp->acc, err)) return -1;
    if (lp->g.fresh && lp->fresh) memset(lp->grads, 0, sizeof(float) * P); /* no backward ran */
    if (dist_size() > 1) { /* the step over every process: gradients, loss and tokens summed in rank order */
        double t_sum = time_now_s();
        dist_sum_f32(lp->grads, P);
        double v[2] = {out.loss, (double)out.tokens};
        dist_sum_f64(v, 2);
        out.loss = v[0], out.tokens = (long)v[1];
        metric_add(&lp->acc, "step_time/allreduce", time_now_s() - t_sum);
    }
    lp->num_tokens += out.tokens;
    double gnorm = grad_clip_norm(lp->grads, P, a->max_grad_norm);
    long long warm = sched_warmup_steps(a->warmup_steps, a->warmup_ratio, lp->total_steps);
    double lr = sched_lr(a->lr_scheduler_type, a->learning_rate, lp->step, warm, lp->total_steps);
    int finite = isfinite(out.loss) && isfinite(gnorm);
    if (finite) {
        if (lp->params) {
            adamw_step(&lp->opt, lp->params, lp->grads, lp->decay_mask, lr, &a->adam);
        } else {
            adamw_step_split(&lp->opt, L->model->mixed->hi, L->model->mixed->lo, lp->grads, lp->decay_mask, lr, &a->adam);
            model_sync_bf16(L->model); /* the fp32 norms and biases the forward reads follow */
        }
        lp->nonfinite_streak = 0;
    } else {
        lp->nonfinite_streak++;
        int rc = RANK0(metric_write_nonfinite(lp->metrics_f, lp->step + 1, out.loss, gnorm)) ? metrics_failed(lp, err) : 0;
        if (dist_check(rc, err)) return -1;
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_NONFINITE, .step = lp->step + 1});
    }
    lp->step++;
    if (L->algo->after_update) L->algo->after_update(L->algo->self, lp->step);
    metric_add(&lp->acc, "loss", out.loss);
    metric_add(&lp->acc, "grad_norm", gnorm);
    metric_add(&lp->acc, "learning_rate", lr);
    metric_add(&lp->acc, "num_tokens", (double)lp->num_tokens);
    metric_add(&lp->acc, "step_time", time_now_s() - t0);
    if (!finite && lp->nonfinite_streak >= a->max_nonfinite_steps) { /* alike on every rank */
        err_set(err, "the loss or gradient was NaN/Inf in %d consecutive steps (last: step %ld); stopping. "
                "Lower learning_rate or check the data and reward functions", lp->nonfinite_streak, lp->step);
        return dist_check(-1, err);
    }
    return 0;
}

/* ---- the run ---- */

/* output_dir (lp->out_dir) cleaned of this program's dead temporary directories,
 * and (for a new run) checked for an earlier run's files. */
static int prepare_output(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    if (fs_exists(lp->out_dir)) ckpt_remove_leftovers(lp->out_dir);
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
 * resets them: "train/NAME", and "eval/NAME" for an evaluation's "eval_NAME"
 * (transformers' callback rewrites its logs so). */
static int write_tensorboard(Loop *lp, const MetricAcc *acc, GrpoErr *err) {
    const char **names = xmalloc(sizeof(char *) * (acc->n + 1));
    double *values = xmalloc(sizeof(double) * (acc->n + 1));
    int eval = 0;
    for (int i = 0; i < acc->n; i++) {
        names[i] = acc->m[i].name;
        if (!strncmp(names[i], "eval_", 5)) names[i] += 5, eval = 1;
        values[i] = acc->m[i].count ? acc->m[i].sum / acc->m[i].count : NAN;
    }
    int rc = tb_write_scalars(&lp->tb, lp->step, 0, eval ? "eval/" : "train/", names, values, acc->n, err);
    free(names);
    free(values);
    return rc;
}

/* A requested stop after a finished step: a checkpoint when the run keeps them. */
static int stop_here(Loop *lp, int saved, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    if (a->save_steps > 0 && !saved && save_checkpoint(lp, err)) return -1;
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", lp->step);
    char *path = a->save_steps > 0 ? fs_join(lp->out_dir, name) : NULL;
    emit(lp, (TrainEvent){.kind = TRAIN_EVENT_STOPPED, .path = path});
    if (path) err_set(err, "stopped at step %ld of %ld; resume with --resume_from_checkpoint %s", lp->step,
                      lp->total_steps, path);
    else err_set(err, "stopped at step %ld of %ld; no checkpoint was written (save_steps is 0)", lp->step,
                 lp->total_steps);
    free(path);
    return TRAIN_STOPPED;
}

/* Rank 0's files for a logging step (or an evaluation): TensorBoard and metrics.jsonl. */
static int write_logs(Loop *lp, MetricAcc *acc, GrpoErr *err) {
    if (dist_rank() != 0) {
        metric_reset(acc);
        return 0;
    }
    if (lp->tb.f && write_tensorboard(lp, acc, err)) return -1;
    if (metric_write_line(acc, lp->metrics_f, lp->step)) return metrics_failed(lp, err);
    return 0;
}

/* The trained weights' bits, hashed (64-bit FNV-1a over the 32-bit words, or both
 * halves' 16-bit ones), to compare processes. */
static uint64_t weights_hash(const Loop *lp) {
    uint64_t h = 1469598103934665603ULL;
    size_t n = lp->table->total;
    if (lp->params) {
        const uint32_t *w = (const uint32_t *)lp->params;
        for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ULL;
        return h;
    }
    const ModelMixed *x = lp->L->model->mixed;
    for (size_t i = 0; i < n; i++) h = (h ^ x->hi[i]) * 1099511628211ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ x->lo[i]) * 1099511628211ULL;
    return h;
}

/* Every process must hold the same weights; a mismatch stops the run naming the ranks. */
static int check_same_weights(Loop *lp, GrpoErr *err) {
    int N = dist_size();
    if (N == 1) return 0;
    int64_t mine = (int64_t)weights_hash(lp), *all = xmalloc(sizeof(int64_t) * N);
    dist_gather_i64(all, &mine, 1);
    char ranks[200] = "";
    size_t k = 0;
    for (int j = 1; j < N && k + 12 < sizeof ranks; j++)
        if (all[j] != all[0]) k += (size_t)snprintf(ranks + k, sizeof ranks - k, "%s%d", k ? ", " : "", j);
    free(all);
    if (!k) return 0;
    err_set(err, "after step %ld the weights of rank(s) %s differ from rank 0's (checksums compared at each logging "
            "step); stopping: the processes no longer train the same model", lp->step, ranks);
    return dist_check(-1, err);
}

/* A stop requested on any process stops them all after the same step. */
static int stop_requested(const Loop *lp) {
    double v = lp->L->hooks.stop && *lp->L->hooks.stop;
    dist_sum_f64(&v, 1);
    return v > 0;
}

static int run_steps(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    double start = time_now_s();
    long step0 = lp->step, tokens0 = lp->num_tokens;
    while (lp->step < lp->total_steps) {
        if (train_step(lp, err)) return -1;
        double el = time_now_s() - start;
        int logged = lp->step % a->logging_steps == 0 || lp->step == lp->total_steps;
        emit(lp, (TrainEvent){.kind = TRAIN_EVENT_STEP, .loss = metric_mean(&lp->acc, "loss"),
                              .reward = metric_mean(&lp->acc, "reward"),
                              .tokens_per_s = (lp->num_tokens - tokens0) / (el > 0 ? el : 1e-9),
                              .eta_s = el / (lp->step - step0) * (lp->total_steps - lp->step), .elapsed_s = el,
                              .logged = logged});
        if (logged && (check_same_weights(lp, err) || dist_check(write_logs(lp, &lp->acc, err), err))) return -1;
        if (lp->L->algo->evaluate && (lp->step % lp->L->algo->eval_steps == 0 || lp->step == lp->total_steps)) {
            /* its own metrics.jsonl line, as TRL logs an evaluation; rank 0 evaluates */
            MetricAcc eacc;
            metric_acc_init(&eacc);
            int rc = RANK0(lp->L->algo->evaluate(lp->L->algo->self, lp->step, &eacc, err));
            if (!rc) rc = write_logs(lp, &eacc, err);
            metric_acc_free(&eacc);
            if (dist_check(rc, err)) return -1;
        }
        int saved = a->save_steps > 0 && lp->step % a->save_steps == 0;
        if (saved && save_checkpoint(lp, err)) return -1;
        if (lp->step < lp->total_steps && stop_requested(lp)) return stop_here(lp, saved, err);
    }
    return 0;
}

static int write_final(Loop *lp, GrpoErr *err) {
    const TrainingArgs *a = lp->L->args;
    if (lp->L->model->lora) {
        LoraSaveOpts lso = {a->model_dir, a->model_dir};
        return lora_layers_save(lp->L->model->lora, lp->out_dir, &lso, err);
    }
    ModelSaveOpts so;
    model_save_opts_default(&so);
    so.copy_from = a->model_dir;
    so.meta = lp->L->save_meta;
    return model_save(lp->L->model, lp->out_dir, &so, err);
}

static int save_final(Loop *lp, GrpoErr *err) {
    if (dist_check(RANK0(write_final(lp, err)), err)) return -1;
    emit(lp, (TrainEvent){.kind = TRAIN_EVENT_SAVED, .path = lp->out_dir,
                          .text = lp->L->model->lora ? "LoRA adapter" : NULL});
    return 0;
}

int train_loop_run(const TrainLoop *L, GrpoErr *err) {
    Loop lp;
    memset(&lp, 0, sizeof lp);
    lp.L = L;
    lp.total_steps = train_loop_total_steps(L->args, L->algo->n_examples, L->algo->examples_per_step);
    LoraLayers *lo = L->model->lora;
    lp.table = lo ? &lo->table : &L->model->table;
    lp.params = lo ? lo->params : L->model->params;
    size_t P = lp.table->total;
    lp.grads = xaligned(sizeof(float) * (P ? P : 1));
    memset(lp.grads, 0, sizeof(float) * P); /* the gaps between tensors, which no backward writes, stay 0 */
    if (lo) {
        lp.g = (ModelGrads){NULL, lp.grads, NULL};
    } else {
        params_view(&lp.gview, &L->model->table, &L->model->cfg, lp.grads);
        lp.g = (ModelGrads){&lp.gview, NULL, &lp.fresh};
    }
    adamw_init(&lp.opt, P);
    lp.decay_mask = xmalloc(P ? P : 1);
    adamw_decay_mask_build(lp.decay_mask, lp.table);
    metric_acc_init(&lp.acc);
    if (L->plan) emit(&lp, (TrainEvent){.kind = TRAIN_EVENT_PLAN, .text = L->plan});
    lp.out_dir = realpath(L->args->output_dir, NULL); /* symlinks resolved, when it exists */
    if (!lp.out_dir) lp.out_dir = xstrdup(L->args->output_dir);
    int rc = dist_check(RANK0(prepare_output(&lp, err)), err); /* the others only read checkpoints from it */
    if (!rc && L->args->resume_from_checkpoint) rc = dist_check(resume(&lp, err), err);
    if (!rc) rc = dist_check(RANK0(open_metrics(&lp, err)), err);
    if (!rc) rc = run_steps(&lp, err);
    if (!rc) rc = save_final(&lp, err);
    if (lp.metrics_f) fclose(lp.metrics_f);
    tb_close(&lp.tb);
    free(lp.out_dir);
    metric_acc_free(&lp.acc);
    free(lp.decay_mask);
    adamw_free(&lp.opt);
    if (!lo) params_view_free(&lp.gview);
    free(lp.grads);
    return rc;
}
