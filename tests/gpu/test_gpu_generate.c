/* tests/gpu/test_gpu_generate.c — the whole model's decoding step on the GPU
 * (gpu/generate.h) against the CPU's model_decode of the same model (model/kvcache.h)
 * under bf16 products, on the GPU where there is one and on the tests' emulated GPU
 * otherwise. A random Qwen2-shaped model of 2 layers (C 64, 4 heads over 2 KV heads
 * of 16, F 64, V 97, q/k/v biases, random norms), in three forms: mixed precision
 * with a tied head, mixed precision with its own lm_head, WEIGHTS_BF16 (one bf16
 * table for the embedding and the head). Five slots of 16 positions: a prompt of 3
 * tokens in slot 0 and one of 2 in slot 4 prefilled in one step of 5 rows; slots 1-3
 * continue slot 0 (shared prefix); then 3 steps of one token for slots 1-4, each
 * token the GPU sampler's pick (temperature 0.9 alone: the processor for which the
 * GPU's sampler picks the CPU's token always) from the step before's logits, the
 * first step's from the prompts' last rows (slot 0's for slots 1-3). And Qwen3's form
 * of the shape (q/k norm with random q_norm and k_norm, no q/k/v biases), mixed
 * precision with a tied head. Sizes small:
 * every emulated thread is a coroutine (about a minute here, most of it the row-wise
 * products' 256-thread blocks).
 *
 * Checks:
 * - logits against model_decode's, every step: |gpu - cpu| <= 1e-2 max|cpu| +
 *   1e-2 |cpu| per value and 1e-3 max|cpu| on average. The GPU runs the CPU's
 *   operands and rounding points but its sums in other orders (test_gpu_decode_layer's
 *   reasons): most logits differ by an ulp or not at all (here 1.4e-7 max|cpu| at
 *   most), but an fp32 ulp that moves an activation across a bf16 boundary moves the
 *   next product by 2^-8 of that operand, and on through the layers and the head:
 *   seen 5.4e-4 max|cpu| in a step of the tied form with other tokens (the first
 *   step's fixed), 3.8e-3 in a 5-step run of a V 301 model;
 * - the GPU sampler's token and log-prob = sampler_sample_logp's on the GPU's logits
 *   downloaded (token equal, log-prob within 1e-6 + 1e-6 relative), Philox stream the
 *   slot's, draw 2 words a step; a pick from a row the step did not have refused;
 * - rows alone = rows in the batch, bit for bit (tied, WEIGHTS_BF16 and Qwen3 forms): the
 *   same steps with every row a call of its own (the prompts a token a call), and
 *   with each step's rows in another order (slot 4's prompt before slot 0's), give
 *   the batch's logits bits;
 * - bad input, one line each: a step past max_rows, a slot outside the cache, a
 *   token past the vocabulary, a full slot (and the refused step changes nothing), a
 *   parent that has a parent;
 * - a step the driver fails part-way (the device's cuLaunchKernel made to refuse its
 *   first, middle or last launch of the step, or the rows' copy refused): -1 with the
 *   driver's error, the slots' lengths and parents as before, no logits to sample;
 *   the same step then run again gives the logits bits of a run that never failed. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "gpu/generate.h"
#include "model/init.h"
#include "model/kvcache.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 35
#include "gpu_test.h"
#include "gpu_test_model.h"

enum { C = 64, H = 4, HKV = 2, D = 16, F = 64, V = 97, L = 2, SLOTS = 5, CAP = 16, STEPS = 3, MAXR = 8 };
enum { P0 = 3, P4 = 2, NPRE = P0 + P4, NDEC = 4 };
static const uint64_t SAMPLE_SEED = 4242;

static const GpuTestShape shape = {C, H, HKV, D, F, V, L};

/* One run of the script: step 0 the prompts' rows, steps 1..STEPS a row for each of
 * slots 1-4. Rows are numbered in the batch's order (the step's rows as `slots`
 * lists them): logits[k][row] for step k. */
typedef struct {
    int n[STEPS + 1], slots[STEPS + 1][MAXR];
    int32_t tok[STEPS + 1][MAXR];
} Script;

static const int dec_slots[NDEC] = {1, 2, 3, 4};

/* The prompts and the decoding steps' slots; their tokens are the sampler's. */
static void script_prompts(Script *s) {
    s->n[0] = NPRE;
    for (int i = 0; i < P0; i++) s->slots[0][i] = 0, s->tok[0][i] = (int32_t)((37 * i + 5) % V);
    for (int i = 0; i < P4; i++) s->slots[0][P0 + i] = 4, s->tok[0][P0 + i] = (int32_t)((53 * i + 11) % V);
    for (int k = 1; k <= STEPS; k++) {
        s->n[k] = NDEC;
        for (int r = 0; r < NDEC; r++) s->slots[k][r] = dec_slots[r];
    }
}

