/* tests/gpu/test_gpu_train_lora.c — `grpo train --use_peft true` and `grpo sft` with
 * LoRA on the GPU (train/model_gpu.c with gpu/model_lora.h's pass): the commands' entry
 * functions run on the GPU where there is one and on the tests' emulated GPU
 * otherwise, on a model of tests/fixtures/qwen2's config (2 layers, C 32, the
 * vocabulary 300 for the byte tokenizer) made by `grpo init`, adapters of r 4 (alpha
 * 8) on PEFT's default modules (q, v), dropout 0, or every linear layer with dropout
 * 0.1 (all-linear: a GRPO run and SFT's), each run a few steps at adam_epsilon 1e-2.
 *
 * Tolerance: the GPU's run against the CPU's bf16 run (--use_cpu true --bf16 true),
 * adapter tensor by tensor on what training moved (the final values minus PEFT's
 * initial ones, remade here from the seed): per element |gpu - cpu| <= 5e-2 max|cpu|
 * + 2e-2 |cpu| and 2e-2 in norm, test_gpu_train's bound and for its reasons (a few
 * updates, each from a gradient within test_gpu_model_train's one-update bound, read
 * at adapters the earlier ones moved apart). The base is frozen on both sides and the
 * adapters are fp32 products on both (gpu/lora.h), so the differences come from the
 * base's bf16 products, as there. Figures seen are printed.
 * Rollouts: a LoRA run decodes on the device, the policy's GpuModel with views of the
 * adapters AdamW writes in place (gpu_decode_layer_lora beside the bf16 base):
 * completions.jsonl is the CPU bf16 run's byte for byte where the two runs' adapters
 * round every sampled token the same way (checked: with dropout 0 and 0.1, and beta
 * 0.04 with the reference the base with the adapters off).
 * Also: micro-batch splits 1/2/4 of SFT's 4 examples give adapters within 1e-5
 * relative (adam_epsilon 1 there, test_gpu_train's well-conditioned rule); a GRPO run
 * resumed from checkpoint-2 writes the uninterrupted run's adapter bytes and step 3's
 * completions; `grpo merge` folds the GPU's saved adapter into the base; the run
 * copies the adapters down for its checkpoint and final save only, not at each update
 * (at most 3 x 4 P + 2 P bytes in 3 steps, P the adapters' floats, test_gpu_train's
 * bound: a copy each update as well is 5.2 x 4 P) and says in its plan that it trains
 * and generates on the GPU; --adapter
 * continues an adapter on the GPU in the bound above, also with a KL reference (the
 * starting adapter frozen on the device: the KL in check_kl's bound, a resume the
 * uninterrupted run's bytes). A GRPO run on tests/fixtures/qwen3's config
 * (q/k norm; every linear layer adapted, dropout 0.1) in the same bound, its
 * completions the CPU bf16 run's bytes. With beta 0.04 the logged KL is the CPU's within 5e-2 relative
 * (a reference with the adapters on would log 0). The pass itself
 * (gpu/model_lora.h, check_pass): settling, write then add, its refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "gpu/model_lora.h"
#include "gpu/ops.h"
#include "model/lora.h"
#include "model/model_io.h"
#define GPU_TEST_SEED 43
#include "gpu_test.h"
#include "gpu_test_cli.h"
#include "gpu_test_model.h"

enum { MAXOUT = 1 << 16 };
static char tmp[256], errs[GPU_TEST_ERRS];

#define LORA " --use_peft true --lora_r 4 --lora_alpha 8"
/* without adapters of its own: --adapter gives them */
#define TRAIN_BASE_ON(M) "train --model %s/" M " --dataset %s/d.jsonl --reward_funcs length:5 --num_generations 4 " \
                   "--per_device_train_batch_size 4 --max_completion_length 6 --max_steps 3 --learning_rate 5e-2 " \
                   "--adam_epsilon 1e-2 --logging_steps 1 --log_completions true --quiet --output_dir %s/%s"
