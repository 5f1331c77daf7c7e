/* bench/bench_model.c — speed of the core model on the Qwen2-0.5B shape (hidden 896,
 * 24 layers, 14 heads, 2 KV heads, intermediate 4864, vocab 151936, tied; random
 * weights), against this machine's own peers measured in the same run:
 *   - the GFLOP/s of gemm_f32, and of gemm_bf16 where the CPU has a bf16 matmul, on a
 *     training-shaped product                                   (peers for training)
 *   - memcpy bandwidth                                          (peer for decoding)
 * and reports forward+backward tokens/s and GFLOP/s for 4 x 192 tokens (the fastest of
 * --iters passes after a warm-up, as the PyTorch peer times its own), decode
 * tokens/s for 8 and 32 sequences (from the fp32 weights, then from the bf16 copy that
 * --bf16 generation reads), and peak RSS. The training pass runs twice: in
 * fp32, then in mixed precision (model_use_bf16_compute, the --bf16 of train/sft), each with
 * where its time went (gemm_stats). Then one training step (forward,
 * backward, clipping, AdamW) of full fine-tuning against the same with LoRA adapters
 * (r 16, all linear layers, dropout 0.05; the base frozen), and decode with them.
 *   build/bench/bench_model [--layers L] [--iters N] [--train_only 1] [--bf16_only 1]
 *                           [--gemm openblas|onednn] [--logprob_chunk_rows R]
 *   (fewer layers, or the training lines alone, for a quick look — the bf16 pass
 *   alone with --bf16_only, as bench/run.sh's alternating rounds against PyTorch
 *   take it; gemm_f32's backend instead of the automatic choice) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/timer.h"
#include "model/init.h"
#include "model/lora_layers.h"
#include "optim/optim.h"
#include "model/kvcache.h"
#include "ops/gemm.h"

#include "qwen2_shape.h"

/* The rate of gemm_f32 (bf16 = 0) or of gemm_bf16 on bf16 operands (bf16 = 1) on the
 * 768x4864x896 product of the training pass, over 2 s. */
static double gemm_gflops(int bf16) {
    int M = 768, N = 4864, K = 896;
    float *A = xaligned(sizeof(float) * M * K), *B = xaligned(sizeof(float) * N * K),
          *C = xaligned(sizeof(float) * M * N);
    for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)N * K; i++) B[i] = (float)(i % 5) * 0.1f;
    uint16_t *A16 = xaligned(sizeof(uint16_t) * M * K), *B16 = xaligned(sizeof(uint16_t) * N * K);
    f32_to_bf16_n(A16, A, (size_t)M * K);
    f32_to_bf16_n(B16, B, (size_t)N * K);
    double t0 = 0;
    int reps = -1; /* the first run is a warm-up */
    do {
        if (reps == 0) t0 = time_now_s();
        if (bf16)
            gemm_bf16(0, 1, M, N, K, 1, (GemmBf16Operand){.h = A16, .ld = K}, (GemmBf16Operand){.h = B16, .ld = K}, 0,
                      C, N);
        else
            gemm_f32(0, 1, M, N, K, 1, A, K, B, K, 0, C, N);
        reps++;
    } while (reps <= 0 || time_now_s() - t0 < 2.0);
    double dt = time_now_s() - t0;
    free(A), free(B), free(C), free(A16), free(B16);
    return 2.0 * M * N * K * reps / dt / 1e9;
}

static double copy_gbps(void) {
    size_t n = (size_t)512 << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double t0 = time_now_s();
    int reps = 0;
    size_t sum = 0;
    while (time_now_s() - t0 < 1.5) {
        /* all threads, as decoding uses them */
#pragma omp parallel for schedule(static)
        for (int c = 0; c < 64; c++) memcpy(b + c * (n / 64), a + c * (n / 64), n / 64);
        __asm__ volatile("" ::: "memory");
        sum += (size_t)b[(size_t)reps * 4099 % n];
        reps++;
    }
    double dt = time_now_s() - t0;
    if (sum == 42) printf(" ");
    free(a), free(b);
    return 2.0 * n * reps / dt / 1e9; /* read + write */
}

static double peak_rss_gb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1048576.0;
}

