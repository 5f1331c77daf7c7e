/* gpu/kernels/kmath.h — the arithmetic the LM head's kernels (embedding.cu,
 * logprob.cu, sampler.cu) share, in the C both lowerings of device.h compile:
 *
 * - exp_neg_cpu: ops/vec.h's vec_exp_neg step for step (the same fused multiply-adds,
 *   the same rounding to an integer), so the GPU's e^x has the CPU's bits — what lets
 *   the sampler pick the CPU's token and the log-prob chunk's exponentials match;
 * - exp_f64, log_f64: e^x and ln x in double (the build has no libdevice): a Taylor
 *   polynomial after range reduction, within a few ulp of glibc's (not its bits);
 * - block reductions in a fixed order (the same bits for the same inputs and block
 *   size, never dependent on other blocks): max of floats (exact in any order), sums
 *   and maxima of doubles over a tree in shared memory (blockDim a power of two). */
#ifndef GRPO_GPU_KERNELS_KMATH_H
#define GRPO_GPU_KERNELS_KMATH_H

#include "device.h"

DEVICE unsigned f32_bits(float x) {
    unsigned u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
}
DEVICE float f32_from_bits(unsigned u) {
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}
DEVICE u64 f64_bits(double x) {
    u64 u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
}
DEVICE double f64_from_bits(u64 u) {
    double x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}
DEVICE double inf_f64(void) { return f64_from_bits(0x7ff0000000000000ULL); }

/* ops/vec.h's vec_exp_neg: e^x for x <= 0 by Cephes' degree-7 polynomial after
 * x = n ln2 + r, 0 below -87. The same operations in the same order, fused where it
 * fuses (fma_rn), so the same bits as the CPU's scalar and vector forms. */
DEVICE float exp_neg_cpu(float x) {
    if (!(x >= -87.0f)) return 0.0f;
    float n = rint_f32(x * 1.44269504088896341f);
    float r = fma_rn(n, -0.693359375f, x);
    r = fma_rn(n, 2.12194440e-4f, r);
    float y = 1.9875691500e-4f;
    y = fma_rn(y, r, 1.3981999507e-3f);
    y = fma_rn(y, r, 8.3334519073e-3f);
    y = fma_rn(y, r, 4.1665795894e-2f);
    y = fma_rn(y, r, 1.6666665459e-1f);
    y = fma_rn(y, r, 5.0000001201e-1f);
    y = fma_rn(y, r * r, r) + 1.0f;
    return y * f32_from_bits((unsigned)((int)n + 127) << 23);
}

/* ln 2 split so that k * LN2_HI is exact for |k| < 2^11 (its low 21 bits are 0). */
#define KM_LN2_HI 6.93147180369123816490e-01
#define KM_LN2_LO 1.90821492927058770002e-10

/* 2^n as a double, n in [-1022, 1023]. */
DEVICE double pow2_f64(int n) { return f64_from_bits((u64)(n + 1023) << 52); }

/* e^x in double: x = k ln2 + r, |r| <= ln2/2, e^r by its Taylor series to r^13
 * (the remainder below 2^-57), times 2^k. */
DEVICE double exp_f64(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return inf_f64();
    if (x < -745.1332191019412) return 0.0;
    double k = rint_f64(x * 1.4426950408889634);
    double r = (x - k * KM_LN2_HI) - k * KM_LN2_LO;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = 1.0 + (r + r * r * p);
    int ki = (int)k; /* in [-1075, 1024]: 2^k in two factors at either end */
    if (ki < -1021) return (p * pow2_f64(ki + 54)) * pow2_f64(-54);
    if (ki > 1023) return (p * pow2_f64(ki - 1)) * 2.0;
    return p * pow2_f64(ki);
}

/* ln x in double: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f);
 * ln m = 2 atanh s = f - (f^2/2 - s (f^2/2 + R)), R = sum 2 s^2j / (2j + 1) to j = 12
 * (|s| <= 0.1716: the remainder below 2^-57 of ln m). */
DEVICE double log_f64(double x) {
    if (x != x || x < 0) return f64_from_bits(0x7ff8000000000000ULL);
    if (x == 0) return -inf_f64();
    if (x == inf_f64()) return x;
    int k = 0;
    if (x < 2.2250738585072014e-308) x *= 18014398509481984.0, k = -54; /* subnormal: times 2^54 */
    u64 b = f64_bits(x);
    k += (int)(b >> 52) - 1023;
    double m = f64_from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    if (m > 1.4142135623730951) m *= 0.5, k++;
    double f = m - 1.0, hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s;
    double R = 2.0 / 25.0;
    R = R * z + 2.0 / 23.0;
    R = R * z + 2.0 / 21.0;
    R = R * z + 2.0 / 19.0;
    R = R * z + 2.0 / 17.0;
    R = R * z + 2.0 / 15.0;
    R = R * z + 2.0 / 13.0;
    R = R * z + 2.0 / 11.0;
    R = R * z + 2.0 / 9.0;
    R = R * z + 2.0 / 7.0;
    R = R * z + 2.0 / 5.0;
    R = R * z + 2.0 / 3.0;
    R *= z;
    double dk = (double)k;
    return dk * KM_LN2_HI - ((hfsq - (s * (hfsq + R) + dk * KM_LN2_LO)) - f);
}

/* The sum (max_not_sum 0) or maximum (1) of v over the block, in every thread: a
 * tree in shared memory, pairs (t, t + s) for s = blockDim/2 .. 1 (blockDim a power
 * of two; scratch: blockDim doubles). A fixed order: the same bits for the same
 * inputs and block size. */
DEVICE double block_reduce_f64(double v, double *scratch, int max_not_sum) {
    int t = thread_x();
    sync_block(); /* scratch may still be read by an earlier reduction */
    scratch[t] = v;
    sync_block();
    for (int s = block_dim_x() >> 1; s > 0; s >>= 1) {
        if (t < s) {
            double a = scratch[t], b = scratch[t + s];
            scratch[t] = max_not_sum ? (b > a ? b : a) : a + b;
        }
        sync_block();
    }
    return scratch[0];
}

/* The sums over the block of 16 values a thread (vals[16], each thread's own),
 * into vals in every thread: 16 trees as block_reduce_f64's, side by side (buf:
 * 16 blockDim doubles of shared memory). */
DEVICE void block_sum16_f64(double *vals, double *buf) {
    int t = thread_x(), n = block_dim_x();
    sync_block(); /* buf may still be read by an earlier reduction */
    for (int j = 0; j < 16; j++) buf[j * n + t] = vals[j];
    sync_block();
    for (int s = n >> 1; s > 0; s >>= 1) {
        if (t < s)
            for (int j = 0; j < 16; j++) buf[j * n + t] += buf[j * n + t + s];
        sync_block();
    }
    for (int j = 0; j < 16; j++) vals[j] = buf[j * n];
}

#endif
