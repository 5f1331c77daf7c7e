/* tests/grpo/fixture.h — reading tests/fixtures/grpo_loss/reference.safetensors
 * (written by tests/grpo/make_loss_reference.py) in the grpo and optim tests. */
#ifndef GRPO_TESTS_GRPO_FIXTURE_H
#define GRPO_TESTS_GRPO_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "io/safetensors.h"

#define GRPO_FIXTURE "tests/fixtures/grpo_loss/reference.safetensors"

/* The tensor as a malloc'd double array (*n elements); aborts when absent. */
static inline double *fx_f64(const StFile *f, const char *name, long *n) {
    const StTensor *t = st_find(f, name);
    GrpoErr err;
    if (!t) {
        fprintf(stderr, "fixture: no tensor %s\n", name);
        exit(2);
    }
    double *out = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(double));
    if (t->dtype == ST_I64) {
        int64_t *tmp = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(int64_t));
        if (st_read_i64(f, t, tmp, &err)) exit(2);
        for (int64_t i = 0; i < t->numel; i++) out[i] = (double)tmp[i];
        free(tmp);
    } else if (st_read_f64(f, t, out, &err)) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        exit(2);
    }
    if (n) *n = (long)t->numel;
    return out;
}

/* Compares doubles with |got - want| <= atol + rtol |want|; reports the worst. */
static inline int close_f64(const char *what, const double *got, const double *want, long n, double atol,
                     double rtol) {
    long worst = -1;
    double excess = 0;
    for (long i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) - (atol + rtol * fabs(want[i]));
        if (isnan(got[i]) != isnan(want[i])) e = INFINITY;
        if (isnan(got[i]) && isnan(want[i])) e = -1;
        if (e > excess) excess = e, worst = i;
    }
    t_checks++;
    if (worst >= 0) {
        t_failures++;
        fprintf(stderr, "FAIL %s: element %ld got %.17g want %.17g (atol %g rtol %g)\n", what, worst,
                got[worst], want[worst], atol, rtol);
        return 0;
    }
    return 1;
}

#endif
