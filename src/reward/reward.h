/* reward/reward.h — reward functions for GRPO, with TRL GRPOTrainer semantics.
 *
 * A reward function scores a batch of completions: out[i] is a double, or NAN
 * for "no value" (TRL: a reward function returning None for an example it
 * does not apply to). Functions are built from a spec string (the syntax is
 * in docs/rewards.md):
 *   reward_len[:TARGET]    -|TARGET - len(completion)|, len in code points (default 20);
 *                          length:TARGET too
 *   format:REGEX           1 if the Oniguruma (Perl syntax) regex is found in the
 *                          completion (search; anchor with ^ $ yourself), else 0
 *   exact_match:COLUMN     1 if the completion's final answer equals the example's
 *                          COLUMN, else 0
 *   environment_reward     the reward the environment gave the completion's
 *                          trajectory (env/env_loop.h), NAN when it gave none
 *   accuracy_reward[:COL], think_format_reward   TRL's (reward_math.c)
 *   accuracy[:COLUMN], format, tag_count, reasoning_steps, cosine,
 *   repetition_penalty, length, soft_overlong_punishment
 *                          open-r1's rewards by their open-r1 names, with the
 *                          parameters of OpenR1Params (reward_openr1.c)
 *   cmd:COMMAND LINE       a long-lived child process speaking JSON lines
 *                          (docs/reward-protocol.md)
 *   plugin:PATH.so[:SYM]   a C function loaded with dlopen (reward/reward_plugin.h)
 * Any spec may be prefixed by NAME= to set its logging name (rewards/NAME/mean).
 *
 * A RewardSet holds several functions and reward_weights and sums them per
 * completion as TRL does: (rewards_per_func * weights).nansum(dim=1).
 *
 * Errors: -1 with a one-line GrpoErr naming the function (spec or command),
 * what went wrong and, for a bad example, its file:line. Nothing here prints,
 * except that a cmd child's stderr is ours. */
#ifndef GRPO_REWARD_REWARD_H
#define GRPO_REWARD_REWARD_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>

#include "core/check.h"
#include "core/options.h"

/* TRL has no reward timeout; ours bounds a hung child process. */
#define REWARD_DEFAULT_TIMEOUT_S 600.0
#define REWARD_DEFAULT_LENGTH_TARGET 20

/* One completion to score. Borrowed pointers, valid during the call. */
typedef struct {
    const json_t *prompt;          /* the example's original `prompt` (string or messages) */
    const char *prompt_text;       /* the rendered prompt text */
    const char *completion;        /* decoded completion text, NUL-terminated UTF-8 */
    const int32_t *completion_ids; /* [n_completion_ids] */
    int n_completion_ids;
    const json_t *row;             /* the whole example: every column, incl. `prompt` */
    const char *file;              /* where the example came from, for messages; may be NULL */
    long line;                     /* its 1-based line; 0 when unknown */
    const double *env_reward;      /* the environment's reward for this completion (NAN: none given);
                                      NULL: the run has no environment (environment_command) */
} RewardItem;

typedef struct {
    const RewardItem *items; /* [n] */
    int n;
    /* transformers' TrainerState at the step being scored, as a JSON object of its
     * fields (train/hf_state.h: global_step, max_steps, epoch, ...), sent as
     * trainer_state; NULL: {"global_step": 0} */
    const json_t *trainer_state;
    /* every column of the dataset the items come from (the union over its rows,
     * data/dataset.h); each is sent for every item, null where its row lacks it,
     * as TRL's datasets give every row every column. Columns a row has beyond
     * these are sent too. NULL / 0: the union over the batch. */
    char *const *columns; /* [n_columns] */
    int n_columns;
} RewardBatch;

/* open-r1's reward parameters (GRPOScriptArguments), with its defaults. Lengths
 * are as open-r1 counts them: cosine_max_len in characters (code points), the
 * soft overlong punishment's in completion tokens. */
typedef struct {
    double cosine_min_value_wrong;   /* 0.0 */
    double cosine_max_value_wrong;   /* -0.5 */
    double cosine_min_value_correct; /* 0.5 */
    double cosine_max_value_correct; /* 1.0 */
    int cosine_max_len_chars;        /* 1000 */
    int repetition_n_grams;          /* 3 */
    double repetition_max_penalty;   /* -1.0, never positive */
    int max_completion_len_tokens;   /* 16384 */
    int soft_punish_cache_tokens;    /* 4096 */
} OpenR1Params;

/* open-r1's defaults, as GRPOScriptArguments declares them. */
void reward_openr1_defaults(OpenR1Params *p);

typedef struct {
    double timeout_s;            /* reward_timeout for cmd: seconds to wait for a reply; <= 0: default */
    const OpenR1Params *openr1;  /* open-r1's parameters; NULL: its defaults */
} RewardOptions;

/* A reward function. Built-ins come from reward_new; callers may also fill one
 * in themselves (compute and destroy; name malloc'd, freed by reward_free). */
typedef struct RewardFunc RewardFunc;
struct RewardFunc {
    char *name; /* for logging: rewards/NAME/mean */
    int (*compute)(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err);
    void (*destroy)(RewardFunc *f); /* frees state (not name, not f); may be NULL */
    void *state;
    /* the column of the example it reads, which every row must hold (a string, a
     * number, or null: no value), checked before anything is generated
     * (reward_set_check_row); NULL: none it declares (cmd, Python and plugin
     * functions read what they like). Valid for f's life. */
    const char *column;
};

