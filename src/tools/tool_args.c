/* tools/tool_args.c — the tool-calling options (tool_args.h) and the tools file's
 * checks. Not the process (tool_proc.c) nor the loop (tool_loop.c). */
#include "tools/tool_args.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "io/fsutil.h"
#include "io/jsonl.h"
#include "reward/reward.h"

#define A(f) offsetof(ToolArgs, f)
const OptSpec tool_options[TOOL_N_OPTIONS] = {
    {"tools", OPT_STR, A(tools_path), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_INPUT,
     "tool calling in rollouts: a JSON file with the list of tool schemas the model may call, rendered into "
     "the prompts as the chat template's tools= (docs/tool-protocol.md); needs tool_command"},
    {"tool_command", OPT_STR, A(command), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "the command (run with /bin/sh -c) of the process that makes the tool calls, one JSON line each way"},
    {"tool_timeout", OPT_F64, A(timeout_s), REWARD_DEFAULT_TIMEOUT_S, NULL, 0, 1e300, NULL, NULL, 0,
     "seconds to wait for the tool process's reply to one call"},
    {"max_tool_calling_iterations", OPT_INT, A(max_iterations), -1, NULL, -1, 1 << 30, NULL, NULL, 0,
     "rounds of tool calls per completion (-1 = no limit, TRL's None)"},
    /* 4: a group's calls come in bursts (its sequences call at about the same turn); four processes take
     * most of a burst at once for G = 8..16 at little cost, and the results do not depend on it */
    {"tool_workers", OPT_INT, A(workers), 4, NULL, 0, 256, NULL, NULL, OPT_NO_RECORD,
     "tool processes whose calls run while the other sequences go on decoding, each call of a turn in order on "
     "one of them (0 = the calls are made inside the decoding batch, which waits for them; same samples)"},
};
#undef A

int tool_args_check(const ToolArgs *a, GrpoErr *err) {
    if (a->command && !a->tools_path)
        return err_set(err, "tool_command needs tools: a JSON file with the list of tool schemas the command serves");
    if (a->tools_path && !a->command)
        return err_set(err, "tools needs tool_command: the command of the process that makes the calls");
    return 0;
}

const char *tool_schema_name(const json_t *t) {
    const json_t *fn = json_object_get(t, "function");
    return json_string_value(json_object_get(json_is_object(fn) ? fn : t, "name"));
}

int tool_schemas_load(const char *path, json_t **out, GrpoErr *err) {
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    if (fs_read_file(path, &buf, &len, err)) return err_prefix(err, "tools");
    json_error_t je;
    json_t *list = json_loadb(buf, len, 0, &je);
    free(buf);
    char shown[120];
    if (!list)
        return err_set(err, "tools %s: not valid JSON: %s (line %d)", text_escaped(shown, sizeof shown, path, 0),
                       je.text, je.line);
    const char *expect = "expected a JSON list of tool schemas ({\"type\": \"function\", \"function\": {\"name\", "
                         "\"description\", \"parameters\"}})";
    if (!json_is_array(list) || json_array_size(list) == 0) {
        err_set(err, "tools %s: %s, got %s", text_escaped(shown, sizeof shown, path, 0), expect,
                json_is_array(list) ? "an empty list" : json_kind(list));
        json_decref(list);
        return -1;
    }
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        const char *name = json_is_object(t) ? tool_schema_name(t) : NULL;
        const char *why = !json_is_object(t) ? "is not an object" : !name || !*name ? "has no string name" : NULL;
        for (size_t k = 0; !why && k < i; k++)
            if (!strcmp(name, tool_schema_name(json_array_get(list, k)))) why = "repeats a name";
        if (why) {
            char nm[80];
            if (name) text_escaped(nm, sizeof nm, name, 0);
            err_set(err, "tools %s: entry %zu %s%s%s%s (%s)", text_escaped(shown, sizeof shown, path, 0), i, why,
                    name ? " '" : "", name ? nm : "", name ? "'" : "", expect);
            json_decref(list);
            return -1;
        }
    }
    *out = list;
    return 0;
}
