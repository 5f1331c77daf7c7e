/* tests/tools/test_tool_args.c — the tool-calling options (tools/tool_args.h):
 * the rules between tools and tool_command, and the tools file read and checked
 * (a list of schemas, each named, no name twice), each bad file refused with one
 * line naming the file and the entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tools/tool_args.h"

static char dir[] = "/tmp/grpo-toolargs-XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[4][400];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 400, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

/* tool_schemas_load of text fails with a message holding want */
static void refused(const char *text, const char *want) {
    json_t *l = (json_t *)1;
    GrpoErr err = {0};
    const char *p = write_file("bad.json", text);
    int rc = tool_schemas_load(p, &l, &err);
    T_CHECK(rc == -1 && l == NULL, "%s refused", text);
    T_CHECK(strstr(err.msg, want) && strstr(err.msg, "bad.json") && !strchr(err.msg, '\n'), "'%s': %s", want,
            err.msg);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    GrpoErr err;
    ToolArgs a = {0};
    T_CHECK(tool_args_check(&a, &err) == 0, "no tools: nothing to check");
    a.command = "python3 calc.py";
    T_CHECK(tool_args_check(&a, &err) == -1 && strstr(err.msg, "tool_command needs tools"), "%s", err.msg);
    a.command = NULL, a.tools_path = "tools.json";
    T_CHECK(tool_args_check(&a, &err) == -1 && strstr(err.msg, "tools needs tool_command"), "%s", err.msg);
    a.command = "python3 calc.py";
    T_CHECK(tool_args_check(&a, &err) == 0, "both: fine");

    json_t *l = NULL;
    const char *good = write_file("tools.json",
                                  "[{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"description\": "
                                  "\"adds\", \"parameters\": {\"type\": \"object\"}}}, {\"name\": \"search\"}]");
    T_CHECK(tool_schemas_load(good, &l, &err) == 0 && json_array_size(l) == 2, "a good file: %s", err.msg);
    T_CHECK(l && !strcmp(tool_schema_name(json_array_get(l, 0)), "calculator") &&
                !strcmp(tool_schema_name(json_array_get(l, 1)), "search"), "the names of both forms");
    json_decref(l);

    char missing[500];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    l = (json_t *)1;
    T_CHECK(tool_schemas_load(missing, &l, &err) == -1 && l == NULL && strstr(err.msg, "none.json") &&
                strstr(err.msg, "tools"), "a missing file: %s", err.msg);
    refused("[{\"name\": \"a\"", "not valid JSON");
    refused("{\"name\": \"a\"}", "expected a JSON list of tool schemas");
    refused("[]", "an empty list");
    refused("[{\"name\": \"a\"}, 3]", "entry 1 is not an object");
    refused("[{\"type\": \"function\", \"function\": {\"description\": \"x\"}}]", "entry 0 has no string name");
    refused("[{\"name\": \"\"}]", "entry 0 has no string name");
    refused("[{\"name\": \"calc\"}, {\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]",
            "entry 1 repeats a name 'calc'");
    refused("[{\"name\": \"a\\nb\"}, {\"name\": \"a\\nb\"}]", "'a\\nb'"); /* untrusted text escaped */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return t_summary("test_tool_args");
}
