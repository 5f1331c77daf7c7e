/* train/world.c — the run's processes for an algorithm's own data (world.h), on
 * dist/dist.h. */
#include "train/world.h"

#include <stdlib.h>

#include "dist/dist.h"

int train_world_size(void) { return dist_size(); }

static void range_of(int n, int j, int world, int *lo, int *hi) {
    *lo = (int)((long)n * j / world);
    *hi = (int)((long)n * (j + 1) / world);
}

void train_world_range(int n, int *lo, int *hi) { range_of(n, dist_rank(), dist_size(), lo, hi); }

void train_world_share(void **items, int *len, int n, size_t elem, int with_len) {
    int world = dist_size();
    if (world == 1) return;
    int *owner = xmalloc(sizeof(int) * (n ? n : 1));
    for (int j = 0; j < world; j++) {
        int lo, hi;
        range_of(n, j, world, &lo, &hi);
        for (int i = lo; i < hi; i++) owner[i] = j;
    }
    dist_share_items(items, len, owner, n, elem, with_len);
    free(owner);
}

int train_world_check(int rc, GrpoErr *err) { return dist_size() > 1 ? dist_check(rc, err) : rc; }

int train_world_once(int (*fn)(void *ctx, GrpoErr *err), void *ctx, GrpoErr *err) {
    return train_world_check(dist_rank() == 0 ? fn(ctx, err) : 0, err);
}
