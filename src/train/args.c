/* train/args.c — the shared training options, declared once (args.h). */
#include "train/args.h"

#include <math.h>
#include <stddef.h>

#include "io/fsutil.h"


#define A(f) offsetof(TrainingArgs, f)
#define BIG 1e300

const char *const train_save_strategy_names[] = {"steps", "epoch", "no", "best", NULL};
const char *const train_ckpt_policy_names[] = {"selective", "full", NULL};

const OptSpec training_args_options[] = {
    OPT_CONFIG_ROW(A(config)),
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_REQUIRED | OPT_MODEL_PATH | OPT_IN(OPT_SEC_MODEL_DATA), "model directory (HF layout)"},
    {"dataset", OPT_STR, A(dataset), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_REQUIRED | OPT_DATA_PATH | OPT_IN(OPT_SEC_MODEL_DATA), "JSON lines file of examples"},
    {"output_dir", OPT_STR, A(output_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_REQUIRED | OPT_NO_RECORD | OPT_IN(OPT_SEC_MODEL_DATA), "where metrics, checkpoints and the final model go"},
    {"overwrite_output_dir", OPT_BOOL, A(overwrite_output_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_MODEL_DATA), "replace an earlier run's metrics and checkpoints in output_dir"},
    {"per_device_train_batch_size", OPT_INT, A(per_device_train_batch_size), 8, NULL, 1, 1 << 20, NULL, NULL,
     OPT_IN(OPT_SEC_BATCH), "sequences per forward/backward (the micro-batch)"},
    {"gradient_accumulation_steps", OPT_INT, A(gradient_accumulation_steps), 1, NULL, 1, 1 << 20, NULL, NULL,
     OPT_IN(OPT_SEC_BATCH), "micro-batches per optimizer step"},
    {"shuffle_dataset", OPT_BOOL, A(shuffle_dataset), 1, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_MODEL_DATA),
     "shuffle the examples each epoch"},
    {"learning_rate", OPT_F64, A(learning_rate), 1e-6, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "AdamW learning rate"},
    {"adam_beta1", OPT_F64, A(adam.beta1), 0.9, NULL, 0, 1, NULL, NULL, OPT_OPEN_MAX | OPT_IN(OPT_SEC_OPTIM),
     "AdamW beta1"},
    {"adam_beta2", OPT_F64, A(adam.beta2), 0.999, NULL, 0, 1, NULL, NULL, OPT_OPEN_MAX | OPT_IN(OPT_SEC_OPTIM),
     "AdamW beta2"},
    {"adam_epsilon", OPT_F64, A(adam.eps), 1e-8, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_OPTIM), "AdamW epsilon"},
    {"weight_decay", OPT_F64, A(adam.weight_decay), 0, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "decoupled weight decay"},
    {"lr_scheduler_type", OPT_ENUM, A(lr_scheduler_type), SCHED_LINEAR, NULL, OPT_NO_RANGE, sched_names, NULL,
     OPT_IN(OPT_SEC_OPTIM), "learning-rate schedule (transformers' get_scheduler)"},
    {"lr_scheduler_kwargs", OPT_JSON, A(lr_scheduler_kwargs), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "the schedule's arguments, e.g. '{\"min_lr_rate\": 0.1}' for cosine_with_min_lr (docs/coming-from-trl.md)"},
    {"warmup_ratio", OPT_F64, A(warmup_ratio), 0, NULL, 0, 1, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "fraction of the steps for warmup"},
    {"warmup_steps", OPT_LONG, A(warmup_steps), 0, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "warmup steps (win over warmup_ratio)"},
    {"max_grad_norm", OPT_F64, A(max_grad_norm), 1.0, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "gradient clipping norm (0 = off)"},
    {"max_steps", OPT_LONG, A(max_steps), 0, NULL, -1, BIG, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "optimizer steps (> 0 wins over num_train_epochs; 0 and TRL's -1: num_train_epochs decides)"},
    {"num_train_epochs", OPT_F64, A(num_train_epochs), 3, NULL, 0, BIG, NULL, NULL, OPT_IN(OPT_SEC_BATCH),
     "passes over the data"},
    {"gradient_checkpointing", OPT_BOOL, A(gradient_checkpointing), 1, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_IN(OPT_SEC_SPEED), "recompute layers in backward (gradient_checkpointing_policy says how much)"},
    {"gradient_checkpointing_policy", OPT_ENUM, A(gradient_checkpointing_policy), TRAIN_CKPT_SELECTIVE, NULL,
     OPT_NO_RANGE, train_ckpt_policy_names, NULL, OPT_IN(OPT_SEC_SPEED),
     "with gradient_checkpointing: selective keeps each layer's input and MLP gate/up product (Qwen2-0.5B: 41.5 KB a "
     "token a layer in fp32, 32 in bf16) and recomputes the attention side; full keeps the input alone (3.5 KB) and "
     "recomputes the whole layer: the least memory, for 19 % more products in the training pass at that shape "
     "(selective: 4 %). Same results, bit for bit"},
    {"bf16", OPT_BOOL, A(bf16), -1, NULL, OPT_NO_RANGE, NULL, NULL, OPT_AUTO | OPT_IN(OPT_SEC_SPEED),
     "bf16 as TRL's: every matrix product in bf16 with fp32 sums — the trained model's on fp32 master weights "
     "(fp32 gradients and AdamW), frozen weights (the KL reference; the base under use_peft) held in bf16; auto: "
     "true where this CPU has bf16 matrix instructions (AVX512_BF16, AMX), as TRL defaults to bf16, else false"},
    {"use_cpu", OPT_BOOL, A(use_cpu), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_SPEED),
     "train on the CPU where there is a GPU (transformers' use_cpu); without it an NVIDIA GPU, when one is found, "
     "trains full fine-tuning and LoRA under bf16 there, and any other form on the CPU, saying so (docs/gpu.md)"},
    {"logprob_chunk_rows", OPT_INT, A(logprob_chunk_rows), 256, NULL, 1, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "LM-head rows computed at once: a rows x vocab fp32 scratch (256 rows of a 152k vocab: 155 MB); fewer "
     "rows take less memory and more passes over the head's weight gradient"},
    {"ddp_timeout", OPT_INT, A(ddp_timeout_s), 1800, NULL, 1, 1 << 30, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_SPEED),
     "seconds a process waits for the others in a collective (sums, gathers) under mpirun, as transformers' "
     "ddp_timeout: a process stopped, stuck or slower than that ends the job with a line naming it"},
    {"logging_steps", OPT_INT, A(logging_steps), 10, NULL, 1, 1 << 30, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "steps per metrics.jsonl line"},
    {"logging_first_step", OPT_BOOL, A(logging_first_step), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "a metrics.jsonl line after the first step too"},
    {"save_strategy", OPT_ENUM, A(save_strategy), TRAIN_SAVE_STEPS, NULL, OPT_NO_RANGE, train_save_strategy_names, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG), "when checkpoints are written: every save_steps steps, at the end of each "
     "epoch, or never (steps and epoch: at the last step too, as transformers)"},
    {"save_steps", OPT_F64, A(save_steps), 500, NULL, 0, BIG, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "steps between checkpoints with save_strategy steps (0 = none; below 1: that fraction of the run's steps, "
     "rounded up)"},
    {"save_total_limit", OPT_INT, A(save_total_limit), 0, NULL, 0, 1 << 30, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG), "checkpoints kept (0 = all)"},
    {"resume_from_checkpoint", OPT_STR, A(resume_from_checkpoint), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG), "checkpoint directory, or latest"},
    {"max_nonfinite_steps", OPT_INT, A(max_nonfinite_steps), 3, NULL, 1, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_OPTIM),
     "consecutive NaN/Inf steps (skipped) before the run stops"},
    {"quiet", OPT_BOOL, A(quiet), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "no progress output"},
    {"report_to", OPT_LIST, A(report_to), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "tensorboard: TensorBoard event files too (under logging_dir); none (the default)"},
    {"logging_dir", OPT_STR, A(logging_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_LOG),
     "where TensorBoard files go (default output_dir/runs/DATE_HOST)"},
    {"dataset_train_split", OPT_STR, A(dataset_train_split), 0, "train", OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_MODEL_DATA),
     "with a dataset directory: the file SPLIT.jsonl or SPLIT.json (also under data/)"},
    {"dataset_test_split", OPT_STR, A(dataset_test_split), 0, "test", OPT_NO_RANGE, NULL, NULL,
     OPT_NO_RECORD | OPT_IN(OPT_SEC_MODEL_DATA), "with an eval_dataset directory: its file, as dataset_train_split"},
    {"use_peft", OPT_BOOL, A(use_peft), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_LORA),
     "train LoRA adapters on a frozen base and save them in PEFT's format"},
    {"lora_r", OPT_INT, A(lora_r), 16, NULL, 1, 65536, NULL, NULL, OPT_IN(OPT_SEC_LORA), "LoRA rank"},
    {"lora_alpha", OPT_F64, A(lora_alpha), 32, NULL, -1e6, 1e6, NULL, NULL, OPT_IN(OPT_SEC_LORA),
     "LoRA alpha: the adapters are scaled by lora_alpha / lora_r"},
    {"lora_dropout", OPT_F64, A(lora_dropout), 0.05, NULL, 0, 1, NULL, NULL, OPT_IN(OPT_SEC_LORA),
     "dropout probability on the adapters' input, in training (below 1)"},
    {"lora_target_modules", OPT_LIST, A(lora_target_modules), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_LORA),
     "modules adapted: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all-linear "
     "(default q_proj v_proj)"},
    {"use_rslora", OPT_BOOL, A(use_rslora), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_LORA),
     "rank-stabilised LoRA: scale by lora_alpha / sqrt(lora_r)"},
    {"adapter", OPT_STR, A(adapter), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_INPUT | OPT_IN(OPT_SEC_LORA),
     "a PEFT LoRA adapter directory to continue training (its r, alpha, dropout and targets; not with use_peft)"},
};
const int training_args_n_options = sizeof training_args_options / sizeof training_args_options[0];

