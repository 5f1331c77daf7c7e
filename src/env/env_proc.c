/* env/env_proc.c — an environment process over JSON lines, on the `cmd:`
 * reward machinery (reward_cmd_start / reward_cmd_request: the process group,
 * the guardian, the timeout, the framing): the request built, the reply checked
 * against the protocol. Not the conversation's bookkeeping nor its rendering
 * (env_loop.c). */
#include "env/env_proc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/text.h"
#include "reward/reward_internal.h" /* the cmd: process machinery, shared with the rewards */

struct EnvProc {
    RewardFunc f; /* the process, as a cmd: reward runs it (its compute unused) */
    char *what;   /* "environment command 'LINE'", for messages */
    int stopped;  /* after a protocol error: the process is gone */
};

int env_proc_start(EnvProc **out, const char *command, double timeout_s, GrpoErr *err) {
    *out = NULL;
    EnvProc *p = xcalloc(1, sizeof *p);
    size_t len = strlen(command) + 32;
    p->what = xmalloc(len);
    snprintf(p->what, len, "environment command '%s'", command);
    char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
    if (reward_cmd_start(&p->f, argv, p->what, "environment", "environment_timeout", timeout_s, err)) {
        free(p->what);
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* The reply's meaning, or NULL with why it breaks the protocol in why[n]. */
static int reply_decode(const json_t *reply, EnvReply *r, char *why, size_t n) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)reply, key, v) {
        if (!strcmp(key, "content")) {
            if (!json_is_string(v)) return snprintf(why, n, "\"content\" must be a string"), -1;
            r->content = xstrdup(json_string_value(v));
        } else if (!strcmp(key, "done")) {
            if (!json_is_boolean(v)) return snprintf(why, n, "\"done\" must be true or false"), -1;
            r->done = json_is_true(v);
        } else if (!strcmp(key, "reward")) {
            if (json_is_null(v)) continue; /* no reward, as a Python reward's None */
            if (!json_is_number(v)) return snprintf(why, n, "\"reward\" must be a number or null"), -1;
            r->has_reward = 1;
            r->reward = json_number_value(v);
        } else {
            char shown[48];
            text_escaped(shown, sizeof shown, key, 32);
            return snprintf(why, n, "unknown key '%s' (expected \"content\", \"done\", \"reward\")", shown), -1;
        }
    }
    if (r->done && r->content) return snprintf(why, n, "\"content\" and \"done\": true together"), -1;
    if (!r->done && !r->content) return snprintf(why, n, "a reply needs \"content\" or \"done\": true"), -1;
    return 0;
}

int env_proc_step(EnvProc *p, const json_t *messages, const json_t *row, int turn, int last, EnvReply *r,
                  GrpoErr *err) {
    memset(r, 0, sizeof *r);
    if (p->stopped) return err_set(err, "%s: not running (an earlier step failed)", p->what);
    json_t *req = json_pack("{s:O, s:o, s:i, s:b}", "messages", messages, "row", row ? json_incref((json_t *)row)
                                                                                       : json_object(),
                            "turn", turn, "last", last);
    CHECK(req);
    json_t *reply;
    int rc = reward_cmd_request(&p->f, req, &reply, err);
    json_decref(req);
    if (rc) return -1;
    char why[160];
    if (!json_is_object(reply) || reply_decode(reply, r, why, sizeof why)) {
        if (!json_is_object(reply)) snprintf(why, sizeof why, "a reply must be a JSON object");
        char shown[96];
        char *all = json_dumps(reply, JSON_COMPACT | JSON_ENCODE_ANY);
        text_escaped(shown, sizeof shown, all ? all : "", 60);
        free(all);
        json_decref(reply);
        env_reply_free(r);
        /* a protocol error: stop the process, later steps fail at once */
        if (p->f.destroy) p->f.destroy(&p->f);
        p->f.destroy = NULL;
        p->stopped = 1;
        return err_set(err, "%s: %s (turn %d got '%s')", p->what, why, turn, shown);
    }
    json_decref(reply);
    return 0;
}

void env_reply_free(EnvReply *r) {
    free(r->content);
    memset(r, 0, sizeof *r);
}

void env_proc_close(EnvProc *p) {
    if (!p) return;
    if (p->f.destroy) p->f.destroy(&p->f);
    free(p->what);
    free(p);
}
