/* tests/train/test_loop.c — the training loop (train/loop.h) and the trainable
 * model (train/model.h) driven directly, without the command line, by a toy
 * algorithm: weighted next-token NLL over 16 fixed sequences on the tiny Qwen3
 * fixture, each step's example weights computed over the processes' ranges and
 * shared (train_world_share, as a GRPO rollout's scores are).
 *
 *  - gradient accumulation: one step over micro-batches of 4, 2 x 2 and 4 x 1 gives
 *    the same update (the model's sums in another order: within 1e-6), and the
 *    token-local gradient taken alongside the LM head gives the two-pass one's;
 *  - the non-finite policy: a NaN loss skips the update (AdamW's step count) and
 *    writes a nonfinite line; max_nonfinite_steps in a row stop the run;
 *  - the closing metrics line, as transformers logs it when training ends: train_loss
 *    the mean of the finite step losses (a NaN step left out), the same after a resume;
 *  - checkpoint and resume: a run resumed from checkpoint-2 ends with the weights
 *    of the uninterrupted run, bit for bit, the algorithm's own state restored;
 *  - sharding: a world of 2 — two processes forked here, their TrainWorld on shared
 *    memory and a process-shared barrier, no MPI — ends on both with the same
 *    weights, those of one process with the whole micro-batch (within 1e-6), each
 *    step's statistics summed over both. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <math.h>

#include "core/options.h"
#include "core/rng.h"
#include "io/fsutil.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "train/loop.h"
#include "train/model.h"
#include "train/world.h"

enum { N_EX = 16, MAX_LEN = 12, MAX_STEPS = 8, MAX_B = 8 };

/* ---- the toy algorithm ---- */

typedef struct {
    int32_t ids[N_EX][MAX_LEN];
    int len[N_EX];
    const TrainWorld *world;
    int fused;            /* the gradient taken alongside the LM head (token-local), else handed back after */
    long nan_from, nan_to; /* steps [from, to) (0-based) whose loss is NaN */
    long pos;             /* examples consumed (checkpointed) */
    int nan_now;
    int *idx;             /* [step's examples] */
    double *w;            /* [step's examples] their weights */
    double targets;
    double stats[MAX_STEPS][2]; /* what end_step saw: sequences and the sum of their weights, over every process */
    BatchSeq seqs[MAX_B];
    uint64_t seq_ids[MAX_B];
    int seq_of[MAX_B * MAX_LEN];
    double seq_w[MAX_B];
    float logp[MAX_B * MAX_LEN], dlogp[MAX_B * MAX_LEN];
} Toy;

static void toy_init(Toy *t, const TrainWorld *w) {
    memset(t, 0, sizeof *t);
    t->world = w;
    t->fused = 1;
    t->nan_from = t->nan_to = -1;
    Rng rng;
    rng_init(&rng, 7, 0);
    for (int e = 0; e < N_EX; e++) {
        t->len[e] = 5 + (int)rng_below(&rng, MAX_LEN - 5 + 1);
        for (int i = 0; i < t->len[e]; i++) t->ids[e][i] = (int32_t)rng_below(&rng, 96);
    }
    t->idx = xmalloc(sizeof(int) * 64);
    t->w = xmalloc(sizeof(double) * 64);
}

static void toy_free(Toy *t) { free(t->idx), free(t->w); }

/* Each example's weight, computed by the process whose range holds it, then shared. */
static int toy_begin(void *self, const TrainStep *s, TrainStepSums *sums, MetricAcc *m, GrpoErr *err) {
    Toy *t = self;
    int n = s->micro_size * s->micro_batches, lo, hi;
    CHECK(n <= 64);
    t->targets = 0;
    for (int k = 0; k < n; k++) {
        t->idx[k] = (int)(t->pos++ % N_EX);
        t->targets += t->len[t->idx[k]] - 1;
    }
    void *items[64];
    int len[64];
    train_world_range(s->world, n, &lo, &hi);
    for (int k = 0; k < n; k++) {
        len[k] = 1;
        items[k] = NULL;
        if (k >= lo && k < hi) {
            items[k] = xmalloc(sizeof(double));
            *(double *)items[k] = 1.0 + 0.5 * (t->idx[k] % 3);
        }
    }
    train_world_share(s->world, items, len, n, sizeof(double), 0);
    for (int k = 0; k < n; k++) t->w[k] = *(double *)items[k], free(items[k]);
    t->nan_now = s->step >= t->nan_from && s->step < t->nan_to;
    sums->loss_norm = t->targets;
    return 0;
}

