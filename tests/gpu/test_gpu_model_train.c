/* tests/gpu/test_gpu_model_train.c — the whole model's training pass on the GPU
 * (gpu/model_train.h) against the CPU's under mixed precision with bf16 activations
 * (model_forward_packed, model_logprobs, model_backward with ModelGrads over a buffer
 * with a GradState), on the GPU where there is one and on the tests' emulated GPU
 * and cuBLASLt otherwise. Two small random Qwen2 models (2 layers, C 64, 2 heads
 * over 1 KV head of 32, F 128, V 96, q/k/v biases, random norms and biases): tied
 * head and untied; and a Qwen3-shaped one, tied (the same sizes, q/k norm with random
 * q_norm and k_norm, no q/k/v biases). One step of two micro-batches, each packed (sequences of 7, 12
 * and 5 tokens; then 9 and 4), targets the next token with a prompt's rows left
 * without one, 1/T = 1/0.7, random dlogprob.
 *
 * Checked: each micro-batch's log-probs and entropies; after the first backward
 * (every gradient written over garbage: the step's state says written) and after
 * the second (added), every tensor of the gradient buffer, compared by the table's
 * entries, so a view at a wrong offset or a tied head's missing share shows. Then
 * one AdamW step on the device (gpu_adamw_step over the flat buffer, the master
 * weights joined to fp32) against the CPU's adamw_step_split over its gradient,
 * each tensor's update (see check_adamw for its epsilon). Then settle after a fresh
 * begin with no backward zeroes every tensor, and the CSR form over a packed
 * PaddedBatch gives the per-row form's log-probs and gradients bit for bit.
 *
 * Tolerance, per tensor: |gpu - cpu| <= 2e-2 max|cpu| + 1e-2 |cpu| each and
 * ||gpu - cpu|| <= 1e-2 ||cpu|| (test_gpu_layer_train's: the same bf16 rounding
 * points, other sum orders, so a value one ulp off may round to the neighbouring
 * bf16 value and carry it on); the figures seen are printed: here (emulated) the
 * log-probs within 1e-7 max|cpu|, the gradients within 3.4e-3 max|cpu| per element
 * and 1.7e-3 in norm, AdamW's updates within 5.6e-3 and 2.5e-3. Bad input: a backward
 * before any forward, a token outside the vocabulary, max_tokens 0, each refused
 * with one line. */
#include <stdlib.h>
#include <string.h>

#include "gpu/model_train.h"
#include "model/batch.h"
#include "model/grads.h"
#include "model/init.h"
#include "gpu/ops.h"
#include "machine/gpu_emulator_blas.h"
#include "optim/optim.h"
#include "ops/ops.h"
#include "ops/token_objective.h"
#define GPU_TEST_SEED 35
#include "gpu_test.h"

enum { L = 2, C = 64, H = 2, HKV = 1, D = 32, F = 128, V = 96, QKV = (H + 2 * HKV) * D, MAXN = 24, CHUNK = 8 };
static const float INV_TEMP = 1.0f / 0.7f;

/* The two micro-batches of the step: sequences packed end to end, the rows before
 * prompt[b] of sequence b without a target (a prompt's), the last row without one. */
typedef struct {
    int B, starts[4], prompt[3];
} Micro;
static const Micro micro[2] = {{3, {0, 7, 19, 24}, {2, 4, 0}}, {2, {0, 9, 13}, {3, 1}}};

#define BF16_ATOL 2e-2
#define BF16_RTOL 1e-2
#define BF16_L2 1e-2

static void compare(const char *what, const float *got, const float *want, size_t n) {
    gpu_test_compare(what, got, want, n, BF16_ATOL, BF16_RTOL, BF16_L2);
}

/* A 2-layer Qwen2 model (Qwen3: q/k norm, no q/k/v biases) of random weights under
 * mixed precision, its norms and biases random too (1 and 0 would hide one read from
 * the wrong place). */
