/* reward/reward_cmd.c — reward functions in any language: a long-lived child
 * process that reads one JSON request line per batch on stdin and writes one
 * JSON reply line on stdout (docs/reward-protocol.md).
 *
 * The child is started once (/bin/sh -c COMMAND, or a program without a shell:
 * reward_cmd_start, as Python rewards are) under a guardian (reward_proc.c: its
 * process group, its stderr relayed prefixed "[reward NAME] " (a tool's "[tool] "), its exit
 * reported, nothing it starts outliving the run) and kept across batches. Its
 * stdin and stdout are sockets, so that a child that dies mid-request gives
 * EPIPE (send with MSG_NOSIGNAL) rather than SIGPIPE in the trainer, and a
 * closed stdout is EOF here. Any failure — timeout, exit, a bad reply — stops
 * the child; later calls fail at once. A stop requested while waiting
 * (reward_watch_stop) gives the child REWARD_STOP_GRACE_S more, then is such a
 * failure. Exactly one reply line per request
 * (reward/cmd_reply.c frames and decodes it). Not here: restarting a failed
 * child, running several children in parallel. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/text.h"
#include "reward/cmd_reply.h"
#include "reward/reward_internal.h"
#include "reward/reward_proc.h"

typedef struct {
    char *what;     /* opens every message: "reward command 'LINE'", "python reward 'SPEC'" */
    int shell;      /* started as /bin/sh -c LINE (its messages may hint at flushing) */
    double timeout_s;
    const char *timeout_option; /* what a timeout message names: "reward_timeout", "tool_timeout", ... */
    RewardProc proc;
    CmdReply reply; /* the reply being read */
    long requests;  /* requests sent, for messages */
    long step;      /* the request's trainer_state.global_step, for messages; -1: none (the start-up line) */
    int failed;     /* an earlier call failed; the child is gone */
} CmdState;

static const volatile sig_atomic_t *stop_flag; /* reward_watch_stop's */

void reward_watch_stop(const volatile sig_atomic_t *stop) {
    stop_flag = stop;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ends the child: close its stdin/stdout (a well-behaved child exits on EOF),
 * wait up to grace_s, then its guardian stops it and all it started. */
static void cmd_stop(CmdState *c, double grace_s) {
    reward_proc_stop(&c->proc, grace_s);
}

/* The child ended, or closed its stdout, before replying: how, for the
 * message (waiting up to 2 s for its exit after a closed stdout). */
static int cmd_died(CmdState *c, GrpoErr *err) {
    int how = reward_proc_ended(&c->proc, 2.0), ended = how == 1, status = c->proc.status;
    cmd_stop(c, 0);
    c->failed = 1;
    char to[64] = "", hint[96] = "";
    if (c->step >= 0) snprintf(to, sizeof to, " to request %ld (global_step %ld)", c->requests, c->step);
    if (ended && WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        const char *why = !c->shell ? NULL : code == 127 ? "command not found?" : code == 126 ? "not executable?" : NULL;
        if (why && c->step >= 0) /* " to request 1 (global_step 0; command not found?)" */
            snprintf(hint, sizeof hint, " to request %ld (global_step %ld; %s)", c->requests, c->step, why);
        else if (why)
            snprintf(hint, sizeof hint, " (%s)", why);
        return err_set(err, "%s: exited with status %d before replying%s", c->what, code, why ? hint : to);
    }
    if (ended && WIFSIGNALED(status))
        return err_set(err, "%s: killed by signal %d (%s) before replying%s", c->what, WTERMSIG(status),
                       strsignal(WTERMSIG(status)), to);
    if (how < 0)
        return err_set(err, "%s: its guardian process ended before it replied%s", c->what, to);
    return err_set(err, "%s: closed its stdout before replying%s", c->what, to);
}

static int cmd_fail(CmdState *c) {
    cmd_stop(c, 0);
    c->failed = 1;
    return -1;
}

/* Bytes the child wrote before being asked: a second line for the previous
 * request, or output nobody asked for. */
static int cmd_check_quiet(CmdState *c, GrpoErr *err) {
    char peek[61], shown[256];
    ssize_t n = recv(c->proc.out_fd, peek, sizeof peek - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) return 0; /* nothing, or EOF / an error the exchange reports */
    peek[n] = 0;
    err_set(err, "%s: wrote more than one line for one request (extra before request %ld: '%s')",
            c->what, c->requests + 1, text_escaped(shown, sizeof shown, peek, 60));
    return cmd_fail(c);
}

/* Reads what the child's stdout holds now, without waiting. 1: EOF (or the
 * connection reset), 0: read or nothing there, -1 with err: failed. */
static int cmd_read(CmdState *c, GrpoErr *err) {
    size_t room;
    char *at = cmd_reply_space(&c->reply, &room);
    ssize_t got = recv(c->proc.out_fd, at, room, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) return 1;
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        err_set(err, "%s: reading the reply: %s", c->what, strerror(errno));
        return cmd_fail(c);
    }
    if (got > 0 && cmd_reply_added(&c->reply, (size_t)got, c->what, err) < 0) return cmd_fail(c);
    return 0;
}

