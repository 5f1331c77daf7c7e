/* ops/gemm.h — the one GEMM interface every kernel calls.
 *
 * Row-major C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C, in fp32
 * (gemm_f32, and gemm_f32_batch for many small ones) or with bf16 operands
 * (gemm_bf16). gemm_f32 runs on OpenBLAS's sgemm or oneDNN's fp32 matmul
 * (gemm_f32_use). Called inside an OpenMP parallel region it is OpenBLAS (OpenMP
 * flavour), single-threaded. */
#ifndef GRPO_OPS_GEMM_H
#define GRPO_OPS_GEMM_H

#include <stddef.h>
#include <stdint.h>

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* A batch of fp32 products over up to three batch dims (n[i] = 1 where unused):
 * product (i0, i1, i2) multiplies A + sum i_d a[d] and B + sum i_d b[d] into C + sum
 * i_d c[d] (strides in elements). A stride of 0 in a or b broadcasts that operand
 * over the dim (grouped-query attention: one key head for several query heads).
 * The batch's products must not write the same C. One call, outside parallel
 * regions: oneDNN's batched matmul, threaded over the batch; where oneDNN has only
 * its reference code for the layout (or gemm_f32_use chose OpenBLAS), the products
 * on the OpenMP threads, each on single-threaded OpenBLAS. */
typedef struct {
    int n[3];
    long a[3], b[3], c[3];
} GemmBatch;
void gemm_f32_batch(const GemmBatch *bt, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* What runs gemm_f32 outside parallel regions. AUTO is oneDNN: 1.85x OpenBLAS's
 * sgemm on a training-shaped product on a 2-core Zen 4 (issue 14), even with it on
 * a 2-core Zen 3 (AVX2) and 2.6x on 8-row products there (bench/bench_gemm.c). */
typedef enum { GEMM_F32_AUTO, GEMM_F32_OPENBLAS, GEMM_F32_ONEDNN } GemmF32Backend;
void gemm_f32_use(GemmF32Backend b);
/* "OpenBLAS sgemm" or "oneDNN <implementation>", as AUTO resolves here. */
const char *gemm_f32_backend_name(void);

/* ---- bf16 operands, fp32 accumulation (ops/gemm_bf16.c) ----
 * One operand: bf16 values h, or fp32 values f that the product reads rounded to
 * bf16 (nearest, ties to even). Exactly one of the two is set; ld in elements. */
typedef struct {
    const float *f;
    const uint16_t *h;
    int ld;
} GemmBf16Operand;

/* C[M,N] = alpha * op(A)·op(B) + beta * C, the operands in bf16, their products
 * summed in fp32, C fp32; beta is 0 or 1. Call it outside parallel regions: it
 * keeps its conversion buffers between calls. On oneDNN's bf16 matmul they grow to
 * the largest operand given in fp32 (activations); where the operands are widened
 * to fp32, to at most 2 Mi values each: a block of an operand at a time. */
void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A, GemmBf16Operand B,
               float beta, float *C, int ldc);

/* C[M,N] = alpha * op(A)·op(B) + beta * C in fp32, with B's values held in bf16 (a
 * frozen model's weights) and A fp32 read as it is: the arithmetic of gemm_f32 on
 * B widened, which happens a block at a time (gemm_bf16's widened path), so B never
 * exists in fp32 whole. beta is 0 or 1; outside parallel regions. */
void gemm_f32_b16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const uint16_t *B, int ldb, float beta, float *C, int ldc);

/* Bytes gemm_bf16's conversion buffers hold now (for memory plans and tests): the
 * operands it is given in fp32, rounded for the length of one call, and the widened
 * path's blocks. None outlives a call as an operand. */
size_t gemm_bf16_buffer_bytes(void);

/* x[rows, cols] (leading dimension ld) rounded to bf16 once, for an operand that
 * several products read (dout in both of a layer's backward products): an operand of
 * bf16 values in dst, the caller's rows x cols values (ld cols); or, where gemm_bf16
 * widens its operands (no bf16 matmul here), x itself, which it rounds a block at a
 * time as it widens it (dst untouched). */
GemmBf16Operand gemm_bf16_round(const float *x, int rows, int cols, int ld, uint16_t *dst);
/* The same into x's own memory, where its fp32 values are not needed again (the LM
 * head's dz, a rows x vocab scratch; a layer's dout, ops/matmul.c): the rows' bf16
 * values packed from x's start, ld cols (an operand laid out as gemm_bf16_round's, so
 * oneDNN's bf16 matmul sums it in the same order). x holds bf16 until rewritten. */
