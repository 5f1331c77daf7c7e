/* tests/gpu/test_gpu_train.c — `grpo train` and `grpo sft` on the GPU (train/model_gpu.c):
 * the commands' entry functions (cmd_train, cmd_sft) run on the GPU where there is one
 * and on the tests' emulated GPU otherwise (gpu_test.h installs it, so the trainable
 * model's own gpu_open finds it), on models of tests/fixtures/qwen2's and qwen3's
 * config (2 layers, C 32; the vocabulary 300 for the byte tokenizer) made by
 * `grpo init`. Every run is a few steps with well-conditioned AdamW: adam_epsilon 1
 * above the gradient's elements (a few tenths here), test_gpu_model_train's rule, so
 * the update is near linear in the gradient. With 1e-2 it is near sign(g), blind to
 * the gradient's errors: a forward on the initial weights at every step (the bf16
 * copies never remade) passed GRPO's check so. GRPO's groups are 4 completions of
 * up to 6 tokens, so that each of the 3 steps has rewards that differ (a gradient).
 *
 * Tolerance: the GPU's run against the CPU's bf16 run (--use_cpu true --bf16 true),
 * tensor by tensor on what training moved (the final weights minus the initial
 * ones): per element |gpu - cpu| <= 5e-2 max|cpu| + 2e-2 |cpu| and in norm within
 * 2e-2. test_gpu_model_train's bound on one update is 2e-2 max|cpu| + 1e-2 |cpu|
 * (1e-2 in norm: bf16 rounding flips of activations where the GPU's sums differ in
 * the last bit); a few steps add a few such updates, each step's gradient also
 * read at weights that moved apart by the earlier ones, hence 2.5x and 2x. Figures
 * seen are printed.
 * GRPO's rollouts and its evaluation decode on the device, on the training's bf16
 * copy of the policy (train_model_gen_device), with the host's Philox streams: the
 * GPU run's completions.jsonl (each completion's ids, rewards, advantage) is the CPU
 * bf16 run's byte for byte, with beta 0 and 0.04, and so are the evaluation's
 * eval_reward and mean length (an update's bf16 rounding could flip a sample where
 * the GPU's weights differ in their last bits: none does here); a run resumed from
 * checkpoint-2 decodes step 3 from step 2's weights (the uninterrupted run's
 * completions and model bytes: the stale-weights trap, which fails with the device
 * left behind); and the run copies down its checkpoint only, neither the gradient
 * (clipped on the device) nor the weights at every update (gpu_copied_bytes).
 * Also: the metrics files have the same keys line by line; micro-batch splits 1/2/4
 * of the same 4 examples give weights within 1e-5 relative (max |a - b| / max |b|
 * per tensor); SFT on a Qwen3 model (q/k norm) on the device in the bound above; a resume from a checkpoint on the device writes the uninterrupted
 * run's bytes; every form the GPU refuses (bf16 false; LoRA, the entropy bonus and
 * sync_ref_model train there: test_gpu_train_lora, test_gpu_train_opts) trains on the CPU, says so in one line naming
 * use_cpu, and writes the --use_cpu run's bytes; and without a GPU (the driver not
 * found) the plain commands write the --use_cpu runs' bytes and nothing more on
 * stderr. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "gpu/ops.h"
#include "model/model_io.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 41
#include "gpu_test.h"
#include "gpu_test_cli.h"

enum { MAXOUT = 1 << 16 };
static char tmp[256], errs[GPU_TEST_ERRS], errs2[GPU_TEST_ERRS];

/* ---- the models and data ---- */

/* The common options of the runs (tiny: a few steps, short completions). */
#define TRAIN "train --model %s/m2 --dataset %s/d.jsonl --reward_funcs length:5 --num_generations 4 " \
              "--per_device_train_batch_size 4 --max_completion_length 6 --max_steps 3 --learning_rate 5e-2 " \
              "--adam_epsilon 1 --logging_steps 1 --log_completions true --quiet --output_dir %s/%s"
/* GRPO's evaluation (eval_strategy) after the last of the 3 steps, on the same generator */
#define EVAL " --eval_strategy steps --eval_steps 3 --eval_dataset %s/d.jsonl"
#define SFT "sft --model %s/%s --dataset %s/s.jsonl --max_steps 3 --learning_rate 5e-2 --adam_epsilon 1 " \
            "--logging_steps 1 --output_dir %s/%s"

/* ---- comparisons ---- */

