/* cli/train_opts.c — the shared training options (see train_opts.h). */
#include "cli/train_opts.h"

#include <string.h>

void train_opts_add(Opt *opts, TrainOptValues *v, const TrainingArgs *a) {
    *v = (TrainOptValues){
        .lr = a->learning_rate, .b1 = a->adam.beta1, .b2 = a->adam.beta2, .eps = a->adam.eps,
        .wd = a->adam.weight_decay, .warmup_ratio = a->warmup_ratio, .max_grad_norm = a->max_grad_norm,
        .epochs = a->num_train_epochs, .warmup_steps = a->warmup_steps, .max_steps = a->max_steps,
        .seed = (long)a->seed, .logging_steps = a->logging_steps, .save_steps = a->save_steps,
        .save_limit = a->save_total_limit, .lp_chunk = a->logprob_chunk_rows, .ckpt = a->gradient_checkpointing,
        .quiet = a->quiet, .sched = sched_name(a->lr_scheduler_type), .resume = a->resume_from_checkpoint,
    };
    Opt shared[TRAIN_OPTS_COUNT] = {
        {"learning_rate", OPT_FLOAT, &v->lr, "AdamW learning rate (grpo train 1e-6, grpo sft 2e-5)"},
        {"adam_beta1", OPT_FLOAT, &v->b1, "default 0.9"},
        {"adam_beta2", OPT_FLOAT, &v->b2, "default 0.999"},
        {"adam_epsilon", OPT_FLOAT, &v->eps, "default 1e-8"},
        {"weight_decay", OPT_FLOAT, &v->wd, "decoupled weight decay (default 0.0)"},
        {"lr_scheduler_type", OPT_STR, &v->sched, "linear (default) | cosine | constant | constant_with_warmup"},
        {"warmup_ratio", OPT_FLOAT, &v->warmup_ratio, "fraction of steps for warmup (default 0)"},
        {"warmup_steps", OPT_INT, &v->warmup_steps, "warmup steps (wins over warmup_ratio)"},
        {"max_grad_norm", OPT_FLOAT, &v->max_grad_norm, "gradient clipping norm (default 1.0; 0 = off)"},
        {"max_steps", OPT_INT, &v->max_steps, "optimizer steps (wins over num_train_epochs)"},
        {"num_train_epochs", OPT_FLOAT, &v->epochs, "passes over the data (default 3)"},
        {"seed", OPT_INT, &v->seed, "random seed (default 42)"},
        {"gradient_checkpointing", OPT_FLAG, &v->ckpt, "recompute layers in backward (default true)"},
        {"logprob_chunk_rows", OPT_INT, &v->lp_chunk, "LM-head rows computed at once (default 64)"},
        {"logging_steps", OPT_INT, &v->logging_steps, "steps per metrics.jsonl line (default 10)"},
        {"save_steps", OPT_INT, &v->save_steps, "steps between checkpoints (default 500; 0 = none)"},
        {"save_total_limit", OPT_INT, &v->save_limit, "checkpoints kept (default 0 = all)"},
        {"resume_from_checkpoint", OPT_STR, &v->resume, "checkpoint directory, or latest"},
        {"quiet", OPT_FLAG, &v->quiet, "no progress output"},
    };
    memcpy(opts, shared, sizeof shared);
}

const char *train_opts_apply(const TrainOptValues *v, TrainingArgs *a) {
    if (sched_parse(v->sched, &a->lr_scheduler_type))
        return "lr_scheduler_type must be linear, cosine, constant or constant_with_warmup";
    a->learning_rate = v->lr;
    a->adam.beta1 = v->b1, a->adam.beta2 = v->b2, a->adam.eps = v->eps, a->adam.weight_decay = v->wd;
    a->warmup_ratio = v->warmup_ratio;
    a->warmup_steps = v->warmup_steps;
    a->max_grad_norm = v->max_grad_norm;
    a->max_steps = v->max_steps;
    a->num_train_epochs = v->epochs;
    a->seed = (uint64_t)v->seed;
    a->gradient_checkpointing = v->ckpt;
    a->logprob_chunk_rows = (int)v->lp_chunk;
    a->logging_steps = (int)v->logging_steps;
    a->save_steps = v->save_steps;
    a->save_total_limit = (int)v->save_limit;
    a->resume_from_checkpoint = v->resume;
    a->quiet = v->quiet;
    return NULL;
}