static void toy_grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    Toy *t = ctx;
    for (int i = 0; i < m; i++) dlogp[i] = (float)(-t->seq_w[t->seq_of[js[i]]] / t->targets);
}

static void toy_micro(void *self, TrainModel *tm, const TrainStep *s, int k, int first, int count,
                      TrainStepSums *sums) {
    Toy *t = self;
    int ntok = 0;
    for (int i = 0; i < count; i++) {
        int e = t->idx[first + i];
        t->seqs[i] = (BatchSeq){t->ids[e], t->len[e], NULL, 0, 1};
        t->seq_ids[i] = (uint64_t)e;
        t->seq_w[i] = t->w[first + i];
        for (int j = 0; j < t->len[e] - 1; j++) t->seq_of[ntok++] = i;
        sums->tokens += t->len[e];
        sums->stats[0] += 1;
        sums->stats[1] += t->seq_w[i];
    }
    TrainBatch b = {t->seqs, count, t->seq_ids, 1.0f};
    train_model_forward(tm, &b, t->logp, NULL, t->fused ? &(LogprobGrad){.fn = toy_grads, .ctx = t} : NULL);
    double loss = 0;
    for (int j = 0; j < ntok; j++) {
        loss -= t->seq_w[t->seq_of[j]] * t->logp[j];
        t->dlogp[j] = (float)(-t->seq_w[t->seq_of[j]] / t->targets);
    }
    train_model_backward(tm, t->fused ? NULL : t->dlogp, NULL);
    sums->loss += t->nan_now ? NAN : loss;
}

static void toy_end(void *self, const TrainStep *s, const TrainStepSums *sums, MetricAcc *m) {
    Toy *t = self;
    if (s->step < MAX_STEPS) memcpy(t->stats[s->step], sums->stats, sizeof t->stats[0]);
    metric_add(m, "toy_sequences", sums->stats[0]);
}

static int toy_save(void *self, const char *dir, json_t *state, GrpoErr *err) {
    json_object_set_new(state, "toy_position", json_integer(((Toy *)self)->pos));
    return 0;
}

static int toy_load(void *self, const char *dir, const json_t *state, GrpoErr *err) {
    json_t *p = json_object_get(state, "toy_position");
    if (!json_is_integer(p)) return err_set(err, "%s: no toy_position", dir);
    ((Toy *)self)->pos = (long)json_integer_value(p);
    return 0;
}

/* ---- a run ---- */

static char model_dir[512];