#define TRAIN_BASE TRAIN_BASE_ON("m2")
#define TRAIN_P TRAIN_BASE LORA /* lora_dropout's default is TRL's 0.05: each run gives its own */
#define TRAIN TRAIN_P " --lora_dropout 0"
#define SFT "sft --model %s/m2 --dataset %s/s.jsonl --max_steps 3 --learning_rate 5e-2 --logging_steps 1 " \
            "--quiet --output_dir %s/%s --lora_target_modules all-linear --lora_dropout 0.1" LORA

/* ---- the adapters ---- */

typedef struct {
    Model base;
    LoraLayers lo;
    int ok;
} Adapter;

/* The adapter saved in dir, on the base model in base_dir. */
static void adapter_load_on(Adapter *a, const char *base_dir, const char *dir) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmp, base_dir);
    a->ok = !model_load_ex(&a->base, path, WEIGHTS_FP32, &err);
    T_CHECK(a->ok, "%s: %s", path, err.msg);
    if (!a->ok) return;
    snprintf(path, sizeof path, "%s/%s", tmp, dir);
    a->ok = !lora_layers_load(&a->lo, path, &a->base, 42, &err);
    T_CHECK(a->ok, "%s: %s", path, err.msg);
    if (!a->ok) model_free(&a->base);
}

static void adapter_load(Adapter *a, const char *dir) { adapter_load_on(a, "m2", dir); }

static void adapter_free(Adapter *a) {
    if (a->ok) lora_layers_free(&a->lo), model_free(&a->base);
    a->ok = 0;
}

/* What training moved from the adapter in init_dir (NULL: PEFT's initialisation from
 * the run's seed, 42), GPU against CPU, per adapter tensor, in the bound above; the
 * adapters on the base model in base_dir. */
static void check_moved_on(const char *what, const char *base_dir, const char *init_dir, const char *cpu_dir,
                           const char *gpu_dir) {
    Adapter c, g, start = {0};
    adapter_load_on(&c, base_dir, cpu_dir), adapter_load_on(&g, base_dir, gpu_dir);
    if (init_dir) adapter_load_on(&start, base_dir, init_dir);
    if (!c.ok || !g.ok || (init_dir && !start.ok)) goto done;
    LoraLayers i0;
    lora_layers_create(&i0, &c.base.cfg, &c.lo.spec, 42);
    if (init_dir) memcpy(i0.params, start.lo.params, sizeof(float) * i0.table.total);
    else lora_init_peft(&i0, 42);
    const ParamTable *t = &c.lo.table;
    T_CHECK(t->total == g.lo.table.total && t->total == i0.table.total, "%s: the adapters' tables differ", what);
    double worst = 0, worst_norm = 0;
    for (int e = 0; e < t->n && t->total == g.lo.table.total; e++) {
        const ParamEntry *pe = &t->entries[e];
        gpu_test_check_move(what, pe->name, i0.params + pe->offset, c.lo.params + pe->offset,
                            g.lo.params + pe->offset, pe->numel, 1, &worst, &worst_norm);
    }
    printf("  %s: the GPU's adapter moves within %.3g max|cpu's| per element, %.3g in norm (worst tensors, %d)\n",
           what, worst, worst_norm, t->n);
    lora_layers_free(&i0);
done:
    adapter_free(&c), adapter_free(&g), adapter_free(&start);
}

static void check_moved_from(const char *what, const char *init_dir, const char *cpu_dir, const char *gpu_dir) {
    check_moved_on(what, "m2", init_dir, cpu_dir, gpu_dir);
}

static void check_moved(const char *what, const char *cpu_dir, const char *gpu_dir) {
    check_moved_from(what, NULL, cpu_dir, gpu_dir);
}

/* Adapters of two splits of one batch within 1e-5 relative, per tensor. */
static void check_split(const char *what, const char *a_dir, const char *b_dir) {
    Adapter a, b;
    adapter_load(&a, a_dir), adapter_load(&b, b_dir);
    if (a.ok && b.ok) {
        double worst = 0;
        const ParamTable *t = &a.lo.table;
        for (int e = 0; e < t->n; e++) {
            const ParamEntry *pe = &t->entries[e];
            worst = fmax(worst, gpu_test_split_gap(a.lo.params + pe->offset, b.lo.params + pe->offset, pe->numel));
        }
        printf("  %s: max |a - b| / max |b| per tensor: %.3g\n", what, worst);
        T_CHECK(worst <= 1e-5, "%s: the splits differ by %.3g relative (bound 1e-5)", what, worst);
    }
    adapter_free(&a), adapter_free(&b);
}

