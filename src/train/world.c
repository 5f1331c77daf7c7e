/* train/world.c — the run's processes as a TrainWorld (on dist/dist.h), and the
 * helpers every world shares (world.h). */
#include "train/world.h"

#include <stdlib.h>

#include "dist/dist.h"

static int proc_size(const TrainWorld *w) { return dist_size(); }
static int proc_rank(const TrainWorld *w) { return dist_rank(); }
static void proc_sum_f32(const TrainWorld *w, float *x, size_t n) { dist_sum_f32(x, n); }
static void proc_sum_f64(const TrainWorld *w, double *x, int n) { dist_sum_f64(x, n); }
static void proc_gather_i64(const TrainWorld *w, int64_t *all, const int64_t *mine, int n) {
    dist_gather_i64(all, mine, n);
}
static void proc_share(const TrainWorld *w, void **items, int *len, const int *owner, int n, size_t elem,
                       int with_len) {
    dist_share_items(items, len, owner, n, elem, with_len);
}
static int proc_check(const TrainWorld *w, int rc, GrpoErr *err) { return dist_check(rc, err); }

static const TrainWorld processes = {proc_size, proc_rank, proc_sum_f32, proc_sum_f64, proc_gather_i64, proc_share,
                                     proc_check, NULL};

const TrainWorld *train_world_processes(void) { return &processes; }

int train_world_size(const TrainWorld *w) { return w->size(w); }
int train_world_writes(const TrainWorld *w) { return w->rank(w) == 0; }

static void range_of(int n, int j, int world, int *lo, int *hi) {
    *lo = (int)((long)n * j / world);
    *hi = (int)((long)n * (j + 1) / world);
}

void train_world_range(const TrainWorld *w, int n, int *lo, int *hi) { range_of(n, w->rank(w), w->size(w), lo, hi); }

void train_world_range_of(const TrainWorld *w, int n, int process, int *lo, int *hi) {
    CHECK(process >= 0 && process < w->size(w));
    range_of(n, process, w->size(w), lo, hi);
}

void train_world_share(const TrainWorld *w, void **items, int *len, int n, size_t elem, int with_len) {
    int world = w->size(w);
    if (world == 1) return;
    int *owner = xmalloc(sizeof(int) * (n ? n : 1));
    for (int j = 0; j < world; j++) {
        int lo, hi;
        range_of(n, j, world, &lo, &hi);
        for (int i = lo; i < hi; i++) owner[i] = j;
    }
    w->share_items(w, items, len, owner, n, elem, with_len);
    free(owner);
}

int train_world_check(const TrainWorld *w, int rc, GrpoErr *err) { return w->check(w, rc, err); }

int train_world_once(const TrainWorld *w, int (*fn)(void *ctx, GrpoErr *err), void *ctx, GrpoErr *err) {
    return w->check(w, train_world_writes(w) ? fn(ctx, err) : 0, err);
}
