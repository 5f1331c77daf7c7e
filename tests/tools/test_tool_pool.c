/* tests/tools/test_tool_pool.c — tool calls made by worker threads
 * (tools/tool_pool.h) with a fake tool in a few lines of Python that sleeps as
 * asked: a job that sleeps comes back after the ones begun later (out of order),
 * a turn's calls in order with their results, nothing finished is NULL without
 * blocking; a crashing call gives its message and the jobs queued behind it come
 * back unmade at once; closing with a call in flight waits for it, no longer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/memory.h"
#include "testutil.h"
#include "tools/tool_pool.h"

static char tmp[] = "/tmp/grpo-pool-XXXXXX";
static char script[600], command[1400];
static json_t *tools;

static const char *FAKE =
    "import json, sys, time\n"
    "for line in sys.stdin:\n"
    "    e = json.loads(line)['arguments']['expression']\n"
    "    if e == 'crash': sys.exit(3)\n"
    "    if e.startswith('sleep '): time.sleep(float(e.split()[1])); e = e.split()[2]\n"
    "    print(json.dumps({'content': str(eval(e, {'__builtins__': {}}))}), flush=True)\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a turn calling the calculator with each expression of exprs[n] */
static ToolAnswer turn(const char *const *exprs, int n) {
    ToolAnswer a = {TOOL_ANSWER_CALLS, xcalloc(n, sizeof(ToolCall)), n, ""};
    for (int k = 0; k < n; k++) {
        a.calls[k].name = xstrdup("calculator");
        a.calls[k].arguments = json_pack("{s:s}", "expression", exprs[k]);
    }
    return a;
}

static void submit(ToolPool *p, int index, const char *const *exprs, int n) {
    ToolAnswer a = turn(exprs, n);
    tool_pool_submit(p, index, &a);
}

static void test_out_of_order(void) {
    ToolPool *p;
    ToolProc *first;
    GrpoErr err = {{0}};
    T_CHECK(tool_proc_start(&first, command, tools, 20, &err) == 0, "start: %s", err.msg);
    T_CHECK(tool_pool_start(&p, 3, first, command, tools, 20, &err) == 0, "pool: %s", err.msg);
    submit(p, 0, (const char *[]){"sleep 2 7*6"}, 1);
    T_CHECK(tool_pool_wait(p, 0) == NULL && tool_pool_pending(p) == 1, "nothing finished yet: NULL at once");
    submit(p, 1, (const char *[]){"1+1", "sleep 0.05 2*3", "3*3"}, 3);
    submit(p, 2, (const char *[]){"5-1"}, 1);
    int order[3], ok = 1;
    for (int q = 0; q < 3; q++) {
        ToolJob *j = tool_pool_wait(p, 1);
        if (!j) {
            T_CHECK(0, "wait %d: NULL with jobs pending", q);
            break;
        }
        order[q] = j->index;
        ok &= j->rc == 0 && j->made == j->answer.n_calls;
        if (j->index == 0) ok &= !strcmp(j->contents[0], "42");
        if (j->index == 1) ok &= !strcmp(j->contents[0], "2") && !strcmp(j->contents[1], "6") && !strcmp(j->contents[2], "9");
        if (j->index == 2) ok &= !strcmp(j->contents[0], "4");
        tool_job_free(j);
    }
    T_CHECK(ok, "each job's results, a turn's calls in order");
    T_CHECK(order[2] == 0, "the sleeping job came back last (order %d %d %d)", order[0], order[1], order[2]);
    T_CHECK(tool_pool_pending(p) == 0 && tool_pool_wait(p, 1) == NULL, "nothing pending: NULL, no block");
    tool_pool_close(p);
    tool_proc_close(first);
}

static void test_failure(void) {
    ToolPool *p;
    ToolProc *first;
    GrpoErr err = {{0}};
    T_CHECK(tool_proc_start(&first, command, tools, 20, &err) == 0, "start: %s", err.msg);
    T_CHECK(tool_pool_start(&p, 1, first, command, tools, 20, &err) == 0, "pool: %s", err.msg);
    double t0 = now_s();
    submit(p, 0, (const char *[]){"1+1", "crash"}, 2);
    submit(p, 1, (const char *[]){"2+2"}, 1);
    submit(p, 2, (const char *[]){"3+3"}, 1);
    ToolJob *j = tool_pool_wait(p, 1);
    T_CHECK(j && j->index == 0 && j->rc == -1 && j->made == 1 && !strcmp(j->contents[0], "2") &&
                strstr(j->err.msg, "exited with status 3"),
            "the crash: its message, the call before it answered (%s)", j ? j->err.msg : "none");
    tool_job_free(j);
    for (int q = 0; q < 2; q++) {
        j = tool_pool_wait(p, 1);
        T_CHECK(j && j->rc == -1 && j->made == 0 && strstr(j->err.msg, "not made"), "queued job %d: unmade (%s)", q,
                j ? j->err.msg : "none");
        tool_job_free(j);
    }
    T_CHECK(now_s() - t0 < 5, "the failure came back at once (%.1f s)", now_s() - t0);
    tool_pool_close(p);
    tool_proc_close(first);
}

static void test_close_in_flight(void) {
    ToolPool *p;
    ToolProc *first;
    GrpoErr err = {{0}};
    T_CHECK(tool_proc_start(&first, command, tools, 20, &err) == 0, "start: %s", err.msg);
    T_CHECK(tool_pool_start(&p, 2, first, command, tools, 20, &err) == 0, "pool: %s", err.msg);
    submit(p, 0, (const char *[]){"sleep 1 1"}, 1);
    for (int k = 1; k < 6; k++) submit(p, k, (const char *[]){"sleep 1 1"}, 1);
    usleep(200000);
    double t0 = now_s();
    tool_pool_close(p); /* two calls in flight, four queued: those are not made */
    double dt = now_s() - t0;
    T_CHECK(dt < 2.5, "close waited for the calls in flight only (%.2f s)", dt);
    tool_proc_close(first);
}

int main(void) {
    CHECK(mkdtemp(tmp));
    snprintf(script, sizeof script, "%s/calc.py", tmp);
    snprintf(command, sizeof command, "python3 %s", script);
    FILE *f = fopen(script, "w");
    CHECK(f);
    fputs(FAKE, f);
    fclose(f);
    tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"parameters\": "
                       "{\"type\": \"object\", \"properties\": {\"expression\": {\"type\": \"string\"}}}}}]",
                       0, NULL);
    test_out_of_order();
    test_failure();
    test_close_in_flight();
    json_decref(tools);
    unlink(script);
    rmdir(tmp);
    return t_summary("test_tool_pool");
}