/* The KL to the reference step by step, GPU against CPU: within 5e-2 |cpu| + 1e-6
 * (the adapters' moves' bound: the KL is the policy's difference from the base), and
 * not 0 after the first step (there the policy is the base: PEFT's B = 0). A
 * reference with the adapters on gives 0 at every step. */
static void check_kl(const char *what, const char *cpu_dir, const char *gpu_dir) {
    double c[8], g[8];
    int n = gpu_test_metric_values(tmp, cpu_dir, "kl", c, 8), m = gpu_test_metric_values(tmp, gpu_dir, "kl", g, 8);
    int bad = 0;
    T_CHECK(n == 3 && m == n, "%s: %d and %d kl values in metrics.jsonl (expected 3)", what, n, m);
    for (int i = 0; i < n && i < m; i++) bad += !(fabs(g[i] - c[i]) <= 5e-2 * fabs(c[i]) + 1e-6);
    T_CHECK(!bad && n == 3 && c[2] > 1e-5, "%s: kl %g %g %g on the GPU, %g %g %g on the CPU", what, g[0], g[1], g[2],
            c[0], c[1], c[2]);
    if (n == 3 && m == 3)
        printf("  %s: kl %.4g, %.4g on the GPU after steps 2 and 3, %.4g, %.4g on the CPU\n", what, g[1], g[2], c[1],
               c[2]);
}

/* The plan (a run without --quiet) says the GPU trains the adapters; nothing says the CPU does. */
static void check_plan(const char *what, const char *e) {
    const char *plan = strstr(e, "the frozen base in bf16 + the adapters");
    T_CHECK(plan && strstr(e, "on the GPU") && !strstr(e, "trains on the CPU"),
            "%s: the plan does not say the GPU trains the adapters:\n%s", what, e);
    if (plan) printf("  %s: ...%.*s\n", what, (int)strcspn(plan, "\n"), plan);
}

/* ---- the pass itself (gpu/model_lora.h) ---- */

/* On a random 2-layer model with rank-4 adapters (all modules but k, dropout 0.25, A
 * and B random): a step with no backward settles to zeros over a gradient buffer of
 * garbage; a step of two backwards of one batch (with dropout keys) gives twice a
 * step of one (the first writes, the second adds) within 1e-6 of the largest; refused
 * with a line: a model without adapters, a backward with no forward before it. */
