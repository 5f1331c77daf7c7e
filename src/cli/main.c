/* cli/main.c — `grpo COMMAND [options]`: dispatch to cli/cmd_*.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "dist/dist.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} Command;

static const Command commands[] = {
    {"init", cmd_init, "write a randomly initialised model directory (HF layout)"},
    {"score", cmd_score, "per-token log-probabilities of completions (JSON lines)"},
    {"train", cmd_train, "GRPO training (TRL's GRPOConfig options, or --config run.yaml)"},
    {"sft", cmd_sft, "supervised fine-tuning / pre-training with next-token cross-entropy"},
    {"generate", cmd_generate, "sample completions from a model (text or JSON lines)"},
    {"tokenize", cmd_tokenize, "encode text to ids or decode ids to text (JSON lines)"},
    {"eval", cmd_eval, "generate on a dataset and report mean rewards and pass@1"},
    {"plot", cmd_plot, "draw a run's metrics.jsonl as an SVG chart"},
    {"merge", cmd_merge, "fold a PEFT LoRA adapter into its base model (a full HF model directory)"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: grpo COMMAND [options]   (grpo COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* libgomp spins up to 300,000 iterations waiting for work at every barrier. On a
 * machine whose cores are shared with other processes that spinning takes the
 * core from the thread with the work, and a small model's step became 10x slower
 * (measured: 38 s vs 4 s for 20 SFT steps under load). libgomp reads its settings
 * before main, so when the user has set neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY we set a short spin and re-execute ourselves once. */
static void set_openmp_wait(char **argv) {
    if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY")) return;
    setenv("GOMP_SPINCOUNT", "1000", 1);
    execv("/proc/self/exe", argv);
    /* if that failed, carry on with libgomp's defaults */
}

int main(int argc, char **argv) {
    set_openmp_wait(argv);
    dist_init(&argc, &argv); /* one of N ranks under mpirun; a world of one otherwise */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (dist_size() > 1 && strcmp(argv[1], "train") && strcmp(argv[1], "sft")) {
        if (dist_rank() == 0)
            fprintf(stderr, "grpo %s: runs as one process; start it without mpirun (grpo train and grpo sft run "
                    "data-parallel under mpirun)\n", argv[1]);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "grpo: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
