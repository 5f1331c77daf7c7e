/* reward/reward_proc.c — a reward process and its guardian (reward_proc.h).
 *
 * The trainer forks the guardian, and the guardian forks the reward: the
 * guardian is the reward's parent and a child subreaper (Linux
 * PR_SET_CHILD_SUBREAPER), so whatever the reward starts and leaves behind — a
 * daemon that double-forked, a child in a new session (setsid) or process group
 * — is re-parented to the guardian instead of init, where it can be found (its
 * children in /proc), killed and reaped. The guardian reports the reward's
 * exit status to the trainer as soon as it reaps it (a 4-byte wait status on a
 * pipe), so an exit is seen at once even while a grandchild holds the reward's
 * stdout open. It relays the reward's stderr, prefixed, and when the trainer's
 * pipe closes — the trainer stopping the reward, or dying however it dies — it
 * ends the reward's group (SIGTERM, SIGKILL 0.5 s later) and then SIGKILLs and
 * reaps each remaining descendant until none is left.
 *
 * The guardian is a forked copy of a trainer with threads: only
 * async-signal-safe calls there (no malloc, no stdio). Not here: the JSON
 * exchange (reward_cmd.c). A descendant that makes itself a subreaper or is
 * ptrace-reparented is beyond reach (a cgroup would be needed). */
#include "reward/reward_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the trainer's side ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int reward_proc_ended(RewardProc *p, double wait_s) {
    if (p->ended) return 1;
    if (p->status_fd < 0) return -1;
    double t_end = now_s() + wait_s;
    for (;;) {
        double left = t_end - now_s();
        struct pollfd q = {.fd = p->status_fd, .events = POLLIN};
        int r = poll(&q, 1, left > 0 ? (int)(left * 1000.0) + 1 : 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? -1 : 0;
        int status;
        ssize_t n;
        while ((n = read(p->status_fd, &status, sizeof status)) < 0 && errno == EINTR) {}
        if (n == (ssize_t)sizeof status) {
            p->ended = 1;
            p->status = status;
            return 1;
        }
        close(p->status_fd); /* EOF: the guardian is gone without a word */
        p->status_fd = -1;
        return -1;
    }
}

void reward_proc_stop(RewardProc *p, double grace_s) {
    if (p->in_fd >= 0) close(p->in_fd);
    if (p->out_fd >= 0) close(p->out_fd);
    p->in_fd = p->out_fd = -1;
    if (p->life_fd >= 0 && grace_s > 0) reward_proc_ended(p, grace_s);
    if (p->life_fd >= 0) close(p->life_fd);
    p->life_fd = -1;
    if (p->guard > 0)
        while (waitpid(p->guard, NULL, 0) < 0 && errno == EINTR) {}
    p->guard = 0;
    if (p->status_fd >= 0) close(p->status_fd);
    p->status_fd = -1;
}

/* ---- the guardian (async-signal-safe calls only) ---- */

/* The guardian's descriptors. */
enum { G_LIFE = 3, G_ERR = 4, G_STATUS = 5, G_CHLD_R = 6, G_CHLD_W = 7, G_IN = 8, G_OUT = 9, G_ERR_W = 10 };

static pid_t g_reward; /* the reward; 0 once reaped */
static pid_t g_group;  /* its process group (its pid) */
static int g_watch_life = 1, g_dropping = 0;

static long ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void on_sigchld(int sig) {
    (void)sig;
    int saved = errno;
    ssize_t w = write(G_CHLD_W, "c", 1); /* a wake-up; a full pipe already holds one */
    (void)w;
    errno = saved;
}

/* Reaps every child that has ended; the reward's status goes to the trainer. */
static void guard_reap(void) {
    int status;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) > 0)
        if (r == g_reward) {
            ssize_t w = write(G_STATUS, &status, sizeof status);
            (void)w;
            g_reward = 0;
        }
}

/* The relay of the reward's stderr: whole lines, each written with the prefix
 * in one write(2); a line longer than the buffer goes out in pieces. */
typedef struct {
    char buf[8192];
    size_t n, prefix_len;
    int at_line_start;
} Relay;
static Relay g_relay;

/* Writes to our stderr without ever blocking the guard's duty: it waits for room
 * (pieces of at most PIPE_BUF, which a writable pipe always takes whole) while
 * watching the trainer's pipe; if the trainer goes while there is no room — its
 * stderr perhaps a full pipe nobody reads — the text is dropped from then on, so
 * that the reward's processes are ended at once. After that (draining), it
 * waits at most a second for room. */
