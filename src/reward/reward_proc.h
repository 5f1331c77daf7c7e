/* reward/reward_proc.h — a reward process under its guardian (reward_proc.c):
 * started, watched and ended so that neither it nor anything it starts (in a
 * new process group or session, double-forked as a daemon) outlives the run,
 * and so that its exit is known the moment it happens, whoever still holds its
 * stdout. The JSON exchange over its stdin and stdout is reward_cmd.c's. */
#ifndef GRPO_REWARD_PROC_H
#define GRPO_REWARD_PROC_H

#include <sys/types.h>

#include "core/check.h"

typedef struct {
    pid_t guard;   /* the guardian, the reward's parent; 0 once reaped */
    int life_fd;   /* write end of the guardian's pipe, held by the trainer alone; -1 once closed */
    int status_fd; /* the guardian's reports: the reward's wait status when it ends; -1 once closed */
    int in_fd;     /* ours of the reward's stdin (a socket: send with MSG_NOSIGNAL); -1 once closed */
    int out_fd;    /* ours of the reward's stdout (a socket of its own, so a closed stdout is EOF) */
    int ended;     /* the guardian reported the reward's end: status holds its wait status */
    int status;
} RewardProc;

/* Starts argv (execv: argv[0] a path) as a reward process: a guardian is forked
 * first, and the guardian starts the reward in its own process group, stdin
 * and stdout sockets to us, stderr relayed line by line prefixed "[LABEL] "
 * (name: "reward NAME" for a reward, "tool", "environment"). The guardian ends the reward and every process it started
 * when the trainer closes life_fd (reward_proc_stop) or dies, kill -9 included.
 * 0, or -1 with err ("WHAT: fork: ..."). */
int reward_proc_start(RewardProc *p, char *const argv[], const char *name, const char *what, GrpoErr *err);

/* Waits up to wait_s seconds for the guardian's report of the reward's end.
 * 1: it ended (p->status, a waitpid status; also when reported earlier),
 * 0: still running, -1: the guardian ended without a report. */
int reward_proc_ended(RewardProc *p, double wait_s);

/* Ends the reward: closes its stdin and stdout (a well-behaved reward exits on
 * EOF), waits up to grace_s for it to end, then has the guardian stop it
 * (SIGTERM to its group, SIGKILL 0.5 s later) and kill and reap everything it
 * started; returns once the guardian has. Idempotent. */
void reward_proc_stop(RewardProc *p, double grace_s);

#endif
