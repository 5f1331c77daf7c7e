/* cli/args.h — `--name value` / `--name=value` / `--flag` option parsing for the
 * subcommands. Option names follow TRL's GRPOConfig where one exists. */
#ifndef GRPO_CLI_ARGS_H
#define GRPO_CLI_ARGS_H

typedef enum { OPT_STR, OPT_INT, OPT_FLOAT, OPT_FLAG } OptKind;

typedef struct {
    const char *name;      /* without the leading dashes */
    OptKind kind;
    void *dst;             /* const char **, long *, double *, int * */
    const char *help;
} Opt;

/* Parses argv[1..] (argv[0] is the command name). Returns 0, or prints a usage
 * error to stderr and returns 2. `--help` prints the options and returns 1 (the
 * caller then exits 0). */
int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const Opt *opts,
               int n_opts);

/* For commands: prints "grpo CMD: message" to stderr and returns 1 (bad input). */
int cli_fail(const char *cmd, const char *msg);

/* Sets OpenMP/OpenBLAS threads from $GRPO_THREADS or OMP_NUM_THREADS (default: all cores). */
void cli_setup_threads(void);

#endif
