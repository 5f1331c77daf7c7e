/* tools/tool_pool.h — tool calls made off the decoding thread, so that a
 * sequence waiting on its tool does not hold up the others (the overlap of
 * issue 37): `tool_workers` threads, each with its own tool process
 * (tool_proc.h), take a turn's calls from a queue, make them in order on their
 * process, and hand the results back; the decoding loop collects them when they
 * are done (tool_loop.h: tool_loop_turn_begin / tool_loop_turn_wait). Only the
 * processes' waits leave the caller's thread: parsing the calls and rendering
 * the results stay on it. Not here: what a call's reply means (tool_proc.c). */
#ifndef GRPO_TOOLS_TOOL_POOL_H
#define GRPO_TOOLS_TOOL_POOL_H

#include <jansson.h>

#include "core/check.h"
#include "tools/tool_calls.h"
#include "tools/tool_proc.h"

typedef struct ToolPool ToolPool;

/* One turn's calls and what came back. rc 0: every call made, contents[k] and
 * failed[k] as tool_proc_call's; rc -1: calls before `made` are answered, call
 * `made` failed with err (or was never made: an earlier turn's failure). */
typedef struct ToolJob {
    int index;            /* the completion's, as handed to tool_pool_submit */
    ToolAnswer answer;    /* the calls, owned */
    char **contents;      /* [answer.n_calls] */
    int *failed;          /* [answer.n_calls] */
    int made;             /* calls answered */
    int rc;
    GrpoErr err;
    struct ToolJob *next;
} ToolJob;

/* Starts n_workers (>= 1) threads, the first making its calls on `first` (borrowed:
 * the loop's process), each other on a process of its own (command, tools,
 * timeout_s as tool_proc_start's). -1 with err when a process cannot be started
 * (those started are stopped). */
int tool_pool_start(ToolPool **out, int n_workers, ToolProc *first, const char *command, const json_t *tools,
                    double timeout_s, GrpoErr *err);
/* Queues the calls of completion `index` (a: TOOL_ANSWER_CALLS, moved into the job). */
void tool_pool_submit(ToolPool *p, int index, ToolAnswer *a);
/* A finished job (free with tool_job_free), in the order they finish; NULL when
 * none is finished and block is 0, or when no job is queued or running. After a
 * call fails, the jobs not yet started come back failed at once, unmade. */
ToolJob *tool_pool_wait(ToolPool *p, int block);
void tool_job_free(ToolJob *j);
/* Jobs submitted and not yet handed back by tool_pool_wait. */
int tool_pool_pending(const ToolPool *p);
/* Waits for the running calls (each bounded by the timeout), stops the threads
 * and the processes the pool started (not `first`) and frees p. NULL is fine. */
void tool_pool_close(ToolPool *p);

#endif