static void check_pass(void) {
    static const GpuTestShape shape = {32, 4, 2, 8, 64, 97, 2};
    Model m32, h;
    gpu_test_random_model(&m32, &shape, 1, 5);
    gpu_test_half_model(&h, &m32, &shape);
    GpuModel g0;
    GpuModelLora t;
    T_CHECK(!gpu_model_upload(&dev, &g0, &h, &err), "%s", err.msg);
    T_CHECK(gpu_model_lora_create(&dev, &t, &g0, &h, 40, 8, &err) < 0 && strstr(err.msg, "no adapters"),
            "a model without adapters: not refused (%s)", err.msg);
    gpu_model_free(&dev, &g0);
    LoraLayers lo;
    gpu_test_random_lora(&lo, &h);
    GpuModel g;
    T_CHECK(!gpu_model_upload(&dev, &g, &h, &err) && !gpu_model_lora_create(&dev, &t, &g, &h, 40, 8, &err), "%s",
            err.msg);
    size_t P = lo.table.total;
    float *garbage = malloc(4 * P), *g1 = malloc(4 * P), *g2 = malloc(4 * P);
    for (size_t i = 0; i < P; i++) garbage[i] = NAN;
    T_CHECK(!gpu_put(&dev, t.grads, garbage, 4 * P, &err), "%s", err.msg);
    gpu_model_lora_begin(&t);
    T_CHECK(gpu_model_lora_backward(&dev, &g, &t, garbage, NULL, &err) < 0 && strstr(err.msg, "without a forward"),
            "a backward with no forward: not refused (%s)", err.msg);
    T_CHECK(!gpu_model_lora_settle(&dev, &t, &err), "%s", err.msg);
    download(g1, t.grads, 4 * P);
    long nonzero = 0;
    for (size_t i = 0; i < P; i++) nonzero += g1[i] != 0;
    T_CHECK(!nonzero, "a step without a backward: %ld of %zu gradient values not settled to 0", nonzero, P);
    static const int starts[4] = {0, 7, 30, 38};
    int32_t ids[38], targets[38];
    float logp[38], dlogp[38];
    uint64_t keys[3] = {0x1234567890abcdefULL, 77, 0xfeedULL};
    for (int n = 0; n < 38; n++) ids[n] = (int32_t)((n * 37 + 5) % 97), targets[n] = n % 5 ? (n * 11) % 97 : -1;
    for (int n = 0; n < 38; n++) dlogp[n] = 0.1f + 0.01f * (float)n;
    for (int times = 1; times <= 2; times++) {
        gpu_model_lora_begin(&t);
        T_CHECK(!gpu_put(&dev, t.grads, garbage, 4 * P, &err), "%s", err.msg);
        for (int k = 0; k < times; k++)
            T_CHECK(!gpu_model_lora_forward(&dev, &g, &t, ids, starts, 3, targets, keys, 1.0f, logp, NULL, &err) &&
                        !gpu_model_lora_backward(&dev, &g, &t, dlogp, NULL, &err),
                    "%s", err.msg);
        T_CHECK(!gpu_model_lora_settle(&dev, &t, &err), "%s", err.msg);
        download(times == 1 ? g1 : g2, t.grads, 4 * P);
    }
    double top = 0, d = 0;
    for (size_t i = 0; i < P; i++) top = fmax(top, fabs(2.0 * g1[i])), d = fmax(d, fabs(g2[i] - 2.0 * g1[i]));
    T_CHECK(top > 0 && d <= 1e-6 * top, "two backwards against twice one: off by %.3g of %.3g", d, top);
    printf("  gpu_model_lora: a step without a backward settles to 0; two backwards = 2 x one within %.2g of the "
           "largest (%zu values)\n", top > 0 ? d / top : d, P);
    gpu_model_lora_free(&dev, &t);
    gpu_model_free(&dev, &g);
    free(garbage), free(g1), free(g2);
    h.lora = NULL;
    lora_layers_free(&lo);
    model_free(&h), model_free(&m32);
}

/* ---- the commands ---- */

static size_t adapter_floats(const char *dir) {
    Adapter a;
    adapter_load(&a, dir);
    size_t P = a.ok ? a.lo.table.total : 0;
    adapter_free(&a);
    return P;
}

static void check_grpo(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --use_cpu true --bf16 true", tmp, tmp, tmp, "l_cpu"), "cpu: %s",
            errs);
    size_t up0, down0, up1, down1;
    gpu_copied_bytes(&up0, &down0);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --quiet false", tmp, tmp, tmp, "l_gpu"), "gpu: %s", errs);
    gpu_copied_bytes(&up1, &down1);
    check_plan("grpo train --use_peft true", errs);
    check_moved("grpo train --use_peft true", "l_cpu", "l_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --use_peft true, rollouts decoded on the GPU's adapters", "l_cpu",
                            "l_gpu");
    size_t P = adapter_floats("l_gpu"), down = down1 - down0;
    T_CHECK(P > 0 && down <= 3 * 4 * P + 2 * P, "grpo train --use_peft: %zu bytes down in 3 steps, more than the "
            "checkpoint's and the final save's (bound 3 x 4 P + 2 P, 4 P = %zu): the adapters copied at each update?",
            down, 4 * P);
    T_CHECK(strstr(errs, "generation on the GPU") != NULL, "grpo train --use_peft: the plan does not generate on the "
            "GPU: %s", errs);
    printf("  grpo train --use_peft true: %zu bytes down in 3 steps, %.2f x 4 P (P = %zu adapter floats)\n", down,
           down / (4.0 * P), P);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train,
                          TRAIN_P " --lora_dropout 0.1 --lora_target_modules all-linear --use_cpu true --bf16 true",
                          tmp, tmp, tmp, "d_cpu"),
            "cpu, dropout: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_P " --lora_dropout 0.1 --lora_target_modules all-linear", tmp,
                          tmp, tmp, "d_gpu"),
            "gpu, dropout: %s", errs);
    check_moved("grpo train --lora_dropout 0.1, every linear layer", "d_cpu", "d_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --lora_dropout 0.1, every linear layer", "d_cpu", "d_gpu");
    T_CHECK(
        !gpu_test_run(tmp, errs, cmd_train, TRAIN " --beta 0.04 --use_cpu true --bf16 true", tmp, tmp, tmp, "k_cpu"),
        "cpu, beta: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --beta 0.04", tmp, tmp, tmp, "k_gpu"), "gpu, beta 0.04: %s",
            errs);
    check_moved("grpo train --beta 0.04 (the reference: the base, adapters off)", "k_cpu", "k_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --beta 0.04", "k_cpu", "k_gpu");
    check_kl("grpo train --beta 0.04", "k_cpu", "k_gpu");
}

