/* tests/gpu/test_gpu_head.c — the LM head's GPU kernels (gpu/ops.h: embedding,
 * log-prob chunks, sampler) against the CPU's ops on random inputs: on the GPU where
 * gpu_open finds one, on the tests' emulated GPU otherwise (GRPO_REQUIRE_GPU=1, as
 * tools/gpu-check.sh runs it: no GPU is a failure).
 *
 * What each must meet, |gpu - cpu| <= atol + rtol |cpu|:
 * - kmath.h on the host: exp_neg_cpu is ops/vec.h's vec_exp_neg bit for bit;
 *   exp_f64 and log_f64 within 4 ulp of glibc's (they are not its bits);
 * - embedding forward (fp32, bf16) and backward: the CPU's bits (copies; the same
 *   sums in the same order);
 * - log-prob chunk forward: lse, logprob 1e-6 + 1e-6 relative, entropy 1e-6 + 1e-5
 *   (the CPU's exponentials, double sums in another order); backward through the
 *   head (dh = dz W, dW = dz^T h by the CPU's GEMM on the GPU's dz) 1e-6 + 1e-5 of
 *   the largest |cpu| (sums of terms that cancel), with dentropy 1e-5 + 1e-4; all
 *   also against a double reference (dz: 1e-7 + 1e-5 of the largest);
 * - sampler: the CPU's token for every row and draw, for every option set of the
 *   CPU's sampler tests; the pick's log-prob 1e-6 + 1e-6 relative; a row's pick the
 *   same launched alone; a vocabulary of 2^24 refused with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "gen/sampler.h"
#include "gpu/kernels/kmath.h"
#include "gpu/ops.h"
#include "ops/gemm.h"
#include "ops/ops.h"
#include "ops/vec.h"
#define GPU_TEST_SEED 29
#include "gpu_test.h"

static int irand(int n) { return (int)((frand() + 1.0f) * 0.5f * n) % n; }

static CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, bytes, &err), "%s", err.msg);
    return p;
}

/* got against want: within atol + rtol |want| (scale_rel: rtol of the largest |want|
 * instead), and how many differ in their bits. */
static void compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol,
                    int scale_rel) {
    double worst = 0, big = 0;
    long bits = 0, outside = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]), tol = atol + rtol * (scale_rel ? big : fabs(want[i]));
        outside += isnan(got[i]) != isnan(want[i]) || e > tol;
        worst = fmax(worst, e);
        bits += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
    printf("  %-40s max |gpu - cpu| %.3g, %ld of %zu differ in bits\n", what, worst, bits, n);
    T_CHECK(outside == 0, "%s: %ld of %zu outside %g + %g |cpu| (max error %.3g)", what, outside, n, atol, rtol, worst);
}

static void compare_bits(const char *what, const float *got, const float *want, size_t n) {
    long diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    printf("  %-40s %ld of %zu differ from the CPU's bits\n", what, diff, n);
    T_CHECK(diff == 0, "%s: %ld of %zu values differ from the CPU's bits", what, diff, n);
}

/* ---- kmath.h, its host lowering (the same source as the kernels') ---- */

static double ulps(double got, double want) {
    if (got == want) return 0;
    return fabs(got - want) / fmax(nextafter(fabs(want), INFINITY) - fabs(want), 4.9e-324);
}