/* The benchmark's objective: mean log-prob of every target, a token-local gradient
 * (as the trainers' losses): the LM head's backward runs alongside its forward. */
static void mean_grad(void *ctx, const int *rows, int m, const float *logp, float *dlogp) {
    for (int i = 0; i < m; i++) dlogp[i] = 1.0f / *(const int *)ctx;
}

/* Forward, log-probs and backward of a micro-batch of B x T tokens into grads
 * (keys: the adapters' dropout keys, or NULL). */
static void fwd_bwd(Model *m, Activations *a, const ModelGrads *grads, const int32_t *ids, const uint8_t *mask,
                    const int32_t *tg, float *lp, int B, int T, const uint64_t *keys) {
    int N = B * T;
    model_forward(m, a, ids, mask, B, T, &(ModelPass){.backward = 1, .drop_keys = keys});
    model_logprobs_train(m, a, tg, 1.0f, lp, NULL, grads, &(LogprobGrad){.fn = mean_grad, .ctx = &N});
    model_backward(m, a, grads, NULL, NULL);
}

/* One optimizer step on 4 x 192 tokens: forward, log-probs, backward, gradient
 * clipping and AdamW over what is trained (every weight, or the adapters); the
 * mean seconds of iters steps after a warm-up. */
static double train_step_s(Model *m, int iters, const int32_t *ids, const uint8_t *mask, const int32_t *tg,
                           float *lp) {
    int B = 4, T = 192, N = B * T;
    LoraLayers *lo = m->lora;
    const ParamTable *tab = lo ? &lo->table : &m->table;
    float *params = lo ? lo->params : m->params;
    Activations a;
    acts_create(&a, &m->cfg, N, 0, 256, 0); /* logprob_chunk_rows: its default */
    if (lo) acts_reserve_lora(&a, &m->cfg, lo);
    uint64_t keys[4] = {1, 2, 3, 4};
    float *g = xaligned(sizeof(float) * tab->total);
    ModelView gv;
    if (!lo) params_view(&gv, tab, &m->cfg, g);
    GradState gs;
    grad_state_create(&gs, tab, g);
    ModelGrads grads = {lo ? NULL : &gv, lo ? g : NULL, lo ? NULL : &gs, lo ? &gs : NULL};
    AdamW opt;
    AdamWConfig ac;
    adamw_config_default(&ac);
    adamw_init(&opt, tab->total);
    double t0 = 0;
    for (int it = 0; it <= iters; it++) {
        if (it == 1) t0 = time_now_s();
        grad_state_begin(&gs); /* as train/model.c: each gradient written by the first backward to reach it */
        fwd_bwd(m, &a, &grads, ids, mask, tg, lp, B, T, keys);
        grad_clip_norm(g, tab->total, 1.0);
        adamw_step(&opt, params, g, NULL, 1e-7, &ac);
    }
    double dt = (time_now_s() - t0) / iters;
    adamw_free(&opt);
    grad_state_free(&gs);
    if (!lo) params_view_free(&gv);
    free(g);
    acts_free(&a);
    return dt;
}

/* Decode seconds per step of G sequences after a 64-token prompt (see main). */
static double decode_step_s(Model *m, int G, const int32_t *ids);

/* The fastest of iters passes after a warm-up, as the PyTorch peer (bench/torch_model.py)
 * times its own: this machine's neighbours move single passes by 10-30 %. Its seconds,
 * and its products' in *g (gemm_stats). Each pass is a step's first (grads->base_state begun:
 * the gradients written, not summed into), as the peer resets .grad before each. */
static double best_pass_s(Model *m, Activations *a, const ModelGrads *grads, const int32_t *ids, const uint8_t *mask,
                          const int32_t *tg, float *lp, int iters, GemmStats *g) {
    int B = 4, T = 192;
    grad_state_begin(grads->base_state);
    fwd_bwd(m, a, grads, ids, mask, tg, lp, B, T, NULL); /* warm-up */
    double best = 1e30;
    for (int it = 0; it < iters; it++) {
        gemm_stats_reset();
        grad_state_begin(grads->base_state);
        double t0 = time_now_s();
        fwd_bwd(m, a, grads, ids, mask, tg, lp, B, T, NULL);
        double dt = time_now_s() - t0;
        if (dt < best) best = dt, *g = gemm_stats();
    }
    return best;
}

