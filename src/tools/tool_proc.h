/* tools/tool_proc.h — the process that executes a run's tool calls, in any
 * language, speaking JSON lines on its stdin and stdout (docs/tool-protocol.md):
 *   request  {"name": "calculator", "arguments": {"expression": "12*34"}}
 *   reply    {"content": "408"}            the tool's result
 *         or {"error": "division by zero"}  the tool failed
 * one reply line per request, within the timeout. It runs on the `cmd:` reward
 * machinery (reward/reward_cmd.c): /bin/sh -c COMMAND in its own process group,
 * a guardian that kills the group whatever ends the trainer, its stderr relayed
 * line by line. One process per run (per rank in a data-parallel run).
 *
 * What goes back to the model is what TRL's _tool_call_loop appends as the `tool`
 * message's content: the reply's content (a string as it is, any other JSON value
 * as compact JSON), or for a call that fails — {"error": ...}, an unknown tool,
 * arguments that are not an object (no request is sent for those two) — Python's
 * str({"error": MSG}). A process that times out, exits, or writes something that
 * is not a JSON object with "content" or "error" is not the model's doing: the
 * call is -1 with a one-line error and the run stops (the process is stopped;
 * TRL has no timeout: such a tool hangs its run). */
#ifndef GRPO_TOOLS_TOOL_PROC_H
#define GRPO_TOOLS_TOOL_PROC_H

#include <jansson.h>

#include "core/check.h"
#include "tools/tool_calls.h"

typedef struct ToolProc ToolProc;

/* Starts command for the tools described by `tools` (a JSON array of schemas,
 * borrowed: it must outlive the process object), each call bounded by
 * timeout_s. -1 with err when the process cannot be started. */
int tool_proc_start(ToolProc **out, const char *command, const json_t *tools, double timeout_s, GrpoErr *err);

/* Makes call c. *content gets the tool message's content (malloc'd), *failed 1
 * when it is an error content (TRL's tool_failure_count). -1 with err when the
 * process failed (see above); *content is then NULL. */
int tool_proc_call(ToolProc *p, const ToolCall *c, char **content, int *failed, GrpoErr *err);

/* Stops the process (EOF on its stdin, then SIGTERM/SIGKILL to its group) and
 * frees p. NULL is fine. */
void tool_proc_close(ToolProc *p);

#endif
