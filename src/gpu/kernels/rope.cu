/* gpu/kernels/rope.cu — rotary position embedding as ops/rope.c applies it (Hugging
 * Face's rotate_half: pairs i and i + D/2), in place, and its backward (the inverse
 * rotation). A block per row: the row's cos/sin for a run of pair indices computed
 * once into shared memory, then every head of the row rotated with them.
 *
 * The angle pos * inv_freq is formed in double as on the CPU (at position 10^5 an
 * fp32 angle is off by about 0.004 rad); the build has no libdevice, so its sine
 * and cosine are computed here in double — a reduction by pi/2 in three parts
 * (Cody and Waite) and Taylor series on [-pi/4, pi/4], whose first omitted terms
 * are below 1e-19 — then rounded to float as the CPU rounds libm's. */
#include "device.h"

enum { ROPE_PAIRS = 128 }; /* pair indices per run: the block's threads */

/* pi/2 in three parts of 33 bits (the first two products by k exact for |k| < 2^20,
 * positions times frequencies up to about 1.6 million rad). */
#define ROPE_PIO2_1 1.57079632673412561417e+00
#define ROPE_PIO2_2 6.07710050630396597660e-11
#define ROPE_PIO2_3 2.02226624871116645580e-21

/* sin a and cos a in double. */
DEVICE void rope_sincos(double a, double *s, double *c) {
    double y = a * 0.63661977236758134308; /* 2 / pi */
    long long k = (long long)(y >= 0 ? y + 0.5 : y - 0.5);
    double kd = (double)k;
    double r = ((a - kd * ROPE_PIO2_1) - kd * ROPE_PIO2_2) - kd * ROPE_PIO2_3, r2 = r * r;
    /* Horner in r^2: sin r = r (1 - r^2/3! (1 - r^2/(4 5) (1 - ...))), likewise cos */
    double sr = 1.0, cr = 1.0;
    for (int n = 17; n >= 3; n -= 2) sr = 1.0 - r2 / (double)((n - 1) * n) * sr;
    for (int n = 16; n >= 2; n -= 2) cr = 1.0 - r2 / (double)((n - 1) * n) * cr;
    sr *= r;
    switch (k & 3) { /* a = k pi/2 + r */
    case 0: *s = sr, *c = cr; break;
    case 1: *s = cr, *c = -sr; break;
    case 2: *s = -sr, *c = -cr; break;
    default: *s = -cr, *c = sr; break;
    }
}

/* x[n, nh, D] (row stride ld) rotated by angles pos[n] inv_freq[i] (sign -1: back). */
DEVICE void rope_rotate(float *x, const int *pos, const float *inv_freq, int nh, int D, int ld, double sign) {
    SHARED float cs[ROPE_PAIRS], sn[ROPE_PAIRS];
    int half = D / 2, n = block_x();
    float *row = x + (u64)n * ld;
    for (int i0 = 0; i0 < half; i0 += ROPE_PAIRS) {
        int nb = half - i0 < ROPE_PAIRS ? half - i0 : ROPE_PAIRS;
        sync_block(); /* the previous run's cos/sin are read by now */
        if (thread_x() < nb) {
            double s, c;
            rope_sincos((double)pos[n] * (double)inv_freq[i0 + thread_x()], &s, &c);
            cs[thread_x()] = (float)c;
            sn[thread_x()] = (float)(sign * s);
        }
        sync_block();
        for (int j = thread_x(); j < nh * nb; j += block_dim_x()) {
            int h = j / nb, i = j % nb;
            float *v = row + (u64)h * D + i0;
            float a = v[i], b = v[i + half];
            v[i] = a * cs[i] - b * sn[i];
            v[i + half] = b * cs[i] + a * sn[i];
        }
    }
}

/* A block of ROPE_PAIRS threads per row n (grid N). */
KERNEL void rope_forward(float *x, const int *pos, const float *inv_freq, int nh, int D, int ld) {
    rope_rotate(x, pos, inv_freq, nh, D, ld, 1.0);
}

KERNEL void rope_backward(float *dx, const int *pos, const float *inv_freq, int nh, int D, int ld) {
    rope_rotate(dx, pos, inv_freq, nh, D, ld, -1.0);
}
