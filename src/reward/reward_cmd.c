/* reward/reward_cmd.c — reward functions in any language: a long-lived child
 * process that reads one JSON request line per batch on stdin and writes one
 * JSON reply line on stdout (docs/reward-protocol.md).
 *
 * The child is started once (/bin/sh -c COMMAND, in its own process group)
 * and kept across batches; its stderr is ours. Its stdin and stdout are one
 * end of a socketpair, so that a child that dies mid-request gives EPIPE
 * (send with MSG_NOSIGNAL) rather than SIGPIPE in the trainer. Any failure —
 * timeout, exit, a bad reply — stops the child; later calls fail at once.
 * Not here: restarting a failed child, running several children in parallel. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reward/reward_internal.h"

typedef struct {
    char *command;
    double timeout_s;
    pid_t pid;      /* 0 once stopped and reaped */
    int fd;         /* our end of the socketpair; -1 when closed */
    char *rbuf;     /* bytes read and not yet consumed */
    size_t rlen, rcap;
    int failed;     /* an earlier call failed; the child is gone */
} CmdState;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits up to wait_s for the child to exit. 1 when it was reaped (its status
 * in *status), -1 when it cannot be waited for, 0 when it is still running. */
static int cmd_reap(CmdState *c, double wait_s, int *status) {
    double t_end = now_s() + wait_s;
    for (;;) {
        pid_t r = waitpid(c->pid, status, WNOHANG);
        if (r == c->pid) return 1;
        if (r < 0 && errno != EINTR) return -1;
        if (now_s() >= t_end) return 0;
        usleep(5000);
    }
}

/* Ends the child: close its stdin/stdout (a well-behaved child exits on EOF),
 * wait up to grace_s, then SIGTERM and SIGKILL its process group. */
static void cmd_stop(CmdState *c, double grace_s) {
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    if (c->pid <= 0) return;
    int status;
    if (!cmd_reap(c, grace_s, &status)) {
        kill(-c->pid, SIGTERM);
        if (!cmd_reap(c, 0.5, &status)) {
            kill(-c->pid, SIGKILL);
            while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {}
        }
    }
    kill(-c->pid, SIGKILL); /* grandchildren left in the group */
    c->pid = 0;
}

/* After EOF or EPIPE: how the child ended, for the message. */
static int cmd_died(CmdState *c, GrpoErr *err) {
    int status = 0, reaped = cmd_reap(c, 2.0, &status) == 1;
    if (reaped) {
        kill(-c->pid, SIGKILL);
        c->pid = 0;
    }
    cmd_stop(c, 0);
    c->failed = 1;
    if (reaped && WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        return err_set(err, "reward command '%s': exited with status %d before replying%s",
                       c->command, code,
                       code == 127 ? " (command not found?)" : code == 126 ? " (not executable?)" : "");
    }
    if (reaped && WIFSIGNALED(status))
        return err_set(err, "reward command '%s': killed by signal %d (%s) before replying",
                       c->command, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return err_set(err, "reward command '%s': closed its stdout before replying", c->command);
}

static int cmd_fail(CmdState *c) {
    cmd_stop(c, 0);
    c->failed = 1;
    return -1;
}

/* Sends req (one line) and reads one reply line into *line (malloc'd, without
 * the newline), within the timeout. */
static int cmd_exchange(CmdState *c, const char *req, size_t req_len, char **line, GrpoErr *err) {
    double deadline = now_s() + c->timeout_s;
    size_t sent = 0;
    for (;;) {
        char *nl = c->rlen ? memchr(c->rbuf, '\n', c->rlen) : NULL;
        if (nl && sent == req_len) {
            size_t n = (size_t)(nl - c->rbuf);
            *line = xmalloc(n + 1);
            memcpy(*line, c->rbuf, n);
            (*line)[n] = 0;
            if (n && (*line)[n - 1] == '\r') (*line)[n - 1] = 0;
            memmove(c->rbuf, nl + 1, c->rlen - n - 1);
            c->rlen -= n + 1;
            return 0;
        }
        double left = deadline - now_s();
        if (left <= 0) {
            err_set(err, "reward command '%s': no reply within %g s (reward_timeout); the process was stopped",
                    c->command, c->timeout_s);
            return cmd_fail(c);
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN | (sent < req_len ? POLLOUT : 0)};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int r = poll(&pfd, 1, ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            err_set(err, "reward command '%s': poll: %s", c->command, strerror(errno));
            return cmd_fail(c);
        }
        if (r == 0) continue; /* the deadline check above reports it */
        if ((pfd.revents & POLLOUT) && sent < req_len) {
            ssize_t w = send(c->fd, req + sent, req_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (errno == EPIPE || errno == ECONNRESET) return cmd_died(c, err);
                err_set(err, "reward command '%s': writing the request: %s", c->command, strerror(errno));
                return cmd_fail(c);
            }
            if (w > 0) sent += (size_t)w;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (c->rcap - c->rlen < 65536) {
                c->rcap = c->rcap * 2 + 65536;
                c->rbuf = xrealloc(c->rbuf, c->rcap);
            }
            ssize_t got = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
            if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) return cmd_died(c, err);
            if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                err_set(err, "reward command '%s': reading the reply: %s", c->command, strerror(errno));
                return cmd_fail(c);
            }
            if (got > 0) c->rlen += (size_t)got;
        }
    }
}

