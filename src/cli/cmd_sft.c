/* cli/cmd_sft.c — `grpo sft`: supervised fine-tuning / pre-training (sft/sft.h)
 * with the same training options as grpo train (TRL's SFTConfig names), or a
 * --config YAML file. The options are declared in sft/sft.c and train/args.c. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ranks.h"
#include "cli/train_events.h"
#include "dist/dist.h"
#include "sft/sft.h"

int cmd_sft(int argc, char **argv) {
    SftConfig c;
    sft_config_default(&c);
    OptGroup g[SFT_CONFIG_N_GROUPS];
    sft_config_groups(g);
    int rc = args_parse("sft", "--model DIR --dataset FILE --output_dir DIR [options]", argc, argv, g,
                        SFT_CONFIG_N_GROUPS, &c);
    rc = cli_ranks_agree("sft", rc, g, SFT_CONFIG_N_GROUPS, &c); /* under mpirun: same options, same inputs */
    GrpoErr err;
    if (rc) {
        rc = rc == 1 ? 0 : rc;
    } else if (sft_config_check(&c, &err)) { /* alike on every process: rank 0 says it */
        if (dist_rank() == 0) fprintf(stderr, "grpo sft: %s\n", err.msg);
        rc = 2;
    } else {
        cli_setup_threads();
        TrainEvents ev;
        TrainHooks hooks = train_events_start(&ev, "sft");
        rc = train_events_end(&ev, sft_run(&c, &hooks, &err), &err);
    }
    args_free();
    return rc;
}