static void check_kmath(void) {
    long exp_diff = 0;
    for (int i = 0; i < 400000; i++) { /* [-100, 0] and the edges */
        float x = i < 4 ? (float[]){-87.0f, -87.00001f, 0.0f, -0.0f}[i] : -100.0f * (frand() + 1.0f) * 0.5f;
        float a = exp_neg_cpu(x), b = vec_exp_neg(x);
        exp_diff += memcmp(&a, &b, sizeof a) != 0;
    }
    printf("  %-40s %ld of 400000 differ from vec_exp_neg\n", "exp_neg_cpu", exp_diff);
    T_CHECK(exp_diff == 0, "exp_neg_cpu: %ld values differ from vec_exp_neg's bits", exp_diff);
    double worst_exp = 0, worst_log = 0;
    for (int i = 0; i < 200000; i++) {
        double x = i % 2 ? 1400.0 * frand() : 40.0 * frand(), y = exp2(1000.0 * frand()) * (1.0 + frand() * 0.5);
        if (i == 0) x = -745.0, y = 4.9e-322; /* near the subnormal edges */
        worst_exp = fmax(worst_exp, ulps(exp_f64(x), exp(x)));
        worst_log = fmax(worst_log, ulps(log_f64(y), log(y)));
    }
    printf("  %-40s exp %.2f ulp, log %.2f ulp of glibc's at worst\n", "exp_f64, log_f64", worst_exp, worst_log);
    T_CHECK(worst_exp <= 4 && worst_log <= 4, "exp_f64 %.2f ulp, log_f64 %.2f ulp from glibc's (4 allowed)", worst_exp,
            worst_log);
    T_CHECK(log_f64(0) == -INFINITY && isnan(log_f64(-1)) && exp_f64(-800) == 0 && exp_f64(800) == INFINITY,
            "exp_f64/log_f64 at their edges");
}

/* ---- embedding ---- */

static void check_embedding(void) {
    enum { N = 45, C = 300, V = 23 };
    int32_t ids[N];
    for (int n = 0; n < N; n++) ids[n] = irand(V); /* repeated ids: their rows' sums in order */
    float *table = randoms((size_t)V * C, 1.0f), *out = malloc(sizeof(float) * N * C);
    float *g_out = malloc(sizeof(float) * N * C);
    uint16_t *t16 = malloc(sizeof(uint16_t) * V * C);
    for (int i = 0; i < V * C; i++) t16[i] = f32_to_bf16(table[i]);
    CUdeviceptr d_ids = upload(ids, sizeof ids), d_table = upload(table, sizeof(float) * V * C),
                d_t16 = upload(t16, sizeof(uint16_t) * V * C), d_out = alloc(sizeof(float) * N * C);
    embedding_forward(out, ids, table, N, C);
    T_CHECK(!gpu_embedding_forward(&dev, d_out, d_ids, d_table, N, C, &err), "%s", err.msg);
    download(g_out, d_out, sizeof(float) * N * C);
    compare_bits("embedding forward (fp32)", g_out, out, (size_t)N * C);
    embedding_forward_bf16(out, ids, t16, N, C);
    T_CHECK(!gpu_embedding_forward_bf16(&dev, d_out, d_ids, d_t16, N, C, &err), "%s", err.msg);
    download(g_out, d_out, sizeof(float) * N * C);
    compare_bits("embedding forward (bf16 table)", g_out, out, (size_t)N * C);
    /* backward: summed into a random table, twice */
    float *dout = randoms((size_t)N * C, 1.0f), *dtable = randoms((size_t)V * C, 0.1f);
    float *g_dtable = malloc(sizeof(float) * V * C);
    CUdeviceptr d_dout = upload(dout, sizeof(float) * N * C), d_dtable = upload(dtable, sizeof(float) * V * C);
    for (int pass = 0; pass < 2; pass++) {
        embedding_backward(dtable, dout, ids, N, C);
        T_CHECK(!gpu_embedding_backward(&dev, d_dtable, d_dout, d_ids, N, C, &err), "%s", err.msg);
    }
    download(g_dtable, d_dtable, sizeof(float) * V * C);
    compare_bits("embedding backward (+= twice)", g_dtable, dtable, (size_t)V * C);
    gpu_free(&dev, d_ids), gpu_free(&dev, d_table), gpu_free(&dev, d_t16), gpu_free(&dev, d_out);
    gpu_free(&dev, d_dout), gpu_free(&dev, d_dtable);
    free(table), free(out), free(g_out), free(t16), free(dout), free(dtable), free(g_dtable);
}

/* ---- the log-prob chunk ---- */

/* The chunk's statistics and dz in double from the same float logits: the
 * definitions of ops/ops.h, a reference independent of the CPU's op. */