/* How far apart two runs' adapters moved from PEFT's initialisation (seed 42), over
 * every tensor: |b - a| / |a - init| in norm. */
static double moves_apart(const char *a_dir, const char *b_dir) {
    Adapter a, b;
    adapter_load(&a, a_dir), adapter_load(&b, b_dir);
    double e2 = 0, m2 = 0;
    if (a.ok && b.ok && a.lo.table.total == b.lo.table.total) {
        LoraLayers i0;
        lora_layers_create(&i0, &a.base.cfg, &a.lo.spec, 42);
        lora_init_peft(&i0, 42);
        for (size_t k = 0; k < a.lo.table.total; k++) {
            double d = (double)b.lo.params[k] - a.lo.params[k], m = (double)a.lo.params[k] - i0.params[k];
            e2 += d * d, m2 += m * m;
        }
        lora_layers_free(&i0);
    }
    adapter_free(&a), adapter_free(&b);
    return m2 > 0 ? sqrt(e2 / m2) : 0;
}

/* The entropy bonus through the frozen head (gpu/model_lora.h's backward with
 * dentropy): entropy_coef 10 (the untrained model is near uniform, where the
 * entropy's gradient is small: test_gpu_train_opts says why 10) against the CPU bf16
 * run in the bound above, completions the same bytes, and the bonus moves the
 * adapters away from the run without it by more than 2.5 x the bound's 2e-2 in norm,
 * so a bonus dropped on the device fails. */
static void check_entropy(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --entropy_coef 10 --use_cpu true --bf16 true", tmp, tmp, tmp,
                          "e_cpu"),
            "cpu, entropy: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --entropy_coef 10", tmp, tmp, tmp, "e_gpu"), "gpu, entropy: %s",
            errs);
    T_CHECK(!errs[0], "grpo train --use_peft --entropy_coef: the GPU run (--quiet) said something: %s", errs);
    check_moved("grpo train --use_peft true --entropy_coef 10", "e_cpu", "e_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --use_peft true --entropy_coef 10", "e_cpu", "e_gpu");
    double apart = moves_apart("l_gpu", "e_gpu");
    printf("  grpo train --use_peft true --entropy_coef 10: without the bonus the moves differ by %.3g in norm\n", apart);
    T_CHECK(apart > 5e-2, "entropy_coef 10 changes the LoRA moves by %.3g only: a GPU ignoring it would pass", apart);
}

/* A run resumed from checkpoint-2: the uninterrupted run's (l_gpu's) adapter bytes
 * and step 3's completions; then the adapter folded into the base by grpo merge. */
