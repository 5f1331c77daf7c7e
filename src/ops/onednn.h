/* ops/onednn.h — oneDNN's matmul, for the GEMMs of ops/gemm.h (internal to ops/). */
#ifndef GRPO_OPS_ONEDNN_H
#define GRPO_OPS_ONEDNN_H

#include <stddef.h>
#include <stdint.h>

/* C[M,N] = alpha * op(A)·op(B) + beta * C: A and B fp32 (bf16 = 0) or bf16 values
 * (bf16 = 1, uint16_t), C fp32, row-major with the given row strides. Outside
 * parallel regions only; the primitive of each shape (or shape family,
 * onednn_families) is made once and cached.
 * Returns 0, or -1 without touching C when oneDNN has only its reference code for
 * this product here (the caller multiplies another way). */
int onednn_gemm(int bf16, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, const void *B,
                 int ldb, float beta, float *C, int ldc);
/* The same in fp32 over a batch of products (gemm.h's gemm_f32_batch): batch index
 * (i0, i1, i2) < nb reads A + sum i·sa, B + sum i·sb and writes C + sum i·sc (strides
 * in elements; a 0 in sa or sb broadcasts that operand over the dim). */
int onednn_gemm_batch(const int nb[3], const long sa[3], const long sb[3], const long sc[3], int ta, int tb, int M,
                      int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc);
/* Whether oneDNN has an fp32 (bf16 = 0) or bf16 matmul on this CPU; its
 * implementation's name ("brg:avx512_core_bf16", "ref:any", ...) in impl[n]. */
int onednn_impl(int bf16, char *impl, size_t n);

/* Whether fp32 products run here on one primitive per shape family (the key less
 * M, N, K and the strides): where oneDNN's fp32 matmul is its gemm-based one (no
 * avx512_core), whose runtime-shape primitive computes as a one-shape one would.
 * Then a product of new sizes or strides makes no primitive; elsewhere each shape
 * has its own (onednn.c). onednn_families_off(1): a primitive per shape everywhere,
 * the tests' seam for comparing the two; outside parallel regions. */
int onednn_families(void);
void onednn_families_off(int off);

/* Bytes of oneDNN scratchpad held for the matmuls run so far: one buffer, grown to
 * the largest primitive's need and kept for the rest of the run. */
size_t onednn_scratch_bytes(void);

#endif
