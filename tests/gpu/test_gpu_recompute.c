/* tests/gpu/test_gpu_recompute.c — recomputation (gradient checkpointing) in the
 * device's training passes (gpu/model_train.h, gpu/model_lora.h: _create_ckpt with
 * CKPT_FULL or CKPT_SELECTIVE), on the GPU where there is one and on the tests'
 * emulated GPU otherwise. The kernels are deterministic, so a layer's forward re-run from its kept
 * input gives the forward's bits, and the gradients with recomputation must be those
 * of the pass that keeps every layer's tensors, bit for bit (no tolerance).
 *
 * Full fine-tuning: 3-layer random models under mixed precision (C 64, 2 heads over
 * 1 KV head of 32, F 128, V 96): Qwen2 tied and untied (q/k/v biases), Qwen3 tied
 * (q/k norm). LoRA: a 3-layer random bf16 base (Qwen2, and Qwen3) with rank-4
 * adapters on every module but k, dropout 0.25 with keys (the masks drawn again in
 * the recomputation). Each: one step of two packed micro-batches (forward with
 * entropies, backward with dlogprob and dentropy) through a pass that keeps every
 * layer and ones that recompute (full, selective), on the same uploaded model: the
 * log-probs, the entropies and the whole gradient buffer equal byte for byte; the
 * device bytes each pass takes (measured as the driver's free memory goes down)
 * none > selective > full, selective exactly full's and every layer's gate/up but
 * one; on the emulated GPU, which counts its products' multiply-adds, selective
 * exactly the gate/up and down products of the recomputed layers fewer than full.
 * Then `grpo train` on the device (tests/fixtures/qwen2's config, 3 steps) with
 * --gradient_checkpointing true (both policies) and false: the same model bytes,
 * completions.jsonl the same bytes, and the plan's words say which is kept. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "gpu/model_lora.h"
#include "gpu/model_train.h"
#include "gpu/ops.h"
#define GPU_TEST_SEED 53
#include "gpu_test.h"
#include "gpu_test_cli.h"
#include "gpu_test_model.h"
#include "machine/gpu_emulator_blas.h"

enum { MAXN = 24, CHUNK = 8 };
static const GpuTestShape shape = {64, 2, 1, 32, 128, 96, 3};
static const float INV_TEMP = 1.0f / 0.7f;

/* The step's two micro-batches: sequences packed end to end. */
typedef struct {
    int B, starts[4];
} Micro;
static const Micro micro[2] = {{3, {0, 7, 19, 24}}, {2, {0, 9, 13}}};
static const uint64_t keys[2][3] = {{0x1234567890abcdefULL, 77, 0xfeedULL}, {5, 0xabcdULL, 0}};

/* Micro-batch k's ids, targets (the next token, -1 on a sequence's first two rows and
 * its last) and the gradients dlogprob, dentropy (random where there is a target). */
static int make_batch(int k, int32_t *ids, int32_t *targets, float *dlogp, float *dent) {
    const Micro *mb = &micro[k];
    int N = mb->starts[mb->B];
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 11 * k + 5) % shape.V);
    for (int b = 0; b < mb->B; b++)
        for (int n = mb->starts[b]; n < mb->starts[b + 1]; n++) {
            int has = n + 1 < mb->starts[b + 1] && n - mb->starts[b] >= 2;
            targets[n] = has ? ids[n + 1] : -1;
            dlogp[n] = has ? frand() : 0.0f, dent[n] = has ? 0.3f * frand() : 0.0f;
        }
    return N;
}

/* What one step through a pass gave: each micro-batch's log-probs and entropies, the
 * gradient buffer, and the device bytes the pass took. */
typedef struct {
    float lp[2][MAXN], ent[2][MAXN];
    float *grads;
    size_t bytes;
    unsigned long long madds; /* the products' multiply-adds in the step (the emulated GPU's count) */
} StepOut;

static size_t free_now(void) {
    size_t f = 0, t = 0;
    T_CHECK(dev.api.MemGetInfo(&f, &t) == CUDA_SUCCESS, "MemGetInfo failed");
    return f;
}

/* The batches drawn once for both passes (frand's order). */
static int32_t ids[2][MAXN], targets[2][MAXN];
static float dlogp[2][MAXN], dent[2][MAXN];
static int Ns[2];