static void chunk_reference(float *lse, float *lp, float *ent, float *dz, const float *z, const int32_t *targets,
                            const float *dlp, const float *dent, int m, int V, float inv_temp) {
    for (int i = 0; i < m; i++) {
        const float *zi = z + (size_t)i * V;
        double mx = -INFINITY, sum = 0, pz = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, zi[v]);
        for (int v = 0; v < V; v++) sum += exp(zi[v] - mx), pz += exp(zi[v] - mx) * zi[v];
        double l = mx + log(sum), H = l - pz / sum;
        int t = targets[i];
        lse[i] = t < 0 ? 0 : (float)l, lp[i] = t < 0 ? 0 : (float)(zi[t] - l), ent[i] = t < 0 ? 0 : (float)H;
        for (int v = 0; v < V; v++) {
            double lpv = zi[v] - l, p = exp(lpv), de = dent ? dent[i] : 0;
            double d = (dlp[i] * ((v == t) - p) - de * p * (lpv + H)) * inv_temp;
            dz[(size_t)i * V + v] = t < 0 ? 0 : (float)d;
        }
    }
}

/* m rows of hidden states h[m, C] through a head W[V, C] at temperature 1/inv_temp:
 * the GPU's chunk kernels on the chunk's logits against the double reference and
 * against the CPU's logprob_forward and logprob_backward, one chunk of every row: dh
 * and dW by the CPU's GEMMs on the GPU's dz. */
