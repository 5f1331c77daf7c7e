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
 *    ends with it (rows at odd offsets; I = 1, where value 0 is all of a row). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/ops.h"
#include "testutil.h"

int main(void) {
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
            free(W16), free(Wr), free(y16);
            free(x), free(y), free(one);
        }
        free(W), free(bias);
    }
    return t_summary("test_rowwise");
}