/* 1 when spec (with or without a NAME= prefix) is the function kind `kind`,
 * e.g. "environment_reward", as reward_new reads it. */
int reward_spec_is(const char *spec, const char *kind);

/* Builds the function described by spec (see above). A cmd child is started
 * here; a plugin is loaded here. */
int reward_new(RewardFunc **out, const char *spec, const RewardOptions *opt, GrpoErr *err);
/* Scores b->n completions into out[0..n). Returns 0 or -1 with err. */
int reward_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err);
/* Frees f (stops a cmd child, unloads a plugin). NULL is fine. */
void reward_free(RewardFunc *f);

/* The grace a cmd or Python reward gets to answer once a stop is requested. */
#define REWARD_STOP_GRACE_S 3.0
/* Process-wide: a flag (a signal handler's) that, once non-zero, asks waiting
 * cmd and Python rewards to give up: a reply not there within REWARD_STOP_GRACE_S
 * of the request fails the call ("stopped while waiting for ...") and stops the
 * process, instead of waiting for the whole reward_timeout. NULL: none. */
void reward_watch_stop(const volatile sig_atomic_t *stop);

/* The final answer in a completion, as exact_match reads it: the content of
 * the last balanced \boxed{...}, else of the last <answer>...</answer>, else
 * the last number (thousands separators removed). Returns a malloc'd string,
 * or NULL when there is none. Exposed for tests and logs. */
char *reward_extract_answer(const char *completion);
/* 1 when two answers match after normalisation (trim, strip a trailing '.',
 * drop '$' and spaces; numerically when both read as numbers), else 0. */
int reward_answers_match(const char *got, const char *want);

typedef struct {
    RewardFunc **funcs; /* [n_funcs] owned */
    int n_funcs;
    double *weights;    /* [n_funcs] reward_weights */
} RewardSet;

/* Builds one function per spec. weights may be NULL (n_weights 0): all 1.0
 * (TRL's default); otherwise n_weights must equal n_specs. Duplicate names
 * get a suffix _2, _3, ... so their logs stay apart. */
int reward_set_init(RewardSet *s, const char *const *specs, int n_specs, const double *weights,
                    int n_weights, const RewardOptions *opt, GrpoErr *err);
/* The same from functions already built; takes ownership of funcs[] entries
 * (freed by reward_set_free, and on error). */
int reward_set_init_funcs(RewardSet *s, RewardFunc **funcs, int n_funcs, const double *weights,
                          int n_weights, GrpoErr *err);
/* per_func: [n_funcs][b->n] each function's values (NAN = none), kept for
 * logging and for normalize_then_sum; total: [b->n] the weighted nansum
 * (may be NULL). */
int reward_set_compute(RewardSet *s, const RewardBatch *b, double *per_func, double *total,
                       GrpoErr *err);
/* 0 when every completion's weighted nansum of per_func ([n_funcs][n]) is a finite
 * number, or when a function itself gave +-inf (that value is the function's, met
 * by the trainer's non-finite policy); else, finite rewards whose weighted sum is
 * not, -1 with "the weighted sum of the rewards of completion I is inf, not
 * a finite number: 'a' 1e+308 x weight 1, 'b' ..." (two rewards of 1e308, or one
 * times a weight of 10, pass what a double holds: advantages would be NaN).
 * reward_set_compute checks its total so; training checks before its advantages. */
int reward_weighted_check(const RewardSet *s, const double *per_func, int n, GrpoErr *err);
void reward_set_free(RewardSet *s);
/* One example (row, from file:line) against the columns s's functions declare
 * (RewardFunc.column), as they read them: 0, or -1 with "FILE:LINE: no 'solution'
 * column, which reward 'accuracy_reward' reads". Run over every row before the
 * first step, so a bad row stops a run before anything is trained. */
int reward_set_check_row(const RewardSet *s, const json_t *row, const char *file, long line, GrpoErr *err);

/* The reward options of `grpo train` and `grpo eval`, declared once in
 * reward_options: reward_funcs (required), reward_weights, reward_timeout and
 * open-r1's reward parameters under their open-r1 names. */
typedef struct {
    StrList funcs;
    F64List weights;
    double timeout_s;
    OpenR1Params openr1;
} RewardArgs;

#define REWARD_N_OPTIONS 12
extern const OptSpec reward_options[REWARD_N_OPTIONS];
#define REWARD_OPTIONS_GROUP(base) ((OptGroup){reward_options, REWARD_N_OPTIONS, (base), OPT_SEC_REWARDS})
/* The rules between the options: every function's kind is a known one (an
 * unknown name gets a did-you-mean), and one weight per function when weights
 * are given. */
int reward_args_check(const RewardArgs *a, GrpoErr *err);

/* 0 when spec's kind (after an optional NAME= prefix, before the first ':') is
 * a reward function reward_new builds; else -1 with "reward 'SPEC': unknown
 * reward function 'KIND'", a did-you-mean over every name when one is close,
 * and for a dotted Python-looking name how Python rewards are given. */
int reward_spec_check(const char *spec, GrpoErr *err);
/* reward_set_init from the options (checked as above). */
int reward_set_from_args(RewardSet *s, const RewardArgs *a, GrpoErr *err);

/* total[i] = sum over f of weights[f] * per_func[f][i], leaving out NANs;
 * 0 when every function gave NAN (torch.nansum of all-NaN is 0, as in TRL). */
void reward_weighted_nansum(const double *per_func, int n_funcs, int n, const double *weights,
                            double *total);

#endif