GemmBf16Operand gemm_bf16_round_in_place(float *x, int rows, int cols, int ld);

/* dst[cols, rows] = src[rows, cols]^T, 16-bit values moved as they are (bf16 NaNs and
 * subnormals included), src contiguous, dst's rows ld_dst >= rows apart (the columns
 * past rows untouched): the LM head's dz^T, a plain operand for its weight gradient's
 * product. Outside parallel regions. */
void bf16_transpose(uint16_t *dst, int ld_dst, const uint16_t *src, int rows, int cols);

/* What runs gemm_bf16. AUTO: the bf16 matmul where this CPU has one (oneDNN's, where
 * it is not oneDNN's reference code: AVX512_BF16, AMX), else WIDEN. ONEDNN: that bf16
 * matmul, the operands given in fp32 rounded to bf16 first. WIDEN: the operands
 * widened to fp32 (in blocks of the operands) and multiplied by gemm_f32 — a bf16
 * value and the product of two are exact in fp32, so this is the same arithmetic,
 * only the order of the sums differs. */
typedef enum { GEMM_BF16_AUTO, GEMM_BF16_ONEDNN, GEMM_BF16_WIDEN } GemmBf16Backend;
/* Chooses the backend; 0, or -1 when it cannot run here (ONEDNN without a bf16 matmul). */
int gemm_bf16_use(GemmBf16Backend b);
/* The backend AUTO resolves to, and the bf16 matmul's name when it is one
 * ("SGEMM (no bf16 matmul on this CPU)", "oneDNN brg:avx512_core_amx", ...). */
const char *gemm_bf16_backend_name(void);
/* 1 when this CPU has a bf16 matmul (or a test says so: gemm_bf16_set_matmul). */
int gemm_bf16_native(void);

/* The widened path's product of gemm_bf16, whatever the backend (its bits on every
 * CPU; tests/support/bf16_matmul.c multiplies with it). Outside parallel regions. */
void gemm_bf16_widened(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A,
                       GemmBf16Operand B, float beta, float *C, int ldc);

/* ---- the tests' seam: which bf16 matmul this CPU has ----
 * A product of bf16 operands (contiguous rows, ld in elements), 0 when it computed
 * C, else -1 (gemm_bf16 then takes the widened path for it). */
typedef int (*GemmBf16MatmulFn)(int trans_a, int trans_b, int M, int N, int K, float alpha, const uint16_t *A,
                                int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
typedef struct {
    int present;        /* -1: this CPU's own answer (oneDNN's); 0: no bf16 matmul; 1: fn */
    GemmBf16MatmulFn fn;
    const char *name;   /* gemm_bf16_backend_name's, when present is 1 */
} GemmBf16Matmul;
/* Takes this CPU as one with the bf16 matmul m (or without one, or as it is) and
 * returns the previous choice. Only tests call it (tests/support/bf16_matmul.h: a
 * machine of the other kind, `make test-isa`); outside parallel regions. */
GemmBf16Matmul gemm_bf16_set_matmul(GemmBf16Matmul m);

/* Where a pass's time goes, for benchmarks: seconds in gemm_f32, gemm_f32_batch and
 * gemm_bf16 calls (conversions included) and their GFLOP, since gemm_stats_reset;
 * of these, the batched ones (attention's) also apart, with how many of them ran
 * per product on OpenBLAS (no oneDNN matmul for their layout here). Calls made
 * inside parallel regions apart, their seconds summed over the threads. A product
 * that runs another (gemm_bf16 on gemm_f32) counts once. And the oneDNN primitives
 * made for shapes not in its cache (ops/onednn.c) and the seconds that took, inside
 * the products' seconds: a new shape's cost, which packed micro-batches meet at
 * every new sequence length where each shape has its own primitive (ops/onednn.h's
 * onednn_families says where one primitive serves all sizes of a family). */
typedef struct {
    double seconds, gflop;
    double batch_seconds, batch_gflop;
    long batch_calls, batch_openblas;
    double region_seconds, region_gflop;
    long primitives_made;
    double primitive_seconds;
} GemmStats;
void gemm_stats_reset(void);
GemmStats gemm_stats(void);
/* For the products' own files (ops/gemm*.c): around the body of a product. */
double gemm_stats_enter(void);
void gemm_stats_leave(double t0, int M, int N, int K);
/* For ops/onednn.c: a primitive made, in `seconds`. */
void gemm_stats_primitive(double seconds);

/* Number of threads the kernels may use (OpenMP and OpenBLAS alike). */
void gemm_set_threads(int n);

#endif
