/* tools/tool_args.h — the tool-calling options of `grpo train` and `grpo eval`,
 * declared once (TRL passes Python functions to GRPOTrainer(tools=...); here the
 * tools are a process and the JSON schemas it serves):
 *   tools                        a JSON file: one list of tool schemas
 *                                ({"type": "function", "function": {"name", "description", "parameters"}}),
 *                                rendered into every prompt as the chat template's tools=
 *   tool_command                 the process that makes the calls (docs/tool-protocol.md)
 *   tool_timeout                 seconds to wait for one reply
 *   max_tool_calling_iterations  TRL's: rounds of calls per completion (-1: no limit, TRL's None)
 *   tool_workers                 tool processes making calls while the other sequences decode (0: none)
 * and the reading of the schemas file. Not the loop itself (tool_loop.h). */
#ifndef GRPO_TOOLS_TOOL_ARGS_H
#define GRPO_TOOLS_TOOL_ARGS_H

#include <jansson.h>

#include "core/check.h"
#include "core/options.h"

typedef struct {
    const char *tools_path;      /* tools: the schemas file, NULL = tool calling off */
    const char *command;         /* tool_command */
    double timeout_s;            /* tool_timeout */
    int max_iterations;          /* max_tool_calling_iterations; -1: no limit */
    int workers;                 /* tool_workers: tool processes whose calls overlap decoding; 0: calls made
                                    inside the decoding batch (every other sequence waits) */
} ToolArgs;

#define TOOL_N_OPTIONS 5
extern const OptSpec tool_options[TOOL_N_OPTIONS];
#define TOOL_OPTIONS_GROUP(base) ((OptGroup){tool_options, TOOL_N_OPTIONS, (base), OPT_SEC_GENERATION})

/* The rules between the options: tools and tool_command come together. */
int tool_args_check(const ToolArgs *a, GrpoErr *err);

/* Reads path, a JSON file holding one list of tool schemas — transformers'
 * {"type": "function", "function": {"name": ...}} or bare {"name": ...}
 * objects — each with a non-empty string name, no two the same. *out: the
 * list (json_decref it). -1 with a message naming the file and the entry. */
int tool_schemas_load(const char *path, json_t **out, GrpoErr *err);

/* The name of schema t (NULL when it has none). */
const char *tool_schema_name(const json_t *t);

#endif
