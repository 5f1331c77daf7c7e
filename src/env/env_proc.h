/* env/env_proc.h — the environment of a multi-turn rollout: one external
 * process, in any language, speaking JSON lines on its stdin and stdout
 * (docs/environment-protocol.md). After each of the model's turns it gets
 *   {"messages": [... the conversation so far, ending with the model's turn],
 *    "row": {... the dataset row's columns}, "turn": 1, "last": false}
 * and answers one line:
 *   {"content": "the next user message"}     the conversation goes on
 *   {"done": true}                            it ends here
 * either with an optional "reward": NUMBER (the trajectory's score so far).
 * This is verl's interaction (generate_response's should_terminate, response,
 * score) and TRL's rollout_func's environment step, over a pipe. It runs on the
 * `cmd:` reward machinery (reward/reward_cmd.c): /bin/sh -c COMMAND in its own
 * process group, a guardian that kills the group whatever ends the trainer, its
 * stderr relayed line by line, each reply bounded by the timeout. One process per
 * run (per rank in a data-parallel run).
 *
 * A process that times out, exits, or replies with anything else (not one JSON
 * object, content that is not a string, both or neither of content and done, a
 * reward that is not a number, another key) is not the model's doing: the step
 * is -1 with a one-line error and the process is stopped. Not the rendering of
 * the reply into ids nor the rollout loop (env_loop.h). */
#ifndef GRPO_ENV_ENV_PROC_H
#define GRPO_ENV_ENV_PROC_H

#include <jansson.h>

#include "core/check.h"

typedef struct EnvProc EnvProc;

typedef struct {
    char *content;     /* the next user message (malloc'd), or NULL when done */
    int done;          /* 1: the conversation ends here */
    int has_reward;    /* 1: the reply carried a reward */
    double reward;
} EnvReply;

/* Starts command, each reply bounded by timeout_s. -1 with err when the
 * process cannot be started. */
int env_proc_start(EnvProc **out, const char *command, double timeout_s, GrpoErr *err);

/* One step: sends the conversation so far (messages, a JSON list), the dataset
 * row's columns (row, a JSON object; NULL: {}), the model's turns so far (turn
 * >= 1) and whether a content reply would still be used (last: 1 when it would
 * not, the turn limit), and reads the reply into *r (free with
 * env_reply_free). -1 with err when the process failed (see above); *r is then
 * empty. */
int env_proc_step(EnvProc *p, const json_t *messages, const json_t *row, int turn, int last, EnvReply *r,
                  GrpoErr *err);

void env_reply_free(EnvReply *r);

/* Stops the process (EOF on its stdin, then SIGTERM/SIGKILL to its group) and
 * frees p. NULL is fine. */
void env_proc_close(EnvProc *p);

#endif