static void make_model(Model *m, int tied, int qwen3) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.type = qwen3 ? MODEL_QWEN3 : MODEL_QWEN2, c.qk_norm = qwen3;
    c.hidden_size = C, c.intermediate_size = F, c.n_layers = L, c.n_heads = H, c.n_kv_heads = HKV;
    c.head_dim = D, c.vocab_size = V, c.max_position_embeddings = 4096, c.rms_norm_eps = 1e-6f;
    c.rope_theta = 1e6, c.qkv_bias = !qwen3, c.tie_word_embeddings = tied, c.bos_token_id = -1, c.n_eos = 0;
    strcpy(c.torch_dtype, "float32");
    model_create(m, &c);
    model_init_random(m, 7 + tied, 0.3f);
    for (int l = 0; l < L; l++) {
        LayerView *v = &m->w.layers[l];
        for (int i = 0; i < C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
        for (int i = 0; v->bqkv && i < QKV; i++) v->bqkv[i] = 0.5f * frand();
        for (int i = 0; v->q_norm && i < D; i++)
            v->q_norm[i] = 1.0f + 0.5f * frand(), v->k_norm[i] = 1.0f + 0.5f * frand();
    }
    for (int i = 0; i < C; i++) m->w.norm[i] = 1.0f + 0.5f * frand();
    model_use_bf16_compute(m);
}

/* Micro-batch k's ids, targets (the next token; -1 in the prompt and on the last
 * row) and dlogprob (random where there is a target, 0 elsewhere). */
static int make_batch(int k, int32_t *ids, int32_t *targets, float *dlogp) {
    const Micro *mb = &micro[k];
    int N = mb->starts[mb->B];
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 11 * k + 5) % V);
    for (int b = 0; b < mb->B; b++)
        for (int n = mb->starts[b]; n < mb->starts[b + 1]; n++) {
            int has = n + 1 < mb->starts[b + 1] && n - mb->starts[b] >= mb->prompt[b];
            targets[n] = has ? ids[n + 1] : -1;
            dlogp[n] = has ? frand() : 0.0f;
        }
    return N;
}

/* The whole gradient buffer against the CPU's, tensor by tensor of the table. */
static void compare_grads(const Model *m, const GpuModelTrain *t, const float *want, const char *when) {
    size_t total = m->table.total;
    float *got = malloc(sizeof(float) * total);
    download(got, t->grads, sizeof(float) * total);
    printf(" %s:\n", when);
    for (int e = 0; e < m->table.n; e++) {
        const ParamEntry *pe = &m->table.entries[e];
        compare(pe->name, got + pe->offset, want + pe->offset, pe->numel);
    }
    free(got);
}

/* Garbage in the whole gradient buffer: a first backward that adds shows. */
static void fill_garbage(const Model *m, const GpuModelTrain *t) {
    float *junk = malloc(sizeof(float) * m->table.total);
    for (size_t i = 0; i < m->table.total; i++) junk[i] = 1e3f;
    T_CHECK(!gpu_put(&dev, t->grads, junk, sizeof(float) * m->table.total, &err), "%s", err.msg);
    free(junk);
}

/* One AdamW step on the device over the step's flat gradient buffer (mixed
 * precision's master weights joined to fp32 there) against the CPU's
 * adamw_step_split over its own gradient: each tensor's update within the bf16
 * bound. eps ten times the largest gradient keeps the first step's update close to
 * linear in the gradient (lr g / (|g| + eps)), so it carries the gradients' bound: at
 * torch's 1e-8 it is lr sign(g), and a gradient near 0 whose sign the two sides'
 * roundings differ on would flip its whole update (seen: 0.6 max|cpu| at eps 1e-3). */
