/* cli/cmd_sft.c — `grpo sft`: supervised fine-tuning / pre-training (sft/sft.h),
 * with the same optimizer, schedule, checkpoint and logging options as grpo train
 * (TRL's SFTConfig names), or a --config YAML file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_opts.h"
#include "sft/sft.h"

int cmd_sft(int argc, char **argv) {
    SftConfig c;
    sft_config_default(&c);
    const char *config = NULL;
    long B = c.per_device_train_batch_size, GA = c.gradient_accumulation_steps, maxlen = c.max_length;
    int completion_only = 1, shuffle = 1;
    Opt own[] = {
        {"config", OPT_YAML, &config, "YAML file of these options (the command line wins)"},
        {"model", OPT_STR, &c.model_dir, "model directory (HF layout) (required)"},
        {"dataset", OPT_STR, &c.dataset, "JSON lines: text | prompt + completion | messages (required)"},
        {"output_dir", OPT_STR, &c.output_dir, "where metrics, checkpoints and the model go (required)"},
        {"per_device_train_batch_size", OPT_INT, &B, "examples per forward/backward (default 8)"},
        {"gradient_accumulation_steps", OPT_INT, &GA, "micro-batches per optimizer step (default 1)"},
        {"max_length", OPT_INT, &maxlen, "tokens kept per example (default 1024)"},
        {"completion_only_loss", OPT_FLAG, &completion_only, "prompt + completion: loss on the completion only (default true)"},
        {"shuffle_dataset", OPT_FLAG, &shuffle, "shuffle each epoch (default true)"},
    };
    enum { N_OWN = sizeof own / sizeof own[0] };
    Opt opts[N_OWN + TRAIN_OPTS_COUNT];
    TrainOptValues tv;
    memcpy(opts, own, sizeof own);
    train_opts_add(opts + N_OWN, &tv, &c.train);
    int rc = args_parse("sft", "--model DIR --dataset FILE --output_dir DIR [options]", argc, argv, opts,
                        sizeof opts / sizeof opts[0]);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    rc = 0;
    const char *bad = train_opts_apply(&tv, &c.train);
    if (!c.model_dir || !c.dataset || !c.output_dir) {
        fprintf(stderr, "grpo sft: --model, --dataset and --output_dir are required\n");
        rc = 2;
    } else if (bad) {
        fprintf(stderr, "grpo sft: %s\n", bad);
        rc = 2;
    }
    if (!rc) {
        c.per_device_train_batch_size = (int)B;
        c.gradient_accumulation_steps = (int)GA;
        c.max_length = (int)maxlen;
        c.completion_only_loss = completion_only;
        c.shuffle_dataset = shuffle;
        cli_setup_threads();
        GrpoErr err;
        if (sft_run(&c, &err)) rc = cli_fail("sft", err.msg);
    }
    args_free();
    return rc;
}
