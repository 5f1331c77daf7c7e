/* tests/gpu/test_gpu_train_opts.c — the two GRPO options that used to send a GPU run
 * back to the CPU, now trained on the device (train/model_gpu.c): the entropy bonus
 * (entropy_coef, use_adaptive_entropy: a gradient with respect to each token's
 * entropy) and sync_ref_model (TRL's SyncRefModelCallback: every
 * ref_model_sync_steps, ref = alpha policy + (1 - alpha) ref). On the GPU where there
 * is one, on the tests' emulated GPU otherwise.
 *
 * 1. The whole model's backward from dlogprob and dentropy (gpu_model_train_backward)
 *    against the CPU's model_backward under mixed precision, on test_gpu_model_train's
 *    small random Qwen2 model (2 layers, C 64, V 96, tied head, q/k/v biases, one
 *    packed micro-batch, 1/T = 1/0.7): every tensor of the gradient within
 *    test_gpu_model_train's bound, 2e-2 max|cpu| + 1e-2 |cpu| per element and 1e-2 in
 *    norm (the same bf16 rounding points, other sum orders). With dentropy alone
 *    (dlogprob 0) too, so the entropy's share is checked by itself; the chunk kernel's
 *    dH/dz is tested against a double reference in test_gpu_head, and the CPU op by
 *    finite differences in tests/ops/test_ops_fd.c.
 * 2. The mixing kernel (gpu_mix_reference) against train_model_mix_reference's
 *    float arithmetic, alpha * p + (1 - alpha) * r: bit for bit (the CPU holds the
 *    moving reference in fp32 and so does the device), zeros, huge and tiny values.
 * 3. `grpo train` on tests/fixtures/qwen2's config (test_gpu_train's model, data and
 *    step sizes: 3 steps of 4 completions, adam_epsilon 1 — test_gpu_train says why not
 *    1e-2: near sign(g), blind to a gradient's errors) with --entropy_coef 0.5, with
 *    --use_adaptive_entropy (its target above the model's entropy, so the bonus acts),
 *    and with --beta 0.04 --sync_ref_model true --ref_model_mixup_alpha 0.6
 *    --ref_model_sync_steps 1, each against its --use_cpu true --bf16 true run: the
 *    GPU run trains on the device (nothing said on stderr), the weights' moves within
 *    test_gpu_train's bound (5e-2 max|cpu| + 2e-2 |cpu|, 2e-2 in norm), the metrics'
 *    keys line by line equal, completions.jsonl equal byte for byte (the rollouts decode
 *    the policy on both sides in bf16 with the same streams). Each run is also shown to
 *    depend on the option beyond that bound: the entropy bonus moves the weights away
 *    from the run without it by more than 2e-2 of the move in norm, so a bonus dropped
 *    on the device fails. For sync_ref_model the reference itself is compared: the
 *    checkpoint's ref_model.safetensors (the device's fp32 reference brought up) moved
 *    from the initial weights as the CPU's did, within the same bound (an unmixed
 *    reference has not moved); a run resumed from that checkpoint writes the
 *    uninterrupted run's model bytes (the reference read back onto the device).
 *    The CPU's moving reference runs fp32 products, the device's bf16 products (its only
 *    form): its log-probs differ by bf16's rounding; the KL term weighs them by beta, so
 *    the weights stay in the bound (figures printed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "gpu/model_train.h"
#include "gpu/ops.h"
#include "model/grads.h"
#include "model/init.h"
#include "model/model_io.h"
#include "ops/ops.h"
#include "train/checkpoint.h"
#define GPU_TEST_SEED 43
#include "gpu_test.h"
#include "gpu_test_cli.h"

/* ---- 1. the backward with dentropy ---- */

enum { L = 2, C = 64, H = 2, HKV = 1, D = 32, F = 128, V = 96, QKV = (H + 2 * HKV) * D, B = 3, N = 24, CHUNK = 8 };
static const int starts[B + 1] = {0, 7, 19, 24}, prompt[B] = {2, 4, 0};
static const float INV_TEMP = 1.0f / 0.7f;

