/* tools/tool_loop.h — the tool-calling turn of a rollout (TRL's _tool_call_loop),
 * as a GenTurns callback for the generator (gen/generate.h): when a completion
 * ends a turn, the model's text of that turn is parsed for tool calls in the
 * chat template's format (tool_calls.h); with calls, each is made by the tool
 * process (tool_proc.h) in order and the results come back as `tool` messages
 * rendered by the template (tool_turn.h), after which the model goes on. A turn
 * without a call — or with a malformed one, which TRL reads as plain text — ends
 * the completion, as does max_tool_calling_iterations rounds of calls. Not
 * wired into `grpo train` / `grpo eval` yet. */
#ifndef GRPO_TOOLS_TOOL_LOOP_H
#define GRPO_TOOLS_TOOL_LOOP_H

#include <jansson.h>

#include "core/check.h"
#include "gen/generate.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_calls.h"
#include "tools/tool_proc.h"

typedef struct {
    Tokenizer *tok;          /* borrowed */
    ToolFormat format;       /* tool_format_of_template of the chat template in use */
    ToolProc *proc;          /* borrowed: the tool process */
    const json_t *kwargs;    /* borrowed: chat_template_kwargs, or NULL */
    int max_iterations;      /* rounds of calls per completion; < 0: no limit (TRL's None) */
    /* counts since the last reset, TRL's tools/call_frequency and tools/failure_frequency */
    long calls, failures, malformed;
    GrpoErr err;             /* why the last turn_end returned -1 */
    TokIds suffix;           /* the ids handed back, valid until the next call */
} ToolLoop;

/* The GenTurns callback (ctx: a ToolLoop). -1 when the tool process fails or the
 * template does not render the tool turn; loop->err says why. */
int tool_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids);

void tool_loop_free(ToolLoop *l); /* frees the suffix buffer only */

#endif
