/* cli/trl_keys.h — what grpo train and grpo sft do with the keys of a TRL
 * config (GRPOConfig/SFTConfig, the TrainingArguments they inherit, TRL's
 * ScriptArguments and ModelConfig, accelerate's launch keys) that are not
 * grpo.c options of the same name: map them to one, accept and ignore them
 * with a reason, or accept only TRL's default value. Names checked against
 * trl/trainer/{grpo,sft,base,model}_config.py, trl/scripts/utils.py and
 * transformers' training_args.py. */
#ifndef GRPO_CLI_TRL_KEYS_H
#define GRPO_CLI_TRL_KEYS_H

#include <stddef.h>

typedef enum {
    TRL_ALIAS,  /* the same setting under grpo.c's name: target */
    TRL_IGNORE, /* no effect here; listed in one warning with its reason (target, when set: TRL's default
                 * values, '|'-separated, which match what grpo.c does and are accepted silently) */
    TRL_ONLY,   /* accepted with one of the values in `values` ('|'-separated); any other is an error (reason) */
} TrlKeyKind;

enum { TRL_FOR_GRPO = 1, TRL_FOR_SFT = 2, TRL_FOR_BOTH = 3 };

typedef struct {
    const char *name;
    int commands;      /* TRL_FOR_* */
    TrlKeyKind kind;
    char arity;        /* on the command line: 'b' a flag with an optional boolean, 'v' one value, 'l' values up to the next --option */
    const char *target; /* TRL_ALIAS: the grpo.c option; TRL_ONLY: the accepted values; TRL_IGNORE: silent ones */
    const char *reason; /* TRL_IGNORE/TRL_ONLY: why, for the message */
} TrlKey;

/* The reason of the precision keys (torch_dtype, fp16, tf32, ...): the message says
 * what bf16 makes of the run in its place. */
extern const char trl_reason_precision[];

/* The entry for name (len bytes) under command cmd ("train" or "sft"), or NULL
 * (any other command has none). */
const TrlKey *trl_key_find(const char *cmd, const char *name, size_t len);

/* value is one of k->target's '|'-separated values (booleans and numbers compared
 * by value: "False" == "false" == "0", "0.0" == "0"). */
int trl_value_accepted(const TrlKey *k, const char *value);

/* The name among cands[0..n) that `name` most likely stands for, else NULL:
 * core/suggest.h's suggest_name (words and their shorthands, then typos). */
const char *closest_name(const char *name, const char *const *cands, int n);

/* 1 when a YAML null for grpo.c's option `option` means its default: its TRL
 * field is typed Optional with default None (GRPOConfig, SFTConfig, TRL's
 * _BaseConfig, transformers' TrainingArguments, ModelConfig, ScriptArguments,
 * open-r1's configs), where our default is what TRL's None does; or it is one of
 * ours, not TRL's, that has no value by default. Else 0: TRL's None is no value
 * of the field, or means other than its default (max_completion_length: None is no
 * limit, TRL's default 256 one). */
int trl_null_is_default(const char *option);

/* Every TRL key name for cmd, for did-you-mean suggestions; returns the count. */
int trl_key_names(const char *cmd, const char **out, int cap);

#endif