static void make_small_model(Model *m) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.type = MODEL_QWEN2, c.hidden_size = C, c.intermediate_size = F, c.n_layers = L, c.n_heads = H;
    c.n_kv_heads = HKV, c.head_dim = D, c.vocab_size = V, c.max_position_embeddings = 4096, c.rms_norm_eps = 1e-6f;
    c.rope_theta = 1e6, c.qkv_bias = 1, c.tie_word_embeddings = 1, c.bos_token_id = -1, c.n_eos = 0;
    strcpy(c.torch_dtype, "float32");
    model_create(m, &c);
    model_init_random(m, 11, 0.3f);
    for (int l = 0; l < L; l++) { /* norms and biases away from 1 and 0, so a misplaced read shows */
        LayerView *v = &m->w.layers[l];
        for (int i = 0; i < C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
        for (int i = 0; i < QKV; i++) v->bqkv[i] = 0.5f * frand();
    }
    for (int i = 0; i < C; i++) m->w.norm[i] = 1.0f + 0.5f * frand();
    model_use_bf16_compute(m);
}

/* The CPU's gradient of one forward + backward (dlp, dent: per row, dent may be NULL). */
static float *cpu_grads(Model *m, const int32_t *ids, const int32_t *targets, const float *dlp, const float *dent) {
    float *g = calloc(m->table.total, sizeof(float));
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, g);
    GradState st;
    grad_state_create(&st, &m->table, g);
    grad_state_begin(&st);
    ModelGrads mg = {&gv, NULL, &st, NULL};
    Activations a;
    acts_create(&a, &m->cfg, N, CKPT_NONE, CHUNK, 1); /* bf16 activations: train/model.c's for a mixed model */
    float lp[N], ent[N];
    ModelPass pass = {.backward = 1};
    model_forward_packed(m, &a, ids, starts, B, &pass);
    model_logprobs(m, &a, targets, INV_TEMP, lp, ent);
    model_backward(m, &a, &mg, dlp, dent);
    grad_state_settle(&st);
    acts_free(&a);
    grad_state_free(&st);
    params_view_free(&gv);
    return g;
}

static float *gpu_grads(const Model *m, const GpuModel *g, GpuModelTrain *t, const int32_t *ids,
                        const int32_t *targets, const float *dlp, const float *dent) {
    float lp[N], ent[N], *got = malloc(sizeof(float) * m->table.total);
    gpu_model_train_begin(t);
    T_CHECK(!gpu_model_train_forward(&dev, g, t, ids, starts, B, targets, INV_TEMP, lp, ent, &err) &&
                !gpu_model_train_backward(&dev, g, t, dlp, dent, &err) && !gpu_model_train_settle(&dev, t, &err),
            "%s", err.msg);
    download(got, t->grads, sizeof(float) * m->table.total);
    return got;
}

/* ||a - b|| / ||b|| over the whole buffer. */
static double rel_norm(const float *a, const float *b, size_t n) {
    double e2 = 0, b2 = 0;
    for (size_t i = 0; i < n; i++) e2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), b2 += (double)b[i] * b[i];
    return b2 > 0 ? sqrt(e2 / b2) : sqrt(e2);
}

static void compare_all(const Model *m, const float *got, const float *want, const char *when) {
    printf(" %s:\n", when);
    for (int e = 0; e < m->table.n; e++) {
        const ParamEntry *pe = &m->table.entries[e];
        gpu_test_compare(pe->name, got + pe->offset, want + pe->offset, pe->numel, 2e-2, 1e-2, 1e-2);
    }
}

