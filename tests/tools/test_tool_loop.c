/* tests/tools/test_tool_loop.c — a completion's tool turn (tools/tool_loop.h)
 * with the real Qwen2.5 tokenizer and template (path from
 * tests/tools/test_tool_turn.sh) and a fake calculator process: a call's result
 * rendered as the next ids; two calls, one to an unknown tool; a later turn parsed
 * alone; a plain answer and a malformed call end the completion; the iteration
 * limit; a crashing tool is -1 with its message. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tools/tool_loop.h"

static char tmp[] = "/tmp/grpo-toolloop-XXXXXX";
static Tokenizer *tok;

/* c := the ids of the model texts and appended texts alternating (appended ones masked 0) */
static void make(Completion *c, const char *const *parts, int n_parts, int n_turns) {
    memset(c, 0, sizeof *c);
    c->ids = malloc(4096 * sizeof *c->ids);
    c->mask = malloc(4096);
    GrpoErr err;
    for (int p = 0; p < n_parts; p++) {
        TokIds ids = {0};
        CHECK(tok_encode(tok, parts[p], strlen(parts[p]), 0, &ids, &err) == 0);
        memcpy(c->ids + c->n, ids.ids, ids.n * sizeof *ids.ids);
        memset(c->mask + c->n, p % 2 == 0, ids.n);
        c->n += (int)ids.n;
        tok_ids_free(&ids);
    }
    c->n_turns = n_turns;
}

static char *text_of(const int32_t *ids, int n) {
    char *t = NULL;
    size_t len;
    GrpoErr err;
    CHECK(tok_decode(tok, ids, (size_t)n, 0, &t, &len, &err) == 0);
    return t;
}

#define CALL(expr) "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" expr "\"}}\n</tool_call>"
#define RESP(x) "\n<|im_start|>user\n<tool_response>\n" x "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"

int main(void) {
    const char *dir = getenv("GRPO_QWEN25_TOKENIZER");
    if (!dir) {
        printf("(the checks run from tests/tools/test_tool_turn.sh, which sets the tokenizer paths)\n");
        return t_summary("test_tool_loop");
    }
    GrpoErr err = {{0}};
    CHECK(tok_load(&tok, dir, &err) == 0);
    CHECK(mkdtemp(tmp));
    char script[256], command[600];
    snprintf(script, sizeof script, "%s/calc.py", tmp);
    FILE *f = fopen(script, "w");
    CHECK(f);
    fputs("import json, sys\n"
          "for line in sys.stdin:\n"
          "    e = json.loads(line)['arguments']['expression']\n"
          "    if e == 'crash': sys.exit(3)\n"
          "    print(json.dumps({'content': str(eval(e, {'__builtins__': {}}))}), flush=True)\n", f);
    fclose(f);
    snprintf(command, sizeof command, "python3 %s", script);
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calculator\"}}]", 0, NULL);
    ToolLoop l = {.tok = tok, .format = TOOL_FORMAT_HERMES, .max_iterations = -1};
    CHECK(tool_proc_start(&l.proc, command, tools, 20, &err) == 0);
    Completion c;
    const int32_t *ids;

    const char *one[] = {CALL("6*7") "<|im_end|>"};
    make(&c, one, 1, 0);
    int k = tool_loop_turn_end(&l, 0, &c, &ids);
    char *t = k > 0 ? text_of(ids, k) : NULL;
    T_CHECK(t && !strcmp(t, RESP("42")), "one call: %d '%s' (%s)", k, t ? t : "", l.err.msg);
    T_CHECK(l.calls == 1 && l.failures == 0, "counts %ld %ld", l.calls, l.failures);
    free(t);
    completion_free(&c);

    const char *two[] = {"Two.\n" CALL("2**70") "\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {}}\n</tool_call><|im_end|>"};
    make(&c, two, 1, 0);
    k = tool_loop_turn_end(&l, 1, &c, &ids);
    t = k > 0 ? text_of(ids, k) : NULL;
    T_CHECK(t && !strcmp(t, "\n<|im_start|>user\n<tool_response>\n1180591620717411303424\n</tool_response>\n"
                            "<tool_response>\n{'error': 'Tool calc not found.'}\n</tool_response><|im_end|>\n"
                            "<|im_start|>assistant\n"),
            "two calls: '%s' (%s)", t ? t : "", l.err.msg);
    T_CHECK(l.calls == 3 && l.failures == 1, "counts %ld %ld", l.calls, l.failures);
    free(t);
    completion_free(&c);

    /* a later turn is parsed alone: the earlier call is not made again */
    const char *later[] = {CALL("6*7") "<|im_end|>", RESP("42"), "It is 42.<|im_end|>"};
    make(&c, later, 3, 1);
    T_CHECK(tool_loop_turn_end(&l, 2, &c, &ids) == 0 && l.calls == 3, "a plain answer ends it");
    completion_free(&c);
    const char *again[] = {CALL("6*7") "<|im_end|>", RESP("42"), CALL("42+1") "<|im_end|>"};
    make(&c, again, 3, 1);
    k = tool_loop_turn_end(&l, 3, &c, &ids);
    t = k > 0 ? text_of(ids, k) : NULL;
    T_CHECK(t && !strcmp(t, RESP("43")) && l.calls == 4, "a second round: '%s'", t ? t : "");
    free(t);
    l.max_iterations = 1;
    T_CHECK(tool_loop_turn_end(&l, 3, &c, &ids) == 0 && l.calls == 4, "max_tool_calling_iterations 1: no second round");
    l.max_iterations = 0;
    completion_free(&c);
    make(&c, one, 1, 0);
    T_CHECK(tool_loop_turn_end(&l, 0, &c, &ids) == 0 && l.calls == 4, "max_tool_calling_iterations 0: no call");
    l.max_iterations = -1;
    completion_free(&c);

    const char *bad[] = {"<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": }\n</tool_call><|im_end|>"};
    make(&c, bad, 1, 0);
    T_CHECK(tool_loop_turn_end(&l, 0, &c, &ids) == 0 && l.malformed == 1 && l.calls == 4, "malformed: ends, counted");
    completion_free(&c);

    const char *crash[] = {CALL("crash") "<|im_end|>"};
    make(&c, crash, 1, 0);
    T_CHECK(tool_loop_turn_end(&l, 0, &c, &ids) == -1 && strstr(l.err.msg, "exited with status 3"), "crash: %s",
            l.err.msg);
    completion_free(&c);

    tool_proc_close(l.proc);
    tool_loop_free(&l);
    json_decref(tools);
    tok_free(tok);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_tool_loop");
}