/* The CPU's pick for slot `slot` from step k's logits z (step k + 1's token). */
static int32_t cpu_pick(const float *z, int slot, int k, const SamplerOpts *o, SamplerScratch *ss, float *lp) {
    Rng rng;
    rng_init(&rng, SAMPLE_SEED, (uint64_t)slot);
    for (int w = 0; w < 2 * k; w++) rng_u32(&rng);
    return sampler_sample_logp(z, V, o, NULL, 0, rng_uniform_f64(&rng), ss, lp);
}

/* The sampler's rows for the decoding slots at step k on the device (no context: no
 * repetition penalty). */
typedef struct {
    CUdeviceptr seed, stream, draw, zeros, ctx;
} SampleDev;

static GpuSampleRows sample_rows(SampleDev *sd, int k) {
    uint64_t seeds[NDEC], streams[NDEC], draws[NDEC];
    int32_t zeros[NDEC] = {0};
    for (int r = 0; r < NDEC; r++) seeds[r] = SAMPLE_SEED, streams[r] = (uint64_t)dec_slots[r], draws[r] = 2 * k;
    sd->seed = upload(seeds, sizeof seeds), sd->stream = upload(streams, sizeof streams);
    sd->draw = upload(draws, sizeof draws), sd->zeros = upload(zeros, sizeof zeros), sd->ctx = upload(zeros, 4);
    GpuSampleRows rows = {sd->seed, sd->stream, sd->draw, sd->zeros, sd->zeros, sd->ctx};
    return rows;
}

static void sample_free(SampleDev *sd) {
    CUdeviceptr all[] = {sd->seed, sd->stream, sd->draw, sd->zeros, sd->ctx};
    for (int i = 0; i < 5; i++) gpu_free(&dev, all[i]);
}

/* The GPU's sampler on step k's logits (the batch run's) against the CPU's on the same
 * logits downloaded: the next step's tokens into the script. After the prompts
 * (k 0), slots 1-3 pick from slot 0's last row, slot 4 from its own prompt's. */
static void sample_step(GpuGen *gen, Script *s, int k, const float *logits, long *same, double *lp_err) {
    static const int after_prompts[NDEC] = {P0 - 1, P0 - 1, P0 - 1, NPRE - 1};
    const int *from = k == 0 ? after_prompts : NULL;
    SamplerOpts o = {0.9f, 0, 1.0f, 0.0f, 1.0f};
    SamplerScratch ss;
    sampler_scratch_create(&ss, V);
    SampleDev sd;
    GpuSampleRows rows = sample_rows(&sd, k);
    int32_t tok[NDEC];
    float lp[NDEC];
    T_CHECK(!gpu_gen_sample(&dev, gen, NDEC, from, &rows, &o, tok, lp, &err), "%s", err.msg);
    for (int r = 0; r < NDEC; r++) {
        float clp;
        int32_t want = cpu_pick(logits + (size_t)(from ? from[r] : r) * V, dec_slots[r], k, &o, &ss, &clp);
        *same += tok[r] == want;
        *lp_err = fmax(*lp_err, fabs((double)lp[r] - clp));
        T_CHECK(tok[r] == want && fabs((double)lp[r] - clp) <= 1e-6 + 1e-6 * fabs(clp),
                "step %d slot %d: the GPU sampler picks %d (log-prob %.9g), the CPU %d (%.9g)", k, dec_slots[r],
                tok[r], lp[r], want, clp);
        if (k < STEPS) s->tok[k + 1][r] = tok[r];
    }
    sample_free(&sd);
    sampler_scratch_free(&ss);
}

/* The script on the GPU, each step in calls of `split` rows (0: the step whole),
 * with reverse the last-listed slot's rows first: logits[k][row, V] in the
 * script's row order. With sample, step k's picks become step k + 1's tokens. */