static void check_entropy_backward(void) {
    Model m;
    make_small_model(&m);
    GpuModel g;
    GpuModelTrain t;
    T_CHECK(!gpu_model_upload(&dev, &g, &m, &err) && !gpu_model_train_create(&dev, &t, &g, &m, N, CHUNK, &err), "%s",
            err.msg);
    int32_t ids[N], targets[N];
    float dlp[N], dent[N], zero[N] = {0};
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 5) % V);
    for (int b = 0; b < B; b++)
        for (int n = starts[b]; n < starts[b + 1]; n++) {
            int has = n + 1 < starts[b + 1] && n - starts[b] >= prompt[b];
            targets[n] = has ? ids[n + 1] : -1;
            dlp[n] = has ? frand() : 0.0f, dent[n] = has ? 0.5f * frand() : 0.0f;
        }
    printf("the backward with dentropy: Qwen2, tied head, %d layers, C %d, V %d, %d rows in %d sequences\n", L, C, V,
           N, B);
    float *want = cpu_grads(&m, ids, targets, dlp, dent), *got = gpu_grads(&m, &g, &t, ids, targets, dlp, dent);
    compare_all(&m, got, want, "dlogprob and dentropy");
    float *want_lp = cpu_grads(&m, ids, targets, dlp, NULL);
    double share = rel_norm(want_lp, want, m.table.total);
    printf(" dentropy's share of the CPU's gradient: %.3g of its norm (the bound: 1e-2)\n", share);
    T_CHECK(share > 5e-2, "dentropy moves the gradient by %.3g only: the test cannot see it dropped", share);
    free(want), free(got);
    want = cpu_grads(&m, ids, targets, zero, dent), got = gpu_grads(&m, &g, &t, ids, targets, zero, dent);
    compare_all(&m, got, want, "dentropy alone (dlogprob 0)");
    free(want), free(got), free(want_lp);
    gpu_model_train_free(&dev, &t);
    gpu_model_free(&dev, &g);
    model_free(&m);
}

/* ---- 2. the mixing kernel ---- */

static void check_mix_kernel(void) {
    enum { NM = 5000 };
    float *p = randoms(NM, 3.0f), *r = randoms(NM, 3.0f), *want = malloc(sizeof(float) * NM);
    float *got = malloc(sizeof(float) * NM);
    const float special[] = {0.0f, -0.0f, 1e-38f, -3e38f, 3e38f, 1e-45f, 1.0f, -1.0f};
    for (int i = 0; i < 8; i++) p[i] = special[i], r[i] = special[7 - i];
    const float alphas[] = {0.6f, 0.9f, 1.0f / 3.0f, 1.0f};
    for (int k = 0; k < 4; k++) {
        float a = alphas[k];
        for (int i = 0; i < NM; i++) want[i] = a * p[i] + (1 - a) * r[i]; /* train_model_mix_reference's */
        CUdeviceptr dr = upload(r, sizeof(float) * NM), dp = upload(p, sizeof(float) * NM);
        T_CHECK(!gpu_mix_reference(&dev, dr, dp, NM, a, &err), "%s", err.msg);
        download(got, dr, sizeof(float) * NM);
        int differ = 0;
        for (int i = 0; i < NM; i++) differ += memcmp(&got[i], &want[i], 4) != 0;
        T_CHECK(differ == 0, "gpu_mix_reference, alpha %g: %d of %d values differ from the CPU's bits", a, differ, NM);
        printf("gpu_mix_reference, alpha %.9g: %d values, the CPU's bits%s\n", a, NM, differ ? " NOT" : "");
        gpu_free(&dev, dr), gpu_free(&dev, dp);
    }
    T_CHECK(gpu_mix_reference(&dev, 0, 0, NM, 0.5f, &err) == -1 && strstr(err.msg, "gpu_mix_reference"),
            "no buffers: not refused");
    free(p), free(r), free(want), free(got);
}

/* ---- 3. grpo train with the options ---- */

enum { MAXOUT = 1 << 16 };
static char tmp[256], errs[GPU_TEST_ERRS];

#define TRAIN "train --model %s/m2 --dataset %s/d.jsonl --reward_funcs length:5 --num_generations 4 " \
              "--per_device_train_batch_size 4 --max_completion_length 6 --max_steps 3 --learning_rate 5e-2 " \
              "--adam_epsilon 1 --logging_steps 1 --log_completions true --quiet --output_dir %s/%s %s"
#define CPU " --use_cpu true --bf16 true"

/* The fp32 weights of DIR/model.safetensors (DIR a model directory under tmp), or of
 * the parameter file DIR/FILE read in that model's table (a checkpoint's reference). */
static int load_params(Model *m, const char *dir, const char *file) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tmp, dir);
    if (model_load_ex(m, path, WEIGHTS_FP32, &err)) {
        T_CHECK(0, "%s: %s", path, err.msg);
        return -1;
    }
    if (!file) return 0;
    snprintf(path, sizeof path, "%s/%s/%s", tmp, dir, file);
    int rc = ckpt_read_params(path, &m->table, m->params, &err);
    T_CHECK(!rc, "%s: %s", path, err.msg);
    if (rc) model_free(m);
    return rc;
}