/* The fixture with the byte tokenizer beside it: a model directory. */
static void make_model_dir(const char *tmp) {
    snprintf(model_dir, sizeof model_dir, "%s/m", tmp);
    const char *files[][2] = {{"tests/fixtures/qwen3/config.json", "config.json"},
                              {"tests/fixtures/qwen3/model.safetensors", "model.safetensors"},
                              {"assets/byte-tokenizer/tokenizer.json", "tokenizer.json"},
                              {"assets/byte-tokenizer/tokenizer_config.json", "tokenizer_config.json"}};
    GrpoErr err;
    T_CHECK(fs_mkdir_p(model_dir, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 4; i++) {
        char *buf, *to = fs_join(model_dir, files[i][1]);
        size_t n;
        T_CHECK(fs_read_file(files[i][0], &buf, &n, &err) == 0 && fs_write_file_atomic(to, buf, n, &err) == 0,
                "%s: %s", files[i][0], err.msg);
        free(buf), free(to);
    }
}

static void args_for(TrainingArgs *a, const char *out, int B, int GA, long steps) {
    OptGroup g = TRAINING_ARGS_GROUP(0);
    opts_defaults(&g, 1, a);
    a->model_dir = model_dir;
    a->dataset = "toy";
    a->output_dir = out;
    a->per_device_train_batch_size = B;
    a->gradient_accumulation_steps = GA;
    a->max_steps = steps;
    a->learning_rate = 1e-3;
    a->adam.eps = 1e-2;
    a->logging_steps = 1;
    a->save_steps = 0;
    a->bf16 = 0;
    a->quiet = 1;
    a->overwrite_output_dir = 1;
    a->max_grad_norm = 0;
}

typedef struct {
    int rc;
    char msg[1024];
    long adam_steps;
    size_t n;
    float *w;  /* the final weights */
    int nonfinite_events;
} Result;

static void on_event(const TrainEvent *e, void *ctx) {
    if (e->kind == TRAIN_EVENT_NONFINITE) ((Result *)ctx)->nonfinite_events++;
}

static long toy_examples_per_step = 1; /* what the loop is told a step consumes (epochs for save_strategy) */

static void run(const TrainingArgs *a, Toy *t, Result *r) {
    memset(r, 0, sizeof *r);
    GrpoErr err = {0};
    TrainModel *tm = train_model_open(a, &(TrainModelNeeds){0}, NULL, &err);
    if (!tm || train_model_plan(tm, a->per_device_train_batch_size, MAX_LEN, "max_length", &err)) {
        r->rc = -1;
        snprintf(r->msg, sizeof r->msg, "%s", err.msg);
        train_model_close(tm);
        return;
    }
    TrainAlgo algo = {.name = "toy", .self = t, .n_examples = N_EX, .examples_per_step = toy_examples_per_step, .n_stats = 2,
                      .begin_step = toy_begin, .micro_batch = toy_micro, .end_step = toy_end, .save = toy_save,
                      .load = toy_load, .plan_line = "toy"};
    OptGroup g = TRAINING_ARGS_GROUP(0);
    TrainHooks hooks = {on_event, r, NULL};
    TrainingArgs loud = *a;
    loud.quiet = 0; /* events reach the hook */
    TrainLoop L = {&loud, tm, &algo, &g, 1, &loud, hooks, NULL, t->world};
    r->rc = train_loop_run(&L, &err);
    snprintf(r->msg, sizeof r->msg, "%s", r->rc ? err.msg : "");
    Model *m = train_model_weights(tm);
    r->n = m->table.total;
    r->w = xmalloc(sizeof(float) * r->n);
    model_get_params(m, 0, r->n, r->w);
    r->adam_steps = train_model_optimizer(tm)->step;
    train_model_close(tm);
}

/* out/metrics.jsonl's closing line's train_loss (NaN when null or absent), and in
 * *mean the mean of the step lines' finite "loss" values (logging_steps 1: the steps'). */
static double closing_train_loss(const char *out, double *mean) {
    char *path = fs_join(out, "metrics.jsonl"), *text = NULL;
    size_t len;
    GrpoErr err;
    double sum = 0, train_loss = NAN;
    int n = 0;
    if (fs_read_file(path, &text, &len, &err) == 0)
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            json_t *o = json_loads(line, 0, NULL), *loss = json_object_get(o, "loss"), *end = json_object_get(o, "train_loss");
            if (json_is_number(loss) && !json_object_get(o, "event")) sum += json_number_value(loss), n++;
            train_loss = json_object_get(o, "train_runtime") && json_is_number(end) ? json_number_value(end) : NAN;
            json_decref(o);
        }
    free(text), free(path);
    *mean = n ? sum / n : NAN;
    return train_loss;
}

static double max_diff(const Result *a, const Result *b) {
    double d = 0;
    for (size_t i = 0; i < a->n && i < b->n; i++) d = fmax(d, fabs((double)a->w[i] - b->w[i]));
    return a->n == b->n ? d : INFINITY;
}

/* ---- a world of two processes on shared memory ---- */

enum { SLOT_BYTES = 4 << 20 };

typedef struct {
    pthread_barrier_t bar;
    size_t n;             /* rank 0's weights: their count */
    int rc[2];
    char msg[2][sizeof(((GrpoErr *)0)->msg)];
    unsigned char slot[2][SLOT_BYTES];
} Shared;

typedef struct {
    TrainWorld w;
    Shared *sh;
    int rank;
} FakeWorld;