int training_args_check(const TrainingArgs *a, GrpoErr *err) {
    /* a path the system cannot hold, refused before any directory is made */
    if (a->output_dir && (fs_path_check(a->output_dir, "output_dir", FS_OUTPUT_ROOM_BYTES, err) ||
                          fs_tmpdir_check(a->output_dir, "output_dir", err))) /* the final save's twin */
        return -1;
    if (a->logging_dir && fs_path_check(a->logging_dir, "logging_dir", FS_OUTPUT_ROOM_BYTES, err)) return -1;
    if (a->max_steps <= 0 && !(a->num_train_epochs > 0))
        return err_set(err, "set max_steps > 0 or num_train_epochs > 0");
    if (!(a->lora_dropout < 1)) return err_set(err, "lora_dropout %g: must be below 1", a->lora_dropout);
    if (a->adapter && a->use_peft) /* TRL refuses a PeftModel together with a peft_config */
        return err_set(err, "use_peft true with --adapter: --adapter continues that adapter with its own r, alpha, "
                       "dropout and targets, use_peft would add new ones; give one of them (to add new adapters on "
                       "top, merge this one first: grpo merge)");
    if (a->save_strategy == TRAIN_SAVE_BEST)
        return err_set(err, "save_strategy 'best' saves when an evaluation improves metric_for_best_model, which "
                       "grpo.c does not track; use steps or epoch");
    if (a->save_steps > 1 && a->save_steps != floor(a->save_steps))
        return err_set(err, "save_steps %g: a whole number of steps, or a fraction of the run below 1", a->save_steps);
    Schedule s;
    return training_args_schedule(a, a->max_steps > 0 ? a->max_steps : 1, &s, err);
}