/* ||(b - i0) - (a - i0)|| / ||a - i0|| over every weight, and per tensor the worst
 * |gpu - cpu| of a move against 5e-2 max|cpu| + 2e-2 |cpu| (test_gpu_train's bound)
 * when check is set: the number of elements outside it. */
static double moved_apart(const Model *i0, const Model *a, const Model *b, long *bad) {
    double e2 = 0, c2 = 0;
    *bad = 0;
    for (int e = 0; e < a->table.n; e++) {
        const ParamEntry *pe = &a->table.entries[e];
        const float *w0 = i0->params + pe->offset, *x = a->params + pe->offset, *y = b->params + pe->offset;
        double top = 0;
        for (size_t k = 0; k < pe->numel; k++) top = fmax(top, fabs((double)x[k] - w0[k]));
        for (size_t k = 0; k < pe->numel; k++) {
            double dc = (double)x[k] - w0[k], d = fabs(((double)y[k] - w0[k]) - dc);
            *bad += !(d <= 5e-2 * top + 2e-2 * fabs(dc));
            e2 += d * d, c2 += dc * dc;
        }
    }
    return c2 > 0 ? sqrt(e2 / c2) : INFINITY;
}

/* The GPU's moves from the initial weights within the bound of the CPU's. */
static void check_moves(const char *what, const char *cpu_dir, const char *gpu_dir, const char *file) {
    Model i0, c, g;
    if (load_params(&i0, "m2", NULL)) return;
    if (!load_params(&c, cpu_dir, file)) {
        if (!load_params(&g, gpu_dir, file)) {
            long bad;
            double rel = moved_apart(&i0, &c, &g, &bad);
            printf("  %s: the GPU's moves %.3g of the CPU's in norm, %ld elements out of the bound\n", what, rel, bad);
            T_CHECK(!bad && rel <= 2e-2, "%s: %ld elements out of the bound, %.3g in norm (bound 2e-2)", what, bad, rel);
            model_free(&g);
        }
        model_free(&c);
    }
    model_free(&i0);
}

/* The option moves the weights beyond the bound: the run without it differs by more than 5e-2 in norm (2.5 x
 * the bound's 2e-2). */
static void check_matters(const char *what, const char *with_dir, const char *without_dir) {
    Model i0, a, b;
    if (load_params(&i0, "m2", NULL)) return;
    if (!load_params(&a, with_dir, NULL)) {
        if (!load_params(&b, without_dir, NULL)) {
            long bad;
            double rel = moved_apart(&i0, &a, &b, &bad);
            printf("  %s: without it the moves differ by %.3g in norm (the bound: 2e-2)\n", what, rel);
            T_CHECK(rel > 5e-2, "%s: the option changes the moves by %.3g only: a GPU ignoring it would pass", what, rel);
            model_free(&b);
        }
        model_free(&a);
    }
    model_free(&i0);
}

/* One option's pair of runs: trained on the device, moves, metrics' keys, completions. */
static void check_pair(const char *what, const char *opts, const char *cpu_dir, const char *gpu_dir) {
    static char ka[MAXOUT], kb[MAXOUT];
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN CPU, tmp, tmp, tmp, cpu_dir, opts), "%s, cpu: %s", what, errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, gpu_dir, opts), "%s, gpu: %s", what, errs);
    T_CHECK(!errs[0], "%s: the GPU run (--quiet) said something (it trains on the device): %s", what, errs);
    check_moves(what, cpu_dir, gpu_dir, NULL);
    gpu_test_metric_keys(tmp, cpu_dir, ka, sizeof ka), gpu_test_metric_keys(tmp, gpu_dir, kb, sizeof kb);
    T_CHECK(ka[0] && !strcmp(ka, kb), "%s: metrics.jsonl keys differ:\n cpu %s\n gpu %s", what, ka, kb);
    int same = gpu_test_same_in(tmp, cpu_dir, gpu_dir, "completions.jsonl");
    T_CHECK(same, "%s: completions.jsonl differs from the CPU's", what);
    printf("  %s: metrics' keys equal%s\n", what, same ? ", completions.jsonl the same bytes" : "");
}

