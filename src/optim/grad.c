/* optim/grad.c — the global gradient L2 norm and clipping
 * (torch.nn.utils.clip_grad_norm_ semantics), deterministic in double.
 *
 * Is: norm and in-place scaling of one flat gradient buffer. Is not: the
 * decision to skip a step on a non-finite norm (the trainer's). */
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>

#include "core/check.h"

#define GRAD_BLOCK 4096

double grad_norm(const float *g, size_t n) {
    long long nb = (long long)((n + GRAD_BLOCK - 1) / GRAD_BLOCK);
    if (nb == 0) return 0.0;
    double *part = xmalloc((size_t)nb * sizeof(double));
#pragma omp parallel for schedule(static)
    for (long long b = 0; b < nb; b++) {
        size_t lo = (size_t)b * GRAD_BLOCK, hi = lo + GRAD_BLOCK < n ? lo + GRAD_BLOCK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)g[i] * (double)g[i];
        part[b] = s;
    }
    double total = 0.0;
    for (long long b = 0; b < nb; b++) total += part[b];   /* fixed order */
    free(part);
    return sqrt(total);
}

double grad_clip_norm(float *g, size_t n, double max_norm) {
    double norm = grad_norm(g, n);
    if (!isfinite(norm) || max_norm <= 0.0) return norm;
    double clip = max_norm / (norm + 1e-6);
    if (clip < 1.0) {
        /* torch multiplies by the coefficient as a tensor of the grads' dtype */
        const float c = (float)clip;
        const long long nn = (long long)n;
#pragma omp parallel for schedule(static)
        for (long long i = 0; i < nn; i++) g[i] *= c;
    }
    return norm;
}