/* Sends req (one line; none for the start-up line) and reads exactly one reply
 * line into c->reply, within the timeout. quiet: first check that nothing came
 * unasked (not for the start-up line, which may already be there). The
 * guardian's report of the child's end is watched too: an exit is an error at
 * once (after what the child wrote before it), even while a process it started
 * keeps its stdout open. */
static int cmd_exchange(CmdState *c, const char *req, size_t req_len, int quiet, GrpoErr *err) {
    if (quiet && cmd_check_quiet(c, err)) return -1;
    cmd_reply_reset(&c->reply);
    c->requests++;
    double deadline = now_s() + c->timeout_s, stop_deadline = INFINITY;
    size_t sent = 0;
    for (;;) {
        if (c->reply.complete && sent == req_len) return 0;
        if (c->proc.ended || c->proc.status_fd < 0) { /* what it wrote before it ended, then its end */
            int r;
            while ((r = cmd_read(c, err)) == 0 && !c->reply.complete) {
                struct pollfd q = {.fd = c->proc.out_fd, .events = POLLIN};
                if (poll(&q, 1, 0) <= 0) break;
            }
            if (r < 0) return -1;
            if (c->reply.complete && sent == req_len) return 0;
            return cmd_died(c, err);
        }
        if (stop_flag && *stop_flag && isinf(stop_deadline)) stop_deadline = now_s() + REWARD_STOP_GRACE_S;
        if (now_s() >= stop_deadline) {
            err_set(err, "stopped while waiting for %s (no reply within %g s of the stop request; the process was "
                    "stopped)", c->what, REWARD_STOP_GRACE_S);
            return cmd_fail(c);
        }
        double left = fmin(deadline, stop_deadline) - now_s();
        if (left <= 0 && now_s() < deadline) continue; /* the stop's grace is over: said above */
        if (left <= 0) {
            err_set(err, "%s: no reply within %g s (%s)%s; the process was stopped", c->what, c->timeout_s,
                    c->timeout_option,
                    c->reply.len ? " — its reply line never ended with a newline"
                    : c->shell   ? " — does it flush stdout?"
                                 : "");
            return cmd_fail(c);
        }
        struct pollfd pfd[3] = {{.fd = c->proc.out_fd, .events = POLLIN},
                                {.fd = sent < req_len ? c->proc.in_fd : -1, .events = POLLOUT},
                                {.fd = c->proc.status_fd, .events = POLLIN}};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int r = poll(pfd, 3, ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            err_set(err, "%s: poll: %s", c->what, strerror(errno));
            return cmd_fail(c);
        }
        if (r == 0) continue; /* the deadline check above reports it */
        if (pfd[1].revents && sent < req_len) {
            ssize_t w = send(c->proc.in_fd, req + sent, req_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (errno == EPIPE || errno == ECONNRESET) return cmd_died(c, err);
                err_set(err, "%s: writing the request: %s", c->what, strerror(errno));
                return cmd_fail(c);
            }
            if (w > 0) sent += (size_t)w;
        }
        if (pfd[0].revents) {
            int rr = cmd_read(c, err);
            if (rr < 0) return -1;
            if (rr > 0) return cmd_died(c, err);
        }
        if (pfd[2].revents) reward_proc_ended(&c->proc, 0); /* handled at the loop's top */
    }
}