/* What training moved, GPU against CPU, per tensor, in the bound above: every tensor moves. */
static void check_moved(const char *what, const char *init_dir, const char *cpu_dir, const char *gpu_dir) {
    int n;
    gpu_test_check_moved(tmp, what, init_dir, cpu_dir, gpu_dir, 1, &n);
}

/* Splits of one batch: weights within 1e-5 relative, per tensor. */
static void check_split(const char *what, const char *a_dir, const char *b_dir) {
    GpuTestWeights a, b;
    gpu_test_weights_load(&a, tmp, a_dir), gpu_test_weights_load(&b, tmp, b_dir);
    if (a.ok && b.ok) {
        double worst = 0;
        const ParamTable *t = &a.m.table;
        for (int e = 0; e < t->n; e++) {
            const ParamEntry *pe = &t->entries[e];
            worst = fmax(worst, gpu_test_split_gap(a.m.params + pe->offset, b.m.params + pe->offset, pe->numel));
        }
        printf("  %s: max |a - b| / max |b| per tensor: %.3g\n", what, worst);
        T_CHECK(worst <= 1e-5, "%s: the splits differ by %.3g relative (bound 1e-5)", what, worst);
    }
    gpu_test_weights_free(&a), gpu_test_weights_free(&b);
}

static void check_metric_keys(const char *what, const char *cpu_dir, const char *gpu_dir) {
    static char a[MAXOUT], b[MAXOUT];
    gpu_test_metric_keys(tmp, cpu_dir, a, sizeof a), gpu_test_metric_keys(tmp, gpu_dir, b, sizeof b);
    T_CHECK(a[0] && !strcmp(a, b), "%s: metrics.jsonl keys differ:\n cpu %s\n gpu %s", what, a, b);
}

/* The value of "key" in DIR/metrics.jsonl as written (its last), or "". */
static void metric_text(const char *dir, const char *key, char *out, size_t n) {
    static char text[MAXOUT];
    char path[400], quoted[64];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, dir);
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    gpu_test_slurp(path, text, sizeof text);
    const char *p = NULL;
    for (const char *q = text; (q = strstr(q, quoted)); q++) p = q + strlen(quoted);
    snprintf(out, n, "%.*s", p ? (int)strcspn(p, ",}") : 0, p ? p : "");
}

/* The evaluations' mean reward and completion length the same as written. */
static void check_eval(const char *what, const char *a_dir, const char *b_dir) {
    static const char *const keys[] = {"eval_reward", "eval_completions/mean_length"};
    for (int k = 0; k < 2; k++) {
        char a[64], b[64];
        metric_text(a_dir, keys[k], a, sizeof a), metric_text(b_dir, keys[k], b, sizeof b);
        T_CHECK(a[0] && !strcmp(a, b), "%s: %s %s against %s's %s", what, keys[k], b[0] ? b : "(none)", a_dir, a);
        if (a[0] && !strcmp(a, b)) printf("  %s: %s %s, the same\n", what, keys[k], a);
    }
}

/* Floats of the test model's parameter table (P). */
static size_t model_floats(const char *dir) {
    GpuTestWeights w;
    gpu_test_weights_load(&w, tmp, dir);
    size_t P = w.ok ? w.m.table.total : 0;
    gpu_test_weights_free(&w);
    return P;
}

/* One line on stderr says the CPU trains, naming why and use_cpu. */
static void check_note(const char *what, const char *e, const char *why) {
    const char *line = strstr(e, "trains on the CPU");
    int count = 0;
    for (const char *p = e; (p = strstr(p, "trains on the CPU")); p++) count++;
    T_CHECK(line && count == 1 && strstr(e, why) && strstr(e, "--use_cpu"),
            "%s: expected one line naming %s and --use_cpu, got:\n%s", what, why, e);
    if (line) {
        const char *start = line;
        while (start > e && start[-1] != '\n') start--;
        printf("  %s: %.*s\n", what, (int)(strchr(line, '\n') ? strchr(line, '\n') - start : 200), start);
    }
}

/* A refused form: the plain command as --use_cpu true runs it, with the one line. */
static void check_refused(const char *what, int (*fn)(int, char **), const char *base, const char *extra,
                          const char *file, const char *why) {
    char a[400], b[400];
    T_CHECK(!gpu_test_run(tmp, errs, fn, "%s %s --output_dir %s/r_gpu --overwrite_output_dir true", base, extra, tmp),
            "%s: %s", what, errs);
    check_note(what, errs, why);
    T_CHECK(!gpu_test_run(tmp, errs2, fn,
                          "%s %s --use_cpu true --quiet --output_dir %s/r_cpu --overwrite_output_dir true", base, extra,
                          tmp),
            "%s --use_cpu: %s", what, errs2);
    snprintf(a, sizeof a, "%s/r_gpu/%s", tmp, file), snprintf(b, sizeof b, "%s/r_cpu/%s", tmp, file);
    T_CHECK(gpu_test_same_file(a, b), "%s: %s differs from the --use_cpu run's", what, file);
}

