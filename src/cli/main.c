/* cli/main.c — `grpo COMMAND [options]`: dispatch to cli/cmd_*.c; `grpo help
 * [COMMAND]` and `grpo --version`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/crash.h"
#include "core/text.h"
#include "core/suggest.h"
#include "core/version.h"
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

enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
    fprintf(out, "grpo %s\nusage: grpo COMMAND [options]   (grpo help COMMAND, or grpo COMMAND --help, for its options)\n\n"
                 "commands:\n", grpo_version());
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n  %-10s %s\n", "help", "this list, or a command's options (grpo help train)", "version",
            "the version (also grpo --version)");
}

static const Command *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name)) return &commands[i];
    return NULL;
}

/* One line for a name that is no command, with the likely one; returns 2 (usage). */
static int unknown_command(const char *name) {
    const char *cands[N_COMMANDS + 2];
    for (int i = 0; i < N_COMMANDS; i++) cands[i] = commands[i].name;
    cands[N_COMMANDS] = "help", cands[N_COMMANDS + 1] = "version";
    const char *near = suggest_name(name, cands, N_COMMANDS + 2);
    if (dist_rank() == 0) {
        char shown[200];
        fprintf(stderr, "grpo: unknown command '%s'", text_escaped(shown, sizeof shown, name, 80));
        if (near) fprintf(stderr, "; did you mean '%s'?", near);
        fprintf(stderr, " (grpo help lists the commands)\n");
    }
    return 2;
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
    crash_report_install(); /* after MPI_Init, whose own handlers it replaces */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
        printf("grpo %s\n", grpo_version());
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || (!strcmp(cmd, "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "help")) { /* grpo help CMD: CMD --help */
        const Command *c = find_command(argv[2]);
        if (!c) return unknown_command(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        return c->run(2, help_argv);
    }
    if (dist_size() > 1 && strcmp(cmd, "train") && strcmp(cmd, "sft")) {
        if (dist_rank() == 0)
            fprintf(stderr, "grpo %s: runs as one process; start it without mpirun (grpo train and grpo sft run "
                    "data-parallel under mpirun)\n", cmd);
        return 2;
    }
    const Command *c = find_command(cmd);
    return c ? c->run(argc - 1, argv + 1) : unknown_command(cmd);
}
