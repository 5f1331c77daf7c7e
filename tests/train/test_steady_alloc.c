/* tests/train/test_steady_alloc.c — a steady training step allocates nothing:
 * the trainable model (train/model.h) on the tiny Qwen3 fixture runs optimizer
 * steps as the loop does (begin_step, micro-batches forward and backward, the
 * gradient's norm and clipping, AdamW), and after two warm-up steps that have seen
 * the largest micro-batch, steps 3 to 6 call malloc and its kin zero times, with
 * micro-batches of every length up to the largest, packed. Covered: fp32 and
 * mixed precision (bf16), LoRA adapters, the token-local gradient taken alongside
 * the LM head and the two-pass one with an entropy term, and the reference's
 * log-probs (train_model_logprobs) of the KL term.
 *
 * The count comes from this binary's own malloc, calloc, realloc, posix_memalign,
 * aligned_alloc and memalign, which count and hand over to glibc's (__libc_*).
 * Two counts: the calls made from this binary's code (the library is linked in
 * statically: every allocation of grpo.c's), which a steady step must not make at
 * all; and the calls of 128 KiB or more from anywhere (oneDNN's and OpenBLAS's
 * too): glibc's default mmap threshold, above which a block may be mapped and
 * unmapped, its pages faulted in afresh each time. oneDNN makes small allocations
 * of its own in every matmul (its execution context), not counted. Under
 * AddressSanitizer (its own allocator) nothing is counted and the test says so. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/options.h"
#include "io/fsutil.h"
#include "optim/optim.h"
#include "testutil.h"
#include "train/model.h"

/* ---- the counting allocator ---- */

enum { BIG_BYTES = 128 << 10 };

#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
#else
#define COUNTING 1
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern char __executable_start, etext; /* this binary's code */

static long ours, big; /* since the start */

/* An allocation of n bytes asked for by code at ra. */
static void count(const void *ra, size_t n) {
    if ((const char *)ra >= &__executable_start && (const char *)ra < &etext) __atomic_add_fetch(&ours, 1, __ATOMIC_RELAXED);
    if (n >= BIG_BYTES) __atomic_add_fetch(&big, 1, __ATOMIC_RELAXED);
}
#define COUNT(n) count(__builtin_return_address(0), (n))
void *malloc(size_t n) { return COUNT(n), __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return COUNT(n * size), __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return COUNT(n), __libc_realloc(p, n); }
void *memalign(size_t align, size_t n) { return COUNT(n), __libc_memalign(align, n); }
void *aligned_alloc(size_t align, size_t n) { return COUNT(n), __libc_memalign(align, n); }
int posix_memalign(void **p, size_t align, size_t n) {
    COUNT(n);
    *p = __libc_memalign(align, n);
    return *p || !n ? 0 : 12 /* ENOMEM */;
}
#endif

/* The counts so far: *n_ours from this binary's code, *n_big of BIG_BYTES or more. */
static void counts(long *n_ours, long *n_big) {
#if COUNTING
    *n_ours = __atomic_load_n(&ours, __ATOMIC_RELAXED), *n_big = __atomic_load_n(&big, __ATOMIC_RELAXED);
#else
    *n_ours = *n_big = 0;
#endif
}

/* ---- the run ---- */

enum { B = 4, MAX_LEN = 24, STEPS = 6, WARM = 2 };

static char model_dir[512];

/* The fixture with the byte tokenizer beside it (as test_loop's). */
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

typedef struct {
    const char *name;
    int bf16, lora, fused, reference;
} Mode;

typedef struct {
    int32_t ids[B][MAX_LEN];
    BatchSeq seqs[B];
    uint64_t seq_ids[B];
    float logp[B * MAX_LEN], ent[B * MAX_LEN], ref[B * MAX_LEN], dlogp[B * MAX_LEN], dent[B * MAX_LEN];
} Batch;

static void grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    for (int i = 0; i < m; i++) dlogp[i] = -0.01f * (float)((js[i] % 5) + 1);
}

/* Micro-batch k of step s: B sequences of lengths that differ by step and place,
 * the first step's first micro-batch the longest. Returns its targets' count. */
static int batch_of(Batch *b, long s, int k) {
    int ntok = 0;
    for (int i = 0; i < B; i++) {
        int len = s == 0 && k == 0 ? MAX_LEN : 2 + (int)((s * 7 + k * 5 + i * 3) % (MAX_LEN - 1));
        for (int j = 0; j < len; j++) b->ids[i][j] = (int32_t)((s * 31 + i * 17 + j * 7) % 90 + 3);
        b->seqs[i] = (BatchSeq){b->ids[i], len, NULL, 0, 1};
        b->seq_ids[i] = (uint64_t)(s * B + i);
        ntok += len - 1;
    }
    return ntok;
}

