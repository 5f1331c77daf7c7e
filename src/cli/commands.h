/* cli/commands.h — one function per `grpo` subcommand, each in cli/cmd_NAME.c.
 * A command returns the process exit status: 0 ok, 1 bad input, 2 usage. */
#ifndef GRPO_CLI_COMMANDS_H
#define GRPO_CLI_COMMANDS_H

#include "gen/generate.h"
#include "tokenizer/tokenizer.h"

int cmd_init(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sft(int argc, char **argv);

/* Generation eos ids: the model's config/generation_config and the tokenizer's
 * (cmd_generate.c; shared with cmd_eval.c). */
int cli_collect_eos(GenOpts *o, const Model *m, const Tokenizer *tok, GrpoErr *err);

#endif
