/* reward/reward.h — reward functions for GRPO, with TRL GRPOTrainer semantics.
 *
 * A reward function scores a batch of completions: out[i] is a double, or NAN
 * for "no value" (TRL: a reward function returning None for an example it
 * does not apply to). Functions are built from a spec string (the syntax is
 * in docs/rewards.md):
 *   length[:TARGET]        -|TARGET - len(completion)|, len in code points (default 20);
 *                          alias reward_len
 *   format:REGEX           1 if the Oniguruma (Perl syntax) regex is found in the
 *                          completion (search; anchor with ^ $ yourself), else 0
 *   exact_match:COLUMN     1 if the completion's final answer equals the example's
 *                          COLUMN, else 0; alias accuracy[:COLUMN] (default 'solution')
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
} RewardItem;

typedef struct {
    const RewardItem *items; /* [n] */
    int n;
    long step;               /* the trainer's global step (sent as trainer_state.global_step) */
} RewardBatch;

typedef struct {
    double timeout_s; /* reward_timeout for cmd: seconds to wait for a reply; <= 0: default */
} RewardOptions;

/* A reward function. Built-ins come from reward_new; callers may also fill one
 * in themselves (compute and destroy; name malloc'd, freed by reward_free). */
typedef struct RewardFunc RewardFunc;
struct RewardFunc {
    char *name; /* for logging: rewards/NAME/mean */
    int (*compute)(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err);
    void (*destroy)(RewardFunc *f); /* frees state (not name, not f); may be NULL */
    void *state;
};

/* Builds the function described by spec (see above). A cmd child is started
 * here; a plugin is loaded here. */
int reward_new(RewardFunc **out, const char *spec, const RewardOptions *opt, GrpoErr *err);
/* Scores b->n completions into out[0..n). Returns 0 or -1 with err. */
int reward_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err);
/* Frees f (stops a cmd child, unloads a plugin). NULL is fine. */
void reward_free(RewardFunc *f);

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
void reward_set_free(RewardSet *s);

/* The reward options of `grpo train` and `grpo eval`, declared once in
 * reward_options: reward_funcs (required), reward_weights, reward_timeout. */
typedef struct {
    StrList funcs;
    F64List weights;
    double timeout_s;
} RewardArgs;

extern const OptSpec reward_options[3];
#define REWARD_OPTIONS_GROUP(base) ((OptGroup){reward_options, 3, (base)})
/* The rule between the options: one weight per function, when weights are given. */
int reward_args_check(const RewardArgs *a, GrpoErr *err);
/* reward_set_init from the options (checked as above). */
int reward_set_from_args(RewardSet *s, const RewardArgs *a, GrpoErr *err);

/* total[i] = sum over f of weights[f] * per_func[f][i], leaving out NANs;
 * 0 when every function gave NAN (torch.nansum of all-NaN is 0, as in TRL). */
void reward_weighted_nansum(const double *per_func, int n_funcs, int n, const double *weights,
                            double *total);

#endif
