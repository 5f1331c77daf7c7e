/* tools/tool_calls.h — the tool calls in a model's answer, in the format its chat
 * template writes them, and the `tool` message fed back for each (TRL's
 * GRPOTrainer: trl/chat_template_utils.py parse_response with the response schema
 * add_response_schema picks, and _tool_call_loop for what a failed call gives).
 *
 * Two formats, picked from the chat template's text:
 *  - TOOL_FORMAT_HERMES: Qwen2.5 / Qwen3 (and the Hermes templates they follow),
 *    `<tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>`, one or more,
 *    after the message's text, then only white space (and `<|im_end|>`);
 *  - TOOL_FORMAT_LLAMA3_JSON: Llama 3.1 / 3.2, the whole answer one JSON object
 *    `{"name": N, "parameters": {...}}` (then `<|eot_id|>`), one call at most.
 * An answer is TOOL_ANSWER_TEXT (no call: the trajectory ends), TOOL_ANSWER_CALLS,
 * or TOOL_ANSWER_MALFORMED — something that starts like a call but does not
 * parse (JSON that is not JSON, a call without a string name, text after the
 * calls, an unclosed <tool_call>). TRL treats a malformed answer as plain text
 * (its parse_response falls back to the decoded text), so it too ends the
 * trajectory; the reason is kept for the logs and the tool-failure count. */
#ifndef GRPO_TOOLS_TOOL_CALLS_H
#define GRPO_TOOLS_TOOL_CALLS_H

#include <jansson.h>

typedef enum { TOOL_FORMAT_NONE, TOOL_FORMAT_HERMES, TOOL_FORMAT_LLAMA3_JSON } ToolFormat;

/* The format a chat template writes tool calls in (TOOL_FORMAT_NONE: it has none
 * this parser knows). NULL is TOOL_FORMAT_NONE. */
ToolFormat tool_format_of_template(const char *chat_template);
const char *tool_format_name(ToolFormat f);

typedef enum { TOOL_ANSWER_TEXT, TOOL_ANSWER_CALLS, TOOL_ANSWER_MALFORMED } ToolAnswerKind;

typedef struct {
    char *name;        /* the tool's name, as the model wrote it */
    json_t *arguments; /* the model's arguments, any JSON value ({} when absent or null);
                          not an object is an error at the call (tool_check_call) */
} ToolCall;

#define TOOL_REASON_BYTES 160

typedef struct {
    ToolAnswerKind kind;
    ToolCall *calls; /* kind == TOOL_ANSWER_CALLS: n_calls >= 1 */
    int n_calls;
    char reason[TOOL_REASON_BYTES]; /* TOOL_ANSWER_MALFORMED: what is wrong, untrusted text escaped */
} ToolAnswer;

/* Parses text (a decoded answer, its end-of-turn token possibly included) in
 * format f into *out, which tool_answer_free empties. TOOL_FORMAT_NONE always
 * gives TOOL_ANSWER_TEXT. Returns 0, or -1 out of memory only. */
int tool_answer_parse(ToolFormat f, const char *text, ToolAnswer *out);
void tool_answer_free(ToolAnswer *a);

/* Whether call c can be made with the tools in `tools` (a JSON array of
 * transformers' tool schemas, {"type": "function", "function": {"name": ...}},
 * or bare {"name": ...} objects): 0 when it can, else -1 with the error message
 * TRL's loop feeds back in msg ("Tool NAME not found.", or the arguments not an
 * object). */
int tool_check_call(const ToolCall *c, const json_t *tools, char *msg, size_t n);

/* The content of the `tool` message for an error, as TRL writes it: Python's
 * str() of {"error": msg}, i.e. {'error': '...'} with msg in Python's repr
 * quoting. A malloc'd string (NULL out of memory). */
char *tool_error_content(const char *msg);

#endif
