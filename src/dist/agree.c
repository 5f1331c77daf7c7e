/* dist/agree.c — the ranks compare what they were asked to do (dist_agree in
 * dist.h): one fixed-size gather of a digest over every item, and only when
 * those differ a second one of the items themselves, so the first difference
 * can be named. Fixed sizes: ranks that disagree on anything, even on how many
 * items there are, still meet in the same collectives (no MPI_ERR_TRUNCATE).
 *
 * Is not: what the items are (cli/ranks.c builds them from a command's options
 * and inputs), nor a check that lasts (it runs once, at start-up). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/wait.h"
#include "io/digest.h"

#define WHAT "the start-up check that every rank has the same options and inputs"

/* One item as it travels: fixed size, NUL-terminated texts. */
typedef struct {
    uint64_t digest[2];
    char name[sizeof ((DistItem *)0)->name];
    char shown[sizeof ((DistItem *)0)->shown];
} Wire;

/* A digest of 0 is no opinion (an input this rank could not read: its loading
 * says so, naming the rank). */
static int no_opinion(const Wire *a) { return !a->digest[0] && !a->digest[1]; }

static int same_item(const Wire *a, const Wire *b) {
    if (strcmp(a->name, b->name)) return 0;
    return no_opinion(a) || no_opinion(b) || (a->digest[0] == b->digest[0] && a->digest[1] == b->digest[1]);
}

static void to_wire(Wire *w, const DistItem *it) {
    memset(w, 0, sizeof *w);
    memcpy(w->digest, it->digest, sizeof w->digest);
    snprintf(w->name, sizeof w->name, "%s", it->name);
    snprintf(w->shown, sizeof w->shown, "%s", it->shown);
}

/* The message for item a (rank 0's) against b (rank j's). */
static int disagree(const Wire *a, const Wire *b, int j, GrpoErr *err) {
    if (strcmp(a->name, b->name)) /* another command, or another table of options */
        return err_set(err, "ranks disagree: rank 0 has %s where rank %d has %s", a->name, j, b->name);
    if (a->shown[0] || b->shown[0])
        return err_set(err, "ranks disagree: %s is %s on rank 0 and %s on rank %d", a->name, a->shown, b->shown, j);
    return err_set(err, "ranks disagree: %s differs between rank 0 and rank %d", a->name, j);
}

int dist_agree(int rc, const DistItem *items, int n, int *rc_out, GrpoErr *err) {
    *rc_out = rc;
    int N = dist_size();
    if (N == 1) return rc ? 1 : 0;
    Wire *mine = xcalloc((size_t)(n ? n : 1), sizeof(Wire));
    Digest d;
    digest_init(&d);
    for (int i = 0; i < n; i++) {
        to_wire(&mine[i], &items[i]);
        digest_add(&d, mine[i].digest, sizeof mine[i].digest);
        digest_add_str(&d, mine[i].name);
    }
    int64_t head[4] = {(int64_t)d.h[0], (int64_t)d.h[1], n, rc}, *heads = xmalloc(sizeof head * (size_t)N);
    MPI_Request r;
    MPI_Iallgather(head, 4, MPI_INT64_T, heads, 4, MPI_INT64_T, MPI_COMM_WORLD, &r);
    dist_wait(&r, WHAT);
    int alike = 1, refused = 0, n_min = n;
    for (int j = 0; j < N; j++) {
        const int64_t *h = heads + 4 * j;
        alike &= h[0] == heads[0] && h[1] == heads[1] && h[2] == heads[2];
        if (h[3]) refused = 1;
        if (h[3] > *rc_out) *rc_out = (int)h[3];
        if (h[2] < n_min) n_min = (int)h[2];
    }
    int out = 0;
    if (refused) {
        out = 1;
    } else if (!alike) { /* which item, which ranks: the first n_min items of every rank */
        Wire *all = xmalloc(sizeof(Wire) * (size_t)N * (size_t)(n_min ? n_min : 1));
        MPI_Iallgather(mine, (int)(sizeof(Wire) * (size_t)n_min), MPI_BYTE, all, (int)(sizeof(Wire) * (size_t)n_min),
                       MPI_BYTE, MPI_COMM_WORLD, &r);
        dist_wait(&r, WHAT);
        int found = 0;
        for (int i = 0; i < n_min && !found; i++)
            for (int j = 1; j < N && !found; j++) {
                const Wire *a = &all[i], *b = &all[(size_t)j * n_min + i];
                if (!same_item(a, b)) found = 1, disagree(a, b, j, err);
            }
        for (int j = 1; j < N && !found; j++)
            if (heads[4 * j + 2] != heads[2]) {
                found = 1;
                err_set(err, "ranks disagree: rank 0 compares %d options and inputs, rank %d %d (another version "
                        "of grpo?)", (int)heads[2], j, (int)heads[4 * j + 2]);
            }
        out = found ? -1 : 0; /* alike but for inputs some rank could not read */
        free(all);
    }
    free(mine), free(heads);
    return out;
}