static void relay_write(const void *buf, size_t n) {
    const char *s = buf;
    while (n > 0 && !g_dropping) {
        struct pollfd q[2] = {{.fd = 2, .events = POLLOUT}, {.fd = g_watch_life ? G_LIFE : -1, .events = POLLIN}};
        int k = poll(q, 2, g_watch_life ? -1 : 1000);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        if (q[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return; /* stderr is gone: drop the text */
        if (!(q[0].revents & POLLOUT)) { /* no room, and the trainer is gone */
            g_dropping = 1;
            return;
        }
        ssize_t w = write(2, s, n < PIPE_BUF ? n : PIPE_BUF);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

/* Flushes buf[prefix_len..n) (one line, or a piece of a long one). */
static void relay_flush(Relay *r) {
    if (r->n > r->prefix_len)
        relay_write(r->at_line_start ? r->buf : r->buf + r->prefix_len,
                    r->at_line_start ? r->n : r->n - r->prefix_len);
    r->at_line_start = r->n > 0 && r->buf[r->n - 1] == '\n';
    r->n = r->prefix_len;
}

static void relay_bytes(Relay *r, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        r->buf[r->n++] = s[i];
        if (s[i] == '\n' || r->n == sizeof r->buf) relay_flush(r);
    }
}

/* Reads what the reward's stderr has; 0 at EOF or error (it is then done). */
static int relay_read(Relay *r) {
    char tmp[4096];
    ssize_t k;
    while ((k = read(G_ERR, tmp, sizeof tmp)) < 0 && errno == EINTR) {}
    if (k <= 0) return 0;
    relay_bytes(r, tmp, (size_t)k);
    return 1;
}

/* Waits up to ms for a child's end, the trainer's pipe (when watched) or
 * stderr, relaying stderr and reaping children. Returns 1 when the trainer's
 * pipe closed. */
static int guard_wait(int ms, int *err_open) {
    struct pollfd q[3] = {{.fd = G_CHLD_R, .events = POLLIN},
                          {.fd = *err_open ? G_ERR : -1, .events = POLLIN},
                          {.fd = g_watch_life ? G_LIFE : -1, .events = POLLIN}};
    int k = poll(q, 3, ms);
    int life_closed = 0;
    if (k > 0) {
        char drain[64];
        if (q[0].revents)
            while (read(G_CHLD_R, drain, sizeof drain) > 0) {}
        if (q[1].revents) *err_open = relay_read(&g_relay);
        life_closed = q[2].revents != 0;
    }
    guard_reap();
    return life_closed;
}

/* SIGKILLs each of our children (found in /proc: ppid is us). They cannot be
 * other processes by the time the signal lands: a child's pid is not reused
 * before we reap it. Returns how many it signalled. */
static int kill_children(void) {
    int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return 0;
    pid_t me = getpid();
    int killed = 0;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long at = 0; at < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + at);
            at += d->d_reclen;
            pid_t pid = 0;
            const char *s = d->d_name;
            for (; *s >= '0' && *s <= '9'; s++) pid = pid * 10 + (*s - '0');
            if (*s || pid <= 0 || pid == me) continue;
            char path[64] = "/proc/", stat[512];
            size_t len = 6;
            for (const char *c = d->d_name; *c && len < 40; c++) path[len++] = *c;
            memcpy(path + len, "/stat", 6);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t got = read(fd, stat, sizeof stat - 1);
            close(fd);
            if (got <= 0) continue;
            stat[got] = 0;
            /* "PID (COMM) STATE PPID ...": COMM may hold anything, so from the last ')' */
            char *p = strrchr(stat, ')');
            if (!p || p[1] != ' ' || !p[2] || p[3] != ' ') continue;
            pid_t ppid = 0;
            for (p += 4; *p >= '0' && *p <= '9'; p++) ppid = ppid * 10 + (*p - '0');
            if (ppid == me && kill(pid, SIGKILL) == 0) killed++;
        }
    }
    close(dir);
    return killed;
}

/* Ends the reward's family: SIGTERM to its group while the reward runs (0.5 s
 * for it to go), then SIGKILL to the group and, round after round, to each
 * child we have — the processes re-parented to us as their parents die — until
 * none is left (at most 5 s: a process stuck in the kernel may not die). The
 * reward's stderr is relayed meanwhile. */
static void guard_end_family(int *err_open) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (g_reward > 0) {
        kill(-g_reward, SIGTERM);
        while (g_reward > 0 && ms_since(&t0) < 500) guard_wait(10, err_open);
    }
    for (;;) {
        kill(-g_group, SIGKILL);
        kill_children();
        guard_wait(10, err_open);
        siginfo_t info;
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) break; /* none left */
        if (ms_since(&t0) > 5000) break;
    }
}