/* Where a pass's time went: its products (gemm_stats g) and the rest. */
static void products_line(double dt, GemmStats g) {
    double s = g.seconds, a = g.batch_seconds;
    printf("  products %.3f s/step (%.0f%%) at %.1f GFLOP/s, of which attention's %.3f s at %.1f GFLOP/s (%s); "
           "the rest %.3f s (%.0f%%)\n",
           s, 100 * s / dt, g.gflop / g.seconds, a, g.batch_seconds > 0 ? g.batch_gflop / g.batch_seconds : 0.0,
           g.batch_openblas == 0                ? "batched on oneDNN"
           : g.batch_openblas == g.batch_calls ? "per head on OpenBLAS: oneDNN has only reference code for them"
                                                : "partly per head on OpenBLAS",
           dt - s, 100 * (dt - s) / dt);
}

int main(int argc, char **argv) {
    int layers = 24, iters = 2, train_only = 0, bf16_only = 0, chunk_rows = 256; /* --logprob_chunk_rows, its default */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--train_only")) train_only = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--bf16_only")) bf16_only = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--logprob_chunk_rows")) chunk_rows = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--gemm")) {
            if (strcmp(argv[i + 1], "onednn") && strcmp(argv[i + 1], "openblas")) {
                fprintf(stderr, "bench_model: --gemm must be openblas or onednn (got %s)\n", argv[i + 1]);
                return 2;
            }
            gemm_f32_use(!strcmp(argv[i + 1], "onednn") ? GEMM_F32_ONEDNN : GEMM_F32_OPENBLAS);
        }
    }
    int train = iters > 0;
    double gf_peer = gemm_gflops(0), gf16 = gemm_bf16_native() ? gemm_gflops(1) : 0;
    double bw = copy_gbps();
    printf("limits: fp32 GEMM %.1f GFLOP/s (gemm_f32 on %s, 768x4864x896)", gf_peer, gemm_f32_backend_name());
    if (gf16 > 0) printf(", bf16 GEMM %.1f GFLOP/s (%s)", gf16, gemm_bf16_backend_name());
    printf(", memcpy %.1f GB/s (read+write)\n", bw);

    ModelConfig cfg = qwen2_05b(layers);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 1, 0.02f);
    long long P = config_param_count(&m.cfg);
    printf("model: Qwen2-0.5B shape, %d layers, %.1f M parameters, fp32, products on %s\n", layers, P / 1e6,
           gemm_f32_backend_name());

    /* ---- training: forward + backward, 4 x 192 tokens, every position a target ---- */
    int B = 4, T = 192, N = B * T;
    Activations a;
    acts_create(&a, &m.cfg, N, 0, chunk_rows > 0 ? chunk_rows : 64, 0);
    int32_t *ids = malloc(sizeof(int32_t) * N), *tg = malloc(sizeof(int32_t) * N);
    uint8_t *mask = malloc(N);
    float *lp = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) ids[i] = (i * 7919) % m.cfg.vocab_size, tg[i] = (i * 104729) % m.cfg.vocab_size, mask[i] = 1;
    float *gbuf = xaligned(sizeof(float) * m.table.total);
    memset(gbuf, 0, sizeof(float) * m.table.total);
    ModelView gv;
    params_view(&gv, &m.table, &m.cfg, gbuf);
    GradState gs;
    grad_state_create(&gs, &m.table, gbuf);
    ModelGrads full = {&gv, NULL, &gs, NULL};
    GemmStats g32 = {0}, g16 = {0};
    int train32 = train && !bf16_only;
    double dt = train32 ? best_pass_s(&m, &a, &full, ids, mask, tg, lp, iters, &g32) : 0;
    /* model FLOPs: 6 per parameter per token for every GEMM (LM head included), plus
     * causal attention's score and value products (2 * 2 * T^2/2 * D * H fwd, x3 with bwd) */
    double C = m.cfg.hidden_size, Pl = P - C * m.cfg.vocab_size; /* non-embedding */
    double flops = 6.0 * N * (Pl + C * m.cfg.vocab_size) +
                   3.0 * 2.0 * B * (double)T * T * m.cfg.head_dim * m.cfg.n_heads * layers;
    if (train32) {
        printf("train fwd+bwd 4x192: %.3f s/step, %.0f tokens/s, %.1f GFLOP/s = %.0f%% of the fp32 GEMM\n", dt, N / dt,
               flops / dt / 1e9, 100.0 * flops / dt / 1e9 / gf_peer);
        products_line(dt, g32);
    }
    if (train) { /* mixed precision (--bf16): the same pass with its products on gemm_bf16 */
        model_use_bf16_compute(&m);
        size_t bytes32 = a.bytes;
        acts_free(&a); /* the trainers' activations under mixed precision: the products' inputs in bf16 */
        acts_create(&a, &m.cfg, N, 0, chunk_rows > 0 ? chunk_rows : 64, 1);
        printf("activations %.2f GB in fp32, %.2f GB with bf16 inputs (no checkpointing)\n", bytes32 / 1e9, a.bytes / 1e9);
        memset(gbuf, 0, sizeof(float) * m.table.total);
        double dt16 = best_pass_s(&m, &a, &full, ids, mask, tg, lp, iters, &g16);
        printf("train bf16 fwd+bwd 4x192: %.3f s/step, %.0f tokens/s", dt16, N / dt16);
        if (dt > 0) printf(", %.2fx fp32", dt / dt16);
        printf(" (products on %s)", gemm_bf16_backend_name());
        if (gf16 > 0)
            printf("; %.1f GFLOP/s = %.0f%% of the bf16 GEMM", flops / dt16 / 1e9, 100.0 * flops / dt16 / 1e9 / gf16);
        printf("\n");
        products_line(dt16, g16);
    }
    printf("activations %.2f GB (no checkpointing)\n", a.bytes / 1e9);
    acts_free(&a);
    grad_state_free(&gs);
    params_view_free(&gv);
    free(gbuf);
    if (train_only) {
        free(ids), free(tg), free(mask), free(lp);
        model_free(&m);
        return 0;
    }

    /* ---- decode: G sequences sharing a 64-token prompt, reading the fp32 weights, then
     * the bf16 copy (what --bf16 generation reads: half the bytes) ---- */
    int prompt = 64, steps = 32;
    for (int gi = 0; gi < 4; gi++) {
        int G = gi % 2 == 0 ? 8 : 32, half = gi >= 2;
        if (half) {
            if (!m.mixed) model_use_bf16_compute(&m);
        } else {
            model_use_fp32_compute(&m);
        }
        double wbytes = (half ? 2.0 : 4.0) * (Pl + C * m.cfg.vocab_size);
        KVCache kv;
        DecodeState ds;
        kv_cache_create(&kv, &m.cfg, G + 1, prompt + steps + 8);
        decode_state_create(&ds, &m.cfg, prompt > G ? prompt : G, prompt + steps + 8);
        float *logits = xaligned(sizeof(float) * (size_t)G * m.cfg.vocab_size);
        int slots[64];
        int32_t toks[64];
        uint8_t want[64] = {0};
        for (int t = 0; t < prompt; t++) slots[t] = 0, toks[t] = ids[t];
        want[prompt - 1] = 1;
        model_decode(&m, &kv, &ds, prompt, slots, toks, want, logits);
        for (int g = 0; g < G; g++) kv_cache_share_prefix(&kv, g + 1, 0), slots[g] = g + 1;
        for (int g = 0; g < G; g++) toks[g] = ids[g + 100];
        model_decode(&m, &kv, &ds, G, slots, toks, NULL, logits); /* warm-up */
        double s0 = time_now_s();
        for (int s = 1; s < steps; s++) model_decode(&m, &kv, &ds, G, slots, toks, NULL, logits);
        double per = (time_now_s() - s0) / (steps - 1);
        double bound = wbytes / (bw / 2 * 1e9); /* weights read once per step at copy (read) rate */
        double dflops = 2.0 * G * (Pl + C * m.cfg.vocab_size);
        printf("decode G=%d%s: %.0f tokens/s, %.1f ms/step, %.1f GFLOP/s = %.0f%% of the fp32 GEMM; bandwidth bound %.1f ms/step -> %.0f%% of bound\n",
               G, half ? ", bf16 weights" : "", G / per, per * 1e3, dflops / per / 1e9,
               100.0 * dflops / per / 1e9 / gf_peer, bound * 1e3, 100.0 * bound / per);
        free(logits);
        kv_cache_free(&kv);
        decode_state_free(&ds);
    }
    model_use_fp32_compute(&m); /* LoRA below: fp32 weights */
    /* ---- LoRA: the training step and decode, against full fine-tuning in this run ---- */
    {
        LoraSpec spec = {16, 32, 0.05, 0, (1u << LORA_N_MODULES) - 1};
        LoraLayers lo;
        lora_layers_create(&lo, &m.cfg, &spec, 1);
        lora_init_peft(&lo, 1);
        for (size_t i = 0; i < lo.table.total; i++) lo.params[i] += 1e-3f; /* B != 0 */
        /* alternated, best of two each: this machine's neighbours move single runs by 10-20 % */
        double full = 1e30, lora = 1e30;
        for (int rep = 0; train && rep < 2; rep++) {
            m.lora = NULL;
            full = fmin(full, train_step_s(&m, iters, ids, mask, tg, lp));
            m.lora = &lo;
            lora = fmin(lora, train_step_s(&m, iters, ids, mask, tg, lp));
        }
        m.lora = &lo;
        if (train)
            printf("train step (fwd+bwd+clip+AdamW) 4x192: full %.3f s, LoRA r16 all-linear %.3f s -> LoRA %.2fx faster "
                   "(target >= 1.4x)\n", full, lora, full / lora);
        /* alternated, best of two each: decode G=8 is bandwidth-bound and noisy */
        double d8 = 1e30, d32 = 1e30, b8 = 1e30, b32 = 1e30;
        for (int rep = 0; rep < 2; rep++) {
            m.lora = NULL;
            b8 = fmin(b8, decode_step_s(&m, 8, ids)), b32 = fmin(b32, decode_step_s(&m, 32, ids));
            m.lora = &lo;
            d8 = fmin(d8, decode_step_s(&m, 8, ids)), d32 = fmin(d32, decode_step_s(&m, 32, ids));
        }
        m.lora = NULL;
        printf("decode with LoRA adapters: G=8 %.1f ms/step (%.0f%% of the plain model's), G=32 %.1f ms/step (%.0f%%)\n",
               d8 * 1e3, 100 * b8 / d8, d32 * 1e3, 100 * b32 / d32);
        lora_layers_free(&lo);
    }
    printf("peak RSS %.2f GB\n", peak_rss_gb());
    free(ids), free(tg), free(mask), free(lp);
    model_free(&m);
    return 0;
}

