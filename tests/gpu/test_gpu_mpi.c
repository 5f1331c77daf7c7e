/* tests/gpu/test_gpu_mpi.c — `mpirun -np N grpo train` with one process per GPU
 * (gpu_open_local, dist_local_rank): each process trains on the GPU of its local rank,
 * and the run's result does not depend on the number of processes. On the tests'
 * emulated machine of GRPO_EMU_GPUS GPUs (tests/machine/gpu_emulator.c): this program
 * is also the ranks' program — `test_gpu_mpi rank train ...` runs cmd_train on the
 * emulated GPUs under mpirun and says which GPUs its process took.
 *
 * Checked: two processes on a machine of two GPUs take GPU 0 and GPU 1 (one each)
 * and say so in the plan; they write the completions of one process with the same
 * global batch byte for byte and weights within 1e-5 relative (max |a - b| / max |b|
 * per tensor; AdamW epsilon 1, test_gpu_train's rule; training moved them by more
 * than 1e-3): the gradient's sum over processes goes through host memory (the loop's
 * dist_sum_f32), in rank order. Two processes on a machine of one GPU stop with one
 * line naming both counts, before training; with --use_cpu true they train on the
 * CPU and take no GPU. Needs mpirun (tools/install-deps.sh installs openmpi-bin);
 * on a real GPU (GRPO_REQUIRE_GPU=1) there is nothing here to run: the emulated
 * machine is what gives two GPUs. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "dist/dist.h"
#include "machine/gpu_emulator.h"
#include "model/model_io.h"
#include "testutil.h"

enum { MAXOUT = 1 << 16 };
static char tmp[256], self[PATH_MAX], out[MAXOUT];
static GrpoErr err;

/* ---- a rank: cmd_train on the emulated GPUs ---- */

static int rank_main(int argc, char **argv) {
    dist_init(&argc, &argv);
    test_gpu_machine(1);
    int rc = cmd_train(argc - 1, argv + 1); /* argv: rank train ... */
    fprintf(stderr, "test_gpu_mpi: rank %d, local rank %d of %d: GPUs taken 0x%x\n", dist_rank(), dist_local_rank(),
            dist_local_size(), gpu_emu_devices_used());
    return rc;
}

/* ---- the test ---- */

/* sh -c line, its stderr into tmp/name.err and then out; the exit status. */
static int shell(const char *name, const char *line) {
    char cmd[9000], path[400];
    snprintf(path, sizeof path, "%s/%s.err", tmp, name);
    snprintf(cmd, sizeof cmd, "%s >/dev/null 2>'%s'", line, path);
    int rc = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return rc;
}

#define TRAIN "train --model %s/m --dataset %s/d.jsonl --reward_funcs length:5 --num_generations 4 " \
              "--max_completion_length 6 --max_steps 2 --learning_rate 5e-2 --adam_epsilon 1 --logging_steps 1 " \
              "--log_completions true --seed 3"

static void make_inputs(void) {
    char line[1024];
    /* grpo init needs no GPU: the built binary ($BUILD/grpo) makes the model */
    snprintf(line, sizeof line,
             "sed 's/\"vocab_size\": 96/\"vocab_size\": 300/; s/\"eos_token_id\": 2,/\"eos_token_id\": 258,/' "
             "tests/fixtures/qwen2/config.json > %s/config.json && '%s' init --config %s/config.json "
             "--tokenizer assets/byte-tokenizer --seed 1 --output_dir %s/m",
             tmp, getenv("GRPO") ? getenv("GRPO") : "build/grpo", tmp, tmp);
    T_CHECK(!shell("init", line), "grpo init: %s", out);
    char path[300];
    snprintf(path, sizeof path, "%s/d.jsonl", tmp);
    FILE *f = fopen(path, "w");
    fputs("{\"prompt\": \"ab\"}\n{\"prompt\": \"cd\"}\n{\"prompt\": \"ef\"}\n{\"prompt\": \"gh\"}\n", f);
    fclose(f);
}

static int same_file(const char *a, const char *b) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cmp -s '%s/%s' '%s/%s'", tmp, a, tmp, b);
    return system(cmd) == 0;
}

/* Weights of runs a and b within 1e-5 relative per tensor, and moved from the initial ones. */
static void check_weights(const char *a, const char *b) {
    Model x, y, m0;
    char p[400], q[400], r[400];
    snprintf(p, sizeof p, "%s/%s", tmp, a), snprintf(q, sizeof q, "%s/%s", tmp, b), snprintf(r, sizeof r, "%s/m", tmp);
    int lx = !model_load_ex(&x, p, WEIGHTS_FP32, &err), ly = lx && !model_load_ex(&y, q, WEIGHTS_FP32, &err),
        l0 = ly && !model_load_ex(&m0, r, WEIGHTS_FP32, &err);
    T_CHECK(l0, "the models of %s, %s and the initial one: %s", a, b, err.msg);
    if (!l0) {
        if (ly) model_free(&y);
        if (lx) model_free(&x);
        return;
    }
    double worst = 0, moved = 0;
    const ParamTable *t = &x.table;
    for (int e = 0; e < t->n; e++) {
        const ParamEntry *pe = &t->entries[e];
        const float *u = x.params + pe->offset, *v = y.params + pe->offset, *w = m0.params + pe->offset;
        double top = 0, diff = 0;
        for (size_t i = 0; i < pe->numel; i++) {
            top = fmax(top, fabs(v[i])), diff = fmax(diff, fabs(u[i] - v[i]));
            moved = fmax(moved, fabs(u[i] - w[i]));
        }
        if (top > 0) worst = fmax(worst, diff / top);
    }
    T_CHECK(moved > 1e-3, "training moved the weights by %g only: the comparison would prove nothing", moved);
    T_CHECK(worst <= 1e-5, "%s vs %s: weights differ by %g relative (bound 1e-5)", a, b, worst);
    printf("  %s vs %s: weights within %.2g relative (bound 1e-5; training moved them by %.3g)\n", a, b, worst, moved);
    model_free(&x), model_free(&y), model_free(&m0);
}

