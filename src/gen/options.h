/* gen/options.h — the generation options (core/options.h rows over GenOpts),
 * declared once for `grpo train`, `generate` and `eval`: TRL's sampling options,
 * max_completion_length, and the KV-cache memory plan. The seed row is
 * train/args.h's seed_option. */
#ifndef GRPO_GEN_OPTIONS_H
#define GRPO_GEN_OPTIONS_H

#include "core/options.h"
#include "gen/generate.h"

extern const OptSpec gen_options[];
extern const int gen_n_options;
#define GEN_OPTIONS_GROUP(base) ((OptGroup){gen_options, gen_n_options, (base)})

/* The one max_prompt_length row (an int; TRL's default 512), placed wherever a
 * command keeps it. */
extern const OptSpec prompt_length_option[1];

/* The `bf16` row of the commands that only run a model (generate, eval, score): an
 * int flag, the model loaded with model_load_ex(half). */
extern const OptSpec bf16_weights_option[1];
/* Its value with auto (-1) resolved: true where this CPU has a bf16 matmul and no adapter is applied. */
int bf16_weights_resolve(int value, int adapter);

#endif
