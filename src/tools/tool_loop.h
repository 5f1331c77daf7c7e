/* tools/tool_loop.h — the tool-calling turn of a rollout (TRL's _tool_call_loop),
 * as a GenTurns callback for the generator (gen/generate.h): when a completion
 * ends a turn, the model's text of that turn is parsed for tool calls in the
 * chat template's format (tool_calls.h); with calls, each is made by the tool
 * process (tool_proc.h) in order and the results come back as `tool` messages
 * rendered by the template (tool_turn.h), after which the model goes on. A turn
 * without a call — or with a malformed one, which TRL reads as plain text — ends
 * the completion, as does max_tool_calling_iterations rounds of calls.
 * tool_loop_open sets one up from the options (tool_args.h): what `grpo train`
 * and `grpo eval` hand their generator (gen_set_turns). */
#ifndef GRPO_TOOLS_TOOL_LOOP_H
#define GRPO_TOOLS_TOOL_LOOP_H

#include <jansson.h>

#include "core/check.h"
#include "gen/generate.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_args.h"
#include "tools/tool_calls.h"
#include "tools/tool_pool.h"
#include "tools/tool_proc.h"

typedef struct {
    Tokenizer *tok;          /* borrowed */
    ToolFormat format;       /* tool_format_of_template of the chat template in use */
    ToolProc *proc;          /* the tool process (the pool's first worker's too) */
    ToolPool *pool;          /* tool_workers > 0: the calls made off the decoding thread; NULL: in it */
    const json_t *kwargs;    /* borrowed: chat_template_kwargs, or NULL */
    int max_iterations;      /* rounds of calls per completion; < 0: no limit (TRL's None) */
    /* counts since the last reset, TRL's tools/call_frequency and tools/failure_frequency */
    long calls, failures, malformed;
    GrpoErr err;             /* why the last turn_end returned -1 (with a pool: the first failure) */
    int pool_failed;         /* a pool's call failed: later calls fail too, err keeps the first reason */
    TokIds suffix;           /* the ids handed back, valid until the next call */
    json_t *own_kwargs;      /* what tool_loop_open made of chat_template_kwargs */
} ToolLoop;

/* Sets up l from the options: the calls checked against schemas (the tools
 * file's, tool_schemas_load; borrowed: it must outlive l), the format of tok's
 * chat template (one this parser knows, else -1: TRL too refuses a template
 * without tool calling), the tool process started, chat_template_kwargs (JSON
 * text or NULL) for the tool turns. a->tools_path NULL: l zeroed, nothing
 * started, 0. -1 with err; nothing then left to close. */
int tool_loop_open(ToolLoop *l, const ToolArgs *a, const json_t *schemas, Tokenizer *tok,
                   const char *chat_template_kwargs, GrpoErr *err);
/* Stops the process tool_loop_open started and frees what it made; a zeroed l is fine. */
void tool_loop_close(ToolLoop *l);

/* The GenTurns callback (ctx: a ToolLoop). -1 when the tool process fails or the
 * template does not render the tool turn; loop->err says why. */
int tool_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids);

/* The overlapped callbacks (GenTurns.turn_begin / turn_wait): without a pool,
 * turn_begin is turn_end. With one, a turn with calls is handed to the pool
 * (GEN_TURN_PENDING) and turn_wait gives its ids when its calls are done, in
 * whatever order they finish; the counts (calls, failures) are made there, on the
 * caller's thread. A turn's ids depend only on its calls, so the samples are
 * the synchronous path's. */
int tool_loop_turn_begin(void *ctx, int index, const Completion *c, const int32_t **ids);
int tool_loop_turn_wait(void *ctx, int block, int *index, const int32_t **ids);

void tool_loop_free(ToolLoop *l); /* frees the suffix buffer only */

#endif