static void check_logprob(int m, int V, float inv_temp, int with_entropy_grad) {
    enum { C = 8 };
    char what[96];
    char *tag = what + snprintf(what, sizeof what, "logprob chunk %dx%d%s: ", m, V, with_entropy_grad ? " +H" : "");
    size_t tag_room = sizeof what - (size_t)(tag - what);
    float *h = randoms((size_t)m * C, 2.0f), *W = randoms((size_t)V * C, 1.0f);
    int32_t *targets = malloc(sizeof(int32_t) * m);
    for (int i = 0; i < m; i++) targets[i] = i == 1 && m > 8 ? -1 : irand(V); /* a row without a target */
    float *r_lp = malloc(sizeof(float) * m), *r_ent = malloc(sizeof(float) * m), *r_lse = malloc(sizeof(float) * m);
    float *g_lp = malloc(sizeof(float) * m), *g_ent = malloc(sizeof(float) * m), *g_lse = malloc(sizeof(float) * m);
    float *dlp = randoms(m, 1.0f), *dent = randoms(m, 0.5f), *logits = malloc(sizeof(float) * m * V);
    float *r_dz = malloc(sizeof(float) * m * V);
    gemm_f32(0, 1, m, V, C, inv_temp, h, C, W, C, 0.0f, logits, V); /* as logprob_forward's chunk */
    chunk_reference(r_lse, r_lp, r_ent, r_dz, logits, targets, dlp, with_entropy_grad ? dent : NULL, m, V, inv_temp);
    CUdeviceptr d_logits = upload(logits, sizeof(float) * m * V), d_t = upload(targets, sizeof(int32_t) * m),
                d_lp = alloc(sizeof(float) * m), d_ent = alloc(sizeof(float) * m), d_lse = alloc(sizeof(float) * m);
    T_CHECK(!gpu_logprob_chunk_forward(&dev, d_lp, d_ent, d_lse, d_logits, d_t, m, V, &err), "%s", err.msg);
    download(g_lp, d_lp, sizeof(float) * m);
    download(g_ent, d_ent, sizeof(float) * m);
    download(g_lse, d_lse, sizeof(float) * m);
    CUdeviceptr d_dlp = upload(dlp, sizeof(float) * m);
    CUdeviceptr d_dent = with_entropy_grad ? upload(dent, sizeof(float) * m) : 0;
    T_CHECK(!gpu_logprob_chunk_backward(&dev, d_logits, d_dlp, d_dent, d_lse, d_t, m, V, inv_temp, &err), "%s",
            err.msg);
    download(logits, d_logits, sizeof(float) * m * V); /* now dz */
    snprintf(tag, tag_room, "lse vs double");
    compare(what, g_lse, r_lse, m, 1e-6, 1e-6, 0);
    snprintf(tag, tag_room, "logprob vs double");
    compare(what, g_lp, r_lp, m, 1e-6, 1e-6, 0);
    snprintf(tag, tag_room, "entropy vs double");
    compare(what, g_ent, r_ent, m, 1e-6, 1e-5, 0);
    snprintf(tag, tag_room, "dz vs double");
    compare(what, logits, r_dz, (size_t)m * V, 1e-7, 1e-5, 1);
    float *lp = malloc(sizeof(float) * m), *ent = malloc(sizeof(float) * m), *lse = malloc(sizeof(float) * m);
    LogprobScratch s;
    float *base = malloc(sizeof(float) * logprob_scratch_floats(m, C, V, 0));
    logprob_scratch_init(&s, base, m, C, V, 0);
    WeightMatrix Wm = {.w = W};
    logprob_forward(lp, ent, lse, NULL, h, Wm, targets, m, C, V, inv_temp, &s);
    snprintf(tag, tag_room, "lse");
    compare(what, g_lse, lse, m, 1e-6, 1e-6, 0);
    snprintf(tag, tag_room, "logprob");
    compare(what, g_lp, lp, m, 1e-6, 1e-6, 0);
    snprintf(tag, tag_room, "entropy");
    compare(what, g_ent, ent, m, 1e-6, 1e-5, 0);
    float *dh = calloc((size_t)m * C, sizeof(float)), *dW = malloc(sizeof(float) * V * C);
    float *g_dh = malloc(sizeof(float) * m * C), *g_dW = malloc(sizeof(float) * V * C);
    logprob_backward(dh, dW, dlp, with_entropy_grad ? dent : NULL, h, Wm, targets, lse, m, C, V, inv_temp, &s, 1);
    gemm_f32(0, 0, m, C, V, 1.0f, logits, V, W, C, 0.0f, g_dh, C);
    gemm_f32(1, 0, V, C, m, 1.0f, logits, V, h, C, 0.0f, g_dW, C);
    double rtol = with_entropy_grad ? 1e-4 : 1e-5, atol = with_entropy_grad ? 1e-5 : 1e-6;
    snprintf(tag, tag_room, "backward dh");
    compare(what, g_dh, dh, (size_t)m * C, atol, rtol, 1);
    snprintf(tag, tag_room, "backward dW");
    compare(what, g_dW, dW, (size_t)V * C, atol, rtol, 1);
    free(lp), free(ent), free(lse), free(base), free(dh), free(dW), free(g_dh), free(g_dW);
    gpu_free(&dev, d_logits), gpu_free(&dev, d_t), gpu_free(&dev, d_lp), gpu_free(&dev, d_ent), gpu_free(&dev, d_lse);
    gpu_free(&dev, d_dlp), gpu_free(&dev, d_dent);
    free(h), free(W), free(targets), free(r_lp), free(r_ent), free(r_lse), free(g_lp), free(g_ent), free(g_lse);
    free(dlp), free(dent), free(logits), free(r_dz);
}

/* ---- the sampler ---- */

typedef struct {
    float temperature;
    int top_k;
    float top_p, min_p, rep;
} OptSet;

/* The option sets of tests/gen/test_sampler.c. */
static const OptSet sets[] = {
    {1.0f, 0, 1.0f, 0, 1.0f},   {0.7f, 0, 1.0f, 0, 1.0f},   {0.01f, 0, 1.0f, 0, 1.0f},  {1.3f, 3, 1.0f, 0, 1.0f},
    {1.0f, 2, 1.0f, 0, 1.0f},   {1.0f, 6, 1.0f, 0, 1.0f},   {0.9f, 0, 0.8f, 0, 1.0f},   {1.0f, 0, 0.9f, 0, 1.0f},
    {1.0f, 0, 0.5f, 0, 1.0f},   {1.0f, 0, 0.01f, 0, 1.0f},  {1.0f, 0, 1.0f, 0.05f, 1.0f}, {1.0f, 0, 1.0f, 0.1f, 1.0f},
    {1.0f, 0, 1.0f, 0.2f, 1.0f}, {1.0f, 0, 1.0f, 0, 1.3f},  {1.0f, 0, 1.0f, 0, 2.0f},   {0.5f, 0, 0.8f, 0, 2.0f},
    {0, 0, 1.0f, 0, 1.0f},      {0, 0, 1.0f, 0, 2.0f},      {0, 3, 1.0f, 0, 1.0f},      {0.8f, 50, 0.95f, 0.02f, 1.1f},
};

