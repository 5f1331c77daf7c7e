/* ops/rope.c — rotary position embedding in Hugging Face's rotate_half layout
 * (pairs i and i + D/2). Angles in double; the backward is the inverse rotation. */
#include <math.h>

#include "ops/ops.h"

/* Pair indices are taken in blocks of ROPE_BLOCK so the angles fit a fixed stack
 * array whatever D is, and each block's cos/sin serve every head of the row. */
#define ROPE_BLOCK 256

static void rope_apply(float *x, const int32_t *pos, const float *inv_freq, int N, int nh,
                       int D, int ld, double sign) {
    int half = D / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float cs[ROPE_BLOCK], sn[ROPE_BLOCK];
        for (int i0 = 0; i0 < half; i0 += ROPE_BLOCK) {
            int nb = half - i0 < ROPE_BLOCK ? half - i0 : ROPE_BLOCK;
            for (int i = 0; i < nb; i++) {
                double a = (double)pos[n] * (double)inv_freq[i0 + i];
                cs[i] = (float)cos(a);
                sn[i] = (float)(sign * sin(a));
            }
            for (int h = 0; h < nh; h++) {
                float *v = x + (size_t)n * ld + (size_t)h * D + i0;
                for (int i = 0; i < nb; i++) {
                    float a = v[i], b = v[i + half];
                    v[i] = a * cs[i] - b * sn[i];
                    v[i + half] = b * cs[i] + a * sn[i];
                }
            }
        }
    }
}

void rope_forward(float *x, const int32_t *pos, const float *inv_freq, int N, int nh, int D,
                  int ld) {
    rope_apply(x, pos, inv_freq, N, nh, D, ld, 1.0);
}

void rope_backward(float *dx, const int32_t *pos, const float *inv_freq, int N, int nh, int D,
                   int ld) {
    rope_apply(dx, pos, inv_freq, N, nh, D, ld, -1.0);
}
