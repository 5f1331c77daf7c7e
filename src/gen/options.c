/* gen/options.c — the generation options, declared once (options.h). */
#include "gen/options.h"

#include <stddef.h>
#include <string.h>

#include "ops/gemm.h"

#define G(f) offsetof(GenOpts, f)

const OptSpec gen_options[] = {
    {"max_completion_length", OPT_INT, G(max_completion_length), 256, NULL, 1, 1 << 20, NULL, NULL, 0,
     "tokens per completion at most"},
    {"temperature", OPT_F32, G(sampler.temperature), 1.0, NULL, 0, 1e300, NULL, NULL, 0,
     "sampling temperature (0 = greedy; in training it also scales the log-probs)"},
    {"top_p", OPT_F32, G(sampler.top_p), 1.0, NULL, 1e-300, 1, NULL, NULL, 0, "nucleus sampling (1 = off)"},
    {"top_k", OPT_INT, G(sampler.top_k), 0, NULL, 0, 1e300, NULL, NULL, 0, "keep the k most likely tokens (0 = off)"},
    {"min_p", OPT_F32, G(sampler.min_p), 0, NULL, 0, 1, NULL, NULL, 0, "drop tokens below min_p x the top probability"},
    {"repetition_penalty", OPT_F32, G(sampler.repetition_penalty), 1.0, NULL, 1e-300, 1e300, NULL, NULL, 0,
     "penalty for tokens already present (1 = off)"},
    {"kv_cache_mb", OPT_MIB, G(kv_cache_bytes), 1024, NULL, 1, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "memory limit of the generation KV cache in MiB"},
    {"generation_chunk_size", OPT_INT, G(chunk_size), 0, NULL, 0, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "completions decoded together (0 = as many as kv_cache_mb allows)"},
    {"chat_template_kwargs", OPT_JSON, G(chat_template_kwargs), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "more chat template variables for conversational prompts, e.g. '{\"enable_thinking\": false}'"},
};
const int gen_n_options = sizeof gen_options / sizeof gen_options[0];

const OptSpec prompt_length_option[1] = {
    {"max_prompt_length", OPT_INT, 0, 512, NULL, 1, 1 << 20, NULL, NULL, 0, "prompt tokens kept, from the right"},
};

const OptSpec prompt_options[3] = {
    {"system_prompt", OPT_STR, offsetof(PromptOptions, system_prompt), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_IN(OPT_SEC_MODEL_DATA),
     "open-r1's: each prompt becomes [this system message, the user message from dataset_prompt_column]"},
    {"dataset_prompt_column", OPT_STR, offsetof(PromptOptions, dataset_prompt_column), 0, NULL, OPT_NO_RANGE, NULL,
     NULL, OPT_IN(OPT_SEC_MODEL_DATA),
     "open-r1's: the column whose text is the user message (as its make_conversation; with system_prompt "
     "and no column: prompt); unset without system_prompt: the prompt column as TRL reads it"},
    {"chat_template", OPT_STR, offsetof(PromptOptions, chat_template), 0, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_IN(OPT_SEC_MODEL_DATA), "open-r1's: a Jinja chat template used instead of the model's"},
};

const DatasetConversation *prompt_options_conversation(const PromptOptions *o, DatasetConversation *out) {
    if (!o->system_prompt && !o->dataset_prompt_column) return NULL;
    out->system_prompt = o->system_prompt;
    out->prompt_column = o->dataset_prompt_column ? o->dataset_prompt_column : "prompt"; /* open-r1's default */
    return out;
}

const OptSpec bf16_options[2] = {
    {"bf16", OPT_BOOL, offsetof(Bf16Options, bf16), -1, NULL, OPT_NO_RANGE, NULL, NULL, OPT_AUTO,
     "bf16 as TRL's and train's: every matrix product in bf16 with fp32 sums, the weight matrices held in bf16 "
     "(as model.to(torch.bfloat16)); an --adapter then runs unmerged beside them, its own path in fp32 (as PEFT "
     "on a bf16 model); auto: true on a GPU, and on a CPU with bf16 matrix instructions (AVX512_BF16, AMX) where "
     "no --adapter is given (false folds it into fp32 weights) and --bf16_held is not"},
    {"bf16_held", OPT_BOOL, offsetof(Bf16Options, held), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "hold the weight matrices in bf16 but compute in fp32: half their memory, and fp32's results for a model "
     "stored in bf16 (without AVX-512 decoding reads them slower than fp32); not with --adapter or --bf16 true"},
};

const char *bf16_options_form(const Bf16Options *o, int adapter, int *form) {
    if (o->bf16 > 0 && o->held > 0)
        return "--bf16 (products in bf16) and --bf16_held (fp32 products on weights held in bf16) exclude each other";
    /* --bf16 true with an adapter is the GPU's form on either machine: the bf16 base, the adapter unmerged
     * (gen_session_open, pretrained_adapter_apply). bf16_held takes none: folded into its bf16 matrices most
     * of a small adapter's delta would round away, and --bf16 false gives fp32 products with it folded in. */
    if (o->held > 0 && adapter)
        return "--bf16_held holds the weights in bf16 and --adapter is folded only into fp32 weights: use --bf16 "
               "true (the adapter unmerged beside the bf16 base) or --bf16 false (folded into fp32 weights)";
    int bf16 = o->bf16 >= 0 ? o->bf16 : !adapter && o->held <= 0 && gemm_bf16_native();
    *form = bf16 ? WEIGHTS_BF16 : o->held > 0 ? WEIGHTS_BF16_HELD : WEIGHTS_FP32;
    return NULL;
}

void gen_opts_default(GenOpts *o) {
    memset(o, 0, sizeof *o);
    OptGroup g[2] = {GEN_OPTIONS_GROUP(0), SEED_OPTION_GROUP(offsetof(GenOpts, seed), OPT_SEC_GENERATION)};
    opts_defaults(g, 2, o);
    o->share_prefix = 1;
}
