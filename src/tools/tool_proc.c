/* tools/tool_proc.c — tool calls executed by an external process over JSON
 * lines, on the `cmd:` reward machinery (reward_cmd_init / reward_cmd_request:
 * the process group, the guardian, the timeout, the framing). Not the parsing
 * of calls (tool_calls.c) nor the rollout loop. */
#include "tools/tool_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/text.h"
#include "reward/reward_internal.h" /* the cmd: process machinery, shared with the rewards */

struct ToolProc {
    RewardFunc f; /* the process, as a cmd: reward runs it (its compute unused) */
    const json_t *tools;
    char *what; /* "tool command 'LINE'", for messages */
    int stopped; /* after a protocol error: the process is gone */
};

int tool_proc_start(ToolProc **out, const char *command, const json_t *tools, double timeout_s, GrpoErr *err) {
    *out = NULL;
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        return err_set(err, "tool command '%s': no tools described (expected a list of JSON schemas)", command);
    ToolProc *p = xcalloc(1, sizeof *p);
    size_t len = strlen(command) + 32;
    p->what = xmalloc(len);
    snprintf(p->what, len, "tool command '%s'", command);
    char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
    if (reward_cmd_start(&p->f, argv, p->what, "tool", "tool_timeout", timeout_s, err)) {
        free(p->what);
        free(p);
        return -1;
    }
    p->tools = tools;
    *out = p;
    return 0;
}

/* content as TRL's str(): a string as it is, other JSON compact */
static char *content_text(const json_t *v) {
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    CHECK(s);
    return s;
}

int tool_proc_call(ToolProc *p, const ToolCall *c, char **content, int *failed, GrpoErr *err) {
    *content = NULL;
    *failed = 0;
    char msg[512];
    if (tool_check_call(c, p->tools, msg, sizeof msg)) {
        *failed = 1;
        *content = tool_error_content(msg);
        CHECK(*content);
        return 0;
    }
    if (p->stopped) return err_set(err, "%s: not running (an earlier call failed)", p->what);
    json_t *req = json_pack("{s:s, s:O}", "name", c->name, "arguments", c->arguments);
    CHECK(req);
    json_t *reply;
    int rc = reward_cmd_request(&p->f, req, &reply, err);
    json_decref(req);
    if (rc) return -1;
    const json_t *ct = json_object_get(reply, "content"), *er = json_object_get(reply, "error");
    if (ct && !er) {
        *content = content_text(ct);
    } else if (er && !ct) {
        *failed = 1;
        char *text = content_text(er);
        *content = tool_error_content(text);
        free(text);
        CHECK(*content);
    } else {
        char shown[96];
        char *all = json_dumps(reply, JSON_COMPACT | JSON_ENCODE_ANY);
        text_escaped(shown, sizeof shown, all ? all : "", 60);
        free(all);
        json_decref(reply);
        /* a protocol error: stop the process, later calls fail at once */
        if (p->f.destroy) p->f.destroy(&p->f);
        p->f.destroy = NULL;
        p->stopped = 1;
        return err_set(err, "%s: a reply needs exactly one of \"content\" or \"error\" (call of '%s' got '%s')",
                       p->what, c->name, shown);
    }
    json_decref(reply);
    return 0;
}

void tool_proc_close(ToolProc *p) {
    if (!p) return;
    if (p->f.destroy) p->f.destroy(&p->f);
    free(p->what);
    free(p);
}