static void check_adamw(const Model *m, const GpuModelTrain *t, const float *want_grads) {
    size_t n = m->table.total;
    AdamWConfig c;
    adamw_config_default(&c);
    double gmax = 0;
    for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(want_grads[i]));
    c.eps = 10 * gmax, c.weight_decay = 0.1;
    const double lr = 1e-3;
    uint16_t *hi = malloc(2 * n), *lo = malloc(2 * n);
    memcpy(hi, m->mixed->hi, 2 * n), memcpy(lo, m->mixed->lo, 2 * n);
    float *p0 = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    f32_join_n(p0, hi, lo, n);
    uint8_t *mask = malloc(n);
    adamw_decay_mask_build(mask, &m->table);
    AdamW opt;
    adamw_init(&opt, n);
    adamw_step_split(&opt, hi, lo, want_grads, mask, lr, &c);
    f32_join_n(want, hi, lo, n);
    AdamWStep s = adamw_step_scalars(1, lr, &c);
    CUdeviceptr dp = upload(p0, sizeof(float) * n), dm, dv, dmask = upload(mask, n);
    T_CHECK(!gpu_alloc(&dev, &dm, sizeof(float) * n, &err) && !gpu_alloc(&dev, &dv, sizeof(float) * n, &err) &&
                !gpu_zero(&dev, dm, sizeof(float) * n, &err) && !gpu_zero(&dev, dv, sizeof(float) * n, &err),
            "%s", err.msg);
    T_CHECK(!gpu_adamw_step(&dev, dp, dm, dv, t->grads, dmask, n, &s, &err), "%s", err.msg);
    download(got, dp, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) got[i] -= p0[i], want[i] -= p0[i];
    printf(" AdamW step 1 over the flat gradient (lr %g, eps %g, weight decay %g), each tensor's update:\n", lr, c.eps,
           c.weight_decay);
    for (int e = 0; e < m->table.n; e++) {
        const ParamEntry *pe = &m->table.entries[e];
        compare(pe->name, got + pe->offset, want + pe->offset, pe->numel);
    }
    gpu_free(&dev, dp), gpu_free(&dev, dm), gpu_free(&dev, dv), gpu_free(&dev, dmask);
    adamw_free(&opt);
    free(hi), free(lo), free(p0), free(want), free(got), free(mask);
}

/* One step of the two micro-batches on both sides, compared after each backward. */
static void check_step(Model *m, const GpuModel *g, GpuModelTrain *t) {
    float *gbuf = calloc(m->table.total, sizeof(float));
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, gbuf);
    GradState st;
    grad_state_create(&st, &m->table, gbuf);
    grad_state_begin(&st);
    ModelGrads mg = {&gv, NULL, &st, NULL};
    Activations a;
    acts_create(&a, &m->cfg, MAXN, CKPT_NONE, CHUNK, 1); /* bf16 activations: train/model.c's for a mixed model */
    fill_garbage(m, t);
    gpu_model_train_begin(t);
    int32_t ids[MAXN], targets[MAXN];
    float dlogp[MAXN], lp[MAXN], ent[MAXN], glp[MAXN], gent[MAXN];
    for (int k = 0; k < 2; k++) {
        int N = make_batch(k, ids, targets, dlogp);
        ModelPass pass = {.backward = 1};
        model_forward_packed(m, &a, ids, micro[k].starts, micro[k].B, &pass);
        model_logprobs(m, &a, targets, INV_TEMP, lp, ent);
        T_CHECK(!gpu_model_train_forward(&dev, g, t, ids, micro[k].starts, micro[k].B, targets, INV_TEMP, glp, gent,
                                         &err),
                "%s", err.msg);
        printf(" micro-batch %d (N %d in %d sequences):\n", k + 1, N, micro[k].B);
        compare("log-probs", glp, lp, (size_t)N);
        compare("entropies", gent, ent, (size_t)N);
        model_backward(m, &a, &mg, dlogp, NULL);
        T_CHECK(!gpu_model_train_backward(&dev, g, t, dlogp, NULL, &err), "%s", err.msg);
        compare_grads(m, t, gbuf, k == 0 ? "backward 1 (written over garbage)" : "backward 2 (added to backward 1's)");
    }
    T_CHECK(!gpu_model_train_settle(&dev, t, &err), "%s", err.msg); /* every tensor reached: changes nothing */
    grad_state_settle(&st);
    check_adamw(m, t, gbuf);
    acts_free(&a);
    grad_state_free(&st);
    params_view_free(&gv);
    free(gbuf);
}