/* Each step's allocations of mode m: ours[s] from grpo.c's code, big[s] of BIG_BYTES or more. */
static void run_mode(const Mode *m, const char *out, long ours_step[STEPS], long big_step[STEPS]) {
    TrainingArgs a;
    OptGroup g = TRAINING_ARGS_GROUP(0);
    opts_defaults(&g, 1, &a);
    a.model_dir = model_dir;
    a.dataset = "steady";
    a.output_dir = out;
    a.per_device_train_batch_size = B;
    a.bf16 = m->bf16;
    a.quiet = 1;
    a.use_peft = m->lora;
    a.lora_dropout = m->lora ? 0.1 : 0.0;
    GrpoErr err = {0};
    TrainModel *tm = train_model_open(&a, &(TrainModelNeeds){.reference = m->reference}, NULL, &err);
    T_CHECK(tm && train_model_plan(tm, B, MAX_LEN, "max_length", &err) == 0, "%s: %s", m->name, err.msg);
    if (!tm) return;
    static Batch bt;
    AdamWConfig opt = a.adam;
    for (long s = 0; s < STEPS; s++) {
        long ours0, big0, ours1, big1;
        counts(&ours0, &big0);
        train_model_begin_step(tm, s);
        for (int k = 0; k < 2; k++) {
            int ntok = batch_of(&bt, s, k);
            TrainBatch b = {bt.seqs, B, bt.seq_ids, 1.0f};
            if (m->reference) train_model_logprobs(tm, TRAIN_REFERENCE, &b, bt.ref, NULL);
            if (m->fused) {
                train_model_forward(tm, &b, bt.logp, NULL, &(LogprobGrad){.fn = grads, .ctx = NULL});
                train_model_backward(tm, NULL, NULL);
            } else {
                train_model_forward(tm, &b, bt.logp, bt.ent, NULL);
                for (int j = 0; j < ntok; j++) bt.dlogp[j] = -0.01f * (float)((j % 5) + 1), bt.dent[j] = 0.001f;
                train_model_backward(tm, bt.dlogp, bt.dent);
            }
        }
        size_t n;
        float *gr = train_model_gradient(tm, &n);
        grad_clip_norm(gr, n, 1.0);
        train_model_update(tm, 1e-3, &opt);
        counts(&ours1, &big1);
        ours_step[s] = ours1 - ours0, big_step[s] = big1 - big0;
    }
    train_model_close(tm);
}

int main(void) {
    char tmp[] = "/tmp/grpo_steady_XXXXXX";
    T_CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    make_model_dir(tmp);
    char out[600];
    snprintf(out, sizeof out, "%s/out", tmp);
    if (!COUNTING) fprintf(stderr, "test_steady_alloc: under AddressSanitizer the allocations are not counted\n");
    static const Mode modes[] = {
        {"fp32, gradient alongside the LM head", 0, 0, 1, 0},
        {"fp32, two passes with entropy, KL reference", 0, 0, 0, 1},
        {"bf16, gradient alongside the LM head, KL reference", 1, 0, 1, 1},
        {"bf16, two passes with entropy", 1, 0, 0, 0},
        {"LoRA fp32, dropout 0.1", 0, 1, 1, 0},
        {"LoRA bf16, two passes, reference = adapters off", 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        long ours_step[STEPS], big_step[STEPS], steady_ours = 0, steady_big = 0;
        run_mode(&modes[i], out, ours_step, big_step);
        char line[256] = "";
        for (int s = 0; s < STEPS; s++) {
            snprintf(line + strlen(line), sizeof line - strlen(line), " %ld/%ld", ours_step[s], big_step[s]);
            if (s >= WARM) steady_ours += ours_step[s], steady_big += big_step[s];
        }
        printf("%s: allocations per step (grpo.c's / of 128 KiB or more):%s\n", modes[i].name, line);
        T_CHECK(steady_ours == 0, "%s: grpo.c allocated %ld times in steps %d..%d (per step, ours/big:%s)",
                modes[i].name, steady_ours, WARM + 1, STEPS, line);
        T_CHECK(steady_big == 0, "%s: %ld allocations of 128 KiB or more in steps %d..%d (per step, ours/big:%s)",
                modes[i].name, steady_big, WARM + 1, STEPS, line);
    }
    fs_rm_rf(tmp);
    return t_summary("test_steady_alloc");
}
