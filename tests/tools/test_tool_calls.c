/* tests/tools/test_tool_calls.c — tool calls parsed from answers in Qwen's
 * <tool_call> format and Llama 3.1's JSON, each malformed case a clear outcome
 * (TRL: plain text, the reason kept), and the error content fed back for an
 * unknown tool or arguments that are not an object (TRL's str({"error": ...})). */
#include <string.h>

#include "testutil.h"
#include "tools/tool_calls.h"

/* parses text, checks its kind and (for calls) the names joined by ',' and the
 * arguments of the first call as compact JSON */
static void expect(ToolFormat f, const char *text, ToolAnswerKind kind, const char *names,
                   const char *args0, const char *reason_part) {
    ToolAnswer a;
    T_CHECK(tool_answer_parse(f, text, &a) == 0, "parse");
    T_CHECK(a.kind == kind, "'%s': kind %d, want %d (%s)", text, a.kind, kind, a.reason);
    if (kind == TOOL_ANSWER_CALLS && a.kind == kind) {
        char got[256] = "";
        for (int i = 0; i < a.n_calls; i++) {
            if (i) strcat(got, ",");
            strcat(got, a.calls[i].name);
        }
        T_CHECK(strcmp(got, names) == 0, "'%s': names '%s', want '%s'", text, got, names);
        char *js = json_dumps(a.calls[0].arguments, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        T_CHECK(js && strcmp(js, args0) == 0, "'%s': arguments %s, want %s", text, js, args0);
        free(js);
    } else {
        T_CHECK(a.n_calls == 0 && !a.calls, "no calls kept");
    }
    if (reason_part) T_CHECK(strstr(a.reason, reason_part), "'%s': reason '%s', want '%s'", text, a.reason, reason_part);
    tool_answer_free(&a);
}

static void test_hermes(void) {
    ToolFormat H = TOOL_FORMAT_HERMES;
    expect(H, "The answer is 4.", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(H, "", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(H, "<tool_call>\n{\"name\": \"multiply\", \"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call><|im_end|>",
           TOOL_ANSWER_CALLS, "multiply", "{\"a\":3,\"b\":4}", NULL);
    expect(H, "Let me compute.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"x\": \"12345678901234567890\"}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"mul\", \"arguments\": {}}\n</tool_call>\n",
           TOOL_ANSWER_CALLS, "add,mul", "{\"x\":\"12345678901234567890\"}", NULL);
    /* a JSON object over several lines (TRL's iterator regex would skip it; we take it) */
    expect(H, "<tool_call>\n{\"name\": \"f\",\n \"arguments\": {\"k\": [1,\n 2]}}\n</tool_call>", TOOL_ANSWER_CALLS, "f",
           "{\"k\":[1,2]}", NULL);
    /* Qwen3's thinking block: a <tool_call> inside it is not a call */
    expect(H, "<think>\nmaybe <tool_call> here\n</think>\n\nNo tool needed.", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(H, "<think>\nuse f\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
           TOOL_ANSWER_CALLS, "f", "{\"a\":1}", NULL);
    /* arguments absent or null: {} (TRL's _validate_tool_calls) */
    expect(H, "<tool_call>{\"name\": \"now\"}</tool_call>", TOOL_ANSWER_CALLS, "now", "{}", NULL);
    expect(H, "<tool_call>{\"name\": \"now\", \"arguments\": null}</tool_call>", TOOL_ANSWER_CALLS, "now", "{}", NULL);
    /* arguments that are not an object: a call, refused when made (tool_check_call) */
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", TOOL_ANSWER_CALLS, "f",
           "\"{\\\"a\\\": 1}\"", NULL);
    /* malformed: plain text for TRL, a reason for us */
    expect(H, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>", TOOL_ANSWER_MALFORMED, NULL,
           NULL, "not JSON");
    expect(H, "<tool_call>\nf(a=1)\n</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "not JSON: 'f(a=1)");
    expect(H, "<tool_call>{\"arguments\": {}}</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "string \"name\"");
    expect(H, "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "\"name\"");
    expect(H, "<tool_call>[1, 2]</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "\"name\"");
    expect(H, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", TOOL_ANSWER_MALFORMED, NULL, NULL, "without </tool_call>");
    expect(H, "<tool_call>\n \n</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "empty");
    expect(H, "<tool_call>{\"name\": \"f\"}</tool_call> and then some text", TOOL_ANSWER_MALFORMED, NULL, NULL,
           "text after </tool_call>: 'and then");
    /* a second block that fails drops the first one too (TRL parses the answer whole) */
    expect(H, "<tool_call>{\"name\": \"f\"}</tool_call>\n<tool_call>{bad}</tool_call>", TOOL_ANSWER_MALFORMED, NULL,
           NULL, "not JSON");
    /* the untrusted text in a reason is escaped */
    expect(H, "<tool_call>\x01\x02\n</tool_call>", TOOL_ANSWER_MALFORMED, NULL, NULL, "\\x01");
}

static void test_llama3(void) {
    ToolFormat L = TOOL_FORMAT_LLAMA3_JSON;
    expect(L, "{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}<|eot_id|>", TOOL_ANSWER_CALLS, "calc",
           "{\"expr\":\"2+2\"}", NULL);
    expect(L, "{\"name\": \"calc\", \"parameters\": {}}", TOOL_ANSWER_CALLS, "calc", "{}", NULL);
    expect(L, "The answer is 4.<|eot_id|>", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    /* not at the first byte: text, as TRL's anchored regex */
    expect(L, "Sure: {\"name\": \"calc\", \"parameters\": {}}", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(L, "{\"name\": \"calc\", \"parameters\": {\"expr\": }}", TOOL_ANSWER_MALFORMED, NULL, NULL, "not JSON");
    expect(L, "{\"name\": \"calc\", \"parameters\": {\"expr\": \"1\"", TOOL_ANSWER_MALFORMED, NULL, NULL, "not JSON");
    expect(L, "{\"name\": \"calc\", \"arguments\": {}}", TOOL_ANSWER_MALFORMED, NULL, NULL, "\"parameters\"");
    /* Qwen's tags mean nothing in Llama's format, and Llama's JSON nothing in Qwen's */
    expect(L, "<tool_call>{\"name\": \"f\"}</tool_call>", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(TOOL_FORMAT_HERMES, "{\"name\": \"calc\", \"parameters\": {}}", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
    expect(TOOL_FORMAT_NONE, "<tool_call>{\"name\": \"f\"}</tool_call>", TOOL_ANSWER_TEXT, NULL, NULL, NULL);
}

static void test_format_of_template(void) {
    T_CHECK(tool_format_of_template("{%- if tools %}<tools>{% endif %}<tool_call>\\n{{ x }}</tool_call>") ==
                TOOL_FORMAT_HERMES, "qwen");
    T_CHECK(tool_format_of_template("{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}"
                                    "{{ '<|eot_id|>' }}") == TOOL_FORMAT_LLAMA3_JSON, "llama 3.1");
    T_CHECK(tool_format_of_template("{{ '<|im_start|>' + m.content }}") == TOOL_FORMAT_NONE, "none");
    T_CHECK(tool_format_of_template(NULL) == TOOL_FORMAT_NONE, "NULL");
}

static void test_check_and_error(void) {
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"parameters\": {}}},"
                               " {\"name\": \"bare\"}]", 0, NULL);
    char msg[256];
    ToolCall c = {"calculator", json_object()};
    T_CHECK(tool_check_call(&c, tools, msg, sizeof msg) == 0, "known tool");
    c.name = "bare";
    T_CHECK(tool_check_call(&c, tools, msg, sizeof msg) == 0, "bare schema");
    c.name = "calculater";
    T_CHECK(tool_check_call(&c, tools, msg, sizeof msg) == -1 && strcmp(msg, "Tool calculater not found.") == 0,
            "unknown: %s", msg);
    json_decref(c.arguments);
    c.name = "calculator";
    c.arguments = json_string("1+1");
    T_CHECK(tool_check_call(&c, tools, msg, sizeof msg) == -1 &&
                strcmp(msg, "calculator() argument after ** must be a mapping, not str") == 0, "args: %s", msg);
    json_decref(c.arguments);
    c.arguments = json_pack("[i]", 1);
    T_CHECK(tool_check_call(&c, tools, msg, sizeof msg) == -1 && strstr(msg, "not list"), "args: %s", msg);
    json_decref(c.arguments);
    json_decref(tools);

    struct { const char *msg, *want; } cases[] = {
        {"Tool f not found.", "{'error': 'Tool f not found.'}"},
        {"can't", "{'error': \"can't\"}"},
        {"both ' and \"", "{'error': 'both \\' and \"'}"},
        {"line\nbreak\\", "{'error': 'line\\nbreak\\\\'}"},
        {"\x01", "{'error': '\\x01'}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = tool_error_content(cases[i].msg);
        T_CHECK(got && strcmp(got, cases[i].want) == 0, "error content %s, want %s", got, cases[i].want);
        free(got);
    }
}

int main(void) {
    test_hermes();
    test_llama3();
    test_format_of_template();
    test_check_and_error();
    return t_summary("test_tool_calls");
}