static void gpu_run(const GpuModel *g, Script *s, int split, int reverse, float *logits[], int sample, long *same,
                    double *lp_err) {
    GpuGen gen;
    T_CHECK(!gpu_gen_create(&dev, &gen, g, SLOTS, CAP, MAXR, &err), "%s", err.msg);
    for (int k = 0; k <= STEPS; k++) {
        int n = s->n[k], order[MAXR];
        /* another order: the last slot's rows first, a slot's rows kept in order */
        for (int r = 0; r < n; r++) order[r] = r;
        if (reverse) {
            int at = 0;
            for (int r = 0; r < n; r++)
                if (s->slots[k][r] == s->slots[k][n - 1]) order[at++] = r;
            for (int r = 0; r < n; r++)
                if (s->slots[k][r] != s->slots[k][n - 1]) order[at++] = r;
        }
        for (int r0 = 0; r0 < n;) {
            int m = split ? split : n, sl[MAXR];
            int32_t tk[MAXR];
            if (r0 + m > n) m = n - r0;
            for (int i = 0; i < m; i++) sl[i] = s->slots[k][order[r0 + i]], tk[i] = s->tok[k][order[r0 + i]];
            T_CHECK(!gpu_gen_step(&dev, &gen, m, sl, tk, &err), "%s", err.msg);
            float out[MAXR * V];
            download(out, gen.logits, sizeof(float) * m * V);
            for (int i = 0; i < m; i++) memcpy(logits[k] + (size_t)order[r0 + i] * V, out + (size_t)i * V, 4 * V);
            r0 += m;
        }
        if (k == 0)
            for (int sl = 1; sl <= 3; sl++) T_CHECK(!gpu_gen_share_prefix(&gen, sl, 0, &err), "%s", err.msg);
        if (sample) sample_step(&gen, s, k, logits[k], same, lp_err);
    }
    gpu_gen_free(&dev, &gen);
}

/* The script on the CPU: model_decode's logits of every step. */
static void cpu_run(Model *m, const Script *s, float *logits[]) {
    KVCache c;
    DecodeState ds;
    kv_cache_create(&c, &m->cfg, SLOTS, CAP);
    decode_state_create(&ds, &m->cfg, MAXR, CAP);
    for (int k = 0; k <= STEPS; k++) {
        model_decode(m, &c, &ds, s->n[k], s->slots[k], s->tok[k], NULL, logits[k]);
        if (k == 0)
            for (int sl = 1; sl <= 3; sl++) kv_cache_share_prefix(&c, sl, 0);
    }
    decode_state_free(&ds);
    kv_cache_free(&c);
}

static float **logits_alloc(void) {
    float **l = malloc(sizeof(float *) * (STEPS + 1));
    for (int k = 0; k <= STEPS; k++) l[k] = malloc(sizeof(float) * MAXR * V);
    return l;
}

static void logits_free(float **l) {
    for (int k = 0; k <= STEPS; k++) free(l[k]);
    free(l);
}

/* got against want, every step: 1e-2 max|want| + 1e-2 |want| per value, and on
 * average 1e-3 max|want|. */
static void compare(const char *name, const Script *s, float **got, float **want) {
    double worst = 0, top = 0, sum = 0;
    long bad = 0, same = 0, n = 0;
    for (int k = 0; k <= STEPS; k++)
        for (int i = 0; i < s->n[k] * V; i++) top = fmax(top, fabs(want[k][i]));
    for (int k = 0; k <= STEPS; k++)
        for (int i = 0; i < s->n[k] * V; i++, n++) {
            double e = isnan(got[k][i]) ? INFINITY : fabs((double)got[k][i] - want[k][i]);
            bad += !(e <= 1e-2 * top + 1e-2 * fabs(want[k][i]));
            worst = fmax(worst, e), sum += e, same += !memcmp(&got[k][i], &want[k][i], 4);
        }
    printf("  %s: logits |gpu - cpu| max %.3g (%.3g max|cpu|) mean %.3g (%.3g max|cpu|); %ld of %ld bit for bit\n",
           name, worst, worst / top, sum / n, sum / n / top, same, n);
    T_CHECK(bad == 0, "%s: %ld of %ld logits outside 1e-2 max|cpu| + 1e-2 |cpu| (worst %.3g, max|cpu| %.3g)", name,
            bad, n, worst, top);
    T_CHECK(sum / n <= 1e-3 * top, "%s: logits |gpu - cpu| %.3g on average, over 1e-3 max|cpu| (%.3g)", name, sum / n,
            top);
}

static void check_bits(const char *name, const char *how, const Script *s, float **got, float **want) {
    int same = 1;
    for (int k = 0; k <= STEPS; k++) same &= !memcmp(got[k], want[k], sizeof(float) * s->n[k] * V);
    printf("  %s: %-44s %s\n", name, how, same ? "the batch's bits" : "OTHER BITS");
    T_CHECK(same, "%s: %s: not the bits of the steps whole", name, how);
}

/* One model form: the GPU's steps (sampling) against the CPU's, then (invariance)
 * in calls of one row and in another order against the GPU's first run. */
