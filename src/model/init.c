/* model/init.c — random initialisation (see init.h). Each block of 4096 elements of
 * each tensor draws from its own Philox stream, so the result does not depend on
 * how the loop is split across threads. */
#include "model/init.h"

#include <string.h>

#include "core/rng.h"

#define INIT_BLOCK 4096

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

void model_init_random(Model *m, uint64_t seed, float std) {
    for (int i = 0; i < m->table.n; i++) {
        const ParamEntry *e = &m->table.entries[i];
        float *p = m->params + e->offset;
        if (ends_with(e->name, "norm.weight") || ends_with(e->name, "layernorm.weight")) {
            for (size_t k = 0; k < e->numel; k++) p[k] = 1.0f;
        } else if (ends_with(e->name, ".bias")) {
            memset(p, 0, sizeof(float) * e->numel);
        } else {
            long nblocks = (long)((e->numel + INIT_BLOCK - 1) / INIT_BLOCK);
#pragma omp parallel for schedule(static)
            for (long b = 0; b < nblocks; b++) {
                Rng r;
                rng_init(&r, seed, rng_mix(rng_mix(0x696e6974ULL /* "init" */, (uint64_t)i), (uint64_t)b));
                size_t end = (size_t)(b + 1) * INIT_BLOCK;
                if (end > e->numel) end = e->numel;
                for (size_t k = (size_t)b * INIT_BLOCK; k < end; k++) p[k] = std * rng_normal(&r);
            }
        }
    }
}
