/* tests/core/test_suggest.c — did-you-mean (core/suggest.h) over names as grpo
 * train lists them: its options first, then TRL's names it accepts. The cases are
 * the ones people type: TRL's or HF's names for our options, shortened words, a
 * dropped word, typos; and names close to nothing, which get no suggestion. */
#include <string.h>

#include "core/suggest.h"
#include "testutil.h"

static const char *const names[] = {
    /* options */
    "config", "model", "dataset", "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps",
    "learning_rate", "adam_beta1", "weight_decay", "lr_scheduler_type", "warmup_ratio", "warmup_steps", "max_steps",
    "num_train_epochs", "gradient_checkpointing", "bf16", "logging_steps", "save_steps", "resume_from_checkpoint",
    "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "seed", "reward_funcs",
    "reward_weights", "max_prompt_length", "max_completion_length", "temperature", "top_p", "top_k",
    "num_generations", "generation_batch_size", "steps_per_generation", "loss_type", "beta", "epsilon",
    /* TRL's names the command accepts (aliases, or without effect) */
    "model_name_or_path", "dataset_name", "local_rank", "per_device_eval_batch_size", "eval_accumulation_steps",
    "fp16", "tf32", "use_vllm", "lr_scheduler_kwargs",
};
enum { N = sizeof names / sizeof names[0] };

static void expect(const char *typed, const char *want) {
    const char *got = suggest_name(typed, names, N);
    if (!want) T_CHECK(got == NULL, "'%s' suggested '%s' (want nothing)", typed, got);
    else T_CHECK(got && !strcmp(got, want), "'%s' suggested '%s' (want '%s')", typed, got ? got : "nothing", want);
}

int main(void) {
    /* issue 39's cases: edit distance alone gave local_rank, and nothing for the others */
    expect("lora_rank", "lora_r");
    expect("lr", "learning_rate");
    expect("per_device_batch_size", "per_device_train_batch_size");
    /* shortened and dropped words, shorthands, other libraries' names */
    expect("batch_size", "per_device_train_batch_size");
    expect("bs", "per_device_train_batch_size");
    expect("grad_accum", "gradient_accumulation_steps");
    expect("epochs", "num_train_epochs");
    expect("temp", "temperature");
    expect("wd", "weight_decay");
    expect("reward_fn", "reward_funcs");
    expect("max_new_tokens", "max_completion_length");
    expect("num_return_sequences", "num_generations");
    expect("lr_scheduler", "lr_scheduler_type");
    /* typos, case, dashes */
    expect("learnig_rate", "learning_rate");
    expect("num_generation", "num_generations");
    expect("max_step", "max_steps");
    expect("seeed", "seed");
    expect("Learning_Rate", "learning_rate");
    expect("learning-rate", "learning_rate");
    /* an alias is found as well as an option */
    expect("model_name", "model_name_or_path");
    /* close to nothing: no suggestion, even with a common word in it */
    expect("banana", NULL);
    expect("xyzzy_frobnicate", NULL);
    expect("foo_bar_baz", NULL);
    expect("foo_steps", NULL);
    expect("a", NULL);
    expect("", NULL);
    /* the measure itself: the same name scores 1, an unrelated one 0 */
    T_CHECK(suggest_score("learning_rate", "learning_rate") == 1, "same name");
    T_CHECK(suggest_score("banana", "learning_rate") == 0, "unrelated name");
    T_CHECK(suggest_score("lora_rank", "lora_r") > suggest_score("lora_rank", "local_rank"), "words before letters");
    return t_summary("test_suggest");
}