static void check_resume_merge(void) {
    char a[400], b[400];
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --save_steps 2", tmp, tmp, tmp, "g_ck"), "with checkpoints: %s",
            errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --resume_from_checkpoint %s/g_ck/checkpoint-2", tmp, tmp, tmp,
                          "g_re", tmp),
            "resume: %s", errs);
    snprintf(a, sizeof a, "%s/l_gpu/adapter_model.safetensors", tmp);
    snprintf(b, sizeof b, "%s/g_re/adapter_model.safetensors", tmp);
    int same = gpu_test_same_file(a, b);
    T_CHECK(same, "grpo train --use_peft resumed on the GPU: the adapter differs from the uninterrupted run's");
    snprintf(a, sizeof a, "%s/l_gpu/completions.jsonl", tmp), snprintf(b, sizeof b, "%s/g_re/completions.jsonl", tmp);
    int rollouts = gpu_test_file_ends(a, b);
    T_CHECK(rollouts, "grpo train --use_peft resumed on the GPU: step 3's completions are not the uninterrupted run's");
    if (same && rollouts)
        printf("  resumed from checkpoint-2 on the GPU: step 3's completions and the adapter the uninterrupted "
               "run's bytes\n");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_merge, "merge --model %s/m2 --adapter %s/l_gpu --output_dir %s/merged", tmp,
                          tmp, tmp),
            "merge: %s", errs);
    Model base, merged;
    snprintf(a, sizeof a, "%s/m2", tmp), snprintf(b, sizeof b, "%s/merged", tmp);
    int ok = !model_load_ex(&base, a, WEIGHTS_FP32, &err) && !model_load_ex(&merged, b, WEIGHTS_FP32, &err);
    T_CHECK(ok, "the merged model: %s", err.msg);
    if (!ok) return;
    double moved = 0;
    for (size_t i = 0; i < base.table.total; i++) moved = fmax(moved, fabs((double)merged.params[i] - base.params[i]));
    T_CHECK(moved > 0, "grpo merge of the GPU's adapter left the base as it was");
    printf("  grpo merge of the GPU's adapter: the base moved by up to %.3g\n", moved);
    model_free(&base), model_free(&merged);
}

static void check_sft(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft,
                          SFT " --per_device_train_batch_size 2 --adam_epsilon 1e-2 --use_cpu true --bf16 true", tmp,
                          tmp, tmp, "s_cpu"),
            "cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2 --adam_epsilon 1e-2 --quiet false",
                          tmp, tmp, tmp, "s_gpu"),
            "gpu: %s", errs);
    check_plan("grpo sft --use_peft true", errs);
    check_moved("grpo sft --use_peft true", "s_cpu", "s_gpu");
    static const int split[3][2] = {{1, 4}, {2, 2}, {4, 1}};
    for (int i = 0; i < 3; i++) {
        char dir[16];
        snprintf(dir, sizeof dir, "b%d", split[i][0]);
        T_CHECK(!gpu_test_run(tmp, errs, cmd_sft,
                              SFT " --adam_epsilon 1 --per_device_train_batch_size %d "
                                  "--gradient_accumulation_steps %d",
                              tmp, tmp, tmp, dir, split[i][0], split[i][1]),
                "split %d: %s", split[i][0], errs);
    }
    check_split("LoRA micro-batches 1 x 4 against 4 x 1", "b1", "b4");
    check_split("LoRA micro-batches 2 x 2 against 4 x 1", "b2", "b4");
}

/* --adapter continues an adapter on the GPU (the CPU's moves from it, in the bound
 * above, its rollouts the same); with a KL reference (the starting adapter, frozen:
 * check_adapter_ref) on the GPU too. */
static void check_adapter(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_BASE " --adapter %s/l_gpu --use_cpu true --bf16 true", tmp, tmp,
                          tmp, "a_cpu", tmp),
            "--adapter, cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_BASE " --adapter %s/l_gpu --quiet false", tmp, tmp, tmp, "a_gpu",
                          tmp),
            "--adapter, gpu: %s", errs);
    check_plan("grpo train --adapter", errs);
    check_moved_from("grpo train --adapter (continued)", "l_gpu", "a_cpu", "a_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --adapter", "a_cpu", "a_gpu");
}

/* --adapter with beta 0.04: the reference is the base under the starting adapter
 * (l_gpu's), frozen, held on the device beside the policy's. Against the CPU bf16
 * run: the moves in the bound above, the same completions, the KL in check_kl's
 * bound (0 at step 1, where the policy is the reference; a reference under the
 * policy's current adapters would log 0 at every step), nothing said on stderr; the
 * plan names the reference; a resume from checkpoint-2 writes the uninterrupted
 * run's adapter bytes (the reference read again from --adapter, as the CPU does). */