static void make_batches(void) {
    for (int k = 0; k < 2; k++) Ns[k] = make_batch(k, ids[k], targets[k], dlogp[k], dent[k]);
}

/* One step of full fine-tuning through a pass made with checkpointing mode ckpt. */
static void step_full(const Model *m, const GpuModel *g, CheckpointMode ckpt, StepOut *o) {
    GpuModelTrain t;
    size_t before = free_now();
    T_CHECK(!gpu_model_train_create_ckpt(&dev, &t, g, m, MAXN, CHUNK, ckpt, &err), "%s", err.msg);
    o->bytes = before - free_now();
    gpu_model_train_begin(&t);
    unsigned long long madds = gpu_emulator_blas_multiply_adds();
    for (int k = 0; k < 2; k++)
        T_CHECK(!gpu_model_train_forward(&dev, g, &t, ids[k], micro[k].starts, micro[k].B, targets[k], INV_TEMP,
                                         o->lp[k], o->ent[k], &err) &&
                    !gpu_model_train_backward(&dev, g, &t, dlogp[k], dent[k], &err),
                "%s", err.msg);
    o->madds = gpu_emulator_blas_multiply_adds() - madds;
    T_CHECK(!gpu_model_train_settle(&dev, &t, &err), "%s", err.msg);
    o->grads = malloc(sizeof(float) * m->table.total);
    download(o->grads, t.grads, sizeof(float) * m->table.total);
    gpu_model_train_free(&dev, &t);
}

/* One step of LoRA (dropout keys) through a pass made with checkpointing mode ckpt. */
static void step_lora(const Model *h, const GpuModel *g, CheckpointMode ckpt, StepOut *o) {
    GpuModelLora t;
    size_t before = free_now();
    T_CHECK(!gpu_model_lora_create_ckpt(&dev, &t, g, h, MAXN, CHUNK, ckpt, 1, &err), "%s", err.msg);
    o->bytes = before - free_now();
    gpu_model_lora_begin(&t);
    unsigned long long madds = gpu_emulator_blas_multiply_adds();
    for (int k = 0; k < 2; k++)
        T_CHECK(!gpu_model_lora_forward(&dev, g, &t, ids[k], micro[k].starts, micro[k].B, targets[k], keys[k],
                                        INV_TEMP, o->lp[k], o->ent[k], &err) &&
                    !gpu_model_lora_backward(&dev, g, &t, dlogp[k], dent[k], &err),
                "%s", err.msg);
    o->madds = gpu_emulator_blas_multiply_adds() - madds;
    T_CHECK(!gpu_model_lora_settle(&dev, &t, &err), "%s", err.msg);
    o->grads = malloc(sizeof(float) * h->lora->table.total);
    download(o->grads, t.grads, sizeof(float) * h->lora->table.total);
    gpu_model_lora_free(&dev, &t);
}

/* The two steps' outputs byte for byte, the recomputing pass's bytes fewer. */
static void compare_steps(const char *what, const StepOut *keep, const StepOut *re, size_t P) {
    size_t differ = 0;
    for (size_t i = 0; i < P; i++) differ += memcmp(&keep->grads[i], &re->grads[i], 4) != 0;
    double top = 0;
    for (size_t i = 0; i < P; i++) top = fmax(top, fabs(keep->grads[i]));
    T_CHECK(top > 0, "%s: the gradient is all zeros", what);
    T_CHECK(differ == 0, "%s: the gradient with recomputation differs at %zu of %zu values", what, differ, P);
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)Ns[k];
        T_CHECK(!memcmp(keep->lp[k], re->lp[k], 4 * n) && !memcmp(keep->ent[k], re->ent[k], 4 * n),
                "%s: micro-batch %d's log-probs or entropies differ with recomputation", what, k + 1);
    }
    T_CHECK(re->bytes < keep->bytes, "%s: the recomputing pass takes %zu bytes, not fewer than %zu", what, re->bytes,
            keep->bytes);
    printf("  %s: log-probs, entropies and %zu gradient values bit for bit; the pass takes %zu bytes with "
           "recomputation, %zu without\n", what, P, re->bytes, keep->bytes);
}

