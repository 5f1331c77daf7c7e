/* reward/reward_internal.h — constructors of the built-in reward functions,
 * shared by the files of reward/. Each fills f->compute, f->destroy and
 * f->state (the name is set by reward_new) or returns -1 with err. */
#ifndef GRPO_REWARD_INTERNAL_H
#define GRPO_REWARD_INTERNAL_H

#include "reward/reward.h"

int reward_exact_match_init(RewardFunc *f, const char *column, GrpoErr *err);
/* environment_reward (reward_env.c): each item's env_reward. */
int reward_environment_init(RewardFunc *f, GrpoErr *err);
/* TRL's accuracy_reward over a column ("solution" when NULL) and
 * think_format_reward (reward_math.c). */
int reward_accuracy_init(RewardFunc *f, const char *column, GrpoErr *err);
int reward_think_format_init(RewardFunc *f, GrpoErr *err);
/* accuracy_reward's pieces, for tests: the completion's answer (NULL if none)
 * and whether two answers are equal. */
char *math_completion_answer(const char *completion);
int math_answers_equal(const char *answer, const char *gold);
/* accuracy_reward's verdict on one completion (open-r1's cosine and length
 * rewards use it too): 1 if its answer equals the solution's, 0 if not or it
 * has none, -1 when the solution holds no answer to compare with (TRL: None). */
int reward_math_correct(const char *completion, const char *solution);
/* name: the reward's name, its stderr lines prefixed "[reward NAME] ". */
int reward_cmd_init(RewardFunc *f, const char *command, const char *name, double timeout_s, GrpoErr *err);
/* The same process machinery for any program: argv[0] a path, what opens
 * every message ("python reward 'f.py:fn'"), label prefixes its stderr lines
 * ("[LABEL] ": "reward NAME", "tool", "environment") and timeout_option is the
 * option a timeout message names ("reward_timeout", "tool_timeout", ...; a
 * string that outlives the process). */
int reward_cmd_start(RewardFunc *f, char *const argv[], const char *what, const char *label,
                     const char *timeout_option, double timeout_s, GrpoErr *err);
/* Reads the process's start-up line (sent before any request) within the
 * timeout into *hello (the caller's reference); {"error": TEXT} or a failure
 * is -1 with err, and the process is stopped. */
int reward_cmd_hello(RewardFunc *f, json_t **hello, GrpoErr *err);
/* Sends req as one request line (compact JSON) and reads the one reply
 * line within the timeout as a JSON object into *reply (the caller's reference),
 * {"error": ...} included: what it means is the caller's. A timeout, an exit, a
 * reply that is not one line of a JSON object is -1 with err, the process
 * stopped. For processes that are not rewards (tools/tool_proc.c). */
int reward_cmd_request(RewardFunc *f, const json_t *req, json_t **reply, GrpoErr *err);
/* A Python reward function (reward_python.c): spec is FILE.py:FUNCTION or
 * module.function (reward_python_spec says whether a spec is one). python3 is
 * started and the function loaded here; *default_name gets its log name (TRL's:
 * the callable's __name__), malloc'd. name: the NAME= given, or NULL. */
int reward_python_spec(const char *spec);
int reward_python_init(RewardFunc *f, const char *spec, const char *name, double timeout_s, char **default_name,
                       GrpoErr *err);
int reward_plugin_init(RewardFunc *f, const char *path, const char *symbol, GrpoErr *err);

/* The text of an example's column for answer checks: a string as it is, a
 * number printed (num holds it). 0 with *text; 1 when the column is null (no
 * value); -1 with err when it is missing or neither. */
int reward_column_text(const RewardFunc *f, const RewardItem *it, int i, const char *column, char num[64],
                       const char **text, GrpoErr *err);

/* open-r1's rewards (reward_openr1.c, reward_openr1_len.c). reward_openr1_claims:
 * 1 when reward_new should build the spec's kind (with its argument, NULL when
 * none) as an open-r1 reward: accuracy[:COLUMN], tag_count, reasoning_steps,
 * cosine, repetition_penalty, soft_overlong_punishment, and format and length
 * without an argument. reward_openr1_init builds it (p: its parameters; NULL:
 * open-r1's defaults); reward_openr1_log_name is open-r1's function name, which
 * TRL logs it by (rewards/accuracy_reward/mean). */
int reward_openr1_claims(const char *kind, const char *arg);
int reward_openr1_init(RewardFunc *f, const char *kind, const char *arg, const char *spec, const OpenR1Params *p,
                       GrpoErr *err);
const char *reward_openr1_log_name(const char *kind);
int reward_openr1_cosine_init(RewardFunc *f, const OpenR1Params *p, GrpoErr *err);
int reward_openr1_len_init(RewardFunc *f, GrpoErr *err);
int reward_openr1_overlong_init(RewardFunc *f, const OpenR1Params *p, GrpoErr *err);
/* Python's len() of a str: code points of valid UTF-8 (decoded completions are). */
long reward_utf8_chars(const char *s);

/* open-r1's cosine and len rewards' correctness (reward_math.c): 1 when the
 * completion's answer equals the gold's, 0 when not or when the completion has
 * none, -1 when the gold has no LaTeX answer (no \boxed{}, $..$, \[..\],
 * \(..\) nor \frac{N}{N}: open-r1 reads it with LaTeX extraction only and
 * then skips it as "Failed to parse gold solution"). */
int math_openr1_correct(const char *completion, const char *gold_text);

/* The message for an unknown reward kind (reward_names.c): returns -1 with err. */
int reward_unknown_err(const char *spec, const char *kind, GrpoErr *err);

/* "file:line" of an item for messages, or "batch item i" when unknown. */
void reward_item_where(const RewardItem *it, int i, char *buf, size_t size);

#endif
