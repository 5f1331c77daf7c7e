/* cli/cmd_sft.c — `grpo sft`: supervised fine-tuning / pre-training (sft/sft.h),
 * with the same optimizer, schedule, checkpoint and logging options as grpo train
 * (TRL's SFTConfig names), or a --config YAML file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "sft/sft.h"

int cmd_sft(int argc, char **argv) {
    SftConfig c;
    sft_config_default(&c);
    const char *config = NULL, *sched = "linear";
    long B = c.per_device_train_batch_size, GA = c.gradient_accumulation_steps, maxlen = c.max_length;
    long warmup_steps = 0, max_steps = 0, seed = 42, logging_steps = c.logging_steps, save_steps = c.save_steps;
    long save_limit = 0, lp_chunk = c.logprob_chunk_rows;
    double lr = c.learning_rate, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0, warmup_ratio = 0, mgn = 1.0, epochs = 3;
    int completion_only = 1, shuffle = 1, ckpt = 1, quiet = 0;
    Opt opts[] = {
        {"config", OPT_YAML, &config, "YAML file of these options (the command line wins)"},
        {"model", OPT_STR, &c.model_dir, "model directory (HF layout) (required)"},
        {"dataset", OPT_STR, &c.dataset, "JSON lines: text | prompt + completion | messages (required)"},
        {"output_dir", OPT_STR, &c.output_dir, "where metrics, checkpoints and the model go (required)"},
        {"per_device_train_batch_size", OPT_INT, &B, "examples per forward/backward (default 8)"},
        {"gradient_accumulation_steps", OPT_INT, &GA, "micro-batches per optimizer step (default 1)"},
        {"max_length", OPT_INT, &maxlen, "tokens kept per example (default 1024)"},
        {"completion_only_loss", OPT_FLAG, &completion_only, "prompt + completion: loss on the completion only (default true)"},
        {"shuffle_dataset", OPT_FLAG, &shuffle, "shuffle each epoch (default true)"},
        {"learning_rate", OPT_FLOAT, &lr, "AdamW learning rate (default 2e-5)"},
        {"adam_beta1", OPT_FLOAT, &b1, "default 0.9"},
        {"adam_beta2", OPT_FLOAT, &b2, "default 0.999"},
        {"adam_epsilon", OPT_FLOAT, &eps, "default 1e-8"},
        {"weight_decay", OPT_FLOAT, &wd, "default 0.0"},
        {"lr_scheduler_type", OPT_STR, &sched, "linear (default) | cosine | constant | constant_with_warmup"},
        {"warmup_ratio", OPT_FLOAT, &warmup_ratio, "fraction of steps for warmup (default 0)"},
        {"warmup_steps", OPT_INT, &warmup_steps, "warmup steps (wins over warmup_ratio)"},
        {"max_grad_norm", OPT_FLOAT, &mgn, "gradient clipping norm (default 1.0)"},
        {"max_steps", OPT_INT, &max_steps, "optimizer steps (wins over num_train_epochs)"},
        {"num_train_epochs", OPT_FLOAT, &epochs, "passes over the data (default 3)"},
        {"seed", OPT_INT, &seed, "random seed (default 42)"},
        {"gradient_checkpointing", OPT_FLAG, &ckpt, "recompute layers in backward (default true)"},
        {"logprob_chunk_rows", OPT_INT, &lp_chunk, "LM-head rows computed at once (default 64)"},
        {"logging_steps", OPT_INT, &logging_steps, "steps per metrics.jsonl line (default 10)"},
        {"save_steps", OPT_INT, &save_steps, "steps between checkpoints (default 500; 0 = none)"},
        {"save_total_limit", OPT_INT, &save_limit, "checkpoints kept (default 0 = all)"},
        {"resume_from_checkpoint", OPT_STR, &c.resume_from_checkpoint, "checkpoint directory, or latest"},
        {"quiet", OPT_FLAG, &quiet, "no progress output"},
    };
    int rc = args_parse("sft", "--model DIR --dataset FILE --output_dir DIR [options]", argc, argv, opts,
                        sizeof opts / sizeof opts[0]);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    rc = 0;
    if (!c.model_dir || !c.dataset || !c.output_dir) {
        fprintf(stderr, "grpo sft: --model, --dataset and --output_dir are required\n");
        rc = 2;
    } else if (sched_parse(sched, &c.lr_scheduler_type)) {
        fprintf(stderr, "grpo sft: lr_scheduler_type '%s' is not linear, cosine, constant or constant_with_warmup\n", sched);
        rc = 2;
    } else if (lp_chunk < 1) {
        fprintf(stderr, "grpo sft: logprob_chunk_rows must be >= 1\n");
        rc = 2;
    }
    if (!rc) {
        c.per_device_train_batch_size = (int)B;
        c.gradient_accumulation_steps = (int)GA;
        c.max_length = (int)maxlen;
        c.completion_only_loss = completion_only;
        c.shuffle_dataset = shuffle;
        c.learning_rate = lr;
        c.adam.beta1 = b1, c.adam.beta2 = b2, c.adam.eps = eps, c.adam.weight_decay = wd;
        c.warmup_ratio = warmup_ratio;
        c.warmup_steps = warmup_steps;
        c.max_grad_norm = mgn;
        c.max_steps = max_steps;
        c.num_train_epochs = epochs;
        c.seed = (uint64_t)seed;
        c.gradient_checkpointing = ckpt;
        c.logprob_chunk_rows = (int)lp_chunk;
        c.logging_steps = (int)logging_steps;
        c.save_steps = save_steps;
        c.save_total_limit = (int)save_limit;
        c.quiet = quiet;
        cli_setup_threads();
        GrpoErr err;
        if (sft_run(&c, &err)) rc = cli_fail("sft", err.msg);
    }
    args_free();
    return rc;
}