/* The selective pass's outputs those of the pass that keeps everything; its bytes
 * between full recomputation's and no recomputation's (emulated: exactly the gate/up
 * of every layer but one more than full's, gu_bytes a token a layer); and (emulated
 * GPU, which counts them) its products fewer than full's by exactly the ones a recomputed layer skips,
 * saved multiply-adds a token (the base's gate/up and down products: 3 C F, and LoRA's
 * second product on those modules), for the L - 1 recomputed layers, and more than no
 * recomputation's. */
static void compare_selective(const char *what, const StepOut *keep, const StepOut *full, const StepOut *sel,
                              size_t P, size_t gu_bytes, unsigned long long saved) {
    char w[160];
    snprintf(w, sizeof w, "%s, selective", what);
    compare_steps(w, keep, sel, P);
    size_t want = full->bytes + (size_t)(shape.L - 1) * MAXN * gu_bytes;
    if (!emulated) { /* a driver's free memory moves by its own pages: the order only */
        T_CHECK(full->bytes <= sel->bytes && sel->bytes <= keep->bytes, "%s: the pass takes %zu bytes (expected "
                "between full's %zu and none's %zu)", w, sel->bytes, full->bytes, keep->bytes);
        return;
    }
    T_CHECK(full->bytes < sel->bytes && sel->bytes == want, "%s: the pass takes %zu bytes (expected %zu: full's %zu "
            "and every other layer's gate/up)", w, sel->bytes, want, full->bytes);
    saved *= (unsigned long long)(shape.L - 1) * (unsigned long long)(Ns[0] + Ns[1]);
    T_CHECK(full->madds - sel->madds == saved && sel->madds > keep->madds,
            "%s: %llu multiply-adds in products (expected full recomputation's %llu less %llu, the gate/up and down "
            "products of the recomputed layers; more than no recomputation's %llu)", w, sel->madds, full->madds, saved,
            keep->madds);
    printf("  %s: products of %llu multiply-adds, full recomputation's %llu, none's %llu\n", w, sel->madds,
           full->madds, keep->madds);
}

static void check_full(int tied, int qwen3) {
    Model m;
    if (qwen3) gpu_test_qwen3_model(&m, &shape, tied, 7);
    else gpu_test_random_model(&m, &shape, tied, 7 + tied);
    model_use_bf16_compute(&m);
    GpuModel g;
    T_CHECK(!gpu_model_upload(&dev, &g, &m, &err), "%s", err.msg);
    GpuModelTrain bad;
    T_CHECK(gpu_model_train_create_ckpt(&dev, &bad, &g, &m, MAXN, CHUNK, (CheckpointMode)3, &err) == -1 &&
                strstr(err.msg, "checkpointing mode 3 (expected none, full or selective)"),
            "a pass with checkpointing mode 3: not refused, or not named (%s)", err.msg);
    StepOut keep, re, sel;
    make_batches();
    step_full(&m, &g, CKPT_NONE, &keep);
    step_full(&m, &g, CKPT_FULL, &re);
    step_full(&m, &g, CKPT_SELECTIVE, &sel);
    char what[96];
    snprintf(what, sizeof what, "full fine-tuning, %s, %s head", qwen3 ? "Qwen3" : "Qwen2", tied ? "tied" : "untied");
    compare_steps(what, &keep, &re, m.table.total);
    /* kept: gu16 [2F] and act16 [F] in bf16 a token; skipped: gate/up and down */
    compare_selective(what, &keep, &re, &sel, m.table.total, 6 * (size_t)shape.F, 3ULL * shape.C * shape.F);
    free(keep.grads), free(re.grads), free(sel.grads);
    gpu_model_free(&dev, &g);
    model_free(&m);
}