/* The whole gradient buffer after one step of a single backward. */
static float *step_grads(const Model *m, GpuModelTrain *t) {
    float *got = malloc(sizeof(float) * m->table.total);
    T_CHECK(!gpu_model_train_settle(&dev, t, &err), "%s", err.msg);
    download(got, t->grads, sizeof(float) * m->table.total);
    return got;
}

/* The CSR form over a packed PaddedBatch of micro-batch 1 against the per-row form on
 * the same device: the same log-probs in target order and the same gradients, bit for
 * bit (the same launches on the same operands). */
static void check_batch_csr(const Model *m, const GpuModel *g, GpuModelTrain *t) {
    int32_t ids[MAXN], targets[MAXN];
    float dlogp[MAXN], lp[MAXN], ent[MAXN];
    int N = make_batch(0, ids, targets, dlogp);
    const Micro *mb = &micro[0];
    BatchSeq seqs[3];
    for (int b = 0; b < mb->B; b++)
        seqs[b] = (BatchSeq){ids + mb->starts[b], mb->starts[b + 1] - mb->starts[b], NULL, 0, mb->prompt[b] + 1};
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, mb->B, 1);
    T_CHECK(pb.N == N && !memcmp(pb.targets, targets, sizeof(int32_t) * N), "the PaddedBatch's targets differ");
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_forward(&dev, g, t, ids, mb->starts, mb->B, targets, INV_TEMP, lp, ent, &err) &&
                !gpu_model_train_backward(&dev, g, t, dlogp, NULL, &err),
            "%s", err.msg);
    float *want = step_grads(m, t);
    int K = pb.offsets[mb->B];
    float want_lp[MAXN], want_ent[MAXN], got_lp[MAXN], got_ent[MAXN], dcsr[MAXN];
    padded_batch_gather(&pb, lp, want_lp);
    padded_batch_gather(&pb, ent, want_ent);
    padded_batch_gather(&pb, dlogp, dcsr);
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_batch_forward(&dev, g, t, &pb, INV_TEMP, got_lp, got_ent, NULL, &err) &&
                !gpu_model_train_batch_backward(&dev, g, t, &pb, dcsr, NULL, &err),
            "%s", err.msg);
    float *got = step_grads(m, t);
    T_CHECK(!memcmp(got_lp, want_lp, sizeof(float) * K) && !memcmp(got_ent, want_ent, sizeof(float) * K),
            "the CSR log-probs or entropies differ from the per-row ones");
    size_t differ = 0;
    for (size_t i = 0; i < m->table.total; i++) differ += memcmp(&got[i], &want[i], 4) != 0;
    T_CHECK(differ == 0, "the CSR backward's gradients differ from the per-row one's at %zu of %zu", differ,
            m->table.total);
    printf(" CSR over a packed PaddedBatch (%d targets): log-probs, entropies and gradients bit for bit with the "
           "per-row form\n", K);
    T_CHECK(gpu_model_train_batch_backward(&dev, g, t, &(PaddedBatch){.packed = 0}, dcsr, NULL, &err) == -1 &&
                strstr(err.msg, "right-padded"),
            "a right-padded batch was not refused");
    padded_batch_free(&pb);
    free(want), free(got);
}

/* A token-local objective's gradient from each log-prob alone (any row naming). */
static void lp_grad(void *ctx, const int *rows, int m, const float *logprob, float *dlogprob) {
    for (int i = 0; i < m; i++) dlogprob[i] = 0.25f + 0.5f * tanhf(logprob[i]);
}

/* The head's backward in the forward's pass (gpu_model_train_forward_grad, then a backward
 * given nothing) against a forward and a backward given that gradient: one step of both
 * micro-batches (gradients written, then added), log-probs, entropies and every gradient
 * bit for bit; the CSR form (gpu_model_train_batch_forward with grad) the same. On the
 * emulated GPU the products' multiply-adds: R V C fewer a micro-batch (R rows with a
 * target: the logits not recomputed). A backward given a gradient after such a forward,
 * and a second backward, are refused. */