/* The KL to the mixed reference, step by step, the GPU's against the CPU's within
 * 5e-2 relative + 1e-7 (the reference's products are bf16 there, fp32 here; at step 1
 * the reference holds the policy's weights: the device's copies are the policy's, KL
 * 0, where the CPU's fp32 products against the policy's bf16 ones give ~7e-8), and
 * apart from the KL to a reference that stays (so a device that does not remake the
 * reference's copies after mixing fails). */
static void check_kl(const char *cpu_dir, const char *gpu_dir, const char *frozen_dir) {
    double c[8], g[8], k[8];
    int n = gpu_test_metric_values(tmp, cpu_dir, "kl", c, 8), m = gpu_test_metric_values(tmp, gpu_dir, "kl", g, 8);
    int f = gpu_test_metric_values(tmp, frozen_dir, "kl", k, 8);
    T_CHECK(n == 3 && m == n && f == n, "kl: %d, %d and %d values (expected 3 steps)", n, m, f);
    for (int i = 0; i < n && m == n && f == n; i++) {
        double rel = fabs(g[i] - c[i]) / fabs(c[i]), apart = fabs(k[i] - g[i]) / fabs(g[i]);
        printf("  kl at step %d: cpu %.6g, gpu %.6g (%.2g relative); a frozen reference's %.6g\n", i + 1, c[i], g[i],
               rel, k[i]);
        T_CHECK(fabs(g[i] - c[i]) <= 5e-2 * fabs(c[i]) + 1e-7, "kl at step %d: the GPU's %.6g against the CPU's %.6g", i + 1, g[i], c[i]);
        if (i > 0) T_CHECK(apart > 0.2, "kl at step %d: %.6g, a frozen reference's %.6g: the mixing does not show",
                           i + 1, g[i], k[i]);
    }
}

static void check_runs(void) {
    char ck[600];
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, "plain", ""), "plain: %s", errs);
    printf("grpo train --entropy_coef 10\n");
    check_pair("entropy_coef 10", "--entropy_coef 10", "e_cpu", "e_gpu");
    check_matters("entropy_coef 10", "e_gpu", "plain");
    printf("grpo train --use_adaptive_entropy true\n");
    const char *adaptive = "--use_adaptive_entropy true --entropy_coef 10 --entropy_coef_delta 5 --entropy_coef_max 20 "
                           "--entropy_target 10";
    check_pair("use_adaptive_entropy", adaptive, "a_cpu", "a_gpu");
    check_matters("use_adaptive_entropy", "a_gpu", "plain");
    printf("grpo train --beta 0.04 --sync_ref_model true\n");
    const char *sync = "--beta 0.04 --sync_ref_model true --ref_model_mixup_alpha 0.6 --ref_model_sync_steps 1 "
                       "--save_steps 2";
    check_pair("sync_ref_model", sync, "r_cpu", "r_gpu");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, "k_gpu", "--beta 0.04"), "beta 0.04: %s", errs);
    check_kl("r_cpu", "r_gpu", "k_gpu");
    check_moves("sync_ref_model, the reference at checkpoint-2", "r_cpu", "r_gpu", "checkpoint-2/ref_model.safetensors");
    snprintf(ck, sizeof ck, "%s --resume_from_checkpoint %s/r_gpu/checkpoint-2", sync, tmp);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, "r_re", ck), "resume: %s", errs);
    int same = gpu_test_same_in(tmp, "r_gpu", "r_re", "model.safetensors");
    T_CHECK(same, "sync_ref_model resumed from checkpoint-2 on the GPU: the model differs from the uninterrupted run's");
    if (same) printf("  sync_ref_model resumed from checkpoint-2: the uninterrupted run's model bytes\n");
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_entropy_backward();
    check_mix_kernel();
    gpu_close(&dev); /* the commands open their own */
    check_runs();
}

int main(void) {
    gpu_test_tmp_make(tmp, sizeof tmp, "test_gpu_train_opts");
    gpu_test_make_model(tmp, errs, "qwen2", "m2");
    gpu_test_write_data(tmp);
    int rc = gpu_test_main("test_gpu_train_opts", check_all);
    gpu_test_tmp_remove(tmp);
    return rc;
}
