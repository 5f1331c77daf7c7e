/* cli/args.h — `--name value` / `--name=value` / `--flag` option parsing for the
 * subcommands. Option names follow TRL's GRPOConfig where one exists. */
#ifndef GRPO_CLI_ARGS_H
#define GRPO_CLI_ARGS_H

typedef enum { OPT_STR, OPT_INT, OPT_FLOAT, OPT_FLAG, OPT_LIST, OPT_YAML } OptKind;

/* Values of an OPT_LIST option: `--reward_funcs a b c` (values up to the next
 * `--option`), or a YAML sequence. A later occurrence replaces the list. */
typedef struct {
    int n;
    const char **v;
} StrList;

typedef struct {
    const char *name;      /* without the leading dashes */
    OptKind kind;
    void *dst;             /* const char **, long *, double *, int *, StrList * */
    const char *help;
} Opt;

/* Parses argv[1..] (argv[0] is the command name). Returns 0, or prints a usage
 * error to stderr and returns 2. `--help` prints the options and returns 1 (the
 * caller then exits 0). An OPT_YAML option (dst: const char **) names a YAML file
 * that is read first: a YAML mapping of the same option names (scalars, or
 * sequences for list options); the command line wins over the file. Strings from
 * the file live until args_free(). */
int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const Opt *opts,
               int n_opts);
void args_free(void);

/* For commands: prints "grpo CMD: message" to stderr and returns 1 (bad input). */
int cli_fail(const char *cmd, const char *msg);

/* Sets OpenMP/OpenBLAS threads from $GRPO_THREADS or OMP_NUM_THREADS (default: all cores). */
void cli_setup_threads(void);

#endif