static void check_fused(const Model *m, const GpuModel *g, GpuModelTrain *t) {
    int32_t ids[MAXN], targets[MAXN];
    float dl[MAXN], lp[2][MAXN] = {{0}}, ent[2][MAXN] = {{0}}, flp[2][MAXN] = {{0}}, fent[2][MAXN] = {{0}};
    LogprobGrad grad = {.fn = lp_grad, .ctx = NULL};
    unsigned long long m0 = emulated ? gpu_emulator_blas_multiply_adds() : 0, saved = 0;
    gpu_model_train_begin(t);
    for (int k = 0; k < 2; k++) {
        int N = make_batch(k, ids, targets, dl);
        T_CHECK(!gpu_model_train_forward(&dev, g, t, ids, micro[k].starts, micro[k].B, targets, INV_TEMP, lp[k],
                                         ent[k], &err),
                "%s", err.msg);
        int R = 0;
        for (int n = 0; n < N; n++) {
            dl[n] = 0;
            if (targets[n] >= 0) lp_grad(NULL, &n, 1, &lp[k][n], &dl[n]), R++;
        }
        saved += (unsigned long long)R * V * C;
        T_CHECK(!gpu_model_train_backward(&dev, g, t, dl, NULL, &err), "%s", err.msg);
    }
    float *want = step_grads(m, t);
    unsigned long long m1 = emulated ? gpu_emulator_blas_multiply_adds() : 0;
    gpu_model_train_begin(t);
    for (int k = 0; k < 2; k++) {
        make_batch(k, ids, targets, dl);
        T_CHECK(!gpu_model_train_forward_grad(&dev, g, t, ids, micro[k].starts, micro[k].B, targets, INV_TEMP,
                                              flp[k], fent[k], &grad, &err) &&
                    !gpu_model_train_backward(&dev, g, t, NULL, NULL, &err),
                "%s", err.msg);
    }
    float *got = step_grads(m, t);
    unsigned long long m2 = emulated ? gpu_emulator_blas_multiply_adds() : 0;
    T_CHECK(!memcmp(lp, flp, sizeof lp) && !memcmp(ent, fent, sizeof ent),
            "the fused pass's log-probs or entropies differ from the forward's");
    size_t differ = 0;
    for (size_t i = 0; i < m->table.total; i++) differ += memcmp(&got[i], &want[i], 4) != 0;
    T_CHECK(differ == 0, "the fused pass's gradients differ from forward + backward's at %zu of %zu", differ,
            m->table.total);
    if (emulated) {
        printf(" the head's backward in the forward's pass: products of %llu multiply-adds against %llu (%llu fewer, "
               "want %llu)\n", m2 - m1, m1 - m0, (m1 - m0) - (m2 - m1), saved);
        T_CHECK(m1 - m0 - (m2 - m1) == saved, "multiply-adds saved: %llu, want %llu", (m1 - m0) - (m2 - m1), saved);
    }
    /* the CSR form over micro-batch 1, against the per-row fused pass's first micro-batch */
    make_batch(0, ids, targets, dl);
    BatchSeq seqs[3];
    for (int b = 0; b < micro[0].B; b++)
        seqs[b] = (BatchSeq){ids + micro[0].starts[b], micro[0].starts[b + 1] - micro[0].starts[b], NULL, 0,
                             micro[0].prompt[b] + 1};
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, micro[0].B, 1);
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_forward_grad(&dev, g, t, ids, micro[0].starts, micro[0].B, targets, INV_TEMP, flp[0],
                                          fent[0], &grad, &err) &&
                !gpu_model_train_backward(&dev, g, t, NULL, NULL, &err),
            "%s", err.msg);
    free(want);
    want = step_grads(m, t);
    float csr_lp[MAXN], want_lp[MAXN];
    padded_batch_gather(&pb, flp[0], want_lp);
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_batch_forward(&dev, g, t, &pb, INV_TEMP, csr_lp, NULL, &grad, &err) &&
                !gpu_model_train_batch_backward(&dev, g, t, &pb, NULL, NULL, &err),
            "%s", err.msg);
    free(got);
    got = step_grads(m, t);
    differ = memcmp(csr_lp, want_lp, sizeof(float) * pb.offsets[micro[0].B]) != 0;
    for (size_t i = 0; i < m->table.total; i++) differ += memcmp(&got[i], &want[i], 4) != 0;
    T_CHECK(differ == 0, "the CSR fused pass differs from the per-row one at %zu values", differ);
    /* what such a forward's backward refuses */
    T_CHECK(gpu_model_train_backward(&dev, g, t, NULL, NULL, &err) == -1 && strstr(err.msg, "without dlogprob"),
            "a second backward after the fused one was not refused (%s)", err.msg);
    T_CHECK(!gpu_model_train_forward_grad(&dev, g, t, ids, micro[0].starts, micro[0].B, targets, INV_TEMP, flp[0],
                                          NULL, &grad, &err),
            "%s", err.msg);
    T_CHECK(gpu_model_train_backward(&dev, g, t, dl, NULL, &err) == -1 && strstr(err.msg, "already took"),
            "a backward given dlogprob after the fused forward was not refused (%s)", err.msg);
    printf(" the head's backward in the forward's pass: log-probs, entropies and gradients bit for bit with forward + "
           "backward (per row and CSR)\n");
    padded_batch_free(&pb);
    free(want), free(got);
}