static Shared *shared_of(const TrainWorld *w, int *rank) {
    const FakeWorld *f = w->ctx;
    *rank = f->rank;
    return f->sh;
}

static int fake_size(const TrainWorld *w) { return 2; }
static int fake_rank(const TrainWorld *w) { return ((const FakeWorld *)w->ctx)->rank; }

/* x over both processes, added in process order: each publishes its values, then
 * reads both. */
static void fake_sum_bytes(const TrainWorld *w, void *x, size_t n, int dbl) {
    int me;
    Shared *sh = shared_of(w, &me);
    size_t elem = dbl ? sizeof(double) : sizeof(float);
    CHECK(n * elem <= SLOT_BYTES);
    memcpy(sh->slot[me], x, n * elem);
    pthread_barrier_wait(&sh->bar);
    for (size_t i = 0; i < n; i++) {
        if (dbl) ((double *)x)[i] = ((double *)sh->slot[0])[i] + ((double *)sh->slot[1])[i];
        else ((float *)x)[i] = ((float *)sh->slot[0])[i] + ((float *)sh->slot[1])[i];
    }
    pthread_barrier_wait(&sh->bar);
}
static void fake_sum_f32(const TrainWorld *w, float *x, size_t n) { fake_sum_bytes(w, x, n, 0); }
static void fake_sum_f64(const TrainWorld *w, double *x, int n) { fake_sum_bytes(w, x, (size_t)n, 1); }

static void fake_gather(const TrainWorld *w, int64_t *all, const int64_t *mine, int n) {
    int me;
    Shared *sh = shared_of(w, &me);
    memcpy(sh->slot[me], mine, sizeof(int64_t) * n);
    pthread_barrier_wait(&sh->bar);
    for (int j = 0; j < 2; j++) memcpy(all + (size_t)j * n, sh->slot[j], sizeof(int64_t) * n);
    pthread_barrier_wait(&sh->bar);
}

/* Each process writes the items it owns as (index, length, bytes) records into its
 * slot; the other reads them. */
static void fake_share(const TrainWorld *w, void **items, int *len, const int *owner, int n, size_t elem,
                       int with_len) {
    int me;
    Shared *sh = shared_of(w, &me);
    unsigned char *p = sh->slot[me];
    for (int i = 0; i < n; i++) {
        if (owner[i] != me) continue;
        memcpy(p, &len[i], sizeof(int)), p += sizeof(int);
        memcpy(p, items[i], elem * len[i]), p += elem * len[i];
    }
    pthread_barrier_wait(&sh->bar);
    const unsigned char *q = sh->slot[1 - me];
    for (int i = 0; i < n; i++) {
        if (owner[i] == me) continue;
        int l;
        memcpy(&l, q, sizeof(int)), q += sizeof(int);
        CHECK(with_len || l == len[i]);
        len[i] = l;
        items[i] = xmalloc(elem * (l ? l : 1));
        memcpy(items[i], q, elem * l), q += elem * l;
    }
    pthread_barrier_wait(&sh->bar);
}

static int fake_check(const TrainWorld *w, int rc, GrpoErr *err) {
    int me;
    Shared *sh = shared_of(w, &me);
    sh->rc[me] = rc;
    snprintf(sh->msg[me], sizeof sh->msg[me], "%s", rc ? err->msg : "");
    pthread_barrier_wait(&sh->bar);
    int first = sh->rc[0] ? 0 : sh->rc[1] ? 1 : -1;
    if (first >= 0) err_set(err, "rank %d: %s", first, sh->msg[first]);
    pthread_barrier_wait(&sh->bar);
    return first >= 0 ? -1 : 0;
}

/* Runs a on two forked processes; each reports its final weights' hash and rc, and
 * rank 0 its weights, through shared memory. */
