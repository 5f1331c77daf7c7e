/* reward/reward_cmd.c — reward functions in any language: a long-lived child
 * process that reads one JSON request line per batch on stdin and writes one
 * JSON reply line on stdout (docs/reward-protocol.md).
 *
 * The child is started once (/bin/sh -c COMMAND, or a program without a shell:
 * reward_cmd_start, as Python rewards are; in its own process group) and kept
 * across batches; its stderr reaches ours line by line, each line
 * prefixed "[reward NAME] " (the guardian relays it). Its stdin and stdout are one
 * end of a socketpair, so that a child that dies mid-request gives EPIPE
 * (send with MSG_NOSIGNAL) rather than SIGPIPE in the trainer. Any failure —
 * timeout, exit, a bad reply — stops the child; later calls fail at once.
 * Exactly one reply line per request (reward/cmd_reply.c frames and decodes
 * it). A guardian process kills the child's whole process group when the
 * trainer dies, however it dies. Not here: restarting a failed child, running several children in parallel. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "core/text.h"
#include "reward/cmd_reply.h"
#include "reward/reward_internal.h"

typedef struct {
    char *what;     /* opens every message: "reward command 'LINE'", "python reward 'SPEC'" */
    int shell;      /* started as /bin/sh -c LINE (its messages may hint at flushing) */
    double timeout_s;
    pid_t pid;      /* sh, leader of the reward's process group; 0 once stopped and reaped */
    pid_t guard;    /* the guardian (guard_group); 0 once reaped */
    int life_fd;    /* write end of the guardian's pipe; -1 when closed */
    int fd;         /* our end of the socketpair; -1 when closed */
    CmdReply reply; /* the reply being read */
    long requests;  /* requests sent, for messages */
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

/* Ends the guardian: with its pipe closed it kills what is left of the group
 * and exits. */
static void guard_stop(CmdState *c) {
    if (c->life_fd >= 0) close(c->life_fd);
    c->life_fd = -1;
    if (c->guard > 0)
        while (waitpid(c->guard, NULL, 0) < 0 && errno == EINTR) {}
    c->guard = 0;
}

/* Ends the child: close its stdin/stdout (a well-behaved child exits on EOF),
 * wait up to grace_s, then SIGTERM and SIGKILL its process group. */
