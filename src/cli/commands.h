/* cli/commands.h — one function per `grpo` subcommand, each in cli/cmd_NAME.c.
 * A command returns the process exit status: 0 ok, 1 bad input, 2 usage. */
#ifndef GRPO_CLI_COMMANDS_H
#define GRPO_CLI_COMMANDS_H

int cmd_init(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sft(int argc, char **argv);
int cmd_merge(int argc, char **argv);

#endif
