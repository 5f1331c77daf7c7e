/* dist/dist.c — the world of processes over OpenMPI (see dist.h). */
#include "dist/dist.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "dist/wait.h"

static int g_mpi, g_rank, g_size = 1, g_shared, g_local_rank, g_local_size = 1;

/* mpirun (OpenMPI's ORTE/PRRTE) and PMI/PMIx launchers say so in the environment. */
static int launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

void dist_init(int *argc, char ***argv) {
    if (g_mpi || !launched_by_mpirun()) return;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) DIE("MPI_Init failed");
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm node; /* the ranks that share this machine's memory: this machine's */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        DIE("MPI_Comm_split_type failed");
    MPI_Comm_rank(node, &g_local_rank);
    MPI_Comm_size(node, &g_local_size);
    MPI_Comm_free(&node);
    atexit(dist_finalize);
}

void dist_finalize(void) {
    int done = 0;
    if (!g_mpi || MPI_Finalized(&done) != MPI_SUCCESS || done) return;
    if (g_size > 1) { /* MPI_Finalize waits for every rank, without a timeout: this barrier has one */
        MPI_Request r;
        MPI_Ibarrier(MPI_COMM_WORLD, &r);
        dist_wait(&r, "the end of the run");
    }
    MPI_Finalize();
}

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
int dist_local_rank(void) { return g_local_rank; }
int dist_local_size(void) { return g_local_size; }

void dist_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* ---- sums in rank order ---- */

#define SUM_PIECE (1 << 20) /* floats per rank per round: N x 4 MiB of scratch at most */

void dist_sum_f32(float *x, size_t n) {
    if (g_size == 1 || n == 0) return;
    int N = g_size;
    size_t round = (size_t)SUM_PIECE * N;
    float *recv = xmalloc(sizeof(float) * SUM_PIECE * N), *mine = xmalloc(sizeof(float) * SUM_PIECE);
    int *cnt = xmalloc(sizeof(int) * N), *dsp = xmalloc(sizeof(int) * N), *rcnt = xmalloc(sizeof(int) * N),
        *rdsp = xmalloc(sizeof(int) * N);
    for (size_t base = 0; base < n; base += round) {
        size_t len = n - base < round ? n - base : round, each = (len + N - 1) / N;
        /* rank j reduces floats [j each, (j+1) each) of this round */
        for (int j = 0; j < N; j++) {
            size_t lo = (size_t)j * each < len ? (size_t)j * each : len, hi = lo + each < len ? lo + each : len;
            cnt[j] = (int)(hi - lo), dsp[j] = (int)lo;
        }
        int my = cnt[g_rank];
        for (int j = 0; j < N; j++) rcnt[j] = my, rdsp[j] = j * my;
        MPI_Request r;
        MPI_Ialltoallv(x + base, cnt, dsp, MPI_FLOAT, recv, rcnt, rdsp, MPI_FLOAT, MPI_COMM_WORLD, &r);
        dist_wait(&r, "the gradient sum");
        for (int k = 0; k < my; k++) {
            float s = recv[k];
            for (int j = 1; j < N; j++) s += recv[(size_t)j * my + k];
            mine[k] = s;
        }
        MPI_Iallgatherv(mine, my, MPI_FLOAT, x + base, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD, &r);
        dist_wait(&r, "the gradient sum");
    }
    free(recv), free(mine), free(cnt), free(dsp), free(rcnt), free(rdsp);
}

void dist_sum_f64(double *x, int n) {
    if (g_size == 1 || n <= 0) return;
    double *all = xmalloc(sizeof(double) * n * g_size);
    MPI_Request r;
    MPI_Iallgather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD, &r);
    dist_wait(&r, "a sum of the step's statistics");
    for (int k = 0; k < n; k++) {
        double s = all[k];
        for (int j = 1; j < g_size; j++) s += all[(size_t)j * n + k];
        x[k] = s;
    }
    free(all);
}

void dist_gather_i64(int64_t *all, const int64_t *mine, int n) {
    if (g_size == 1) {
        memcpy(all, mine, sizeof(int64_t) * n);
        return;
    }
    MPI_Request r;
    MPI_Iallgather(mine, n, MPI_INT64_T, all, n, MPI_INT64_T, MPI_COMM_WORLD, &r);
    dist_wait(&r, "a gather of the weights' checksums");
}

/* ---- items owned by one rank each ---- */

/* at[j] = where rank j's block starts, from at[j] = the size of rank j's block. */
static void block_starts(size_t *at, int N) {
    size_t s = 0;
    for (int j = 0; j < N; j++) {
        size_t c = at[j];
        at[j] = s, s += c;
    }
}