typedef struct {
    int m, V, n_ctx_total;
    float *logits;
    uint64_t *seeds, *streams;
    int32_t *ctx_first, *ctx_len, *ctx;
    CUdeviceptr d_logits, d_scratch, d_tok, d_logp, d_seed, d_stream, d_draw, d_first, d_len, d_ctx;
} SampleCase;

/* m rows of logits over V tokens: random, some rows coarse (ties), a token ruled out
 * (-inf); contexts of 0..24 tokens with repeats and ids outside [0, V). */
static void case_make(SampleCase *c, int m, int V) {
    c->m = m, c->V = V;
    c->logits = malloc(sizeof(float) * m * V);
    for (int r = 0; r < m; r++)
        for (int v = 0; v < V; v++) {
            float x = frand() * 4.0f;
            c->logits[(size_t)r * V + v] = r % 3 == 1 ? rintf(x * 2.0f) * 0.5f : x; /* rows of ties */
        }
    c->logits[3] = -INFINITY;
    if (m > 1 && V > 812) /* row 1: the largest value three times, one thread's tokens (256 a block) */
        for (int v = 300; v < V; v += 256) c->logits[V + v] = 10.0f;
    c->seeds = malloc(sizeof(uint64_t) * m), c->streams = malloc(sizeof(uint64_t) * m);
    c->ctx_first = malloc(sizeof(int32_t) * m), c->ctx_len = malloc(sizeof(int32_t) * m);
    c->ctx = malloc(sizeof(int32_t) * m * 25);
    int at = 0;
    for (int r = 0; r < m; r++) {
        c->seeds[r] = 1000 + r % 4, c->streams[r] = rng_mix(77, (uint64_t)r);
        c->ctx_first[r] = at, c->ctx_len[r] = irand(25);
        for (int i = 0; i < c->ctx_len[r]; i++, at++)
            c->ctx[at] = i % 7 == 6 ? (i % 2 ? -1 : V) : i > 2 && i % 3 == 0 ? c->ctx[at - 2] : irand(V);
    }
    c->n_ctx_total = at;
    c->d_logits = upload(c->logits, sizeof(float) * m * V), c->d_scratch = alloc(sizeof(double) * m * V);
    c->d_tok = alloc(sizeof(int32_t) * m), c->d_logp = alloc(sizeof(float) * m);
    c->d_seed = upload(c->seeds, sizeof(uint64_t) * m), c->d_stream = upload(c->streams, sizeof(uint64_t) * m);
    c->d_draw = alloc(sizeof(uint64_t) * m);
    c->d_first = upload(c->ctx_first, sizeof(int32_t) * m), c->d_len = upload(c->ctx_len, sizeof(int32_t) * m);
    c->d_ctx = upload(c->ctx, sizeof(int32_t) * (at ? at : 1));
}

static void case_free(SampleCase *c) {
    CUdeviceptr p[] = {c->d_logits, c->d_scratch, c->d_tok, c->d_logp, c->d_seed, c->d_stream, c->d_draw, c->d_first,
                       c->d_len, c->d_ctx};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) gpu_free(&dev, p[i]);
    free(c->logits), free(c->seeds), free(c->streams), free(c->ctx_first), free(c->ctx_len), free(c->ctx);
}