/* Builds the request object (TRL's reward-function keyword arguments). */
static json_t *build_request(const RewardBatch *b, GrpoErr *err, const char *what) {
    json_t *req = json_object(), *prompts = json_array(), *completions = json_array(),
           *ids = json_array();
    json_object_set_new(req, "prompts", prompts);
    json_object_set_new(req, "completions", completions);
    json_object_set_new(req, "completion_ids", ids);
    /* dataset columns: the dataset's, then any other the batch's rows have, in
     * first-seen order; an example without one gets null there (as datasets
     * fills missing keys) */
    json_t *columns = json_object();
    for (int c = 0; c < b->n_columns; c++) {
        const char *key = b->columns[c];
        if (!strcmp(key, "prompt") || !strcmp(key, "completion") || !strcmp(key, "completion_ids") ||
            json_object_get(columns, key))
            continue;
        json_t *col = json_array();
        for (int k = 0; k < b->n; k++) json_array_append_new(col, json_null());
        json_object_set_new(columns, key, col);
    }
    for (int i = 0; i < b->n; i++) {
        const RewardItem *it = &b->items[i];
        json_array_append(prompts, it->prompt ? (json_t *)it->prompt : json_null());
        json_t *text = json_string(it->completion);
        if (!text) {
            json_decref(columns);
            json_decref(req);
            err_set(err, "%s: completion %d is not valid UTF-8", what, i);
            return NULL;
        }
        if (it->prompt && json_is_array(it->prompt)) /* conversational: a message list, as TRL */
            json_array_append_new(completions,
                                  json_pack("[{s:s, s:o}]", "role", "assistant", "content", text));
        else
            json_array_append_new(completions, text);
        json_t *row_ids = json_array();
        for (int k = 0; k < it->n_completion_ids; k++)
            json_array_append_new(row_ids, json_integer(it->completion_ids[k]));
        json_array_append_new(ids, row_ids);
        const char *key;
        json_t *v;
        if (!it->row) continue;
        json_object_foreach((json_t *)it->row, key, v) {
            if (!strcmp(key, "prompt") || !strcmp(key, "completion") || !strcmp(key, "completion_ids"))
                continue;
            if (!json_object_get(columns, key)) {
                json_t *col = json_array();
                for (int k = 0; k < b->n; k++) json_array_append_new(col, json_null());
                json_object_set_new(columns, key, col);
            }
            json_array_set(json_object_get(columns, key), (size_t)i, v);
        }
    }
    const char *key;
    json_t *v;
    json_object_foreach(columns, key, v) json_object_set(req, key, v);
    json_decref(columns);
    json_object_set_new(req, "trainer_state",
                        b->trainer_state ? json_deep_copy(b->trainer_state) : json_pack("{s:i}", "global_step", 0));
    return req;
}

/* req as one protocol line: compact JSON and its newline (malloc'd, *len bytes). */
static char *request_line(const json_t *req, size_t *len) {
    char *text = json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER);
    CHECK(text);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    text[n] = 0;
    *len = n;
    return text;
}

static int cmd_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    CmdState *c = f->state;
    if (c->failed)
        return err_set(err, "%s: not running (an earlier call failed)", c->what);
    json_t *req = build_request(b, err, c->what);
    if (!req) return -1;
    json_t *step = json_object_get(json_object_get(req, "trainer_state"), "global_step");
    c->step = json_is_integer(step) ? (long)json_integer_value(step) : 0;
    size_t len;
    char *text = request_line(req, &len);
    json_decref(req);
    int rc = cmd_exchange(c, text, len, 1, err);
    free(text);
    if (rc) return -1;
    return cmd_reply_decode(&c->reply, b->n, out, c->what, err) ? cmd_fail(c) : 0;
}

