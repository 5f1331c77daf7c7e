/* tests/ops/test_rowwise.c — matmul_forward_rowwise, the decoding matmul:
 *  - batch invariance: row r of a batch of N rows is bit-identical to the same row
 *    computed alone, for N across every block width (1..8 ymm, 16/32/48/64 zmm; with AVX2
 *    8/16/24 and 2-4 panels of 16, the last one part full; and
 *    more than one 64-row block) and weight-row counts that leave remainders;
 *  - accuracy against a double-precision product (1e-5 relative to the row's scale);
 *  - the same bits as the scalar chain s = fmaf(w[k], x[k], s), k = 0..I-1, then + bias,
 *    which every build (AVX-512, AVX2, scalar) computes: machines agree;
 *  - bf16 weights (matmul_forward_rowwise_bf16): the same bits as the fp32 kernel on
 *    the weights widened to fp32, each value read from the unaligned 32-bit word that
 *    ends with it (rows at odd offsets; I = 1, where value 0 is all of a row);
 *  - bf16 products (matmul_forward_rowwise_bf16_products, mixed precision's decode):
 *    batch-invariant, within 1e-5 of the double-precision product of the rounded
 *    inputs, and the bits of the chain it states: with AVX512_BF16, vdpbf16ps's
 *    definition written out here (pairs, odd value first, denormals flushed; odd I
 *    pairs the last value with zeros), in two chains, over the even pairs and over
 *    the odd, then their sum; elsewhere the fmaf chain on the rounded inputs. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/ops.h"
#include "testutil.h"

/* a denormal to zero of its sign (vdpbf16ps flushes its inputs and results) */
static float ftz(float v) {
    return fabsf(v) < FLT_MIN ? copysignf(0.0f, v) : v;
}

/* one output of matmul_forward_rowwise_bf16_products, as the build defines it */
static float products_chain(const uint16_t *w, const float *x, int I, int dot) {
    float acc = 0;
    if (!dot) {
        for (int k = 0; k < I; k++) acc = fmaf(bf16_to_f32(w[k]), bf16_round(x[k]), acc);
        return acc;
    }
    float chain[2] = {0, 0}; /* over the even and the odd words */
    for (int k = 0; k < I; k += 2) {
        float x1 = k + 1 < I ? bf16_round(x[k + 1]) : 0.0f, w1 = k + 1 < I ? bf16_to_f32(w[k + 1]) : 0.0f;
        float *a = &chain[(k / 2) % 2];
        *a = ftz(fmaf(ftz(x1), ftz(w1), *a));
        *a = ftz(fmaf(ftz(bf16_round(x[k])), ftz(bf16_to_f32(w[k])), *a));
    }
    acc = chain[0] + chain[1];
    return acc;
}