static void cmd_stop(CmdState *c, double grace_s) {
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    if (c->pid > 0) {
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
    guard_stop(c);
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
        return err_set(err, "%s: exited with status %d before replying%s",
                       c->what, code,
                       !c->shell ? "" : code == 127 ? " (command not found?)" : code == 126 ? " (not executable?)" : "");
    }
    if (reaped && WIFSIGNALED(status))
        return err_set(err, "%s: killed by signal %d (%s) before replying",
                       c->what, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return err_set(err, "%s: closed its stdout before replying", c->what);
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
    ssize_t n = recv(c->fd, peek, sizeof peek - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) return 0; /* nothing, or EOF / an error the exchange reports */
    peek[n] = 0;
    err_set(err, "%s: wrote more than one line for one request (extra before request %ld: '%s')",
            c->what, c->requests + 1, text_escaped(shown, sizeof shown, peek, 60));
    return cmd_fail(c);
}

/* Sends req (one line; none for the start-up line) and reads exactly one reply
 * line into c->reply, within the timeout. quiet: first check that nothing came
 * unasked (not for the start-up line, which may already be there). */
static int cmd_exchange(CmdState *c, const char *req, size_t req_len, int quiet, GrpoErr *err) {
    if (quiet && cmd_check_quiet(c, err)) return -1;
    cmd_reply_reset(&c->reply);
    c->requests++;
    double deadline = now_s() + c->timeout_s;
    size_t sent = 0;
    for (;;) {
        if (c->reply.complete && sent == req_len) return 0;
        double left = deadline - now_s();
        if (left <= 0) {
            err_set(err, "%s: no reply within %g s (reward_timeout)%s; the process was stopped", c->what,
                    c->timeout_s,
                    c->reply.len ? " — its reply line never ended with a newline"
                    : c->shell   ? " — does it flush stdout?"
                                 : "");
            return cmd_fail(c);
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN | (sent < req_len ? POLLOUT : 0)};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int r = poll(&pfd, 1, ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            err_set(err, "%s: poll: %s", c->what, strerror(errno));
            return cmd_fail(c);
        }
        if (r == 0) continue; /* the deadline check above reports it */
        if ((pfd.revents & POLLOUT) && sent < req_len) {
            ssize_t w = send(c->fd, req + sent, req_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (errno == EPIPE || errno == ECONNRESET) return cmd_died(c, err);
                err_set(err, "%s: writing the request: %s", c->what, strerror(errno));
                return cmd_fail(c);
            }
            if (w > 0) sent += (size_t)w;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            size_t room;
            char *at = cmd_reply_space(&c->reply, &room);
            ssize_t got = recv(c->fd, at, room, MSG_DONTWAIT);
            if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) return cmd_died(c, err);
            if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                err_set(err, "%s: reading the reply: %s", c->what, strerror(errno));
                return cmd_fail(c);
            }
            if (got > 0 && cmd_reply_added(&c->reply, (size_t)got, c->what, err) < 0) return cmd_fail(c);
        }
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

static int cmd_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    CmdState *c = f->state;
    if (c->failed)
        return err_set(err, "%s: not running (an earlier call failed)", c->what);
    json_t *req = build_request(b, err, c->what);
    if (!req) return -1;
    char *text = json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(req);
    CHECK(text);
    size_t len = strlen(text);
    text = xrealloc(text, len + 2);
    text[len++] = '\n';
    text[len] = 0;
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

/* The guardian's relay of the reward's stderr: whole lines, each written with
 * the prefix in one write(2); a line longer than the buffer goes out in pieces.
 * Only async-signal-safe calls. */
typedef struct {
    char buf[8192];
    size_t n, prefix_len;
    int at_line_start;
} Relay;

/* The reward's process group, for a guardian that must give up relaying, and
 * whether the trainer's pipe (fd 3) is still to be watched (before the kill). */
static pid_t relay_group;
static int relay_watch_life = 1;

/* Writes to our stderr without ever blocking the guard's duty: it waits for room
 * (pieces of at most PIPE_BUF, which a writable pipe always takes whole) while
 * watching the trainer's pipe (fd 3); if the trainer goes while there is no room —
 * its stderr perhaps a full pipe nobody reads — the group is killed and the
 * guardian exits. Text that has room is written first, even when the trainer has
 * just closed the pipe (what the reward wrote before it was stopped is shown).
 * After the kill (draining), it waits at most a second for room. */
static void relay_write(const void *p, size_t n) {
    const char *s = p;
    while (n > 0) {
        struct pollfd q[2] = {{.fd = 2, .events = POLLOUT}, {.fd = relay_watch_life ? 3 : -1, .events = POLLIN}};
        int k = poll(q, 2, relay_watch_life ? -1 : 1000);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        if (q[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return; /* stderr is gone: drop the text */
        if (!(q[0].revents & POLLOUT)) { /* no room, and the trainer is gone: stop waiting for it */
            kill(-relay_group, SIGKILL);
            _exit(0);
        }
        ssize_t w = write(2, s, n < PIPE_BUF ? n : PIPE_BUF);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

/* Flushes buf[prefix_len..n) (one line, or a piece of a long one). */
static void relay_flush(Relay *r) {
    if (r->n > r->prefix_len) relay_write(r->at_line_start ? r->buf : r->buf + r->prefix_len,
                                          r->at_line_start ? r->n : r->n - r->prefix_len);
    r->at_line_start = r->n > 0 && r->buf[r->n - 1] == '\n';
    r->n = r->prefix_len;
}

static void relay_bytes(Relay *r, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        r->buf[r->n++] = p[i];
        if (p[i] == '\n' || r->n == sizeof r->buf) relay_flush(r);
    }
}

/* Reads what fd has; 0 at EOF or error (the fd is then done). */
static int relay_read(Relay *r, int fd) {
    char tmp[4096];
    ssize_t k;
    while ((k = read(fd, tmp, sizeof tmp)) < 0 && errno == EINTR) {}
    if (k <= 0) return 0;
    relay_bytes(r, tmp, (size_t)k);
    return 1;
}

/* The guardian, a forked copy of the trainer that only waits: when the pipe's
 * write end — held by the trainer alone — closes, because the trainer stopped
 * the reward or died in any way (kill -9 included), it kills the reward's whole
 * process group, grandchildren included, and exits. Meanwhile it relays the
 * reward's stderr (err_fd) to its own, prefixed; after the kill it drains what
 * is left (up to a second, for a process that escaped the group). It ignores the
 * terminal's signals: Ctrl-C is for the trainer, which stops the reward itself.
 * Only async-signal-safe calls here (the trainer has threads). */
static void guard_group(int life_fd, int err_fd, pid_t group, const char *name) {
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGPIPE, SIG_IGN); /* a closed stderr must not stop the guard */
    static Relay r;
    relay_group = group;
    const char *parts[3] = {"[reward ", name, "] "};
    for (int k = 0; k < 3; k++)
        for (const char *s = parts[k]; *s && r.n < 200; s++) r.buf[r.n++] = *s;
    r.prefix_len = r.n;
    r.at_line_start = 1;
    if (dup2(life_fd, 3) < 0 || dup2(err_fd, 4) < 0) _exit(1);
    close_range(5, ~0U, 0); /* the trainer's files: above all its end of the socket */
    int err_open = 1;
    for (;;) {
        struct pollfd p[2] = {{.fd = 3, .events = POLLIN}, {.fd = err_open ? 4 : -1, .events = POLLIN}};
        int k = poll(p, 2, 1000);
        if (k < 0 && errno != EINTR) break;
        if (k > 0 && p[1].revents) err_open = relay_read(&r, 4);
        if (k > 0 && p[0].revents) break;
    }
    kill(-group, SIGKILL);
    relay_watch_life = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (err_open) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int left_ms = 1000 - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = 4, .events = POLLIN};
        if (left_ms <= 0 || poll(&p, 1, left_ms) <= 0) break;
        err_open = relay_read(&r, 4);
    }
    if (r.n > r.prefix_len) relay_bytes(&r, "\n", 1); /* a last line without its newline */
    _exit(0);
}

int reward_cmd_start(RewardFunc *f, char *const argv[], const char *what, const char *name, double timeout_s,
                     GrpoErr *err) {
    int sv[2], life[2], errp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return err_set(err, "%s: socketpair: %s", what, strerror(errno));
    if (pipe2(life, O_CLOEXEC)) {
        close(sv[0]);
        close(sv[1]);
        return err_set(err, "%s: pipe: %s", what, strerror(errno));
    }
    if (pipe2(errp, O_CLOEXEC)) {
        close(sv[0]), close(sv[1]), close(life[0]), close(life[1]);
        return err_set(err, "%s: pipe: %s", what, strerror(errno));
    }
    fflush(NULL); /* no duplicated stdio buffers in the children */
    pid_t pid = fork();
    if (pid == 0) {
        /* own process group, so stopping it reaches what sh starts */
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        /* wait for the guardian: the trainer sends one byte once it exists; a
         * trainer killed before that ends us here (EOF) */
        close(sv[0]);
        char c;
        ssize_t r;
        while ((r = read(sv[1], &c, 1)) < 0 && errno == EINTR) {}
        if (r != 1) _exit(127);
        dup2(sv[1], 0);
        dup2(sv[1], 1);
        dup2(errp[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    pid_t guard = pid > 0 ? (setpgid(pid, pid), fork()) : -1; /* setpgid here too: kill(-pid) works at once */
    if (guard == 0) guard_group(life[0], errp[0], pid, name ? name : "cmd");
    int fork_errno = errno;
    close(sv[1]);
    close(life[0]);
    close(errp[0]);
    close(errp[1]);
    if (guard > 0) /* the guardian is there: let the command run */
        while (send(sv[0], "g", 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {}
    if (guard < 0) {
        if (pid > 0) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        }
        close(sv[0]);
        close(life[1]);
        return err_set(err, "%s: fork: %s", what, strerror(fork_errno));
    }
    CmdState *c = xcalloc(1, sizeof *c);
    c->what = xstrdup(what);
    c->shell = !strcmp(argv[0], "/bin/sh");
    c->timeout_s = timeout_s;
    c->pid = pid;
    c->guard = guard;
    c->life_fd = life[1];
    c->fd = sv[0];
    f->state = c;
    f->compute = cmd_compute;
    f->destroy = cmd_destroy;
    return 0;
}

int reward_cmd_init(RewardFunc *f, const char *command, const char *name, double timeout_s, GrpoErr *err) {
    char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
    char shown[512], what[600]; /* the command as messages name it: escaped, shortened */
    snprintf(what, sizeof what, "reward command '%s'", text_escaped(shown, sizeof shown, command, 120));
    return reward_cmd_start(f, argv, what, name, timeout_s, err);
}

int reward_cmd_hello(RewardFunc *f, json_t **hello, GrpoErr *err) {
    CmdState *c = f->state;
    *hello = NULL;
    if (cmd_exchange(c, "", 0, 0, err)) return -1;
    c->requests = 0; /* the start-up line answers no request */
    return cmd_reply_object(&c->reply, c->what, hello, err) ? cmd_fail(c) : 0;
}
