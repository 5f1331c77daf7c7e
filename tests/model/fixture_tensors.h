/* tests/model/fixture_tensors.h — whole tensors of a reference fixture
 * (safetensors) read as float64 or int64; a missing or unreadable tensor ends the
 * test with its name. */
#ifndef GRPO_TESTS_MODEL_FIXTURE_TENSORS_H
#define GRPO_TESTS_MODEL_FIXTURE_TENSORS_H

#include <stdio.h>
#include <stdlib.h>

#include "io/safetensors.h"

static double *read_f64(StFile *f, const char *name, long *n) {
    const StTensor *t = st_find(f, name);
    GrpoErr err;
    double *out = t ? malloc(sizeof(double) * (t->numel ? t->numel : 1)) : NULL;
    if (!t || st_read_f64(f, t, out, &err)) {
        fprintf(stderr, "fixture: cannot read tensor %s\n", name);
        exit(1);
    }
    *n = (long)t->numel;
    return out;
}

static int64_t *read_i64(StFile *f, const char *name, long *n) {
    const StTensor *t = st_find(f, name);
    GrpoErr err;
    int64_t *out = t ? malloc(sizeof(int64_t) * (t->numel ? t->numel : 1)) : NULL;
    if (!t || st_read_i64(f, t, out, &err)) {
        fprintf(stderr, "fixture: cannot read tensor %s\n", name);
        exit(1);
    }
    *n = (long)t->numel;
    return out;
}

static inline double max_abs(const double *x, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

#endif