static void check_lora(int qwen3) {
    Model m32, h;
    if (qwen3) gpu_test_qwen3_model(&m32, &shape, 1, 11);
    else gpu_test_random_model(&m32, &shape, 1, 11);
    gpu_test_half_model(&h, &m32, &shape);
    LoraLayers lo;
    gpu_test_random_lora(&lo, &h);
    GpuModel g;
    T_CHECK(!gpu_model_upload(&dev, &g, &h, &err), "%s", err.msg);
    GpuModelLora bad;
    T_CHECK(gpu_model_lora_create_ckpt(&dev, &bad, &g, &h, MAXN, CHUNK, (CheckpointMode)-1, 0, &err) == -1 &&
                strstr(err.msg, "checkpointing mode -1 (expected none, full or selective)"),
            "a LoRA pass with checkpointing mode -1: not refused, or not named (%s)", err.msg);
    StepOut keep, re, sel;
    make_batches();
    step_lora(&h, &g, CKPT_NONE, &keep);
    step_lora(&h, &g, CKPT_FULL, &re);
    step_lora(&h, &g, CKPT_SELECTIVE, &sel);
    const char *what = qwen3 ? "LoRA, Qwen3, dropout 0.25" : "LoRA, Qwen2, dropout 0.25";
    compare_steps(what, &keep, &re, lo.table.total);
    /* kept: gu [2F] in fp32 a token; skipped: the base's gate/up and down, and the
     * adapters' u B^T on gate, up (F outputs each) and down (C) */
    compare_selective(what, &keep, &re, &sel, lo.table.total, 8 * (size_t)shape.F,
                      3ULL * shape.C * shape.F + (unsigned long long)lo.spec.r * (2 * shape.F + shape.C));
    free(keep.grads), free(re.grads), free(sel.grads);
    gpu_model_free(&dev, &g);
    h.lora = NULL;
    lora_layers_free(&lo);
    model_free(&h), model_free(&m32);
}

/* ---- grpo train on the device ---- */

static char tmp[256], errs[GPU_TEST_ERRS];

#define TRAIN "train --model %s/m --dataset %s/d.jsonl --reward_funcs length:5 --num_generations 4 " \
              "--per_device_train_batch_size 4 --max_completion_length 6 --max_steps 3 --learning_rate 5e-2 " \
              "--adam_epsilon 1 --logging_steps 1 --log_completions true --output_dir %s/%s"

/* One run into tmp/dir with the extra options; the plan's words checked for want. */
static void train_run(const char *dir, const char *opts, const char *want) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " %s", tmp, tmp, tmp, dir, opts), "%s: %s", opts, errs);
    const char *plan = strstr(errs, "activations");
    T_CHECK(strstr(errs, "on the GPU (") && plan && strstr(plan, want), "%s: the plan does not say '%s':\n%s", opts,
            want, errs);
    if (plan) printf("  %s: ...%.*s\n", opts, (int)strcspn(plan, "\n"), plan);
}

static void check_train(void) {
    gpu_test_make_model(tmp, errs, "qwen2", "m");
    gpu_test_write_data(tmp);
    train_run("t_sel", "--gradient_checkpointing true --gradient_checkpointing_policy selective",
              "gradient checkpointing, selective: layer inputs and gate/up products + one layer's activations kept, "
              "layers recomputed in the backward up to their gate/up product)");
    train_run("t_full", "--gradient_checkpointing true --gradient_checkpointing_policy full",
              "gradient checkpointing, full: layer inputs + one layer's activations kept, layers recomputed in the "
              "backward)");
    train_run("t_keep", "--gradient_checkpointing false", "no recomputation");
    const char *files[] = {"model.safetensors", "completions.jsonl"};
    for (int i = 0; i < 2; i++) {
        T_CHECK(gpu_test_same_in(tmp, "t_keep", "t_full", files[i]), "grpo train: %s differs with recomputation (full)",
                files[i]);
        T_CHECK(gpu_test_same_in(tmp, "t_keep", "t_sel", files[i]),
                "grpo train: %s differs with recomputation (selective)", files[i]);
    }
    printf("  grpo train, 3 steps: gradient_checkpointing true (selective, full) and false write the same "
           "model.safetensors and completions.jsonl bytes\n");
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_full(1, 0);
    check_full(0, 0);
    check_full(1, 1);
    check_lora(0);
    check_lora(1);
    gpu_close(&dev); /* the commands open their own */
    check_train();
}

int main(void) {
    gpu_test_tmp_make(tmp, sizeof tmp, "test_gpu_recompute");
    int rc = gpu_test_main("test_gpu_recompute", check_all);
    gpu_test_tmp_remove(tmp);
    return rc;
}
