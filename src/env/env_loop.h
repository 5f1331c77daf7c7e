/* env/env_loop.h — the environment's turn of a rollout, as a GenTurns callback
 * for the generator (gen/generate.h): when a completion ends a turn, the
 * conversation so far — the group's prompt messages, then the model's turns and
 * the environment's messages alternating, the model's text decoded without
 * special tokens — goes to the environment process (env_proc.h) with the
 * dataset row; its next message comes back as a `user` turn rendered by the
 * chat template with the generation prompt (tool_turn_suffix_ids, TRL's way of
 * appending a tool turn), after which the model goes on. `done`, or max_turns
 * environment messages, ends the completion there; the reward of the last reply
 * that carried one is the completion's (verl's interaction score; TRL's
 * rollout_func's extra reward field), read back with env_loop_reward.
 *
 * The environment must answer from the request alone (the conversation is in
 * it): the completions of a group are decoded in chunks, in an order that
 * depends on the chunk size, and only then are samples independent of it. */
#ifndef GRPO_ENV_ENV_LOOP_H
#define GRPO_ENV_ENV_LOOP_H

#include <jansson.h>

#include "core/check.h"
#include "env/env_args.h"
#include "env/env_proc.h"
#include "gen/generate.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    Tokenizer *tok;          /* borrowed */
    EnvProc *proc;           /* borrowed: the environment process */
    const json_t *kwargs;    /* borrowed: chat_template_kwargs, or NULL */
    int max_turns;           /* environment messages per completion; < 0: no limit. At the limit the
                                environment is still asked (with "last": true), for its reward */
    /* the group being generated (env_loop_begin_group) */
    const json_t *prompt;    /* borrowed: its prompt messages */
    const json_t *row;       /* borrowed: its dataset row's columns, or NULL */
    int n;                   /* completions in the group */
    int cap;
    json_t **turns;          /* [cap] per completion: the messages after the prompt */
    double *reward;          /* [cap] per completion: the environment's reward, NaN when none */
    /* counts since the last reset: requests, completions the environment ended, completions ended
       by max_turns */
    long steps, done, limited;
    GrpoErr err;             /* why the last turn_end returned -1 */
    TokIds suffix;           /* the ids handed back, valid until the next call */
    json_t *own_kwargs;      /* what env_loop_open made of chat_template_kwargs */
    json_t *own_prompt;      /* a plain-text prompt made a user message */
} EnvLoop;

/* Sets up l from the options: the environment process started, tok and
 * chat_template_kwargs (JSON text or NULL) for its turns, max_environment_turns.
 * a->command NULL: l zeroed, nothing started, 0. -1 with err; nothing then left
 * to close. */
int env_loop_open(EnvLoop *l, const EnvArgs *a, Tokenizer *tok, const char *chat_template_kwargs, GrpoErr *err);
/* Stops the process env_loop_open started and frees what the loop made; a
 * zeroed l is fine. */
void env_loop_close(EnvLoop *l);

/* Starts a group of n completions of the prompt `messages` (a JSON list of
 * {"role", "content"}, or a dataset's plain-text prompt, which the environment
 * sees as one user message) for dataset row `row` (a JSON object or NULL):
 * their conversations and rewards are reset. Both borrowed until the next group. */
void env_loop_begin_group(EnvLoop *l, const json_t *messages, const json_t *row, int n);

/* The GenTurns callback (ctx: an EnvLoop). -1 when the environment process
 * fails or the template does not render the turn; l->err says why. */
int env_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids);

/* Completion index's reward from the environment in the current group, NaN when
 * it gave none. */
double env_loop_reward(const EnvLoop *l, int index);

/* The environment's messages of completion index (a JSON list of the messages
 * after the prompt, borrowed until the next group), for logs. */
const json_t *env_loop_turns(const EnvLoop *l, int index);

void env_loop_free(EnvLoop *l); /* frees what the loop allocated, not what it borrows */

#endif