static void run_world_of_two(const TrainingArgs *a, Result *r0, uint64_t hash[2], double stats[MAX_STEPS][2]) {
    size_t bytes = sizeof(Shared) + 2 * sizeof(uint64_t) + sizeof(double) * MAX_STEPS * 2 + (1 << 20);
    Shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    T_CHECK(sh != MAP_FAILED, "mmap");
    uint64_t *hashes = (uint64_t *)(sh + 1);
    double *st = (double *)(hashes + 2);
    float *w0 = (float *)(st + MAX_STEPS * 2);
    pthread_barrierattr_t at;
    pthread_barrierattr_init(&at);
    pthread_barrierattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->bar, &at, 2);
    pid_t pid[2];
    for (int rank = 0; rank < 2; rank++) {
        if ((pid[rank] = fork()) == 0) {
            FakeWorld f = {{fake_size, fake_rank, fake_sum_f32, fake_sum_f64, fake_gather, fake_share, fake_check, NULL},
                           sh, rank};
            f.w.ctx = &f;
            Toy t;
            toy_init(&t, &f.w);
            Result r;
            run(a, &t, &r);
            uint64_t h = 1469598103934665603ULL;
            for (size_t i = 0; i < r.n; i++) h = (h ^ ((uint32_t *)r.w)[i]) * 1099511628211ULL;
            hashes[rank] = h;
            if (rank == 0) {
                memcpy(st, t.stats, sizeof t.stats);
                memcpy(w0, r.w, sizeof(float) * r.n);
                sh->n = r.n;
            }
            _exit(r.rc ? 3 : 0);
        }
    }
    int ok = 1;
    for (int rank = 0; rank < 2; rank++) {
        int status = 0;
        waitpid(pid[rank], &status, 0);
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    T_CHECK(ok, "a process of the world of two failed");
    hash[0] = hashes[0], hash[1] = hashes[1];
    memcpy(stats, st, sizeof(double) * MAX_STEPS * 2);
    r0->n = sh->n;
    r0->w = xmalloc(sizeof(float) * r0->n);
    memcpy(r0->w, w0, sizeof(float) * r0->n);
    munmap(sh, bytes);
}

/* What a resume does to output_dir's logs and checkpoints, line by line: a
 * corrupted metrics line is refused with FILE:LINE (the file untouched), an
 * unfinished last line dropped with a note naming it; `latest` is the highest
 * checkpoint-N directory (a file of that name, checkpoint-+5, checkpoint-x are
 * none), and the checkpoints later than the step resumed from are refused or,
 * with overwrite, removed. */