static void check_ranks(void) {
    char line[8192], base[1024];
    snprintf(base, sizeof base, TRAIN, tmp, tmp);
    snprintf(line, sizeof line, "GRPO_EMU_GPUS=1 '%s' rank %s --per_device_train_batch_size 4 --output_dir %s/one", self,
             base, tmp);
    T_CHECK(!shell("one", line), "one process: %s", out);
    T_CHECK(strstr(out, "GPUs taken 0x1") != NULL, "one process did not train on GPU 0:\n%s", out);
    const char *mpi = "mpirun --oversubscribe --bind-to none";
    snprintf(line, sizeof line, "GRPO_EMU_GPUS=2 %s -np 2 '%s' rank %s --per_device_train_batch_size 2 --output_dir %s/two",
             mpi, self, base, tmp);
    T_CHECK(!shell("two", line), "two processes: %s", out);
    T_CHECK(strstr(out, "rank 0, local rank 0 of 2: GPUs taken 0x1") && strstr(out, "rank 1, local rank 1 of 2: GPUs "
            "taken 0x2"), "two processes on two GPUs did not take one GPU each:\n%s", out);
    T_CHECK(strstr(out, "GPU 0: ") != NULL, "the plan does not name the GPU of a machine of several:\n%s", out);
    T_CHECK(same_file("one/completions.jsonl", "two/completions.jsonl"), "1 vs 2 processes: completions differ");
    check_weights("one", "two");
    printf("  2 processes on 2 GPUs: GPU 0 and GPU 1, the completions of 1 process byte for byte\n");

    snprintf(line, sizeof line, "GRPO_EMU_GPUS=1 %s -np 2 '%s' rank %s --per_device_train_batch_size 2 --output_dir "
             "%s/over", mpi, self, base, tmp);
    T_CHECK(shell("over", line) != 0, "two processes on one GPU: accepted");
    const char *want = "2 processes on this machine and 1 GPU: one process per GPU (mpirun -np 1)";
    T_CHECK(strstr(out, want) != NULL, "two processes on one GPU: no line saying '%s':\n%s", want, out);
    T_CHECK(!strstr(out, "GPUs taken 0x1"), "two processes on one GPU: one of them trained there:\n%s", out);
    printf("  2 processes on 1 GPU: stopped with \"%s\"\n", want);
    snprintf(line, sizeof line, "GRPO_EMU_GPUS=1 %s -np 2 '%s' rank %s --per_device_train_batch_size 2 --use_cpu true "
             "--output_dir %s/cpu", mpi, self, base, tmp);
    T_CHECK(!shell("cpu", line), "--use_cpu true, 2 processes on 1 GPU: %s", out);
    T_CHECK(strstr(out, "rank 1, local rank 1 of 2: GPUs taken 0x0") != NULL, "--use_cpu took a GPU:\n%s", out);
    printf("  2 processes on 1 GPU with --use_cpu true: trained on the CPU\n");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "rank")) return rank_main(argc - 1, argv + 1);
    const char *need = getenv("GRPO_REQUIRE_GPU");
    if (need && !strcmp(need, "1")) {
        printf("test_gpu_mpi: the emulated machine of two GPUs only (nothing to run on a real GPU)\n");
        return t_summary("test_gpu_mpi");
    }
    if (system("command -v mpirun >/dev/null 2>&1")) {
        T_CHECK(0, "mpirun not found (tools/install-deps.sh installs openmpi-bin)");
        return t_summary("test_gpu_mpi");
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    /* mpirun as tests/cli/lib.sh's mpi_env runs it (root in CI containers, no CMA, ASan's leaks of OpenMPI's) */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1), setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1), setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1), setenv("GRPO_THREADS", "1", 1);
    char supp[PATH_MAX + 64], cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) {
        snprintf(supp, sizeof supp, "suppressions=%s/tests/cli/lsan-openmpi.supp:print_suppressions=0", cwd);
        setenv("LSAN_OPTIONS", supp, 1);
    }
    const char *asan = getenv("ASAN_OPTIONS");
    char asan_opts[512];
    snprintf(asan_opts, sizeof asan_opts, "%s%sfast_unwind_on_malloc=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", asan_opts, 1);
    snprintf(tmp, sizeof tmp, "/tmp/test_gpu_mpi_%d", (int)getpid());
    mkdir(tmp, 0700);
    make_inputs();
    check_ranks();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) printf("could not remove %s\n", tmp);
    return t_summary("test_gpu_mpi");
}