static double decode_step_s(Model *m, int G, const int32_t *ids) {
    int prompt = 64, steps = 16;
    KVCache kv;
    DecodeState ds;
    kv_cache_create(&kv, &m->cfg, G + 1, prompt + steps + 8);
    decode_state_create(&ds, &m->cfg, prompt > G ? prompt : G, prompt + steps + 8);
    float *logits = xaligned(sizeof(float) * (size_t)(G > 1 ? G : 1) * m->cfg.vocab_size);
    int slots[64];
    int32_t toks[64];
    uint8_t want[64] = {0};
    for (int t = 0; t < prompt; t++) slots[t] = 0, toks[t] = ids[t];
    want[prompt - 1] = 1;
    model_decode(m, &kv, &ds, prompt, slots, toks, want, logits);
    for (int g = 0; g < G; g++) kv_cache_share_prefix(&kv, g + 1, 0), slots[g] = g + 1, toks[g] = ids[g + 100];
    model_decode(m, &kv, &ds, G, slots, toks, NULL, logits);
    double s0 = time_now_s();
    for (int s = 1; s < steps; s++) model_decode(m, &kv, &ds, G, slots, toks, NULL, logits);
    double per = (time_now_s() - s0) / (steps - 1);
    free(logits);
    kv_cache_free(&kv);
    decode_state_free(&ds);
    return per;
}