static void cmd_destroy(RewardFunc *f) {
    CmdState *c = f->state;
    cmd_stop(c, 2.0);
    free(c->what);
    cmd_reply_free(&c->reply);
    free(c);
}

int reward_cmd_start(RewardFunc *f, char *const argv[], const char *what, const char *label,
                     const char *timeout_option, double timeout_s, GrpoErr *err) {
    CmdState *c = xcalloc(1, sizeof *c);
    if (reward_proc_start(&c->proc, argv, label, what, err)) {
        free(c);
        return -1;
    }
    c->what = xstrdup(what);
    c->shell = !strcmp(argv[0], "/bin/sh");
    c->timeout_s = timeout_s;
    c->timeout_option = timeout_option;
    c->step = -1;
    f->state = c;
    f->compute = cmd_compute;
    f->destroy = cmd_destroy;
    return 0;
}

/* Whether sh may run command as `exec COMMAND`: one simple command (no list,
 * pipe, redirection, subshell or substitution — the characters are refused
 * even quoted), its first word a program, not an assignment, a keyword or a
 * builtin. bash execs such a command itself; dash stays as its parent, holding
 * its stdout, so that a program that closes its stdout would not be seen to. */
static int cmd_simple(const char *command) {
    static const char *const builtins[] = {
        "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit", "export", "false",
        "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read", "readonly", "return",
        "set", "shift", "test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait",
        "if", "while", "until", "for", "case", "!", "{", "[", ".", ":"};
    if (strpbrk(command, ";&|<>()`\n\\") || strstr(command, "$(")) return 0;
    const char *w = command + strspn(command, " \t");
    size_t n = strcspn(w, " \t");
    if (n == 0 || memchr(w, '=', n)) return 0;
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (strlen(builtins[i]) == n && !memcmp(w, builtins[i], n)) return 0;
    return 1;
}

int reward_cmd_init(RewardFunc *f, const char *command, const char *name, double timeout_s, GrpoErr *err) {
    size_t len = strlen(command) + 32;
    char *line = xmalloc(len);
    snprintf(line, len, "%s%s", cmd_simple(command) ? "exec " : "", command);
    char shown[512], what[600]; /* the command as messages name it: escaped, shortened */
    snprintf(what, sizeof what, "reward command '%s'", text_escaped(shown, sizeof shown, command, 120));
    char *argv[] = {"/bin/sh", "-c", line, NULL};
    char label[300];
    snprintf(label, sizeof label, "reward %s", name);
    int rc = reward_cmd_start(f, argv, what, label, "reward_timeout", timeout_s, err);
    free(line);
    return rc;
}

int reward_cmd_hello(RewardFunc *f, json_t **hello, GrpoErr *err) {
    CmdState *c = f->state;
    *hello = NULL;
    if (cmd_exchange(c, "", 0, 0, err)) return -1;
    c->requests = 0; /* the start-up line answers no request */
    c->step = -1;
    return cmd_reply_object(&c->reply, c->what, hello, err) ? cmd_fail(c) : 0;
}

int reward_cmd_request(RewardFunc *f, const json_t *req, json_t **reply, GrpoErr *err) {
    CmdState *c = f->state;
    *reply = NULL;
    if (c->failed) return err_set(err, "%s: not running (an earlier call failed)", c->what);
    size_t len;
    char *text = request_line(req, &len);
    int rc = cmd_exchange(c, text, len, 1, err);
    free(text);
    if (rc) return -1;
    json_error_t je;
    *reply = json_loadb(c->reply.buf, c->reply.line_len, 0, &je);
    if (!*reply) {
        char shown[64], line[48];
        size_t k = c->reply.line_len < sizeof line - 1 ? c->reply.line_len : sizeof line - 1;
        memcpy(line, c->reply.buf, k);
        line[k] = 0;
        text_escaped(shown, sizeof shown, line, 40);
        err_set(err, "%s: reply %ld is not a JSON object ('%s')", c->what, c->requests, shown);
        return cmd_fail(c);
    }
    return 0;
}
