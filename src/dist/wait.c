/* dist/wait.c — collectives that give up: transformers' ddp_timeout for MPI.
 *
 * Every collective in dist/ is started non-blocking and finished here. Waiting
 * spins on MPI_Test for the first milliseconds (as OpenMPI's blocking
 * collectives do, so a step's sums are as fast as before), then sleeps between
 * tests, 20 us doubling to 250 us, so a rank that waits minutes for a slow one
 * costs almost no CPU.
 *
 * Past the deadline a rank cannot ask MPI which ranks are missing from a
 * collective, so the ranks find out among themselves: the first to time out
 * sends "late" to every rank; a rank waiting in a collective that sees it (or
 * times out itself) answers the same way. After a grace period (a tenth of the
 * timeout, 1 to 30 s) the ranks never heard from are the ones that did not
 * arrive: stopped, stuck, or still busy past the timeout. The lowest rank that
 * waited reports, and MPI_Abort ends the job. A rank that died is mpirun's to
 * notice (it ends the job itself).
 *
 * Is not: a check of the work between collectives (a rank computing forever
 * while the others wait is what the timeout catches, at the next collective). */
#include "dist/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "dist/dist.h"

#define TAG_LATE 0x6c61 /* point-to-point tag of the "late" messages; collectives use none */

static double g_timeout_s = 1800; /* transformers' default ddp_timeout */
static void (*g_report)(const char *msg);

void dist_set_timeout(double timeout_s, void (*report)(const char *msg)) {
    if (timeout_s > 0) g_timeout_s = timeout_s;
    g_report = report;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ns(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&t, NULL);
}

/* Whether a "late" message waits to be received. */
static int late_pending(void) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_LATE, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    return flag;
}

/* The collective r did not complete in time: tell every rank we are here, hear
 * who else is, report the ones that never spoke, and end the job. */
static void __attribute__((noreturn)) give_up(MPI_Request *r, const char *what) {
    int N = dist_size(), me = dist_rank();
    char *here = xcalloc((size_t)N, 1);
    here[me] = 1;
    int one = 1, got;
    MPI_Request *sent = xmalloc(sizeof(MPI_Request) * (size_t)N);
    for (int j = 0; j < N; j++)
        if (j != me) MPI_Isend(&one, 1, MPI_INT, j, TAG_LATE, MPI_COMM_WORLD, &sent[j]);
    double grace_s = g_timeout_s / 10 < 1 ? 1 : g_timeout_s / 10 > 30 ? 30 : g_timeout_s / 10;
    double end = now_s() + grace_s;
    int heard = 1, done = 0;
    while (heard < N && now_s() < end) {
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_LATE, MPI_COMM_WORLD, &flag, &st);
        if (flag) {
            MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, TAG_LATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (!here[st.MPI_SOURCE]) here[st.MPI_SOURCE] = 1, heard++;
            continue;
        }
        if (!done) MPI_Test(r, &done, MPI_STATUS_IGNORE); /* keeps the transfer moving for the others */
        sleep_ns(1000000);
    }
    int lowest = 0;
    while (!here[lowest]) lowest++;
    if (lowest == me) {
        char msg[600], list[400] = "";
        size_t k = 0;
        int missing = 0;
        for (int j = 0; j < N && k + 16 < sizeof list; j++)
            if (!here[j]) k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", missing++ ? ", " : "", j);
        if (missing)
            snprintf(msg, sizeof msg, "%s %s did not reach %s within ddp_timeout %g s; stopping the job",
                     missing > 1 ? "ranks" : "rank", list, what, g_timeout_s);
        else /* everyone answered, yet the collective did not complete */
            snprintf(msg, sizeof msg, "%s did not complete within ddp_timeout %g s on any rank; stopping the job",
                     what, g_timeout_s);
        if (g_report) g_report(msg);
    } else {
        sleep_ns(2000000000L); /* the reporting rank ends the job; this one only if it does not */
    }
    dist_abort(1);
}

void dist_wait(MPI_Request *r, const char *what) {
    double start = now_s(), deadline = start + g_timeout_s;
    long pause_ns = 20000;
    for (;;) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        double t = now_s();
        if (t - start < 0.005) continue; /* spin, as a blocking collective would */
        if (t > deadline || late_pending()) give_up(r, what);
        sleep_ns(pause_ns);
        if (pause_ns < 250000) pause_ns *= 2;
    }
}
