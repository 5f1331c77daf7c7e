/* gen/options.h — the generation options (core/options.h rows over GenOpts),
 * declared once for `grpo train`, `generate` and `eval`: TRL's sampling options,
 * max_completion_length, and the KV-cache memory plan. The seed row is
 * train/args.h's seed_option. */
#ifndef GRPO_GEN_OPTIONS_H
#define GRPO_GEN_OPTIONS_H

#include "core/options.h"
#include "data/dataset.h"
#include "gen/generate.h"
#include "model/transformer.h"

extern const OptSpec gen_options[];
extern const int gen_n_options;
#define GEN_OPTIONS_GROUP(base) ((OptGroup){gen_options, gen_n_options, (base), OPT_SEC_GENERATION})

/* The one max_prompt_length row (an int; TRL's default 512), placed wherever a
 * command keeps it. */
extern const OptSpec prompt_length_option[1];
#define PROMPT_LENGTH_GROUP(base) ((OptGroup){prompt_length_option, 1, (base), OPT_SEC_GENERATION})

/* open-r1's prompt options (src/open_r1/configs.py; grpo.py's make_conversation),
 * declared once for `grpo train`, `eval` and `generate`, so a model trained on a
 * recipe's prompts is evaluated on the same ones. */
typedef struct {
    const char *system_prompt;         /* NULL: none */
    const char *dataset_prompt_column; /* NULL: "prompt" when system_prompt is set, else TRL's prompt as it is */
    const char *chat_template;         /* NULL: the model's; else a Jinja template replacing it */
} PromptOptions;
extern const OptSpec prompt_options[3];
#define PROMPT_OPTIONS_GROUP(base) ((OptGroup){prompt_options, 3, (base), OPT_SEC_MODEL_DATA})
/* The prompt building the options ask for, in *out (NULL: TRL's prompt column as it is),
 * for dataset_load_conversation. */
const DatasetConversation *prompt_options_conversation(const PromptOptions *o, DatasetConversation *out);

/* The precision rows of the commands that only run a model (generate, eval, score),
 * placed in a Bf16Options: bf16, as train's and TRL's (every matrix product in bf16
 * with fp32 sums, the matrices held in bf16; auto), and bf16_held (the matrices held
 * in bf16, their products in fp32: half the memory, fp32's results on a model stored
 * in bf16). Their values are -1 (auto), 0 or 1. */
typedef struct {
    int bf16;
    int held;
} Bf16Options;
extern const OptSpec bf16_options[2];
#define BF16_OPTIONS_GROUP(base) ((OptGroup){bf16_options, 2, (base), OPT_SEC_SPEED})
/* The WeightForm (model/transformer.h) the rows choose, auto resolved: bf16 where
 * this CPU has bf16 matrix instructions, unless an adapter is given (adapter: auto
 * folds it into fp32 weights) or bf16_held is set. bf16 with an adapter is the bf16
 * base with the adapter unmerged (gen_session_open). NULL, or why the choice cannot
 * be run (a usage error: bf16_held with an adapter, or with bf16). */
const char *bf16_options_form(const Bf16Options *o, int adapter, int *form);

#endif
