/* cli/trl_keys.c — the TRL config keys grpo.c maps, ignores or restricts (trl_keys.h). */
#include "cli/trl_keys.h"

#include "core/options.h"
#include "core/suggest.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define G TRL_FOR_GRPO
#define S TRL_FOR_SFT
#define B TRL_FOR_BOTH

/* reasons, shared by the keys they explain */
#define R_VLLM "generation is built in"
#define R_PREC trl_reason_precision
#define R_TORCH "not a PyTorch program"
#define R_DIST "processes are mpirun's (docs/distributed.md)"
#define R_HUB "nothing is uploaded: output_dir is a save_pretrained directory"
#define R_EVAL "no evaluation during training"
#define R_LOG "metrics go to output_dir/metrics.jsonl"
#define R_DATA "dataset columns are read as they are"
#define R_LOCAL "--model and --dataset name local files"
#define R_MOE "for mixture-of-experts models"
#define R_CONFIGS "a local file has no configurations: --dataset names the file"
#define R_WANDB "nothing goes to Weights & Biases: metrics go to output_dir/metrics.jsonl"
#define R_LAUNCH "an accelerate launch setting: mpirun -np N starts the processes"

const char trl_reason_precision[] = "precision follows bf16";

static const TrlKey keys[] = {
    /* ScriptArguments, ModelConfig */
    {"model_name_or_path", B, TRL_ALIAS, 'v', "model", NULL},
    {"dataset_name", B, TRL_ALIAS, 'v', "dataset", NULL},
    {"dataset_config", B, TRL_IGNORE, 'v', "", R_CONFIGS},
    {"dataset_configs", B, TRL_IGNORE, 'l', "", R_CONFIGS}, /* an open-r1 fork's recipe key (tests/fixtures/open-r1) */
    {"dataset_mixture", B, TRL_ONLY, 'v', "",
     "open-r1's dataset mixtures are not supported: concatenate the files into one JSON lines file"},
    {"dataset_streaming", B, TRL_IGNORE, 'b', "false", R_LOCAL},
    {"ignore_bias_buffers", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"model_revision", B, TRL_IGNORE, 'v', "main", R_LOCAL},
    {"reward_model_name_or_path", G, TRL_ONLY, 'v', "", "reward models are not supported; use a cmd: or plugin: reward"},
    {"dtype", B, TRL_IGNORE, 'v', NULL, R_PREC},
    {"torch_dtype", B, TRL_IGNORE, 'v', NULL, R_PREC},
    {"attn_implementation", B, TRL_IGNORE, 'v', "", "attention is grpo.c's own kernel"},
    {"trust_remote_code", B, TRL_IGNORE, 'b', "false", "no Python code is loaded"},
    {"model_init_kwargs", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"lora_target_parameters", B, TRL_ONLY, 'v', "",
     "LoRA on parameters (mixture-of-experts weights) is not supported; use lora_target_modules"},
    {"lora_modules_to_save", B, TRL_ONLY, 'v', "", "modules_to_save (fully trained extra modules) is not supported"},
    {"lora_task_type", B, TRL_ONLY, 'v', "CAUSAL_LM", "the adapters are for a causal language model (CAUSAL_LM)"},
    {"use_dora", B, TRL_ONLY, 'b', "false", "DoRA is not supported: plain LoRA only"},
    {"load_in_8bit", B, TRL_ONLY, 'b', "false", "quantized (bitsandbytes) loading is not supported"},
    {"load_in_4bit", B, TRL_ONLY, 'b', "false", "quantized (bitsandbytes) loading is not supported"},
    {"bnb_4bit_quant_type", B, TRL_IGNORE, 'v', NULL, "used only with load_in_4bit"},
    {"use_bnb_nested_quant", B, TRL_IGNORE, 'b', NULL, "used only with load_in_4bit"},
    {"bnb_4bit_quant_storage", B, TRL_IGNORE, 'v', NULL, "used only with load_in_4bit"},
    /* TrainingArguments (transformers 4.x and 5.x) and TRL's _BaseConfig */
    {"optim", B, TRL_ONLY, 'v', "adamw_torch|adamw_torch_fused|adamw_hf|adamw",
     "the optimizer is AdamW as torch.optim.AdamW computes it"},
    {"optim_args", B, TRL_IGNORE, 'v', NULL, "the optimizer is AdamW"},
    {"optim_target_modules", B, TRL_IGNORE, 'l', NULL, "the optimizer is AdamW"},
    {"average_tokens_across_devices", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"label_smoothing_factor", B, TRL_IGNORE, 'v', NULL, "not used by GRPO or SFT's loss"},
    {"fp16", B, TRL_IGNORE, 'b', "false", R_PREC},
    {"bf16_full_eval", B, TRL_IGNORE, 'b', "false", R_PREC},
    {"fp16_full_eval", B, TRL_IGNORE, 'b', "false", R_PREC},
    {"tf32", B, TRL_IGNORE, 'b', "", R_PREC},
    {"half_precision_backend", B, TRL_IGNORE, 'v', NULL, R_PREC},
    {"fp16_opt_level", B, TRL_IGNORE, 'v', NULL, R_PREC},
    {"fp16_backend", B, TRL_IGNORE, 'v', NULL, R_PREC},
    {"cast_lm_head_to_fp32", G, TRL_IGNORE, 'b', NULL, R_PREC},
    {"gradient_checkpointing_kwargs", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"torch_compile", B, TRL_IGNORE, 'b', "false", R_TORCH},
    {"torch_compile_backend", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"torch_compile_mode", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"torchdynamo", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"use_liger_kernel", B, TRL_IGNORE, 'b', "false", "the loss kernels are grpo.c's own"},
    {"liger_kernel_config", B, TRL_IGNORE, 'v', NULL, "the loss kernels are grpo.c's own"},
    {"use_cache", B, TRL_IGNORE, 'b', NULL, R_TORCH},
    {"torch_empty_cache_steps", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"auto_find_batch_size", B, TRL_IGNORE, 'b', NULL, "memory is checked before the run starts"},
    {"neftune_noise_alpha", B, TRL_ONLY, 'v', "", "NEFTune is not supported"},
    {"logging_strategy", B, TRL_ONLY, 'v', "steps", "a metrics line is written every logging_steps steps"},
    {"log_on_each_node", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"logging_nan_inf_filter", B, TRL_IGNORE, 'b', NULL, "NaN/Inf steps are skipped (max_nonfinite_steps)"},
    {"include_num_input_tokens_seen", B, TRL_IGNORE, 'v', NULL, R_LOG},
    {"include_tokens_per_second", B, TRL_IGNORE, 'b', NULL, R_LOG},
    {"log_level", B, TRL_IGNORE, 'v', "passive", "grpo.c's messages are its own: --quiet silences the progress"},
    {"log_level_replica", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"disable_tqdm", B, TRL_IGNORE, 'b', NULL, "--quiet turns the progress line off"},
    {"run_name", B, TRL_IGNORE, 'v', NULL, R_LOG},
    {"project", B, TRL_IGNORE, 'v', NULL, R_LOG},
    {"trackio_space_id", B, TRL_IGNORE, 'v', NULL, R_LOG},
    {"eval_strategy", S, TRL_ONLY, 'v', "no", "SFT has no evaluation during training yet; run grpo eval on a checkpoint"},
    {"evaluation_strategy", S, TRL_ONLY, 'v', "no", "SFT has no evaluation during training yet; run grpo eval on a checkpoint"},
    {"evaluation_strategy", G, TRL_ALIAS, 'v', "eval_strategy", NULL},
    {"eval_steps", S, TRL_IGNORE, 'v', NULL, R_EVAL},
    {"eval_delay", B, TRL_IGNORE, 'v', NULL, R_EVAL},
    {"eval_on_start", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"per_device_eval_batch_size", B, TRL_IGNORE, 'v', NULL, "eval prompts are generated one group at a time"},
    {"per_gpu_eval_batch_size", B, TRL_IGNORE, 'v', NULL, R_EVAL},
    {"per_gpu_train_batch_size", B, TRL_IGNORE, 'v', NULL, "deprecated in transformers; per_device_train_batch_size is used"},
    {"prediction_loss_only", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"eval_do_concat_batches", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"eval_use_gather_object", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"eval_accumulation_steps", B, TRL_IGNORE, 'v', NULL, R_EVAL},
    {"include_for_metrics", B, TRL_IGNORE, 'l', NULL, R_EVAL},
    {"include_inputs_for_metrics", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"batch_eval_metrics", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"jit_mode_eval", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"use_legacy_prediction_loop", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"load_best_model_at_end", B, TRL_IGNORE, 'b', "false", R_EVAL},
    {"metric_for_best_model", B, TRL_IGNORE, 'v', NULL, R_EVAL},
    {"greater_is_better", B, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"save_only_model", B, TRL_IGNORE, 'b', NULL, "checkpoints always hold what a resume needs"},
    {"save_safetensors", B, TRL_IGNORE, 'b', NULL, "weights are always saved as safetensors"},
    {"save_on_each_node", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"enable_jit_checkpoint", B, TRL_IGNORE, 'b', NULL, "SIGTERM always stops at a safe point with a checkpoint"},
    {"push_to_hub", B, TRL_IGNORE, 'b', "false", R_HUB},
    {"hub_token", B, TRL_IGNORE, 'v', "", R_HUB},
    {"hub_private_repo", B, TRL_IGNORE, 'b', "", R_HUB},
    {"hub_model_id", B, TRL_IGNORE, 'v', "", R_HUB},
    {"hub_strategy", B, TRL_IGNORE, 'v', "every_save", R_HUB},
    {"hub_always_push", B, TRL_IGNORE, 'b', "false", R_HUB},
    {"hub_revision", B, TRL_IGNORE, 'v', NULL, R_HUB},
    {"push_to_hub_model_id", B, TRL_IGNORE, 'v', NULL, R_HUB},
    {"push_to_hub_organization", B, TRL_IGNORE, 'v', NULL, R_HUB},
    {"push_to_hub_token", B, TRL_IGNORE, 'v', NULL, R_HUB},
    {"log_completions_hub_repo", G, TRL_IGNORE, 'v', NULL, R_HUB},
    {"ignore_data_skip", B, TRL_IGNORE, 'b', NULL, "a resume continues the data order exactly"},
    {"restore_callback_states_from_checkpoint", B, TRL_IGNORE, 'b', NULL, R_TORCH},
    {"full_determinism", B, TRL_IGNORE, 'b', NULL, "runs are deterministic for a thread count"},
    {"data_seed", B, TRL_IGNORE, 'v', NULL, "the data order follows seed"},
    {"no_cuda", B, TRL_IGNORE, 'b', NULL, "grpo.c runs on the CPU"},
    {"use_mps_device", B, TRL_IGNORE, 'b', NULL, "grpo.c runs on the CPU"},
    {"use_ipex", B, TRL_IGNORE, 'b', NULL, R_TORCH},
    {"accelerator_config", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"parallelism_config", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"dataloader_drop_last", B, TRL_IGNORE, 'b', NULL, R_DATA},
    {"dataloader_num_workers", B, TRL_IGNORE, 'v', NULL, R_DATA},
    {"dataloader_pin_memory", B, TRL_IGNORE, 'b', NULL, R_DATA},
    {"dataloader_persistent_workers", B, TRL_IGNORE, 'b', NULL, R_DATA},
    {"dataloader_prefetch_factor", B, TRL_IGNORE, 'v', NULL, R_DATA},
    {"remove_unused_columns", B, TRL_IGNORE, 'b', NULL, R_DATA},
    {"label_names", B, TRL_IGNORE, 'l', NULL, R_DATA},
    {"train_sampling_strategy", B, TRL_IGNORE, 'v', NULL, "examples are shuffled with shuffle_dataset"},
    {"group_by_length", B, TRL_IGNORE, 'b', NULL, "examples are shuffled with shuffle_dataset"},
    {"length_column_name", B, TRL_IGNORE, 'v', NULL, R_DATA},
    {"past_index", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"ray_scope", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"mp_parameters", B, TRL_IGNORE, 'v', NULL, R_TORCH},
    {"split_batches", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"dispatch_batches", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"ddp_find_unused_parameters", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"ddp_bucket_cap_mb", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"ddp_broadcast_buffers", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"ddp_backend", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"fsdp", B, TRL_IGNORE, 'l', NULL, R_DIST},
    {"sharded_ddp", B, TRL_IGNORE, 'l', NULL, R_DIST},
    {"xpu_backend", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"fsdp_config", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"fsdp_min_num_params", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"fsdp_transformer_layer_cls_to_wrap", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"deepspeed", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"ds3_gather_for_generation", G, TRL_IGNORE, 'b', NULL, R_DIST},
    {"local_rank", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"tpu_num_cores", B, TRL_IGNORE, 'v', NULL, R_DIST},
    {"tpu_metrics_debug", B, TRL_IGNORE, 'b', NULL, R_DIST},
    {"debug", B, TRL_IGNORE, 'l', NULL, R_TORCH},
    {"skip_memory_metrics", B, TRL_IGNORE, 'b', NULL, R_LOG},
    {"do_train", B, TRL_IGNORE, 'b', "false", "the command says what runs"},
    {"do_eval", B, TRL_IGNORE, 'b', "false", "the command says what runs"},
    {"do_predict", B, TRL_IGNORE, 'b', "false", "the command says what runs"},
    /* accelerate launch keys and TRL CLI's env mapping, which TRL's YAML files may carry */
    {"num_processes", B, TRL_IGNORE, 'v', NULL, R_LAUNCH},
    {"num_machines", B, TRL_IGNORE, 'v', NULL, R_LAUNCH},
    {"mixed_precision", B, TRL_IGNORE, 'v', NULL, R_LAUNCH},
    {"gpu_ids", B, TRL_IGNORE, 'v', NULL, R_LAUNCH},
    {"env", B, TRL_IGNORE, 'v', NULL, "set environment variables in the shell"},
    /* GRPOConfig */
    {"router_aux_loss_coef", B, TRL_IGNORE, 'v', NULL, R_MOE},
    {"disable_dropout", B, TRL_IGNORE, 'b', NULL, "the supported models have no dropout"},
    {"pad_to_multiple_of", B, TRL_IGNORE, 'v', NULL, "batches are packed without padding"},
    {"generation_kwargs", G, TRL_ONLY, 'v', "", "set temperature, top_p, top_k, min_p and repetition_penalty as options"},
    {"cache_implementation", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"use_vllm", G, TRL_IGNORE, 'b', "false", R_VLLM},
    {"vllm_mode", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_model_impl", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_enable_sleep_mode", G, TRL_IGNORE, 'b', NULL, R_VLLM},
    {"vllm_structured_outputs_regex", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_guided_decoding_regex", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_server_base_url", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_server_host", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_server_port", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_server_timeout", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_group_port", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_gpu_memory_utilization", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_max_model_length", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"vllm_tensor_parallel_size", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    /* vllm_importance_sampling_correction, _mode, _clip_max, _clip_min are grpo train's own options
     * (grpo/loss.c): the sampler/trainer correction, without vLLM; _cap is TRL's deprecated _clip_max */
    {"vllm_importance_sampling_cap", G, TRL_ALIAS, 'v', "vllm_importance_sampling_clip_max", NULL},
    {"use_transformers_continuous_batching", G, TRL_IGNORE, 'b', NULL, R_VLLM},
    {"transformers_continuous_batching_config", G, TRL_IGNORE, 'v', NULL, R_VLLM},
    {"use_transformers_paged", G, TRL_IGNORE, 'b', NULL, R_VLLM},
    {"off_policy_mask_threshold", G, TRL_ONLY, 'v', "", "off-policy sequence masking is not supported"},
    {"use_bias_correction_kl", G, TRL_ONLY, 'b', "false", "the bias-corrected KL estimator is not supported"},
    {"log_multimodal", G, TRL_IGNORE, 'b', NULL, R_LOG},
    {"num_completions_to_print", G, TRL_IGNORE, 'v', "|0", "log_completions writes them to completions.jsonl"},
    {"log_unique_prompts", G, TRL_IGNORE, 'b', NULL, "log_completions writes them to completions.jsonl"},
    {"wandb_log_unique_prompts", G, TRL_IGNORE, 'b', NULL, "log_completions writes them to completions.jsonl"},
    /* open-r1's GRPOConfig (src/open_r1/configs.py; system_prompt and chat_template are options) */
    {"benchmarks", G, TRL_IGNORE, 'l', "", "open-r1 runs its benchmarks after training with lighteval: run grpo eval"},
    {"callbacks", G, TRL_IGNORE, 'l', "", "open-r1's callback pushes checkpoints to a Hub revision: nothing is uploaded"},
    {"hub_model_revision", G, TRL_IGNORE, 'v', "main", R_HUB},
    {"overwrite_hub_revision", G, TRL_IGNORE, 'b', "false", R_HUB},
    {"push_to_hub_revision", G, TRL_IGNORE, 'b', "false", R_HUB},
    {"wandb_entity", G, TRL_IGNORE, 'v', "", R_WANDB},
    {"wandb_project", G, TRL_IGNORE, 'v', "", R_WANDB},
    {"wandb_run_group", G, TRL_IGNORE, 'v', "", R_WANDB},
    /* SFTConfig */
    {"chat_template_path", S, TRL_ONLY, 'v', "", "the chat template is the model directory's"},
    {"dataset_text_field", S, TRL_ONLY, 'v', "text", "the columns are text, prompt/completion or messages"},
    {"dataset_kwargs", S, TRL_IGNORE, 'v', NULL, R_DATA},
    {"dataset_num_proc", S, TRL_IGNORE, 'v', NULL, R_DATA},
    {"dataset_batch_size", S, TRL_IGNORE, 'v', NULL, R_DATA},
    {"eos_token", S, TRL_IGNORE, 'v', NULL, "eos is the tokenizer's"},
    {"pad_token", S, TRL_IGNORE, 'v', NULL, "batches are packed without padding"},
    {"truncation_mode", S, TRL_ONLY, 'v', "keep_start", "sequences are cut at max_length, keeping their start"},
    {"packing", S, TRL_IGNORE, 'b', NULL, "batches are packed without padding"},
    {"packing_strategy", S, TRL_IGNORE, 'v', NULL, "batches are packed without padding"},
    {"padding_free", S, TRL_IGNORE, 'b', NULL, "batches are packed without padding"},
    {"eval_packing", S, TRL_IGNORE, 'b', NULL, R_EVAL},
    {"assistant_only_loss", S, TRL_ONLY, 'b', "false", "the loss covers completions (completion_only_loss) or every token"},
    {"activation_offloading", S, TRL_IGNORE, 'b', NULL, "memory is checked before the run starts"},
    {"loss_type", S, TRL_ONLY, 'v', "nll", "SFT's loss is the negative log-likelihood (nll; dft is not supported)"},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static int command_bit(const char *cmd) {
    return !strcmp(cmd, "train") ? TRL_FOR_GRPO : !strcmp(cmd, "sft") ? TRL_FOR_SFT : 0;
}

const TrlKey *trl_key_find(const char *cmd, const char *name, size_t len) {
    int bit = command_bit(cmd);
    for (int i = 0; bit && i < N_KEYS; i++)
        if ((keys[i].commands & bit) && strlen(keys[i].name) == len && !strncmp(keys[i].name, name, len))
            return &keys[i];
    return NULL;
}

int trl_key_names(const char *cmd, const char **out, int cap) {
    int bit = command_bit(cmd), n = 0;
    for (int i = 0; bit && i < N_KEYS && n < cap; i++)
        if (keys[i].commands & bit) out[n++] = keys[i].name;
    return n;
}

static int as_number(const char *s, double *d) {
    char *end;
    *d = strtod(s, &end);
    return end != s && !*end;
}

/* value equals want: "" means null (YAML null, ~, Python's None or nothing);
 * booleans and numbers compare by value, other text exactly. */
static int same_value(const char *want, const char *value) {
    int bw, bv;
    double dw, dv;
    if (!*want) return !*value || !strcmp(value, "null") || !strcmp(value, "None") || !strcmp(value, "~");
    if (!strcasecmp(want, "true") || !strcasecmp(want, "false"))
        return opt_parse_bool(want, &bw) == 0 && opt_parse_bool(value, &bv) == 0 && bw == bv;
    if (as_number(want, &dw)) return as_number(value, &dv) && dv == dw;
    return !strcmp(want, value);
}

/* TRL's `X | None = None` fields, by the name of the grpo.c option they set, with
 * ours that have no value by default (eval_dataset, adapter). */
static const char *const null_is_default[] = {
    "model", "dataset", "output_dir", "resume_from_checkpoint", "logging_dir",                 /* Script/TrainingArguments */
    "reward_funcs", "reward_weights", "min_p", "chat_template_kwargs", "epsilon_high", "delta", /* GRPOConfig, grpo.py */
    "steps_per_generation", "generation_batch_size", "num_generations_eval",
    "lr_scheduler_kwargs", "bf16", "eval_steps", "save_total_limit",                         /* _BaseConfig, TrainingArguments */
    "lora_target_modules",                                                                    /* ModelConfig: PEFT's per-model default */
    "completion_only_loss",                                                                   /* SFTConfig */
    "system_prompt", "chat_template",                                                         /* open-r1's GRPOConfig/SFTConfig */
    "max_tool_calling_iterations",                                                            /* GRPOConfig */
    "eval_dataset", "adapter", "tools", "tool_command", "environment_command",                /* ours */
};

int trl_null_is_default(const char *option) {
    for (size_t i = 0; i < sizeof null_is_default / sizeof null_is_default[0]; i++)
        if (!strcmp(option, null_is_default[i])) return 1;
    return 0;
}

int trl_value_accepted(const TrlKey *k, const char *value) {
    for (const char *p = k->target;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        char want[64];
        if (len < sizeof want) {
            memcpy(want, p, len);
            want[len] = 0;
            if (same_value(want, value)) return 1;
        }
        if (!bar) return 0;
        p = bar + 1;
    }
}

const char *closest_name(const char *name, const char *const *cands, int n) {
    return suggest_name(name, cands, n);
}
