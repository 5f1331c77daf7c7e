/* tools/tool_pool.c — worker threads making tool calls while the model decodes
 * (tool_pool.h). Each worker owns one tool process, so the calls of different
 * completions run side by side and a turn's calls stay in order on one process.
 * A queue in, a list out, one mutex and two condition variables. Not here: the
 * parsing of calls, the rendering of results (tool_loop.c), the protocol
 * (tool_proc.c). */
#include "tools/tool_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"

struct ToolPool {
    int n_workers;
    ToolProc **procs;      /* [n_workers]; procs[0] borrowed */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work;   /* a job was queued, or closing */
    pthread_cond_t done;   /* a job finished */
    ToolJob *queue, *queue_tail, *finished, *finished_tail;
    int pending;           /* submitted and not yet handed back */
    int failed;            /* a call failed: later jobs are not made */
    int closing;
};

static void push(ToolJob **head, ToolJob **tail, ToolJob *j) {
    j->next = NULL;
    if (*tail) (*tail)->next = j;
    else *head = j;
    *tail = j;
}

static ToolJob *pop(ToolJob **head, ToolJob **tail) {
    ToolJob *j = *head;
    if (j && !(*head = j->next)) *tail = NULL;
    return j;
}

/* Makes job j's calls in order on proc; stops at the first that fails. */
static void make_calls(ToolProc *proc, ToolJob *j) {
    for (j->made = 0; j->made < j->answer.n_calls; j->made++) {
        j->rc = tool_proc_call(proc, &j->answer.calls[j->made], &j->contents[j->made], &j->failed[j->made],
                               &j->err);
        if (j->rc) return;
    }
}

typedef struct {
    ToolPool *pool;
    int worker;
} WorkerArg;

static void *worker_main(void *arg) {
    WorkerArg *w = arg;
    ToolPool *p = w->pool;
    ToolProc *proc = p->procs[w->worker];
    free(w);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queue && !p->closing) pthread_cond_wait(&p->work, &p->mu);
        ToolJob *j = pop(&p->queue, &p->queue_tail);
        if (!j) break; /* closing and nothing queued */
        if (p->failed) {
            j->rc = err_set(&j->err, "tool call not made: an earlier call failed");
        } else {
            pthread_mutex_unlock(&p->mu);
            make_calls(proc, j);
            pthread_mutex_lock(&p->mu);
            if (j->rc) p->failed = 1;
        }
        push(&p->finished, &p->finished_tail, j);
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int tool_pool_start(ToolPool **out, int n_workers, ToolProc *first, const char *command, const json_t *tools,
                    double timeout_s, GrpoErr *err) {
    CHECK(n_workers >= 1 && first);
    *out = NULL;
    ToolPool *p = xcalloc(1, sizeof *p);
    p->procs = xcalloc(n_workers, sizeof(ToolProc *));
    p->threads = xcalloc(n_workers, sizeof(pthread_t));
    p->procs[0] = first;
    for (int k = 1; k < n_workers; k++)
        if (tool_proc_start(&p->procs[k], command, tools, timeout_s, err)) {
            for (int q = 1; q < k; q++) tool_proc_close(p->procs[q]);
            free(p->procs), free(p->threads), free(p);
            return -1;
        }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int k = 0; k < n_workers; k++) {
        WorkerArg *w = xmalloc(sizeof *w);
        *w = (WorkerArg){p, k};
        CHECK(pthread_create(&p->threads[k], NULL, worker_main, w) == 0);
        p->n_workers++;
    }
    *out = p;
    return 0;
}

void tool_pool_submit(ToolPool *p, int index, ToolAnswer *a) {
    ToolJob *j = xcalloc(1, sizeof *j);
    j->index = index;
    j->answer = *a;
    memset(a, 0, sizeof *a);
    int n = j->answer.n_calls > 0 ? j->answer.n_calls : 1;
    j->contents = xcalloc(n, sizeof(char *));
    j->failed = xcalloc(n, sizeof(int));
    pthread_mutex_lock(&p->mu);
    push(&p->queue, &p->queue_tail, j);
    p->pending++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

ToolJob *tool_pool_wait(ToolPool *p, int block) {
    pthread_mutex_lock(&p->mu);
    while (block && !p->finished && p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    ToolJob *j = pop(&p->finished, &p->finished_tail);
    if (j) p->pending--;
    pthread_mutex_unlock(&p->mu);
    return j;
}

int tool_pool_pending(const ToolPool *p) {
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    int n = p->pending;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return n;
}

void tool_job_free(ToolJob *j) {
    if (!j) return;
    for (int k = 0; k < j->answer.n_calls; k++) free(j->contents[k]);
    free(j->contents);
    free(j->failed);
    tool_answer_free(&j->answer);
    free(j);
}

void tool_pool_close(ToolPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    p->failed = 1; /* what is still queued is not made */
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->n_workers; k++) pthread_join(p->threads[k], NULL);
    ToolJob *j;
    while ((j = pop(&p->finished, &p->finished_tail))) tool_job_free(j);
    for (int k = 1; k < p->n_workers; k++) tool_proc_close(p->procs[k]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->procs), free(p->threads), free(p);
}
