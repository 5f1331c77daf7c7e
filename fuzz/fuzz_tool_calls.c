/* fuzz/fuzz_tool_calls.c — tools/tool_calls.c: tool calls parsed from text a
 * model wrote, in the format the first byte picks (Qwen's <tool_call> blocks or
 * Llama 3.1's JSON). Every answer is one of the three kinds; calls have a name
 * and arguments, and only calls do; a malformed answer says why; each call is
 * checked against a fixed tool list and an error content is built from its
 * name. Not covered: executing a call (tools/tool_proc.c). */
#include "fuzz.h"
#include "tools/tool_calls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    ToolFormat f = data[0] % 3 == 0 ? TOOL_FORMAT_HERMES : data[0] % 3 == 1 ? TOOL_FORMAT_LLAMA3_JSON : TOOL_FORMAT_NONE;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    static json_t *tools;
    if (!tools) tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calculator\"}}]", 0, NULL);
    ToolAnswer a;
    FUZZ_ASSERT(tool_answer_parse(f, text, &a) == 0);
    FUZZ_ASSERT(a.kind == TOOL_ANSWER_TEXT || a.kind == TOOL_ANSWER_CALLS || a.kind == TOOL_ANSWER_MALFORMED);
    FUZZ_ASSERT((a.kind == TOOL_ANSWER_CALLS) == (a.n_calls > 0));
    FUZZ_ASSERT(a.kind != TOOL_ANSWER_MALFORMED || a.reason[0]);
    FUZZ_ASSERT(f != TOOL_FORMAT_NONE || a.kind == TOOL_ANSWER_TEXT);
    for (int i = 0; i < a.n_calls; i++) {
        FUZZ_ASSERT(a.calls[i].name && a.calls[i].arguments);
        char msg[256];
        int r = tool_check_call(&a.calls[i], tools, msg, sizeof msg);
        FUZZ_ASSERT(r == 0 || r == -1);
        char *content = tool_error_content(r ? msg : a.calls[i].name);
        FUZZ_ASSERT(content && strncmp(content, "{'error': ", 10) == 0);
        free(content);
    }
    tool_answer_free(&a);
    free(text);
    return 0;
}