/* A new step that no backward reaches: settle zeroes every tensor. */
static void check_settle(const Model *m, GpuModelTrain *t) {
    fill_garbage(m, t);
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_settle(&dev, t, &err), "%s", err.msg);
    float *got = malloc(sizeof(float) * m->table.total);
    download(got, t->grads, sizeof(float) * m->table.total);
    size_t nonzero = 0;
    for (size_t i = 0; i < m->table.total; i++) nonzero += got[i] != 0.0f;
    T_CHECK(nonzero == 0, "settle without a backward left %zu of %zu values nonzero", nonzero, m->table.total);
    free(got);
}

/* Bad input, each refused with one line naming it. */
static void check_refusals(const Model *m, const GpuModel *g) {
    GpuModelTrain t;
    T_CHECK(gpu_model_train_create(&dev, &t, g, m, 0, CHUNK, &err) == -1 && strstr(err.msg, "max_tokens"),
            "max_tokens 0 was not refused");
    printf("  refused: %s\n", err.msg);
    T_CHECK(!gpu_model_train_create(&dev, &t, g, m, MAXN, CHUNK, &err), "%s", err.msg);
    float dl[MAXN] = {0};
    T_CHECK(gpu_model_train_backward(&dev, g, &t, dl, NULL, &err) == -1 && strstr(err.msg, "without a forward"),
            "a backward before any forward was not refused");
    printf("  refused: %s\n", err.msg);
    int32_t ids[3] = {1, V, 2}, targets[3] = {-1, -1, -1};
    int starts[2] = {0, 3};
    float lp[3];
    T_CHECK(gpu_model_train_forward(&dev, g, &t, ids, starts, 1, targets, 1.0f, lp, NULL, &err) == -1 &&
                strstr(err.msg, "token id"),
            "a token outside the vocabulary was not refused");
    printf("  refused: %s\n", err.msg);
    T_CHECK(gpu_model_train_backward(&dev, g, &t, dl, NULL, &err) == -1, "a backward after a refused forward ran");
    gpu_model_train_free(&dev, &t);
}

/* LogprobGrad's host function for a TokenObjective (ctx). */
static void objective_grad(void *ctx, const int *js, int m, const float *logprob, float *dlogprob) {
    tokobj_grads(ctx, js, m, logprob, dlogprob);
}

/* A token-local objective given as data (LogprobGrad.objective) takes each chunk's
 * gradient on the device: against the same objective through the host's function over
 * a packed PaddedBatch (CSR indices), log-probs and every gradient bit for bit (GRPO's
 * clipped term with the sampler correction's weights, a tool mask and a sequence of
 * weight 0: no e^x, so the same double arithmetic on both sides); and no copy to the
 * host inside the chunk loop (the host's function costs one a chunk, here R / CHUNK
 * rounded up). */