/* ---- the checks ---- */

/* What the GPU's run copied down: the last step's checkpoint (the master weights,
 * AdamW's m and v: 3 x 4 P, P the parameters; the final save finds the host's copy
 * current), the clip's block sums (8 bytes per 4096 parameters a step) and the
 * rollouts' tokens and log-probs (a few KB): 3 x 4 P + 2 P at most. Each step's
 * gradient brought to the host to be clipped there, as before train_model_clip, adds
 * 4 P a step (6 x 4 P in 3 steps); the host's copy following every update, as when the
 * rollouts decoded on it, the weights at each update (8 x 4 P). */
static void check_downloads(size_t down, int steps) {
    size_t P = model_floats("m2"), bound = 3 * 4 * P + 2 * P;
    T_CHECK(P > 0 && down <= bound, "grpo train on the GPU copied %zu bytes down in %d steps: more than %zu (the "
            "checkpoint's 3 tensors, 4 P each, P = %zu, and 2 P for the rest): the gradient or the weights come to "
            "the host each step", down, steps, bound, P);
    printf("  grpo train: %zu bytes down in %d steps, %.2f x 4 P (P = %zu; the checkpoint: 3)\n", down, steps,
           down / (4.0 * P), P);
}

static void check_grpo(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --use_cpu true --bf16 true" EVAL, tmp, tmp, tmp, "t_cpu", tmp),
            "cpu: %s", errs);
    size_t up0, down0, up1, down1;
    gpu_copied_bytes(&up0, &down0);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN EVAL, tmp, tmp, tmp, "t_gpu", tmp), "gpu: %s", errs);
    gpu_copied_bytes(&up1, &down1);
    T_CHECK(!errs[0], "the GPU run (--quiet) wrote to stderr: %s", errs);
    check_moved("grpo train", "m2", "t_cpu", "t_gpu");
    check_metric_keys("grpo train", "t_cpu", "t_gpu");
    gpu_test_check_rollouts(tmp, "grpo train, rollouts decoded on the GPU against the CPU's bf16", "t_cpu", "t_gpu");
    check_eval("grpo train's evaluation on the GPU against the CPU's bf16", "t_cpu", "t_gpu");
    check_downloads(down1 - down0, 3);
    T_CHECK(
        !gpu_test_run(tmp, errs, cmd_train, TRAIN " --beta 0.04 --use_cpu true --bf16 true", tmp, tmp, tmp, "k_cpu"),
        "cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --beta 0.04", tmp, tmp, tmp, "k_gpu"), "gpu, beta 0.04: %s",
            errs);
    check_moved("grpo train --beta 0.04 (the reference on the device)", "m2", "k_cpu", "k_gpu");
    check_metric_keys("grpo train --beta 0.04", "k_cpu", "k_gpu");
    gpu_test_check_rollouts(tmp, "grpo train --beta 0.04", "k_cpu", "k_gpu");
}

/* A GRPO run resumed from checkpoint-2 generates step 3's rollouts from the weights
 * of step 2 (the resume writes the host's copy; the device must take it before it
 * decodes): the uninterrupted run's (t_gpu's) completions and final weights. The run
 * that wrote the checkpoint prints its plan: the generator on the GPU. t_gpu also
 * evaluated after step 3, these runs do not: the evaluation leaves training as it was. */