/* The CPU's pick for row r at u32 word `draw` of its stream. */
static int32_t cpu_pick(const SampleCase *c, int r, uint64_t draw, const SamplerOpts *o, SamplerScratch *s, float *lp) {
    Rng rng;
    rng_init(&rng, c->seeds[r], c->streams[r]);
    for (uint64_t k = 0; k < draw; k++) rng_u32(&rng);
    double u = rng_uniform_f64(&rng);
    const float *z = c->logits + (size_t)r * c->V;
    return sampler_sample_logp(z, c->V, o, c->ctx + c->ctx_first[r], c->ctx_len[r], u, s, lp);
}

/* Rows [first, first + m) of the case on the GPU: tok, logp. */
static void gpu_picks(SampleCase *c, int first, int m, const uint64_t *draws, const SamplerOpts *o, int sequential,
                      int32_t *tok, float *logp) {
    size_t V = (size_t)c->V;
    GpuSampleRows rows = {c->d_seed + 8 * first, c->d_stream + 8 * first, c->d_draw, c->d_first + 4 * first,
                          c->d_len + 4 * first, c->d_ctx};
    T_CHECK(!gpu_put(&dev, c->d_draw, draws, sizeof(uint64_t) * m, &err), "%s", err.msg);
    T_CHECK(!gpu_sampler_sample(&dev, c->d_tok, c->d_logp, c->d_logits + 4 * V * first, c->d_scratch, &rows, m, c->V,
                                o, sequential, &err),
            "%s", err.msg);
    download(tok, c->d_tok, sizeof(int32_t) * m);
    download(logp, c->d_logp, sizeof(float) * m);
}

/* Every option set, `draws` draws a row (words 0, 2, 4, ...: generation's one
 * rng_uniform_f64 a token): the CPU's token for each; the log-prob close. */
static void check_sampler(int m, int V, int set_from, int set_to, int draws, int sequential) {
    SampleCase c;
    case_make(&c, m, V);
    SamplerScratch s;
    sampler_scratch_create(&s, V);
    int32_t *tok = malloc(sizeof(int32_t) * m);
    float *logp = malloc(sizeof(float) * m);
    uint64_t *dw = malloc(sizeof(uint64_t) * m);
    for (int k = set_from; k < set_to; k++) {
        SamplerOpts o = {sets[k].temperature, sets[k].top_k, sets[k].top_p, sets[k].min_p, sets[k].rep};
        long picks = 0, wrong = 0, lp_bits = 0, lp_out = 0;
        double lp_err = 0;
        for (int d = 0; d < draws; d++) {
            for (int r = 0; r < m; r++) dw[r] = 2 * (uint64_t)d + (uint64_t)(r % 3) * 1001; /* draws across blocks */
            gpu_picks(&c, 0, m, dw, &o, sequential, tok, logp);
            for (int r = 0; r < m; r++) {
                float lp;
                int32_t want = cpu_pick(&c, r, dw[r], &o, &s, &lp);
                picks++;
                wrong += tok[r] != want;
                if (tok[r] != want && wrong <= 3)
                    fprintf(stderr, "set %d row %d draw %d: gpu token %d, cpu %d\n", k, r, d, tok[r], want);
                double e = fabs((double)logp[r] - lp);
                lp_err = fmax(lp_err, e);
                lp_out += !(e <= 1e-6 + 1e-6 * fabs(lp));
                lp_bits += memcmp(&logp[r], &lp, sizeof lp) != 0;
            }
        }
        printf("  sampler V %-6d T %-4g k %-2d p %-4g min_p %-4g rep %-3g%s: %ld/%ld tokens the CPU's, logp max err "
               "%.2g (%ld differ in bits)\n",
               V, o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty, sequential ? " (seq)" : "",
               picks - wrong, picks, lp_err, lp_bits);
        T_CHECK(wrong == 0, "sampler set %d (V %d): %ld of %ld picks differ from the CPU's", k, V, wrong, picks);
        T_CHECK(lp_out == 0, "sampler set %d (V %d): %ld log-probs outside 1e-6 + 1e-6 |cpu| (max %.3g)", k, V, lp_out,
                lp_err);
    }
    sampler_scratch_free(&s);
    free(tok), free(logp), free(dw);
    case_free(&c);
}

/* A row launched alone picks what it picks in a batch; a vocabulary the float
 * encoding of token ids cannot hold is refused. */