static void check_objective(const Model *m, const GpuModel *g, GpuModelTrain *t) {
    int32_t ids[MAXN], targets[MAXN];
    float dl[MAXN];
    const Micro *mb = &micro[0];
    make_batch(0, ids, targets, dl);
    BatchSeq seqs[3];
    for (int b = 0; b < mb->B; b++)
        seqs[b] = (BatchSeq){ids + mb->starts[b], mb->starts[b + 1] - mb->starts[b], NULL, 0, mb->prompt[b] + 1};
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, mb->B, 1);
    int K = pb.offsets[mb->B], seq_of[MAXN];
    double w[3] = {0.05, 0.0, 0.02}, adv[3] = {1.5, -0.7, -0.4}, isw[MAXN];
    unsigned char tmask[MAXN];
    for (int b = 0; b < mb->B; b++)
        for (int j = pb.offsets[b]; j < pb.offsets[b + 1]; j++) seq_of[j] = b;
    for (int j = 0; j < K; j++) isw[j] = 0.5 + 0.1 * j, tmask[j] = j % 5 != 2;
    TokenObjective o = {{TOKOBJ_CLIP, 0.2, 0.28, 0, 0.04, 1, 1.05}, seq_of, w, adv, NULL, NULL, isw, tmask};
    float lp[2][MAXN], *grads[2];
    unsigned long long down[2];
    for (int k = 0; k < 2; k++) {
        LogprobGrad grad = {objective_grad, &o, k ? &o : NULL, NULL};
        unsigned long long c0 = emulated ? gpu_emu_copies(1) : 0;
        gpu_model_train_begin(t);
        T_CHECK(!gpu_model_train_batch_forward(&dev, g, t, &pb, INV_TEMP, lp[k], NULL, &grad, &err) &&
                    !gpu_model_train_batch_backward(&dev, g, t, &pb, NULL, NULL, &err),
                "%s", err.msg);
        down[k] = emulated ? gpu_emu_copies(1) - c0 : 0;
        grads[k] = step_grads(m, t);
    }
    size_t differ = memcmp(lp[0], lp[1], sizeof(float) * K) != 0;
    for (size_t i = 0; i < m->table.total; i++) differ += memcmp(&grads[0][i], &grads[1][i], 4) != 0;
    T_CHECK(differ == 0, "the device's objective differs from the host's function at %zu values", differ);
    if (emulated) {
        unsigned long long chunks = (unsigned long long)(K + CHUNK - 1) / CHUNK;
        printf(" a token-local objective on the device: copies to the host %llu against %llu through the host's "
               "function (%llu chunks)\n", down[1], down[0], chunks);
        T_CHECK(down[0] - down[1] == chunks, "copies to the host saved: %llu, want one a chunk (%llu)",
                down[0] - down[1], chunks);
    }
    printf(" a token-local objective on the device: log-probs and gradients bit for bit with the host's function "
           "(%d targets)\n", K);
    padded_batch_free(&pb);
    free(grads[0]), free(grads[1]);
}

static void check_model(int tied, int qwen3) {
    Model m;
    make_model(&m, tied, qwen3);
    printf("%s, %s head: %d layers, C %d, %d heads over %d of %d, F %d, V %d\n", qwen3 ? "Qwen3" : "Qwen2", tied ? "tied" : "untied", L, C, H, HKV,
           D, F, V);
    GpuModel g;
    GpuModelTrain t;
    T_CHECK(!gpu_model_upload(&dev, &g, &m, &err), "%s", err.msg);
    T_CHECK(!gpu_model_train_create(&dev, &t, &g, &m, MAXN, CHUNK, &err), "%s", err.msg);
    T_CHECK((t.g_head == t.g_embed) == tied, "the head's gradient view %s the embedding's", tied ? "is not" : "is");
    check_step(&m, &g, &t);
    check_batch_csr(&m, &g, &t);
    check_fused(&m, &g, &t);
    check_objective(&m, &g, &t);
    check_settle(&m, &t);
    gpu_model_train_free(&dev, &t);
    if (tied && !qwen3) check_refusals(&m, &g);
    gpu_model_free(&dev, &g);
    model_free(&m);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_model(1, 0);
    check_model(0, 0);
    check_model(1, 1);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_model_train", check_all);
}
