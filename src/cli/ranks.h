/* cli/ranks.h — under mpirun, the ranks of grpo train and grpo sft agree on
 * their command line and inputs before anything is loaded (dist_agree), and
 * every collective gets the run's ddp_timeout. */
#ifndef GRPO_CLI_RANKS_H
#define GRPO_CLI_RANKS_H

#include "core/options.h"

/* Collective (a no-op returning parse_rc in a world of one). parse_rc is
 * args_parse's result on this rank. Sets dist's timeout from the ddp_timeout
 * option, then compares every rank's command, every option's value (all of
 * them: none may differ between ranks), the contents of each input the options
 * name (model and adapter directories, datasets, the --config file: io/digest.h)
 * and the checkpoint a resume starts from (latest resolved, and its contents).
 * Returns what the command goes on with: parse_rc when every rank parsed and
 * agrees; the largest rank's parse_rc when some rank refused its command line
 * (it printed why); 2 when they disagree, rank 0 having printed one line,
 * "grpo CMD: ranks disagree: --seed is 1 on rank 0 and 2 on rank 1". */
int cli_ranks_agree(const char *cmd, int parse_rc, const OptGroup *g, int ng, const void *obj);

#endif