static void test_resume_files(const char *tmp) {
    char dir[700], note[1200];
    snprintf(dir, sizeof dir, "%s/logs", tmp);
    GrpoErr err = {{0}};
    CHECK(fs_mkdir_p(dir, &err) == 0);
    char *path = fs_join(dir, "metrics.jsonl"), *text = NULL;
    size_t len;
    const char *corrupt = "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo\n{\"step\": 3}\n";
    CHECK(fs_write_file_atomic(path, corrupt, strlen(corrupt), &err) == 0);
    T_CHECK(ckpt_truncate_log(dir, "metrics.jsonl", 3, note, sizeof note, &err) == -1 &&
                strstr(err.msg, "metrics.jsonl:2: not JSON") && !strchr(err.msg, '\n'), "a corrupted line: %s", err.msg);
    T_CHECK(fs_read_file(path, &text, &len, &err) == 0 && !strcmp(text, corrupt), "the file is left as it was");
    free(text);
    const char *no_step = "{\"step\": 1}\n[1, 2]\n";
    CHECK(fs_write_file_atomic(path, no_step, strlen(no_step), &err) == 0);
    T_CHECK(ckpt_truncate_log(dir, "metrics.jsonl", 3, note, sizeof note, &err) == -1 &&
                strstr(err.msg, "metrics.jsonl:2: an array without an integer \"step\""), "no step: %s", err.msg);
    const char *unfinished = "{\"step\": 1}\n\n{\"step\": 2}\n{\"step\": 3}\n{\"step\": 4, \"lo";
    CHECK(fs_write_file_atomic(path, unfinished, strlen(unfinished), &err) == 0);
    T_CHECK(ckpt_truncate_log(dir, "metrics.jsonl", 2, note, sizeof note, &err) == 0 &&
                strstr(note, "metrics.jsonl:5: an unfinished last line") && strstr(note, "dropped"),
            "an unfinished last line: '%s' %s", note, err.msg);
    T_CHECK(fs_read_file(path, &text, &len, &err) == 0 && !strcmp(text, "{\"step\": 1}\n{\"step\": 2}\n"),
            "kept: '%s'", text);
    free(text);
    T_CHECK(ckpt_truncate_log(dir, "metrics.jsonl", 2, note, sizeof note, &err) == 0 && !note[0], "clean: '%s'", note);
    free(path);

    const char *names[] = {"checkpoint-2", "checkpoint-5", "checkpoint-9"};
    for (int i = 0; i < 3; i++) {
        char *p = fs_join(dir, names[i]);
        CHECK(fs_mkdir_p(p, &err) == 0);
        free(p);
    }
    const char *not_ones[] = {"checkpoint-12", "checkpoint-+20", "checkpoint-30x"};
    for (int i = 0; i < 3; i++) {
        if (i) {
            char *p = fs_join(dir, not_ones[i]);
            CHECK(fs_mkdir_p(p, &err) == 0);
            free(p);
        } else {
            char *p = fs_join(dir, not_ones[i]);
            CHECK(fs_write_file_atomic(p, "x", 1, &err) == 0);
            free(p);
        }
    }
    char *latest = ckpt_resolve(dir, "latest", &err), *want = fs_join(dir, "checkpoint-9");
    T_CHECK(latest && !strcmp(latest, want), "latest: %s", latest ? latest : err.msg);
    free(latest), free(want);
    T_CHECK(ckpt_check_later(dir, 9, 0, note, sizeof note, &err) == 0 && !note[0], "nothing later than 9");
    T_CHECK(ckpt_check_later(dir, 2, 0, note, sizeof note, &err) == -1 &&
                strstr(err.msg, "holds 2 checkpoints (checkpoint-5 to checkpoint-9), later than step 2"),
            "later than 2: %s", err.msg);
    char *five = fs_join(dir, "checkpoint-5"), *nine = fs_join(dir, "checkpoint-9");
    T_CHECK(fs_is_dir(five) && fs_is_dir(nine), "refused: nothing removed");
    T_CHECK(ckpt_check_later(dir, 2, 1, note, sizeof note, &err) == 0 && strstr(note, "removed 2 checkpoints") &&
                !fs_exists(five) && !fs_exists(nine), "overwrite: '%s' %s", note, err.msg);
    free(five), free(nine);
}

