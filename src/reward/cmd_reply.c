/* reward/cmd_reply.c — framing and decoding of a `cmd:` reward reply
 * (reward/cmd_reply.h). Each byte is searched for the newline once, however the
 * reply arrives; a reply is one line and nothing else. */
#include "reward/cmd_reply.h"

#include "core/text.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#define READ_ROOM ((size_t)65536)

void cmd_reply_reset(CmdReply *r) {
    r->len = r->scanned = r->line_len = 0;
    r->complete = 0;
}

void cmd_reply_free(CmdReply *r) {
    free(r->buf);
    *r = (CmdReply){0};
}

char *cmd_reply_space(CmdReply *r, size_t *room) {
    if (r->cap - r->len < READ_ROOM) {
        r->cap = r->len + READ_ROOM > 2 * r->cap ? r->len + READ_ROOM : 2 * r->cap;
        r->buf = xrealloc(r->buf, r->cap + 1);
    }
    *room = r->cap - r->len;
    return r->buf + r->len;
}

int cmd_reply_added(CmdReply *r, size_t n, const char *what, GrpoErr *err) {
    r->len += n;
    r->buf[r->len] = 0; /* for messages quoting it */
    if (!r->complete) {
        char *nl = memchr(r->buf + r->scanned, '\n', r->len - r->scanned);
        r->scanned = r->len;
        if (nl) {
            r->complete = 1;
            r->line_len = (size_t)(nl - r->buf);
            r->scanned = r->line_len + 1;
        }
    }
    size_t line = r->complete ? r->line_len : r->len;
    if (line > CMD_REPLY_MAX_BYTES)
        return err_set(err, "%s: reply line longer than %zu MiB (the protocol's limit)", what,
                       CMD_REPLY_MAX_BYTES >> 20);
    if (r->complete && r->len > r->line_len + 1) {
        char shown[256];
        return err_set(err, "%s: wrote more than one line for one request (extra: '%s')", what,
                       text_escaped(shown, sizeof shown, r->buf + r->line_len + 1, 60));
    }
    return r->complete;
}

static const char *kind_of(const json_t *v) {
    return json_is_string(v) ? "a string" : json_is_boolean(v) ? "a boolean" : json_is_array(v) ? "a list"
                                                                                                 : "an object";
}

int cmd_reply_object(const CmdReply *r, const char *what, json_t **obj, GrpoErr *err) {
    *obj = NULL;
    size_t len = r->line_len;
    if (len && r->buf[len - 1] == '\r') len--;
    json_error_t jerr;
    json_t *reply = json_loadb(r->buf, len, JSON_DECODE_ANY, &jerr);
    if (!reply) { /* the reply's first 120 characters, escaped (the line is the process's text) */
        char shown[512], why[256];
        char *line = xmalloc(len + 1);
        memcpy(line, r->buf, len);
        line[len] = 0;
        err_set(err, "%s: reply is not JSON (%s): '%s'", what, text_escaped(why, sizeof why, jerr.text, 100),
                text_escaped(shown, sizeof shown, line, 120));
        free(line);
        return -1;
    }
    json_t *error = json_is_object(reply) ? json_object_get(reply, "error") : NULL;
    if (json_is_string(error)) { /* the process's own account of its failure */
        char shown[1024];
        err_set(err, "%s: %s", what, text_escaped(shown, sizeof shown, json_string_value(error), 400));
        json_decref(reply);
        return -1;
    }
    *obj = reply;
    return 0;
}

int cmd_reply_decode(const CmdReply *r, int n, double *out, const char *what, GrpoErr *err) {
    json_t *reply;
    if (cmd_reply_object(r, what, &reply, err)) return -1;
    json_t *rewards = json_is_object(reply) ? json_object_get(reply, "rewards") : NULL;
    int rc = 0;
    if (!json_is_array(rewards))
        rc = err_set(err, "%s: reply must be an object {\"rewards\": [number or null, ...]}", what);
    else if (json_array_size(rewards) != (size_t)n)
        rc = err_set(err, "%s: reply has %zu rewards for %d completions", what, json_array_size(rewards), n);
    for (int i = 0; i < n && !rc; i++) {
        json_t *v = json_array_get(rewards, (size_t)i);
        if (json_is_null(v))
            out[i] = NAN;
        else if (json_is_number(v))
            out[i] = json_number_value(v);
        else
            rc = err_set(err, "%s: rewards[%d] must be a number or null, got %s", what, i, kind_of(v));
    }
    json_decref(reply);
    return rc;
}