/* The reward's process: its own group, signals as a fresh program has them,
 * stdin/stdout/stderr the sockets and the relay pipe, nothing else open. */
static void reward_exec(char *const argv[], pid_t guardian) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* should the guardian itself be killed */
    if (getppid() != guardian) _exit(127);
    int sigs[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(G_IN, 0) < 0 || dup2(G_OUT, 1) < 0 || dup2(G_ERR_W, 2) < 0) _exit(127);
    close_range(3, ~0U, 0);
    execv(argv[0], argv);
    _exit(127);
}

/* The guardian: fds[] are, in G_ order from G_LIFE, the trainer's pipe, the
 * reward's stderr (read end), the status pipe, the SIGCHLD pipe (read, write),
 * the reward's stdin and stdout sockets and stderr's write end. It ignores the
 * terminal's signals: Ctrl-C is for the trainer, which stops the reward itself. */
static void guard_main(int fds[8], char *const argv[], const char *name) {
    int sigs[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE}; /* a closed stderr must not stop the guard */
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_IGN);
    /* the descriptors at fixed numbers: above everything first, so none is overwritten */
    for (int i = 0; i < 8; i++) {
        int high = fcntl(fds[i], F_DUPFD, G_ERR_W + 1);
        if (high < 0) _exit(1);
        fds[i] = high;
    }
    for (int i = 0; i < 8; i++)
        if (dup2(fds[i], G_LIFE + i) < 0) _exit(1);
    close_range(G_ERR_W + 1, ~0U, 0); /* the trainer's files: above all its ends of the sockets */
    fcntl(G_CHLD_R, F_SETFL, O_NONBLOCK);
    fcntl(G_CHLD_W, F_SETFL, O_NONBLOCK);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);

    Relay *r = &g_relay;
    const char *parts[3] = {"[", name, "] "};
    for (int k = 0; k < 3; k++)
        for (const char *s = parts[k]; *s && r->n < 200; s++) r->buf[r->n++] = *s;
    r->prefix_len = r->n;
    r->at_line_start = 1;

    pid_t me = getpid();
    pid_t pid = fork();
    if (pid == 0) reward_exec(argv, me);
    if (pid < 0) _exit(1); /* the trainer reports a guardian gone without a word */
    setpgid(pid, pid);     /* here too: kill(-pid) works at once */
    g_reward = g_group = pid;
    close(G_IN), close(G_OUT), close(G_ERR_W);

    int err_open = 1;
    while (!guard_wait(1000, &err_open)) {}
    g_watch_life = 0;
    guard_end_family(&err_open);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (err_open && ms_since(&t0) < 1000) guard_wait(50, &err_open); /* what is left of its stderr */
    if (r->n > r->prefix_len) relay_bytes(r, "\n", 1);                  /* a last line without its newline */
    _exit(0);
}

int reward_proc_start(RewardProc *p, char *const argv[], const char *name, const char *what, GrpoErr *err) {
    *p = (RewardProc){.life_fd = -1, .status_fd = -1, .in_fd = -1, .out_fd = -1};
    /* in, out: socketpairs ([0] ours); life, errp, status, chld: pipes */
    int in[2] = {-1, -1}, out[2] = {-1, -1}, life[2] = {-1, -1}, errp[2] = {-1, -1}, status[2] = {-1, -1},
        chld[2] = {-1, -1};
    int *all[6] = {in, out, life, errp, status, chld};
    int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) ||
             pipe2(life, O_CLOEXEC) || pipe2(errp, O_CLOEXEC) || pipe2(status, O_CLOEXEC) || pipe2(chld, O_CLOEXEC);
    pid_t guard = -1;
    int saved = errno;
    if (!rc) {
        fflush(NULL); /* no duplicated stdio buffers in the children */
        guard = fork();
        saved = errno;
        if (guard == 0) {
            int fds[8] = {life[0], errp[0], status[1], chld[0], chld[1], in[1], out[1], errp[1]};
            guard_main(fds, argv, name ? name : "cmd");
        }
    }
    /* ours: in[0], out[0], life[1], status[0]; the rest is the guardian's */
    int keep[] = {in[0], out[0], life[1], status[0]};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 2; j++) {
            int fd = all[i][j], kept = 0;
            for (int k = 0; k < 4; k++) kept |= guard > 0 && fd == keep[k];
            if (fd >= 0 && !kept) close(fd);
        }
    if (guard < 0) return err_set(err, "%s: %s: %s", what, rc ? "pipe" : "fork", strerror(saved));
    p->guard = guard;
    p->in_fd = in[0];
    p->out_fd = out[0];
    p->life_fd = life[1];
    p->status_fd = status[0];
    return 0;
}