int main(void) {
    char tmpl[] = "/tmp/test_loop.XXXXXX", out[600], out2[600];
    char *tmp = mkdtemp(tmpl);
    make_model_dir(tmp);
    test_resume_files(tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(out2, sizeof out2, "%s/out2", tmp);
    TrainingArgs a;
    Result r[4];
    Toy t;

    /* sharding first: the processes are forked before this one starts OpenMP */
    Result two = {0};
    uint64_t hash[2];
    double stats2[MAX_STEPS][2];
    args_for(&a, out2, 2, 2, 3);
    run_world_of_two(&a, &two, hash, stats2);
    T_CHECK(hash[0] == hash[1], "world of two: the processes' weights differ");

    /* gradient accumulation: 4 x 1, 2 x 2, 1 x 4 per step */
    int split[3][2] = {{4, 1}, {2, 2}, {1, 4}};
    for (int i = 0; i < 3; i++) {
        args_for(&a, out, split[i][0], split[i][1], 3);
        toy_init(&t, train_world_processes());
        run(&a, &t, &r[i]);
        T_CHECK(r[i].rc == 0, "split %d x %d: %s", split[i][0], split[i][1], r[i].msg);
        T_CHECK(t.stats[2][0] == 4 && t.stats[2][1] > 4, "split %d: step statistics %g %g", i, t.stats[2][0],
                t.stats[2][1]);
        toy_free(&t);
    }
    for (int i = 1; i < 3; i++)
        T_CHECK(max_diff(&r[0], &r[i]) < 1e-6, "micro-batches of %d: weights differ from one of 4 by %g", split[i][0],
                max_diff(&r[0], &r[i]));
    T_CHECK(max_diff(&r[0], &(Result){0, "", 0, r[0].n, r[0].w, 0}) == 0, "max_diff");
    /* the world of two's step: 2 x 2 per process, global micro-batches of 4 */
    args_for(&a, out, 4, 2, 3);
    toy_init(&t, train_world_processes());
    run(&a, &t, &r[3]);
    T_CHECK(max_diff(&r[3], &two) < 1e-6, "world of two: weights differ from one process's by %g", max_diff(&r[3], &two));
    for (int s = 0; s < 3; s++)
        T_CHECK(stats2[s][0] == 8 && stats2[s][0] == t.stats[s][0] && fabs(stats2[s][1] - t.stats[s][1]) < 1e-12,
                "world of two: step %d's statistics %g %g, one process's %g %g", s, stats2[s][0], stats2[s][1],
                t.stats[s][0], t.stats[s][1]);
    toy_free(&t);
    free(r[3].w), free(two.w);

    /* the gradient handed back after the forward equals the one taken alongside the head */
    args_for(&a, out, 2, 2, 3);
    toy_init(&t, train_world_processes());
    t.fused = 0;
    run(&a, &t, &r[3]);
    T_CHECK(r[3].rc == 0 && max_diff(&r[1], &r[3]) < 1e-6, "two-pass gradient: %s, weights differ by %g", r[3].msg,
            max_diff(&r[1], &r[3]));
    toy_free(&t);
    free(r[3].w);

    /* non-finite: step 2's update skipped, the run goes on */
    args_for(&a, out, 2, 2, 3);
    toy_init(&t, train_world_processes());
    t.nan_from = 1, t.nan_to = 2;
    run(&a, &t, &r[3]);
    T_CHECK(r[3].rc == 0 && r[3].adam_steps == 2 && r[3].nonfinite_events == 1,
            "a NaN step: rc %d, %ld AdamW steps, %d events (%s)", r[3].rc, r[3].adam_steps, r[3].nonfinite_events,
            r[3].msg);
    char *metrics = fs_join(out, "metrics.jsonl"), *text = NULL;
    size_t len;
    GrpoErr err;
    T_CHECK(fs_read_file(metrics, &text, &len, &err) == 0 && strstr(text, "\"nonfinite\""),
            "metrics.jsonl has no nonfinite line");
    free(text), free(metrics);
    /* the closing line's train_loss: the mean of steps 1 and 3 (metrics.jsonl's 10 digits) */
    double mean, train_loss = closing_train_loss(out, &mean);
    T_CHECK(fabs(train_loss - mean) <= 1e-9 * fabs(mean) && mean > 0, "train_loss %.17g, the steps' mean %.17g",
            train_loss, mean);
    toy_free(&t);
    free(r[3].w);
    /* ... and max_nonfinite_steps in a row stop it */
    args_for(&a, out, 2, 2, 4);
    a.max_nonfinite_steps = 2;
    toy_init(&t, train_world_processes());
    t.nan_from = 0, t.nan_to = 2;
    run(&a, &t, &r[3]);
    T_CHECK(r[3].rc == -1 && strstr(r[3].msg, "NaN/Inf in 2 consecutive steps"), "NaN twice: rc %d: %s", r[3].rc,
            r[3].msg);
    toy_free(&t);
    free(r[3].w);

    /* resume: 4 steps straight, and 2 + 2 from checkpoint-2 */
    args_for(&a, out, 2, 2, 4);
    a.save_steps = 2;
    toy_init(&t, train_world_processes());
    run(&a, &t, &r[3]);
    toy_free(&t);
    double loss_mean, uninterrupted = closing_train_loss(out, &loss_mean);
    T_CHECK(fabs(uninterrupted - loss_mean) <= 1e-9 * fabs(loss_mean), "train_loss %.17g, the steps' mean %.17g",
            uninterrupted, loss_mean);
    Result resumed;
    char ck[700];
    snprintf(ck, sizeof ck, "%s/checkpoint-2", out);
    a.resume_from_checkpoint = ck;
    /* checkpoint-4 is later than the resume: refused, the run's files left as they
     * were; --overwrite_output_dir removes it (a deliberate change: this resume ran
     * without it, and checkpoint-4 was rewritten at step 4) */
    a.overwrite_output_dir = 0;
    char *metrics_path = fs_join(out, "metrics.jsonl"), *before = NULL, *after = NULL;
    size_t before_len = 0, after_len = 0;
    GrpoErr ferr;
    fs_read_file(metrics_path, &before, &before_len, &ferr);
    toy_init(&t, train_world_processes());
    run(&a, &t, &resumed);
    fs_read_file(metrics_path, &after, &after_len, &ferr);
    T_CHECK(resumed.rc != 0 && strstr(resumed.msg, "holds checkpoint-4, later than step 2 resumed from") &&
                before && after && before_len == after_len && !memcmp(before, after, before_len),
            "a resume before a later checkpoint: %s", resumed.msg);
    free(before), free(after), free(metrics_path), free(resumed.w);
    toy_free(&t);
    a.overwrite_output_dir = 1;
    toy_init(&t, train_world_processes());
    run(&a, &t, &resumed);
    T_CHECK(resumed.rc == 0 && t.pos == 16 && resumed.adam_steps == 4, "resume: %s (position %ld, %ld steps)",
            resumed.msg, t.pos, resumed.adam_steps);
    T_CHECK(resumed.n == r[3].n && !memcmp(resumed.w, r[3].w, sizeof(float) * r[3].n),
            "resumed weights differ from the uninterrupted run's (by %g)", max_diff(&resumed, &r[3]));
    /* train_loss over the whole run: checkpoint-2 carries the sum of steps 1 and 2 */
    T_CHECK(closing_train_loss(out, &loss_mean) == uninterrupted, "resumed train_loss %.17g, uninterrupted %.17g",
            closing_train_loss(out, &loss_mean), uninterrupted);
    toy_free(&t);
    free(resumed.w), free(r[3].w);
    for (int i = 0; i < 3; i++) free(r[i].w);

    /* save_strategy: epoch (16 examples, 6 a step: epochs end at steps 3 and 6, and the
     * last step, 7, as transformers' on_epoch_end fires for a cut-short epoch); steps
     * with save_steps 0.25 of 7 steps (ceil 1.75 = every 2), and 3, each with the last
     * step, 7, as transformers' DefaultFlowCallback saves when training stops (a
     * deliberate change: they were "2 4 6" and "3 6"); steps with save_steps 0: none;
     * no (save_steps notwithstanding) */
    static const struct { int strategy; double save_steps; const char *want; } saves[] = {
        {TRAIN_SAVE_EPOCH, 0, "3 6 7"}, {TRAIN_SAVE_STEPS, 0.25, "2 4 6 7"}, {TRAIN_SAVE_STEPS, 3, "3 6 7"},
        {TRAIN_SAVE_STEPS, 0, ""}, {TRAIN_SAVE_NO, 1, ""}};
    toy_examples_per_step = 6;
    for (int c = 0; c < 5; c++) {
        args_for(&a, out, 2, 2, 7);
        a.save_strategy = saves[c].strategy;
        a.save_steps = saves[c].save_steps;
        toy_init(&t, train_world_processes());
        run(&a, &t, &r[3]);
        char got[64] = "";
        for (int step = 1; step <= 7; step++) {
            char ckd[700];
            snprintf(ckd, sizeof ckd, "%s/checkpoint-%d", out, step);
            if (fs_exists(ckd)) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", *got ? " " : "", step);
        }
        T_CHECK(r[3].rc == 0 && !strcmp(got, saves[c].want), "save_strategy %s, save_steps %g: checkpoints '%s', want '%s' (%s)",
                train_save_strategy_names[saves[c].strategy], saves[c].save_steps, got, saves[c].want, r[3].msg);
        toy_free(&t);
        free(r[3].w);
    }
    toy_examples_per_step = 1;
    /* save_strategy best and a save_steps above 1 that is not whole are refused by name */
    args_for(&a, out, 2, 2, 7);
    a.save_strategy = TRAIN_SAVE_BEST;
    T_CHECK(training_args_check(&a, &err) == -1 && strstr(err.msg, "save_strategy 'best'"), "best: %s", err.msg);
    a.save_strategy = TRAIN_SAVE_STEPS;
    a.save_steps = 2.5;
    T_CHECK(training_args_check(&a, &err) == -1 && strstr(err.msg, "save_steps 2.5"), "save_steps 2.5: %s", err.msg);

    fs_rm_rf(tmp);
    return t_summary("test_loop");
}