static void check_sampler_rows(void) {
    enum { M = 9, V = 700 };
    SampleCase c;
    case_make(&c, M, V);
    int32_t tok[M], one;
    float logp[M], one_lp;
    uint64_t dw[M];
    int same = 1;
    static const int some[] = {1, 17, 19}; /* temperature alone; greedy with a penalty; every processor */
    for (int i = 0; i < 3; i++) {
        int k = some[i];
        SamplerOpts o = {sets[k].temperature, sets[k].top_k, sets[k].top_p, sets[k].min_p, sets[k].rep};
        for (int r = 0; r < M; r++) dw[r] = 6;
        gpu_picks(&c, 0, M, dw, &o, 0, tok, logp);
        for (int r = 0; r < M; r += 4) {
            gpu_picks(&c, r, 1, dw, &o, 0, &one, &one_lp);
            same &= one == tok[r] && memcmp(&one_lp, &logp[r], sizeof one_lp) == 0;
        }
    }
    T_CHECK(same, "a row launched alone picks another token (or log-prob) than in its batch");
    /* a row whose every logit is -inf: the CPU's token (0 with temperature alone and
     * greedy, V - 1 through its NaN probabilities otherwise), a NaN log-prob but greedy's */
    for (int v = 0; v < V; v++) c.logits[2 * V + v] = -INFINITY;
    T_CHECK(!gpu_put(&dev, c.d_logits, c.logits, sizeof(float) * M * V, &err), "%s", err.msg);
    SamplerScratch s;
    sampler_scratch_create(&s, V);
    for (int i = 0; i < 3; i++) {
        int k = (int[]){0, 16, 19}[i];
        SamplerOpts o = {sets[k].temperature, sets[k].top_k, sets[k].top_p, sets[k].min_p, sets[k].rep};
        float lp;
        gpu_picks(&c, 2, 1, dw, &o, 0, &one, &one_lp);
        int32_t want = cpu_pick(&c, 2, dw[0], &o, &s, &lp);
        T_CHECK(one == want && (isnan(lp) ? isnan(one_lp) : one_lp == lp),
                "a row of -inf logits, set %d: gpu token %d log-prob %g, cpu %d %g", k, one, one_lp, want, lp);
    }
    sampler_scratch_free(&s);
    SamplerOpts o;
    sampler_opts_default(&o);
    GpuSampleRows rows = {0};
    err.msg[0] = 0;
    T_CHECK(gpu_sampler_sample(&dev, c.d_tok, 0, c.d_logits, c.d_scratch, &rows, 1, 1 << 24, &o, 0, &err) == -1 &&
                strstr(err.msg, "vocabulary of 16777216 tokens"),
            "V = 2^24: refused with a message (got '%s')", err.msg);
    case_free(&c);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d, %d multiprocessors, %.1f GiB\n", dev.name, dev.cc_major, dev.cc_minor, dev.sms,
           dev.total_bytes / 1073741824.0);
    check_embedding();
    check_logprob(24, 1000, 1.0f, 0);
    check_logprob(24, 1000, 1.0f / 0.7f, 1);
    check_logprob(3, 151936, 1.0f, 0);
    check_logprob(2, 151936, 1.0f / 0.9f, 1);
    /* the emulator runs a block's threads one after another: fewer rows there */
    int n_sets = (int)(sizeof sets / sizeof sets[0]), big = strstr(dev.name, "emulator") ? 1 : 4;
    check_sampler(16 * big, 1000, 0, 3, 3 * big, 0); /* temperature alone */
    check_sampler(6 * big, 1000, 3, n_sets, 2 * big, 0);
    check_sampler(8, 1000, 0, 3, 2, 1); /* the CPU's order of sums, forced: the fallback itself */
    check_sampler(3 * big, 151936, 0, 3, 2, 0);
    check_sampler(2 * big, 151936, n_sets - 1, n_sets, 1, 0);
    check_sampler_rows();
    gpu_close(&dev);
}

int main(void) {
    check_kmath();
    return gpu_test_main("test_gpu_head", check_all);
}