static void check_adapter_ref(void) {
    const char *what = "grpo train --adapter --beta 0.04 (the reference: the starting adapter, frozen)";
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_BASE " --beta 0.04 --adapter %s/l_gpu --use_cpu true --bf16 true",
                          tmp, tmp, tmp, "r_cpu", tmp),
            "--adapter --beta 0.04, cpu: %s", errs);
    T_CHECK(
        !gpu_test_run(tmp, errs, cmd_train, TRAIN_BASE " --beta 0.04 --adapter %s/l_gpu", tmp, tmp, tmp, "r_gpu", tmp),
        "--adapter --beta 0.04, gpu: %s", errs);
    T_CHECK(!errs[0], "%s: the GPU run (--quiet) said something: %s", what, errs);
    check_moved_from(what, "l_gpu", "r_cpu", "r_gpu");
    gpu_test_check_rollouts(tmp, what, "r_cpu", "r_gpu");
    check_kl(what, "r_cpu", "r_gpu");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train,
                          TRAIN_BASE " --beta 0.04 --adapter %s/l_gpu --save_steps 2 --quiet false", tmp, tmp, tmp,
                          "r_ck", tmp),
            "--adapter --beta 0.04, checkpoints: %s", errs);
    check_plan(what, errs);
    /* the device's words (the host's line says "(the base under the starting adapter, frozen)" on either side) */
    T_CHECK(strstr(errs, "(the base under the starting adapter, frozen: its fp32 values; the base not copied)") &&
                !strstr(errs, "trains on the CPU"),
            "%s: the plan does not say the GPU holds the starting adapter as the reference:\n%s", what, errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train,
                          TRAIN_BASE " --beta 0.04 --adapter %s/l_gpu --resume_from_checkpoint "
                                     "%s/r_ck/checkpoint-2",
                          tmp, tmp, tmp, "r_re", tmp, tmp),
            "--adapter --beta 0.04, resume: %s", errs);
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/r_gpu/adapter_model.safetensors", tmp);
    snprintf(b, sizeof b, "%s/r_re/adapter_model.safetensors", tmp);
    int same = gpu_test_same_file(a, b);
    T_CHECK(same, "%s: resumed from checkpoint-2, the adapter differs from the uninterrupted run's", what);
    if (same) printf("  %s: resumed from checkpoint-2, the uninterrupted run's adapter bytes\n", what);
}

/* Qwen3 (q/k norm between the qkv product with its adapters and RoPE): a GRPO run
 * with adapters on every linear layer (q's and k's gradients pass the frozen norm)
 * and dropout 0.1 on the GPU, against the CPU's bf16 run in the bound above, its
 * rollouts the same bytes. */
#define TRAIN_Q3 TRAIN_BASE_ON("m3") LORA " --lora_target_modules all-linear --lora_dropout 0.1"
static void check_qwen3(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_Q3 " --use_cpu true --bf16 true", tmp, tmp, tmp, "q_cpu"),
            "qwen3, cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN_Q3 " --quiet false", tmp, tmp, tmp, "q_gpu"), "qwen3, gpu: %s",
            errs);
    check_plan("grpo train --use_peft true on Qwen3", errs);
    check_moved_on("grpo train --use_peft true on Qwen3, every linear layer, dropout 0.1", "m3", NULL, "q_cpu",
                   "q_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --use_peft true on Qwen3", "q_cpu", "q_gpu");
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_pass();
    gpu_close(&dev); /* the commands open their own */
    check_grpo();
    check_entropy();
    check_resume_merge();
    check_sft();
    check_adapter();
    check_adapter_ref();
    check_qwen3();
}

int main(void) {
    gpu_test_tmp_make(tmp, sizeof tmp, "test_gpu_train_lora");
    gpu_test_make_model(tmp, errs, "qwen2", "m2");
    gpu_test_make_model(tmp, errs, "qwen3", "m3");
    gpu_test_write_data(tmp);
    int rc = gpu_test_main("test_gpu_train_lora", check_all);
    gpu_test_tmp_remove(tmp);
    return rc;
}