/* Every rank's owned ints/bytes, concatenated in item order, to everyone. */
static void *gather_owned(const void *mine, size_t my_bytes, size_t *total) {
    int N = g_size;
    int *cnt = xmalloc(sizeof(int) * N), *dsp = xmalloc(sizeof(int) * N), c = (int)my_bytes;
    if (my_bytes > (size_t)INT32_MAX) DIE("dist_share_items: %zu bytes from one rank", my_bytes);
    MPI_Request r;
    MPI_Iallgather(&c, 1, MPI_INT, cnt, 1, MPI_INT, MPI_COMM_WORLD, &r);
    dist_wait(&r, "the sharing of generated items");
    size_t t = 0;
    for (int j = 0; j < N; j++) {
        if (t > (size_t)INT32_MAX) DIE("dist_share_items: more than 2 GiB in one exchange");
        dsp[j] = (int)t, t += (size_t)cnt[j];
    }
    char *all = xmalloc(t ? t : 1);
    MPI_Iallgatherv(mine, c, MPI_BYTE, all, cnt, dsp, MPI_BYTE, MPI_COMM_WORLD, &r);
    dist_wait(&r, "the sharing of generated items");
    free(cnt), free(dsp);
    *total = t;
    return all;
}

void dist_share_items(void **items, int *len, const int *owner, int n, size_t elem, int with_len) {
    if (g_size == 1) return;
    int N = g_size;
    if (with_len) { /* the lengths first: one int per item, from its owner */
        int mine = 0;
        for (int i = 0; i < n; i++) mine += owner[i] == g_rank;
        int *buf = xmalloc(sizeof(int) * (mine ? mine : 1)), k = 0;
        for (int i = 0; i < n; i++)
            if (owner[i] == g_rank) buf[k++] = len[i];
        size_t t;
        int *all = gather_owned(buf, sizeof(int) * mine, &t);
        /* rank j's lengths are in item order within its block */
        size_t *at = xcalloc(N, sizeof(size_t));
        for (int i = 0; i < n; i++) at[owner[i]]++;
        block_starts(at, N);
        for (int i = 0; i < n; i++) len[i] = all[at[owner[i]]++];
        free(buf), free(all), free(at);
    }
    size_t my_bytes = 0;
    for (int i = 0; i < n; i++)
        if (owner[i] == g_rank) my_bytes += (size_t)len[i] * elem;
    char *buf = xmalloc(my_bytes ? my_bytes : 1), *p = buf;
    for (int i = 0; i < n; i++)
        if (owner[i] == g_rank) {
            memcpy(p, items[i], (size_t)len[i] * elem);
            p += (size_t)len[i] * elem;
        }
    size_t t;
    char *all = gather_owned(buf, my_bytes, &t);
    size_t *at = xcalloc(N, sizeof(size_t));
    for (int i = 0; i < n; i++) at[owner[i]] += (size_t)len[i] * elem;
    block_starts(at, N);
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)len[i] * elem;
        if (owner[i] != g_rank) {
            items[i] = xmalloc(b ? b : 1);
            memcpy(items[i], all + at[owner[i]], b);
        }
        at[owner[i]] += b;
    }
    free(buf), free(all), free(at);
}

/* ---- errors every rank agrees on ---- */

int dist_check(int rc, GrpoErr *err) {
    if (g_size == 1) {
        if (rc) g_shared = 1;
        return rc ? -1 : 0;
    }
    int failed = rc != 0, any = 0;
    MPI_Request r;
    MPI_Iallreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
    dist_wait(&r, "a check for errors");
    if (!any) return 0;
    char mine[sizeof err->msg];
    memset(mine, 0, sizeof mine);
    if (failed) snprintf(mine, sizeof mine, "%s", err->msg);
    char *msgs = xmalloc(sizeof mine * g_size);
    int *f = xmalloc(sizeof(int) * g_size);
    MPI_Iallgather(mine, sizeof mine, MPI_CHAR, msgs, sizeof mine, MPI_CHAR, MPI_COMM_WORLD, &r);
    dist_wait(&r, "a check for errors");
    MPI_Iallgather(&failed, 1, MPI_INT, f, 1, MPI_INT, MPI_COMM_WORLD, &r);
    dist_wait(&r, "a check for errors");
    int first = 0;
    while (!f[first]) first++;
    const char *m = msgs + sizeof mine * first;
    int alike = 1; /* every rank failed, with the same message */
    for (int j = 0; j < g_size && alike; j++) alike = f[j] && !strcmp(msgs + sizeof mine * j, m);
    char text[sizeof mine];
    snprintf(text, sizeof text, "%s", m);
    if (alike) err_set(err, "%s", text);
    else err_set(err, "rank %d: %s", first, text);
    free(msgs), free(f);
    g_shared = 1;
    return -1;
}

int dist_error_shared(void) { return g_shared; }