static void check_grpo_resume(void) {
    char a[400], b[400];
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --save_steps 2 --quiet false", tmp, tmp, tmp, "g_ck"),
            "with checkpoints: %s", errs);
    const char *plan = strstr(errs, "generation on the GPU");
    T_CHECK(plan && strstr(errs, "decoding the policy's bf16 copy"), "the plan does not say the GPU generates: %s", errs);
    if (plan) printf("  the plan: ...%.*s\n", (int)strcspn(plan, "\n"), plan);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --resume_from_checkpoint %s/g_ck/checkpoint-2", tmp, tmp, tmp,
                          "g_re", tmp),
            "resume: %s", errs);
    snprintf(a, sizeof a, "%s/t_gpu/model.safetensors", tmp), snprintf(b, sizeof b, "%s/g_re/model.safetensors", tmp);
    int same = gpu_test_same_file(a, b);
    T_CHECK(same, "grpo train resumed on the GPU: the model differs from the uninterrupted run's");
    snprintf(a, sizeof a, "%s/t_gpu/completions.jsonl", tmp), snprintf(b, sizeof b, "%s/g_re/completions.jsonl", tmp);
    int rollouts = gpu_test_file_ends(a, b);
    T_CHECK(rollouts, "grpo train resumed on the GPU: step 3's completions are not the uninterrupted run's");
    if (same && rollouts)
        printf("  grpo train resumed from checkpoint-2 on the GPU: step 3's completions and the final model the "
               "uninterrupted run's bytes\n");
}

static void check_sft(void) {
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2 --quiet --use_cpu true --bf16 true",
                          tmp, "m2", tmp, tmp, "s_cpu"),
            "cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2", tmp, "m2", tmp, tmp, "s_gpu"),
            "gpu: %s", errs);
    T_CHECK(strstr(errs, "on the GPU") && strstr(errs, "one layer's activations kept, layers recomputed"),
            "the plan does not say the GPU trains: %s", errs);
    const char *plan = strstr(errs, "memory plan");
    if (plan) printf("  the plan: %.*s\n", (int)strcspn(plan, "\n"), plan);
    check_moved("grpo sft", "m2", "s_cpu", "s_gpu");
    check_metric_keys("grpo sft", "s_cpu", "s_gpu");
    /* the same 4 examples a step as 4 x 1, 2 x 2 and 1 x 4 */
    static const int split[3][2] = {{1, 4}, {2, 2}, {4, 1}};
    for (int i = 0; i < 3; i++) {
        char dir[16];
        snprintf(dir, sizeof dir, "b%d", split[i][0]);
        T_CHECK(!gpu_test_run(tmp, errs, cmd_sft,
                              SFT " --quiet --per_device_train_batch_size %d --gradient_accumulation_steps %d", tmp,
                              "m2", tmp, tmp, dir, split[i][0], split[i][1]),
                "split %d: %s", split[i][0], errs);
    }
    check_split("micro-batches 1 x 4 against 4 x 1", "b1", "b4");
    check_split("micro-batches 2 x 2 against 4 x 1", "b2", "b4");
    /* a Qwen3 model (q/k norm in the training layer) on the device */
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2 --quiet --use_cpu true --bf16 true",
                          tmp, "m3", tmp, tmp, "q_cpu"),
            "qwen3 cpu: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2", tmp, "m3", tmp, tmp, "q_gpu"),
            "qwen3 gpu: %s", errs);
    T_CHECK(strstr(errs, "on the GPU") != NULL, "qwen3: the plan does not say the GPU trains: %s", errs);
    check_moved("grpo sft, a Qwen3 model", "m3", "q_cpu", "q_gpu");
}

static void check_resume(void) {
    char a[400], b[400];
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2 --quiet --max_steps 4", tmp, "m2",
                          tmp, tmp, "ra"),
            "uninterrupted: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft,
                          SFT " --per_device_train_batch_size 2 --quiet --max_steps 4 --save_steps 2", tmp, "m2", tmp,
                          tmp, "rb"),
            "with checkpoints: %s", errs);
    snprintf(b, sizeof b, "%s/rb/model.safetensors", tmp);
    unlink(b);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft,
                          SFT " --per_device_train_batch_size 2 --quiet --max_steps 4 --resume_from_checkpoint "
                              "%s/rb/checkpoint-2 --overwrite_output_dir true",
                          tmp, "m2", tmp, tmp, "rb", tmp),
            "resume: %s", errs);
    snprintf(a, sizeof a, "%s/ra/model.safetensors", tmp);
    int same = gpu_test_same_file(a, b);
    T_CHECK(same, "the resumed run on the GPU differs from the uninterrupted one");
    if (same) printf("  resume from checkpoint-2 on the GPU: the uninterrupted run's bytes\n");
}

static void check_refusals(void) {
    char base[1200];
    snprintf(base, sizeof base, "sft --model %s/m2 --dataset %s/s.jsonl --max_steps 2 --learning_rate 1e-3 "
             "--per_device_train_batch_size 2", tmp, tmp);
    check_refused("sft --bf16 false", cmd_sft, base, "--bf16 false", "model.safetensors", "bf16 false");
}

