/* cli/args.h — the command line and YAML files of the subcommands, over the
 * options each command declares once (core/options.h). Option names follow TRL's
 * GRPOConfig where one exists. */
#ifndef GRPO_CLI_ARGS_H
#define GRPO_CLI_ARGS_H

#include "core/options.h"

/* Parses argv[1..] (argv[0] is the command name) into the struct at obj, whose
 * defaults the caller has set. `--help` prints the options with those defaults
 * and returns 1 (the caller then exits 0). Usage errors are collected over the files
 * and the command line — every bad value, refused TRL value, range (opts_check) and,
 * for the training commands, training_args_check's rule — and printed one a line
 * with the unknown keys before 2 is returned; else the keys without effect get one
 * warning line and 0 is returned. An OPT_CONFIG option names a YAML
 * mapping of the same option names (scalars, or sequences for lists) read first:
 * the command line wins over the file. Strings live until args_free(). */
int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const OptGroup *g, int ng, void *obj);
void args_free(void);

/* For a command that reads another's files (`grpo eval --config` on a training
 * recipe): the next args_parse sets this command's options from a --config file
 * as usual, maps cmd's TRL aliases onto them (model_name_or_path), and leaves
 * aside, silently, the file's keys that are only options of cmd (its groups
 * g[ng]) or its TRL keys (learning_rate, use_vllm): settings of the other
 * command, not unknown names. The command line is not affected. Until args_free. */
void args_config_also(const char *cmd, const OptGroup *g, int ng);

/* For commands: prints "grpo CMD: message" to stderr and returns 1 (bad input). */
int cli_fail(const char *cmd, const char *msg);

/* Sets the OpenMP/OpenBLAS thread count from $GRPO_THREADS (OpenMP itself reads
 * OMP_NUM_THREADS; default: all cores). */
void cli_setup_threads(void);

#endif
