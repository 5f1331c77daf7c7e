/* optim/grad.c — the global gradient L2 norm and clipping
 * (torch.nn.utils.clip_grad_norm_ semantics), deterministic in double.
 *
 * Is: norm and in-place scaling of one flat gradient buffer. Is not: the
 * decision to skip a step on a non-finite norm (the trainer's). */
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>

#include "core/check.h"

#define GRAD_BLOCK GRAD_NORM_BLOCK
#define GRAD_PARTS 1024 /* block sums held at once, on the stack: no allocation per step */

/* Block b's sum of squares is part of the total in block order, whatever the
 * thread count; the blocks are summed GRAD_PARTS at a time into the total, which
 * adds them in the same order as one array of every block's would. */
double grad_norm(const float *g, size_t n) {
    long long nb = (long long)((n + GRAD_BLOCK - 1) / GRAD_BLOCK);
    double part[GRAD_PARTS], total = 0.0;
    for (long long b0 = 0; b0 < nb; b0 += GRAD_PARTS) {
        int k = nb - b0 < GRAD_PARTS ? (int)(nb - b0) : GRAD_PARTS;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < k; i++) {
            size_t lo = (size_t)(b0 + i) * GRAD_BLOCK, hi = lo + GRAD_BLOCK < n ? lo + GRAD_BLOCK : n;
            double s = 0.0;
            for (size_t j = lo; j < hi; j++) s += (double)g[j] * (double)g[j];
            part[i] = s;
        }
        for (int i = 0; i < k; i++) total += part[i]; /* fixed order */
    }
    return sqrt(total);
}

double grad_norm_parts(const double *part, size_t nb) {
    double total = 0.0;
    for (size_t i = 0; i < nb; i++) total += part[i]; /* grad_norm's order */
    return sqrt(total);
}

float grad_clip_factor(double norm, double max_norm) {
    if (!isfinite(norm) || max_norm <= 0.0) return 1.0f;
    double clip = max_norm / (norm + 1e-6);
    /* torch multiplies by the coefficient as a tensor of the grads' dtype */
    return clip < 1.0 ? (float)clip : 1.0f;
}

double grad_clip_norm(float *g, size_t n, double max_norm) {
    double norm = grad_norm(g, n);
    const float c = grad_clip_factor(norm, max_norm);
    if (c != 1.0f) {
        const long long nn = (long long)n;
#pragma omp parallel for schedule(static)
        for (long long i = 0; i < nn; i++) g[i] *= c;
    }
    return norm;
}
