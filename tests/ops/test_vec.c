/* tests/ops/test_vec.c — ops/vec.h's exp: vec_exp_neg against exp() in double over
 * every 64th float of [-87, 0] (at most 2 ulp of the float result), 0 below -87
 * and for NaN; vec_exp_sum's values bit-identical to the scalar vec_exp_neg (the
 * AVX2 path is the one this build runs where the CPU has it), and its sum equal to
 * the fixed 8-lane order spelled out here, for lengths that leave every tail;
 * vec_max equal to the scalar max, NaN values passed over; vec_dot in this build's
 * summing order, bit for bit, and vec_axpy fused where its vectors reach. `make
 * test-isa` runs these on the other build's code too (AVX-512, emulated where the CPU
 * lacks it: tests/zmm/emulate.h). */
#include <stdlib.h>

#include "ops/vec.h"
#include "testutil.h"

/* The distance in ulp between a float and the exact value, in units of the float's ulp. */
static double ulps(float got, double want) {
    double ulp = nextafterf((float)want, INFINITY) - (float)want;
    return fabs((double)got - want) / ulp;
}

static void test_accuracy(void) {
    double worst = 0;
    float at = 0;
    long n = 0;
    for (float x = 0.0f; x >= -87.0f; n++) {
        double u = ulps(vec_exp_neg(x), exp((double)x));
        if (u > worst) worst = u, at = x;
        for (int k = 0; k < 64; k++) x = nextafterf(x, -INFINITY); /* every 64th float */
    }
    T_CHECK(worst <= 2.0, "exp: %.2f ulp at %.9g (over %ld points)", worst, at, n);
    T_CHECK(vec_exp_neg(0.0f) == 1.0f, "exp(0) = %.9g", vec_exp_neg(0.0f));
    T_CHECK(vec_exp_neg(-87.5f) == 0.0f && vec_exp_neg(-1e30f) == 0.0f && vec_exp_neg(-INFINITY) == 0.0f,
            "below -87: 0");
    T_CHECK(vec_exp_neg(NAN) == 0.0f, "NaN: 0");
    T_CHECK(vec_exp_neg(-87.0f) > 0.0f, "exp(-87) > 0");
}

static void test_sum(void) {
    int lens[] = {1, 7, 8, 9, 15, 16, 17, 1000, 32003};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        int n = lens[t];
        float *x = malloc(sizeof(float) * n), *e = malloc(sizeof(float) * n);
        for (int i = 0; i < n; i++) x[i] = (float)((i * 7919) % 2000) * 0.05f - 60.0f; /* some past the floor */
        if (n > 1) x[n - 1] = -INFINITY;
        x[n / 2] = 40.0f;
        float shift = 40.0f, scale = 1.0f / 0.7f;
        double s = vec_exp_sum(e, x, shift, scale, n);
        double lane[8] = {0};
        int same = 1;
        for (int i = 0; i < n; i++) {
            float want = vec_exp_neg((x[i] - shift) * scale);
            same &= e[i] == want;
            lane[i % 8] += want;
        }
        double want_s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        T_CHECK(same, "n %d: vector and scalar exp differ", n);
        T_CHECK(s == want_s, "n %d: sum %.17g, want %.17g", n, s, want_s);
        T_CHECK(e[n / 2] == 1.0f && (n == 1 || e[n - 1] == 0.0f), "n %d: the maximum gives 1, -inf gives 0", n);
        free(x), free(e);
    }
}

/* vec_sigmoid against 1 / (1 + exp(-x)) in double, and vec_sigmoid8 against it bit
 * for bit; NaN gives 1 in both, the infinities 0 and 1. */
static void test_sigmoid(void) {
    double worst = 0;
    int same = 1, n = 0;
    for (float x = -100.0f; x <= 100.0f; x += 0.0137f, n++) {
        double want = 1.0 / (1.0 + exp(-(double)x)); /* under -87 e^x is flushed to 0, as expf's overflow did */
        worst = fmax(worst, x > VEC_EXP_MIN ? fabs(vec_sigmoid(x) - want) / want : fabs(vec_sigmoid(x) - want) * 0x1p100);
    }
    T_CHECK(worst < 4 * 0x1p-24, "sigmoid: relative error %.3g over [-87, 100] (absolute x 2^100 below)", worst);
    float specials[8] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.0f, -88.0f, -1e-30f};
    T_CHECK(vec_sigmoid(NAN) == 1.0f && vec_sigmoid(INFINITY) == 1.0f && vec_sigmoid(-INFINITY) == 0.0f &&
                vec_sigmoid(0.0f) == 0.5f,
            "sigmoid of NaN, the infinities, 0");
#ifdef __AVX2__
    float out[8];
    _mm256_storeu_ps(out, vec_sigmoid8(_mm256_loadu_ps(specials)));
    for (int i = 0; i < 8; i++) same &= !memcmp(&out[i], &(float){vec_sigmoid(specials[i])}, 4);
    for (float x = -90.0f; x <= 90.0f; x += 0.0371f * 8) {
        float in[8];
        for (int i = 0; i < 8; i++) in[i] = x + 0.0371f * i;
        _mm256_storeu_ps(out, vec_sigmoid8(_mm256_loadu_ps(in)));
        for (int i = 0; i < 8; i++) same &= out[i] == vec_sigmoid(in[i]);
    }
