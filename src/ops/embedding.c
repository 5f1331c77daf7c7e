/* ops/embedding.c — token embedding lookup and its scatter-add gradient. */
#include <omp.h>
#include <string.h>

#include "ops/ops.h"

void embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, sizeof(float) * C);
}

void embedding_forward_bf16(float *out, const int32_t *ids, const uint16_t *table, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) bf16_to_f32_n(out + (size_t)n * C, table + (size_t)ids[n] * C, (size_t)C);
}

void embedding_forward_split(float *out, const int32_t *ids, const uint16_t *hi, const uint16_t *lo, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        size_t at = (size_t)ids[n] * C;
        f32_join_n(out + (size_t)n * C, hi + at, lo + at, (size_t)C);
    }
}

/* Threads split the hidden dimension, so two tokens with the same id never race
 * and the summation order over n is fixed (deterministic). */
void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N, int C) {
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            float *row = dtable + (size_t)ids[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) row[c] += g[c];
        }
    }
}