CheckpointMode training_args_ckpt(const TrainingArgs *a) {
    if (!a->gradient_checkpointing) return CKPT_NONE;
    return a->gradient_checkpointing_policy == TRAIN_CKPT_FULL ? CKPT_FULL : CKPT_SELECTIVE;
}

const char *training_args_ckpt_less(CheckpointMode ckpt) {
    return ckpt == CKPT_NONE        ? "set gradient_checkpointing true"
           : ckpt == CKPT_SELECTIVE ? "set gradient_checkpointing_policy full"
                                    : NULL;
}

long training_args_save_every(const TrainingArgs *a, long total_steps) {
    if (a->save_steps <= 0) return 0;
    return a->save_steps < 1 ? (long)ceil((double)total_steps * a->save_steps) : (long)a->save_steps;
}

int training_args_schedule(const TrainingArgs *a, long total_steps, Schedule *s, GrpoErr *err) {
    json_error_t jerr;
    json_t *kwargs = a->lr_scheduler_kwargs ? json_loads(a->lr_scheduler_kwargs, 0, &jerr) : NULL;
    if (a->lr_scheduler_kwargs && !kwargs)
        return err_set(err, "lr_scheduler_kwargs: not JSON (%s)", jerr.text);
    long long warmup = sched_warmup_steps(a->warmup_steps, a->warmup_ratio, total_steps);
    int rc = sched_init(s, a->lr_scheduler_type, kwargs, a->learning_rate, warmup, total_steps, err);
    json_decref(kwargs);
    return rc;
}