#endif
    (void)specials;
    T_CHECK(same, "vec_sigmoid8 differs from vec_sigmoid (%d values)", n);
}

/* vec_max: the value of the scalar `x > m ? x : m` from -inf, at lengths around the
 * 16-wide vector steps, with NaN values anywhere (passed over) and every value NaN
 * (-inf, as the scalar loop gives). */
static void test_max(void) {
    int ns[] = {0, 1, 7, 15, 16, 17, 31, 33, 100, 32000};
    uint32_t st = 12345;
    float *x = malloc(sizeof(float) * 32000);
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
        for (int nan_every = 0; nan_every <= 3; nan_every++) {
            int n = ns[t];
            for (int i = 0; i < n; i++) {
                st = st * 1664525u + 1013904223u;
                x[i] = (float)((int32_t)st >> 8) * 0x1p-20f; /* about +-8000 */
                if (nan_every == 3 || (nan_every && i % (nan_every * 5 + 2) == 0)) x[i] = NAN;
            }
            if (n > 40 && nan_every == 1) x[n - 3] = 1e30f; /* the largest in the scalar tail */
            float want = -INFINITY;
            for (int i = 0; i < n; i++) want = x[i] > want ? x[i] : want;
            float got = vec_max(x, n);
            T_CHECK(got == want, "vec_max n=%d nan_every=%d: %g, the scalar loop %g", n, nan_every, got, want);
        }
    free(x);
}

/* vec_dot in the order this build sums, spelled out: with AVX-512, 16 lanes in two
 * accumulators over steps of 32 (fused), a step of 16 into the first, the two added
 * and reduced as gcc's _mm512_reduce_add_ps does (halves, quarters, then (0+2)+(1+3));
 * otherwise 8 lanes (a * b rounded, then added: no contraction under -std=c11) added
 * pairwise. Then the tail, one value at a time. */
static float dot_in_order(const float *a, const float *b, int n) {
    int i = 0;
    float s;
#ifdef __AVX512F__
    float a0[16] = {0}, a1[16] = {0}, h[8], q[4];
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 16; l++) {
            a0[l] = fmaf(a[i + l], b[i + l], a0[l]);
            a1[l] = fmaf(a[i + 16 + l], b[i + 16 + l], a1[l]);
        }
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) a0[l] = fmaf(a[i + l], b[i + l], a0[l]);
    for (int l = 0; l < 8; l++) h[l] = (a0[l + 8] + a1[l + 8]) + (a0[l] + a1[l]);
    for (int l = 0; l < 4; l++) q[l] = h[l + 4] + h[l];
    s = (q[0] + q[2]) + (q[1] + q[3]);
#else
    float acc[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* vec_dot (decoding's attention scores) bit for bit in the order above, and within
 * 1e-6 of the double-precision sum relative to sum |a b|; vec_axpy fused (fmaf) on the
 * elements its vectors cover — with AVX2 or AVX-512, all but the last n mod 8 — and
 * y + a x rounded on the rest: every length from 0 to 100, around the 8/16/32 steps. */
static void test_dot_axpy(void) {
    enum { MAXN = 100 };
    float a[MAXN], b[MAXN], y[MAXN], y0[MAXN];
    uint32_t st = 777;
    for (int i = 0; i < MAXN; i++) {
        st = st * 1664525u + 1013904223u;
        a[i] = (float)((int32_t)st >> 8) * 0x1p-22f;
        st = st * 1664525u + 1013904223u;
        b[i] = (float)((int32_t)st >> 8) * 0x1p-21f;
    }
    int dot_same = 1, dot_close = 1, axpy_same = 1;
    for (int n = 0; n <= MAXN; n++) {
        float got = vec_dot(a, b, n);
        double exact = 0, scale = 0;
        for (int i = 0; i < n; i++) exact += (double)a[i] * b[i], scale += fabs((double)a[i] * b[i]);
        dot_same &= got == dot_in_order(a, b, n);
        dot_close &= fabs(got - exact) <= 1e-6 * scale;
        float alpha = 0.37f + 0.01f * n;
        for (int i = 0; i < n; i++) y[i] = y0[i] = b[(i * 7) % MAXN];
        vec_axpy(y, alpha, a, n);
#ifdef __AVX2__
        int fused = n - n % 8;
#else
        int fused = 0;
#endif
        for (int i = 0; i < n; i++) {
            float p = alpha * a[i];
            axpy_same &= y[i] == (i < fused ? fmaf(alpha, a[i], y0[i]) : y0[i] + p);
        }
    }
    T_CHECK(dot_same, "vec_dot does not sum in this build's order");
    T_CHECK(dot_close, "vec_dot is not within 1e-6 of the double-precision sum");
    T_CHECK(axpy_same, "vec_axpy differs from fmaf over the vectors' elements and y + a x on the tail");
}

int main(void) {
    test_dot_axpy();
    test_max();
    test_accuracy();
    test_sum();
    test_sigmoid();
    return t_summary("test_vec");
}