int main(void) {
    const int dot = matmul_rowwise_bf16_dot();
    int sizes[][2] = {{1, 5}, {2, 3}, {37, 29}, {64, 131}, {96, 13}, {600, 7}}; /* I = 1: bf16 value 0 alone; odd I: rows at odd offsets */
    int Ns[] = {1, 2, 5, 8, 9, 16, 17, 24, 25, 31, 32, 33, 48, 49, 64, 65, 130};
    Rng r;
    rng_init(&r, 7, 1);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int I = sizes[si][0], O = sizes[si][1];
        float *W = malloc(sizeof(float) * O * I), *bias = malloc(sizeof(float) * O);
        for (int i = 0; i < O * I; i++) W[i] = rng_normal(&r);
        for (int o = 0; o < O; o++) bias[o] = rng_normal(&r);
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
            int N = Ns[ni];
            float *x = malloc(sizeof(float) * N * I), *y = malloc(sizeof(float) * N * O), *one = malloc(sizeof(float) * O);
            for (int i = 0; i < N * I; i++) x[i] = rng_normal(&r);
            matmul_forward_rowwise(y, x, W, bias, N, I, O);
            int invariant = 1, accurate = 1, chain = 1;
            for (int n = 0; n < N; n++) {
                matmul_forward_rowwise(one, x + (size_t)n * I, W, bias, 1, I, O);
                invariant &= memcmp(one, y + (size_t)n * O, sizeof(float) * O) == 0;
                for (int o = 0; o < O; o++) {
                    double s = bias[o], scale = fabs(bias[o]);
                    for (int k = 0; k < I; k++) {
                        s += (double)W[(size_t)o * I + k] * x[(size_t)n * I + k];
                        scale += fabs((double)W[(size_t)o * I + k] * x[(size_t)n * I + k]);
                    }
                    accurate &= fabs(y[(size_t)n * O + o] - s) <= 1e-5 * scale;
                    float c = 0;
                    for (int k = 0; k < I; k++) c = fmaf(W[(size_t)o * I + k], x[(size_t)n * I + k], c);
                    chain &= y[(size_t)n * O + o] == c + bias[o];
                }
            }
            T_CHECK(invariant, "I=%d O=%d N=%d: a row's result depends on the batch", I, O, N);
            T_CHECK(accurate, "I=%d O=%d N=%d: differs from the double-precision product", I, O, N);
            T_CHECK(chain, "I=%d O=%d N=%d: not the bits of the sequential fmaf chain", I, O, N);
            /* without a bias (most products): the chain alone, transposed out of the tile */
            matmul_forward_rowwise(y, x, W, NULL, N, I, O);
            int plain = 1;
            for (int n = 0; n < N; n++)
                for (int o = 0; o < O; o++) {
                    float c = 0;
                    for (int k = 0; k < I; k++) c = fmaf(W[(size_t)o * I + k], x[(size_t)n * I + k], c);
                    plain &= y[(size_t)n * O + o] == c;
                }
            T_CHECK(plain, "I=%d O=%d N=%d: without a bias, not the bits of the sequential fmaf chain", I, O, N);
            uint16_t *W16 = malloc(sizeof(uint16_t) * O * I);
            float *Wr = malloc(sizeof(float) * O * I), *y16 = malloc(sizeof(float) * N * O);
            for (int i = 0; i < O * I; i++) {
                uint32_t u;
                memcpy(&u, &W[i], 4);
                W16[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); /* round to nearest even */
                Wr[i] = bf16_to_f32(W16[i]);
            }
            matmul_forward_rowwise_bf16(y16, x, W16, bias, N, I, O);
            matmul_forward_rowwise(y, x, Wr, bias, N, I, O);
            T_CHECK(!memcmp(y16, y, sizeof(float) * N * O), "I=%d O=%d N=%d: bf16 weights differ from their fp32 widening",
                    I, O, N);
            matmul_forward_rowwise_bf16_products(y16, x, W16, bias, N, I, O);
            invariant = accurate = chain = 1;
            for (int n = 0; n < N; n++) {
                const float *xn = x + (size_t)n * I;
                matmul_forward_rowwise_bf16_products(one, xn, W16, bias, 1, I, O);
                invariant &= memcmp(one, y16 + (size_t)n * O, sizeof(float) * O) == 0;
                for (int o = 0; o < O; o++) {
                    double s = bias[o], scale = fabs(bias[o]);
                    for (int k = 0; k < I; k++) {
                        double p = (double)Wr[(size_t)o * I + k] * bf16_round(xn[k]);
                        s += p, scale += fabs(p);
                    }
                    accurate &= fabs(y16[(size_t)n * O + o] - s) <= 1e-5 * scale;
                    chain &= y16[(size_t)n * O + o] == products_chain(W16 + (size_t)o * I, xn, I, dot) + bias[o];
                }
            }
            T_CHECK(invariant, "I=%d O=%d N=%d: bf16 products: a row's result depends on the batch", I, O, N);
            T_CHECK(accurate, "I=%d O=%d N=%d: bf16 products differ from the double-precision product", I, O, N);
            T_CHECK(chain, "I=%d O=%d N=%d: bf16 products: not the bits of the %s chain", I, O, N,
                    dot ? "vdpbf16ps" : "fmaf");
            free(W16), free(Wr), free(y16);
            free(x), free(y), free(one);
        }
        free(W), free(bias);
    }
    return t_summary("test_rowwise");
}
