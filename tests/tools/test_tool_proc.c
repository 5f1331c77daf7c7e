/* tests/tools/test_tool_proc.c — tool calls executed by an external process
 * (tools/tool_proc.h) with a fake calculator in a few lines of Python: results,
 * an {"error"} reply fed back as TRL's error content with the process kept, an
 * unknown tool and arguments that are not an object refused without a request,
 * non-string content as JSON; a tool that times out, crashes, writes garbage or
 * a reply with neither key: each -1 with its message, within the timeout, and
 * later calls fail at once. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "tools/tool_proc.h"

static char tmp[] = "/tmp/grpo-tools-XXXXXX";
static char script[600], log_path[600], command[1400];

static const char *FAKE =
    "import json, sys, time\n"
    "log = open(sys.argv[1], 'a')\n"
    "for line in sys.stdin:\n"
    "    req = json.loads(line); log.write(line); log.flush()\n"
    "    e = req['arguments'].get('expression', '')\n"
    "    if e == 'sleep': time.sleep(60)\n"
    "    if e == 'crash': sys.exit(3)\n"
    "    if e == 'garbage': print('hello', flush=True); continue\n"
    "    if e == 'neither': print(json.dumps({'result': 1}), flush=True); continue\n"
    "    if e == 'object': print(json.dumps({'content': {'a': [1, 2]}}), flush=True); continue\n"
    "    try: out = {'content': str(eval(e, {'__builtins__': {}}))}\n"
    "    except Exception as ex: out = {'error': str(ex)}\n"
    "    print(json.dumps(out), flush=True)\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long log_lines(void) {
    FILE *f = fopen(log_path, "r");
    if (!f) return 0;
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

static json_t *tools;

/* a call of `name` with arguments given as JSON text */
static int call(ToolProc *p, const char *name, const char *args, char **content, int *failed, GrpoErr *err) {
    ToolCall c = {(char *)name, json_loads(args, JSON_DECODE_ANY, NULL)};
    int rc = tool_proc_call(p, &c, content, failed, err);
    json_decref(c.arguments);
    return rc;
}

static void test_calls(void) {
    ToolProc *p;
    GrpoErr err = {{0}};
    T_CHECK(tool_proc_start(&p, command, tools, 20, &err) == 0, "start: %s", err.msg);
    if (!p) return;
    char *content;
    int failed;
    T_CHECK(call(p, "calculator", "{\"expression\": \"12345678901234567890 + 98765432109876543210\"}", &content,
                 &failed, &err) == 0 && !failed && !strcmp(content, "111111111011111111100"),
            "result: %s (%s)", content, err.msg);
    free(content);
    T_CHECK(call(p, "calculator", "{\"expression\": \"1/0\"}", &content, &failed, &err) == 0 && failed &&
                !strcmp(content, "{'error': 'division by zero'}"),
            "error reply: %s (%s)", content, err.msg);
    free(content);
    long before = log_lines();
    T_CHECK(call(p, "calc", "{\"expression\": \"1\"}", &content, &failed, &err) == 0 && failed &&
                !strcmp(content, "{'error': 'Tool calc not found.'}"),
            "unknown tool: %s", content);
    free(content);
    T_CHECK(call(p, "calculator", "\"1+1\"", &content, &failed, &err) == 0 && failed &&
                !strcmp(content, "{'error': 'calculator() argument after ** must be a mapping, not str'}"),
            "arguments not an object: %s", content);
    free(content);
    T_CHECK(log_lines() == before, "no request sent for those two (%ld, %ld)", log_lines(), before);
    T_CHECK(call(p, "calculator", "{\"expression\": \"object\"}", &content, &failed, &err) == 0 && !failed &&
                !strcmp(content, "{\"a\":[1,2]}"),
            "non-string content as JSON: %s", content);
    free(content);
    /* the process lives on after an error reply */
    T_CHECK(call(p, "calculator", "{\"expression\": \"6*7\"}", &content, &failed, &err) == 0 && !failed &&
                !strcmp(content, "42"),
            "still running: %s (%s)", content, err.msg);
    free(content);
    T_CHECK(log_lines() == before + 2, "requests logged: %ld", log_lines());
    tool_proc_close(p);
}

/* a process that fails on `expression`: -1 with want in the message, soon */
static void expect_failure(const char *expression, double timeout_s, const char *want) {
    ToolProc *p;
    GrpoErr err = {{0}};
    T_CHECK(tool_proc_start(&p, command, tools, timeout_s, &err) == 0, "start: %s", err.msg);
    if (!p) return;
    char args[128], *content = (char *)"x";
    int failed;
    snprintf(args, sizeof args, "{\"expression\": \"%s\"}", expression);
    double t0 = now_s();
    int rc = call(p, "calculator", args, &content, &failed, &err);
    double took = now_s() - t0;
    T_CHECK(rc == -1 && !content && strstr(err.msg, want) && strstr(err.msg, "tool command '"),
            "%s: rc %d, '%s' (want '%s')", expression, rc, err.msg, want);
    T_CHECK(took < timeout_s + 3, "%s: took %.1f s", expression, took);
    rc = call(p, "calculator", "{\"expression\": \"1\"}", &content, &failed, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "not running"), "%s: then not running: '%s'", expression, err.msg);
    t0 = now_s();
    tool_proc_close(p);
    T_CHECK(now_s() - t0 < 5, "close is prompt");
}

int main(void) {
    CHECK(mkdtemp(tmp));
    snprintf(script, sizeof script, "%s/calc.py", tmp);
    snprintf(log_path, sizeof log_path, "%s/requests.log", tmp);
    snprintf(command, sizeof command, "python3 %s %s", script, log_path);
    FILE *f = fopen(script, "w");
    CHECK(f);
    fputs(FAKE, f);
    fclose(f);
    tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"parameters\": "
                       "{\"type\": \"object\", \"properties\": {\"expression\": {\"type\": \"string\"}}}}}]",
                       0, NULL);
    test_calls();
    expect_failure("sleep", 1.0, "no reply within 1 s (tool_timeout)");
    expect_failure("crash", 10, "exited with status 3 before replying");
    expect_failure("garbage", 10, "is not a JSON object ('hello')");
    expect_failure("neither", 10, "exactly one of \"content\" or \"error\" (call of 'calculator' got '{\"result\":1}')");
    ToolProc *p;
    GrpoErr err = {{0}};
    json_t *none = json_array();
    T_CHECK(tool_proc_start(&p, command, none, 10, &err) == -1 && !p && strstr(err.msg, "no tools described"),
            "no tools: %s", err.msg);
    json_decref(none);
    json_decref(tools);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_tool_proc");
}