static void check_form(const char *name, Model *m, int invariance) {
    GpuModel g;
    T_CHECK(!gpu_model_upload(&dev, &g, m, &err), "%s: %s", name, err.msg);
    Script s;
    script_prompts(&s);
    float **batch = logits_alloc(), **cpu = logits_alloc(), **other = logits_alloc();
    long same = 0;
    double lp_err = 0;
    gpu_run(&g, &s, 0, 0, batch, 1, &same, &lp_err);
    printf("  %s: sampler %ld of %d tokens the CPU's, log-prob max err %.3g\n", name, same, (STEPS + 1) * NDEC,
           lp_err);
    cpu_run(m, &s, cpu);
    compare(name, &s, batch, cpu);
    if (invariance) {
        gpu_run(&g, &s, 1, 0, other, 0, NULL, NULL);
        check_bits(name, "every row a call of its own", &s, other, batch);
        gpu_run(&g, &s, 0, 1, other, 0, NULL, NULL);
        check_bits(name, "each step's rows in another order", &s, other, batch);
    }
    logits_free(batch), logits_free(cpu), logits_free(other);
    gpu_model_free(&dev, &g);
}

/* What a step refuses, one line each; a refused step changes nothing. */
static void check_refused(Model *m) {
    GpuModel g;
    GpuGen gen;
    T_CHECK(!gpu_model_upload(&dev, &g, m, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_create(&dev, &gen, &g, 2, 3, 4, &err), "%s", err.msg);
    int sl[5] = {0, 0, 0, 1, 1};
    int32_t tk[5] = {1, 2, 3, 4, 5};
    struct { int n, at, slot; int32_t tok; const char *want; } bad[] = {
        {5, 0, 0, 1, "a step of 5 rows (expected 1 .. 4)"},
        {2, 1, 2, 1, "row 1's slot 2 (expected 0 .. 1)"},
        {2, 1, 0, V, "row 1's token id 97 is outside the vocabulary of 97"},
        {4, 3, 0, 1, "slot 0 is full (3 positions: the step adds 4 to its 0)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int s2[5];
        int32_t t2[5];
        memcpy(s2, sl, sizeof sl), memcpy(t2, tk, sizeof tk);
        s2[bad[i].at] = bad[i].slot, t2[bad[i].at] = bad[i].tok;
        T_CHECK(gpu_gen_step(&dev, &gen, bad[i].n, s2, t2, &err) == -1 && strstr(err.msg, bad[i].want),
                "not refused with \"%s\" (%s)", bad[i].want, err.msg);
        printf("  refused: %s\n", err.msg);
    }
    T_CHECK(gen.len[0] == 0 && gen.len[1] == 0, "a refused step grew the slots (%d, %d)", gen.len[0], gen.len[1]);
    T_CHECK(!gpu_gen_step(&dev, &gen, 3, sl, tk, &err), "%s", err.msg);
    SamplerOpts o = {1.0f, 0, 1.0f, 0.0f, 1.0f};
    GpuSampleRows none = {0, 0, 0, 0, 0, 0};
    int32_t pick;
    const int from[1] = {3};
    T_CHECK(gpu_gen_sample(&dev, &gen, 1, from, &none, &o, &pick, NULL, &err) == -1 &&
                strstr(err.msg, "pick 0 from row 3 of the last step's logits (expected 0 .. 2)"),
            "a pick from a row the step did not have was not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    T_CHECK(gpu_gen_step(&dev, &gen, 1, sl, tk, &err) == -1 && strstr(err.msg, "slot 0 is full"),
            "a step past a slot's capacity was not refused (%s)", err.msg);
    T_CHECK(!gpu_gen_share_prefix(&gen, 1, 0, &err), "%s", err.msg);
    T_CHECK(gpu_gen_share_prefix(&gen, 0, 1, &err) == -1 && strstr(err.msg, "which continues slot 0"),
            "a parent with a parent was not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    gpu_gen_free(&dev, &gen);
    gpu_model_free(&dev, &g);
}

/* ---- a step the driver fails part-way ---- */

enum { LAUNCH_FAILED = 719 }; /* NVIDIA's CUDA_ERROR_LAUNCH_FAILED */
static CudaApi real_api;      /* the device's driver, which the wrappers below call */
static int launches, fail_launch, fail_copy;

/* cuLaunchKernel, refusing the fail_launch-th call (counted from 1; 0: none). */
static CUresult failing_launch(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream stream, void **params, void **extra) {
    if (++launches == fail_launch) return LAUNCH_FAILED;
    return real_api.LaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

/* cuMemcpyHtoD, refusing every call while fail_copy. */
static CUresult failing_copy(CUdeviceptr dst, const void *src, size_t bytes) {
    return fail_copy ? LAUNCH_FAILED : real_api.MemcpyHtoD(dst, src, bytes);
}

/* Steps 1 (a prompt of 2 in slot 0, one of 1 in slot 1) and 2 (a token each) on a
 * fresh generator; step 2's logits into z (NULL: not kept). Returns step 2's
 * launches. */
static const int fail_slots[2][3] = {{0, 0, 1}, {0, 1}};
static const int32_t fail_tok[2][3] = {{7, 8, 9}, {10, 11}};
static int two_steps(const GpuModel *g, float *z) {
    GpuGen gen;
    T_CHECK(!gpu_gen_create(&dev, &gen, g, 2, 8, 4, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_step(&dev, &gen, 3, fail_slots[0], fail_tok[0], &err), "%s", err.msg);
    launches = 0;
    T_CHECK(!gpu_gen_step(&dev, &gen, 2, fail_slots[1], fail_tok[1], &err), "%s", err.msg);
    int n = launches;
    if (z) download(z, gen.logits, sizeof(float) * 2 * V);
    gpu_gen_free(&dev, &gen);
    return n;
}

/* Step 2 failed at each point, then run again: the bookkeeping unchanged by the
 * failures, and the logits a run without them gives. */
static void check_failed_step(Model *m) {
    GpuModel g;
    T_CHECK(!gpu_model_upload(&dev, &g, m, &err), "%s", err.msg);
    real_api = dev.api;
    dev.api.LaunchKernel = failing_launch, dev.api.MemcpyHtoD = failing_copy;
    float want[2 * V], got[2 * V];
    int K = two_steps(&g, want);
    GpuGen gen;
    T_CHECK(!gpu_gen_create(&dev, &gen, &g, 2, 8, 4, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_step(&dev, &gen, 3, fail_slots[0], fail_tok[0], &err), "%s", err.msg);
    const int at[4] = {1, K / 2, K, 0}; /* 0: the rows' copy refused */
    for (int i = 0; i < 4; i++) {
        launches = 0, fail_launch = at[i], fail_copy = at[i] == 0;
        int rc = gpu_gen_step(&dev, &gen, 2, fail_slots[1], fail_tok[1], &err);
        fail_launch = 0, fail_copy = 0;
        T_CHECK(rc == -1, "a step whose %s was refused succeeded", at[i] ? "launch" : "copy");
        T_CHECK(gen.len[0] == 2 && gen.len[1] == 1 && gen.parent[0] == -1 && gen.parent[1] == -1,
                "a failed step changed the bookkeeping: lengths %d, %d, parents %d, %d", gen.len[0], gen.len[1],
                gen.parent[0], gen.parent[1]);
        T_CHECK(gen.last_n == 0, "a failed step left %d rows of logits to sample", gen.last_n);
        if (at[i]) printf("  step failed at launch %d of %d: %s; lengths %d, %d\n", at[i], K, err.msg, gen.len[0],
                          gen.len[1]);
        else printf("  step failed at the rows' copy: %s; lengths %d, %d\n", err.msg, gen.len[0], gen.len[1]);
    }
    T_CHECK(!gpu_gen_step(&dev, &gen, 2, fail_slots[1], fail_tok[1], &err), "%s", err.msg);
    download(got, gen.logits, sizeof got);
    T_CHECK(gen.len[0] == 3 && gen.len[1] == 2, "after the step: lengths %d, %d (expected 3, 2)", gen.len[0],
            gen.len[1]);
    int same = !memcmp(got, want, sizeof got);
    printf("  the step run again after 4 failures: %s\n", same ? "the logits bits of a run without them" : "OTHER BITS");
    T_CHECK(same, "the step run again after failures: not the logits of a run without");
    dev.api = real_api;
    gpu_gen_free(&dev, &gen);
    gpu_model_free(&dev, &g);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    Model tied, untied, half, qwen3;
    gpu_test_random_model(&tied, &shape, 1, 24);
    gpu_test_random_model(&untied, &shape, 0, 23);
    gpu_test_half_model(&half, &tied, &shape);
    gpu_test_qwen3_model(&qwen3, &shape, 1, 25);
    model_use_bf16_compute(&tied);
    model_use_bf16_compute(&untied);
    model_use_bf16_compute(&qwen3);
    check_form("mixed, tied head", &tied, 1);
    check_form("mixed, own lm_head", &untied, 0);
    check_form("WEIGHTS_BF16", &half, 1);
    check_form("Qwen3, mixed, tied head", &qwen3, 1);
    check_refused(&tied);
    check_failed_step(&tied);
    model_free(&tied), model_free(&untied), model_free(&half), model_free(&qwen3);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_generate", check_all);
}