/* gpu_master_to_weights: f32_split's upper half bit for bit (random values, ties
 * either way, NaNs, infinities, zeros of both signs), and the fp32 copy. */
static void check_master_kernel(void) {
    enum { N = 3000 };
    float *x = randoms(N, 4.0f);
    uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xff800001u,
                          0x80000000u, 0x00000000u, 0x7f7fffffu, 0x00008000u, 0x7f7f8000u};
    memcpy(x, special, sizeof special);
    for (int i = 100; i < 200; i++) { /* ties: the lower half exactly 0x8000 */
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&x[i], &u, 4);
    }
    CUdeviceptr src = upload(x, 4 * N), d16, d32;
    T_CHECK(!gpu_alloc(&dev, &d16, 2 * N, &err) && !gpu_alloc(&dev, &d32, 4 * N, &err), "%s", err.msg);
    T_CHECK(!gpu_master_to_weights(&dev, d16, 0, src, N, &err) && !gpu_master_to_weights(&dev, 0, d32, src, N, &err),
            "%s", err.msg);
    uint16_t *got16 = malloc(2 * N);
    float *got32 = malloc(4 * N);
    download(got16, d16, 2 * N), download(got32, d32, 4 * N);
    int bad16 = 0;
    for (int i = 0; i < N; i++) {
        uint16_t hi, lo;
        f32_split(x[i], &hi, &lo);
        bad16 += got16[i] != hi;
    }
    T_CHECK(!bad16, "gpu_master_to_weights: %d bf16 values differ from f32_split's upper half", bad16);
    T_CHECK(!memcmp(got32, x, 4 * N), "gpu_master_to_weights: the fp32 copy differs");
    T_CHECK(gpu_master_to_weights(&dev, 0, 0, src, N, &err) < 0, "no destination: accepted");
    printf("  gpu_master_to_weights: %d values (ties, NaNs, infinities) as f32_split, the copy exact\n", N);
    gpu_free(&dev, src), gpu_free(&dev, d16), gpu_free(&dev, d32);
    free(x), free(got16), free(got32);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_master_kernel();
    gpu_close(&dev); /* the commands open their own */
    check_grpo();
    check_grpo_resume();
    check_sft();
    check_resume();
    check_refusals();
}

/* No GPU (the driver not found): the commands as they were, in silence. */
static void check_no_gpu(void) {
    char why[256] = "", a[400], b[400];
    GpuDevice d;
    if (gpu_open(&d, why, sizeof why, &err) != 0) {
        printf("  (a GPU is here: the no-GPU runs are checked where there is none)\n");
        return;
    }
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, "n_plain") && !errs[0], "no GPU: %s", errs);
    T_CHECK(!gpu_test_run(tmp, errs, cmd_train, TRAIN " --use_cpu true", tmp, tmp, tmp, "n_cpu") && !errs[0],
            "--use_cpu: %s", errs);
    snprintf(a, sizeof a, "%s/n_plain/model.safetensors", tmp), snprintf(b, sizeof b, "%s/n_cpu/model.safetensors", tmp);
    T_CHECK(gpu_test_same_file(a, b), "no GPU: grpo train's model differs from --use_cpu's");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_sft, SFT " --per_device_train_batch_size 2", tmp, "m2", tmp, tmp, "o_plain"),
            "%s", errs);
    T_CHECK(!gpu_test_run(tmp, errs2, cmd_sft, SFT " --per_device_train_batch_size 2 --use_cpu true", tmp, "m2", tmp,
                          tmp, "o_cpu"),
            "%s", errs2);
    T_CHECK(!strstr(errs, "GPU") && !strstr(errs, "use_cpu"), "no GPU: sft said something of it: %s", errs);
    snprintf(a, sizeof a, "%s/o_plain/model.safetensors", tmp), snprintf(b, sizeof b, "%s/o_cpu/model.safetensors", tmp);
    T_CHECK(gpu_test_same_file(a, b), "no GPU: grpo sft's model differs from --use_cpu's");
    printf("  no GPU (%s): train and sft write the --use_cpu runs' bytes, nothing more said\n", why);
}

int main(void) {
    gpu_test_tmp_make(tmp, sizeof tmp, "test_gpu_train");
    gpu_test_make_model(tmp, errs, "qwen2", "m2");
    gpu_test_make_model(tmp, errs, "qwen3", "m3");
    gpu_test_write_data(tmp);
    check_no_gpu();
    int rc = gpu_test_main("test_gpu_train", check_all);
    gpu_test_tmp_remove(tmp);
    return rc;
}