/* Builds the request object (TRL's reward-function keyword arguments). */
static json_t *build_request(const RewardBatch *b, GrpoErr *err, const char *command) {
    json_t *req = json_object(), *prompts = json_array(), *completions = json_array(),
           *ids = json_array();
    json_object_set_new(req, "prompts", prompts);
    json_object_set_new(req, "completions", completions);
    json_object_set_new(req, "completion_ids", ids);
    /* dataset columns: the union over the batch in first-seen order; an
     * example without one gets null there (as datasets fills missing keys) */
    json_t *columns = json_object();
    for (int i = 0; i < b->n; i++) {
        const RewardItem *it = &b->items[i];
        json_array_append(prompts, it->prompt ? (json_t *)it->prompt : json_null());
        json_t *text = json_string(it->completion);
        if (!text) {
            json_decref(columns);
            json_decref(req);
            err_set(err, "reward command '%s': completion %d is not valid UTF-8", command, i);
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
    json_object_set_new(req, "trainer_state", json_pack("{s:I}", "global_step", (json_int_t)b->step));
    return req;
}

static int cmd_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    CmdState *c = f->state;
    if (c->failed)
        return err_set(err, "reward command '%s': not running (an earlier call failed)", c->command);
    json_t *req = build_request(b, err, c->command);
    if (!req) return -1;
    char *text = json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(req);
    CHECK(text);
    size_t len = strlen(text);
    text = xrealloc(text, len + 2);
    text[len++] = '\n';
    text[len] = 0;
    char *line = NULL;
    int rc = cmd_exchange(c, text, len, &line, err);
    free(text);
    if (rc) return -1;
    json_error_t jerr;
    json_t *reply = json_loads(line, JSON_DECODE_ANY, &jerr);
    if (!reply) {
        err_set(err, "reward command '%s': reply is not JSON (%s): '%.120s'", c->command, jerr.text, line);
        free(line);
        return cmd_fail(c);
    }
    free(line);
    json_t *rewards = json_is_object(reply) ? json_object_get(reply, "rewards") : NULL;
    if (!json_is_array(rewards))
        rc = err_set(err, "reward command '%s': reply must be an object {\"rewards\": [number or null, ...]}",
                     c->command);
    else if (json_array_size(rewards) != (size_t)b->n)
        rc = err_set(err, "reward command '%s': reply has %zu rewards for %d completions", c->command,
                     json_array_size(rewards), b->n);
    for (int i = 0; i < b->n && !rc; i++) {
        json_t *v = json_array_get(rewards, (size_t)i);
        if (json_is_null(v))
            out[i] = NAN;
        else if (json_is_number(v))
            out[i] = json_number_value(v);
        else
            rc = err_set(err, "reward command '%s': rewards[%d] must be a number or null, got %s", c->command,
                         i, json_is_string(v) ? "a string" : json_is_boolean(v) ? "a boolean"
                            : json_is_array(v) ? "a list" : "an object");
    }
    json_decref(reply);
    return rc ? cmd_fail(c) : 0;
}

static void cmd_destroy(RewardFunc *f) {
    CmdState *c = f->state;
    cmd_stop(c, 2.0);
    free(c->command);
    free(c->rbuf);
    free(c);
}

int reward_cmd_init(RewardFunc *f, const char *command, double timeout_s, GrpoErr *err) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return err_set(err, "reward command '%s': socketpair: %s", command, strerror(errno));
    fflush(NULL); /* no duplicated stdio buffers in the child */
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return err_set(err, "reward command '%s': fork: %s", command, strerror(errno));
    }
    if (pid == 0) {
        /* own process group, so stopping it reaches what sh starts */
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        dup2(sv[1], 0);
        dup2(sv[1], 1);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so kill(-pid) works before the child runs */
    close(sv[1]);
    CmdState *c = xcalloc(1, sizeof *c);
    c->command = xstrdup(command);
    c->timeout_s = timeout_s;
    c->pid = pid;
    c->fd = sv[0];
    f->state = c;
    f->compute = cmd_compute;
    f->destroy = cmd_destroy;
    return 0;
}
