/* tests/grpo/test_step_alloc.c — a steady GRPO step makes no per-step allocation
 * of its large and numeric buffers: whole optimizer steps of trainer_run on the
 * tiny model (generation, the tokenizer's decoding, rewards, advantages, old and
 * reference log-probs, the micro-batches, AdamW, the metrics line), counted from
 * one TRAIN_EVENT_STEP to the next. tests/train/test_steady_alloc.c covers the
 * training pass alone; this is the whole step around it.
 *
 * Counted: the calls of malloc and its kin made from this binary's code — grpo.c's,
 * the library being linked in statically. Bound, per steady step (steps WARM+1 ..
 * STEPS): at most PER_COMPLETION allocations per completion of the generation batch
 * plus FIXED for the step. What remains is each completion's decoded text, handed
 * to the rewards as a string of its own, and the advantages' and the sampler
 * correction's per-step lists: 19 to 25 per step here. Before the rollout kept the
 * tokenizer's decoding buffers (TokDecodeWork), 131 to 137 (about 7 more per
 * completion); before generation and the rollout kept their memory (commit
 * f124a5a), 219 to 261.
 * And all allocations, libraries' included (jansson's, oneDNN's, OpenMP's), at most
 * ALL_BOUND a step: 3,400 to 5,200 here, nearly all oneDNN 2.6's own, which its API
 * gives no handle on — about 4 small ones per executed matmul (its execution
 * context's argument maps) and 2 per product in its gemm driver (each thread's
 * packing buffer, about 16 KiB here, malloc'd and freed inside the call); they are
 * served from malloc's free lists, no system call (a 2-step run at a 2-layer cut of
 * the Qwen2-0.5B shape makes 158 mmap and 51 munmap calls in all, its minor faults
 * flat after the first step). The bound catches what made 7,500 to 13,700 a step
 * before (a primitive made per step, below) or a buffer allocated per product.
 * And the oneDNN primitives made (gemm_stats): where fp32 products run on one
 * primitive per shape family (ops/onednn.h's onednn_families: AVX2 machines),
 * a steady step makes none, whatever lengths its micro-batches and attention
 * blocks have; before the families, 4 to 81 a step on such a machine, each a few
 * hundred allocations. Where they do not (avx512_core: oneDNN's brgemm matmul, and
 * bf16 products, take no runtime sizes) a micro-batch of a length not seen yet
 * still makes its primitives — 4 to 91 a step here on an AVX512_BF16 machine, about
 * 200 allocations each — and the libraries' bound is taken net of PER_PRIMITIVE
 * allocations for each primitive the step made (3,900 to 5,600 left).
 * Under AddressSanitizer nothing is counted and the test says so. With
 * GRPO_ALLOC_SITES set, the call sites of the steady steps' allocations (every
 * one, grpo.c's or not) are printed as object+offset; tools/alloc_sites.py names
 * and groups them. */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpo/trainer.h"
#include "grpo/tiny_run.h"
#include "io/fsutil.h"
#include "ops/gemm.h"
#include "ops/onednn.h"
#include "testutil.h"

enum { STEPS = 7, WARM = 2, PER_COMPLETION = 1, FIXED = 16, ALL_BOUND = 6500, PER_PRIMITIVE = 400 };

/* ---- the counting allocator ---- */

#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
#else
#define COUNTING 1
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern char __executable_start, etext; /* this binary's code */

enum { N_SITES = 4096, DEPTH = 10 };
typedef struct {
    void *frames[DEPTH];
    long calls, bytes;
} Site;

static volatile int counting, sites_on; /* set while a step is counted */
static long n_ours, n_all, bytes_all;
static Site sites[N_SITES];
static int n_sites;
static int lock;
static __thread int inside; /* backtrace may allocate: not counted again */

