/* dev/skinny_gemm.c — experiment: time of the decode step's GEMMs (n rows x Qwen2-0.5B
 * weight shapes) through gemm_f32, to see how much of a decode step they are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/timer.h"
#include "ops/ops.h"

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    int shapes[5][2] = {{1152, 896}, {896, 896}, {9728, 896}, {896, 4864}, {151936, 896}};
    int reps[5] = {24, 24, 24, 24, 1};
    double total = 0;
    for (int s = 0; s < 5; s++) {
        int O = shapes[s][0], I = shapes[s][1];
        float *W = xaligned(sizeof(float) * (size_t)O * I), *x = xaligned(sizeof(float) * n * I), *y = xaligned(sizeof(float) * (size_t)n * O);
        for (size_t i = 0; i < (size_t)O * I; i++) W[i] = (float)(i % 13) * 0.01f;
        for (int i = 0; i < n * I; i++) x[i] = 0.5f;
        /* 24 distinct weight matrices would not fit cache; emulate by one big one when reps=24 */
        matmul_forward_rowwise(y, x, W, NULL, n, I, O);
        double t0 = time_now_s();
        int k = 0;
        while (time_now_s() - t0 < 0.5) matmul_forward_rowwise(y, x, W, NULL, n, I, O), k++;
        double per = (time_now_s() - t0) / k;
        printf("O=%6d I=%5d n=%d: %.3f ms (%.1f GB/s weights)\n", O, I, n, per * 1e3, 4.0 * O * I / per / 1e9);
        total += per * reps[s];
        free(W), free(x), free(y);
    }
    printf("sum over a decode step: %.1f ms\n", total * 1e3);
    return 0;
}
