/* cli/cmd_train.c — `grpo train`: GRPO training from the command line or a YAML
 * file (--config run.yaml; the same option names, TRL's GRPOConfig; the command
 * line wins). The options are declared in grpo/config.c and the groups it
 * shares; this file only runs them. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ranks.h"
#include "cli/train_events.h"
#include "dist/dist.h"
#include "grpo/trainer.h"

int cmd_train(int argc, char **argv) {
    TrainConfig c;
    train_config_default(&c);
    OptGroup g[TRAIN_CONFIG_N_GROUPS];
    train_config_groups(g);
    int rc = args_parse("train", "--model DIR --dataset FILE --reward_funcs SPEC... --output_dir DIR [options]", argc,
                        argv, g, TRAIN_CONFIG_N_GROUPS, &c);
    rc = cli_ranks_agree("train", rc, g, TRAIN_CONFIG_N_GROUPS, &c); /* under mpirun: same options, same inputs */
    GrpoErr err;
    if (rc) {
        rc = rc == 1 ? 0 : rc; /* --help, or a usage error */
    } else if (train_config_check(&c, &err)) { /* alike on every process: rank 0 says it */
        if (dist_rank() == 0) fprintf(stderr, "grpo train: %s\n", err.msg);
        rc = 2;
    } else {
        if (c.eval_dataset && !c.eval_strategy && dist_rank() == 0) /* transformers is silent; nothing would be */
            fprintf(stderr, "grpo train: warning: eval_dataset is set but eval_strategy is 'no': no evaluation will run; "
                    "set eval_strategy steps (and eval_steps)\n");
        cli_setup_threads();
        TrainEvents ev;
        TrainHooks hooks = train_events_start(&ev, "train");
        rc = train_events_end(&ev, trainer_run(&c, &hooks, &err), &err);
    }
    args_free();
    return rc;
}