static void record_site(size_t n) {
    void *fr[DEPTH + 2];
    int k = backtrace(fr, DEPTH + 2);
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
    }
    int s = 0;
    for (; s < n_sites; s++)
        if (!memcmp(sites[s].frames, fr + 2, sizeof(void *) * (k - 2 < DEPTH ? k - 2 : DEPTH))) break;
    if (s == n_sites && n_sites < N_SITES) {
        memset(&sites[s], 0, sizeof sites[s]);
        memcpy(sites[s].frames, fr + 2, sizeof(void *) * (k - 2 < DEPTH ? k - 2 : DEPTH));
        n_sites++;
    }
    if (s < N_SITES) sites[s].calls++, sites[s].bytes += (long)n;
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

/* An allocation of n bytes asked for by code at ra. */
static void count(const void *ra, size_t n) {
    if (!counting || inside) return;
    inside = 1;
    if ((const char *)ra >= &__executable_start && (const char *)ra < &etext) __atomic_add_fetch(&n_ours, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&n_all, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bytes_all, (long)n, __ATOMIC_RELAXED);
    if (sites_on) record_site(n);
    inside = 0;
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

/* ---- the run ---- */

typedef struct {
    long ours[STEPS + 1], all[STEPS + 1], bytes[STEPS + 1]; /* [s]: step s's (1-based) */
    long prims[STEPS + 1];                                   /* oneDNN primitives made */
} StepCounts;

/* Each step's allocations: the counters read and reset at every step's event. */
static void on_event(const TrainEvent *e, void *ctx) {
    StepCounts *sc = ctx;
    if (e->kind != TRAIN_EVENT_STEP || e->step < 1 || e->step > STEPS) return;
    sc->prims[e->step] = gemm_stats().primitives_made;
    gemm_stats_reset();
#if COUNTING
    counting = 0;
    sc->ours[e->step] = n_ours, sc->all[e->step] = n_all, sc->bytes[e->step] = bytes_all;
    n_ours = n_all = bytes_all = 0;
    sites_on = e->step >= WARM && getenv("GRPO_ALLOC_SITES") != NULL;
    counting = e->step < STEPS; /* not the final save after the last step */
#endif
}

typedef struct {
    const char *name;
    double beta;
    int num_iterations, is_correction, bf16;
} Mode;

static void print_sites(const char *name) {
#if COUNTING
    if (!n_sites) return;
    fprintf(stderr, "%s: call sites of steps %d..%d (calls, bytes, frames from the caller of malloc):\n", name,
            WARM + 1, STEPS);
    for (int s = 0; s < n_sites; s++) {
        fprintf(stderr, "  %6ld %10ld", sites[s].calls, sites[s].bytes);
        for (int d = 0; d < DEPTH; d++) { /* object+offset: addr2line -f -e object offset */
            Dl_info info;
            if (sites[s].frames[d] && dladdr(sites[s].frames[d], &info) && info.dli_fname) {
                const char *base = strrchr(info.dli_fname, '/');
                fprintf(stderr, " %s+%#lx", base ? base + 1 : info.dli_fname,
                        (unsigned long)((char *)sites[s].frames[d] - (char *)info.dli_fbase));
            } else {
                fprintf(stderr, " %p", sites[s].frames[d]);
            }
        }
        fprintf(stderr, "\n");
    }
    n_sites = 0;
#endif
}

static void run_mode(const Mode *m, const char *model, const char *data, const char *out) {
    static const char *funcs[] = {"length:6"};
    TrainConfig c;
    train_config_default(&c);
    c.train.model_dir = model;
    c.train.dataset = data;
    c.train.output_dir = out;
    c.rewards.funcs = (StrList){1, funcs};
    c.num_generations = 16;
    c.gen.max_completion_length = 24;
    c.train.per_device_train_batch_size = 4;
    c.train.gradient_accumulation_steps = 4;
    c.train.learning_rate = 1e-4;
    c.train.max_steps = STEPS;
    c.train.logging_steps = 1;
    c.train.save_steps = 0;
    c.train.quiet = 0; /* the step events come to on_event, which prints nothing */
    c.train.seed = 7;
    c.train.bf16 = m->bf16;
    c.loss.beta = m->beta;
    c.num_iterations = m->num_iterations;
    c.loss.is_correction = m->is_correction;
    int n_gen = c.train.per_device_train_batch_size * c.train.gradient_accumulation_steps; /* per round */
    StepCounts sc = {0};
    GrpoErr err;
    fs_rm_rf(out);
    gemm_stats_reset();
#if COUNTING
    n_ours = n_all = bytes_all = 0;
    counting = 1;
#endif
    int rc = trainer_run(&c, &(TrainHooks){on_event, &sc, NULL}, &err);
#if COUNTING
    counting = 0, sites_on = 0;
#endif
    T_CHECK(rc == 0, "%s: %s", m->name, err.msg);
    char line[400] = "";
    long worst = 0, worst_all = 0;
    for (int s = 1; s <= STEPS; s++) {
        snprintf(line + strlen(line), sizeof line - strlen(line), " %ld/%ld/%ldk", sc.ours[s], sc.all[s],
                 sc.bytes[s] >> 10);
        if (s > WARM) worst = sc.ours[s] > worst ? sc.ours[s] : worst;
        /* where products keep a primitive per shape, each one made costs its own allocations */
        long all = sc.all[s] - (onednn_families() ? 0 : PER_PRIMITIVE * sc.prims[s]);
        if (s > WARM) worst_all = all > worst_all ? all : worst_all;
    }
    printf("%s: allocations per step (grpo.c's / all / all's bytes):%s\n", m->name, line);
    long prims = 0;
    char pline[200] = ""; /* line stays the allocations', for the messages below */
    for (int s = 1; s <= STEPS; s++) {
        snprintf(pline + strlen(pline), sizeof pline - strlen(pline), " %ld", sc.prims[s]);
        if (s > WARM) prims += sc.prims[s];
    }
    printf("%s: oneDNN primitives made per step:%s\n", m->name, pline);
    if (onednn_families())
        T_CHECK(prims == 0, "%s: %ld oneDNN primitives made in steps %d..%d, want none (per step:%s)", m->name, prims,
                WARM + 1, STEPS, pline);
    if (!COUNTING) return;
    long bound = (long)PER_COMPLETION * n_gen + FIXED;
    int failed = t_failures;
    T_CHECK(worst <= bound, "%s: grpo.c allocated %ld times in a steady step, bound %ld (%d per completion of %d, "
            "+ %d) (per step, grpo.c's / all / bytes:%s)", m->name, worst, bound, PER_COMPLETION, n_gen, FIXED, line);
    T_CHECK(worst_all <= ALL_BOUND, "%s: %ld allocations in a steady step with the libraries'%s, bound %d (per step, "
            "grpo.c's / all / bytes:%s; primitives made:%s)", m->name, worst_all,
            onednn_families() ? "" : " net of the primitives made", (int)ALL_BOUND, line, pline);
    if (t_failures > failed || getenv("GRPO_ALLOC_SITES")) print_sites(m->name);
}

int main(void) {
    char root[] = "/tmp/grpo_step_alloc_XXXXXX";
    T_CHECK(mkdtemp(root) != NULL, "mkdtemp");
    char *model = fs_join(root, "model"), *data = fs_join(root, "data.jsonl"), *out = fs_join(root, "out");
    tiny_model_save(model);
    FILE *f = fopen(data, "w");
    fputs("{\"prompt\": \"ab\"}\n{\"prompt\": \"hello\"}\n{\"prompt\": \"xyz\"}\n{\"prompt\": \"four\"}\n", f);
    fclose(f);
    if (!COUNTING) fprintf(stderr, "test_step_alloc: under AddressSanitizer the allocations are not counted\n");
    static const Mode modes[] = {
        {"defaults (beta 0, one iteration)", 0.0, 1, 0, 0},
        {"beta 0.04, num_iterations 2 (old and reference log-probs)", 0.04, 2, 0, 0},
        {"sampler correction, bf16", 0.0, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) run_mode(&modes[i], model, data, out);
    fs_rm_rf(root);
    free(model), free(data), free(out);
    return t_summary("test_step_alloc");
}
