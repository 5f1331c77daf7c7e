/* ops/ops.h — the fp32 kernels of the transformer, forward and backward side by side.
 *
 * Dimension legend (used in every shape comment):
 *   N    tokens in the batch (B * T, padding included)
 *   B    sequences, T  positions per sequence (padded length)
 *   C    hidden size            F  intermediate (MLP) size
 *   H    query heads            Hkv key/value heads (H % Hkv == 0, group G = H / Hkv)
 *   D    head dim               V  vocabulary size
 *   I,O  input / output features of a linear layer
 *
 * Conventions (../shared/STYLE.md):
 *   - argument order: outputs, inputs, weights, sizes; backward: input-gradients,
 *     output-gradient, saved tensors, weights, sizes.
 *   - backward ACCUMULATES (+=) into every gradient it is given, weights and inputs
 *     alike, unless the comment says "written". Zeroing is the caller's job. This is
 *     what makes micro-batch accumulation exact.
 *   - a NULL gradient pointer means "not needed".
 *   - row strides (ld*) are in floats; tensors inside a fused buffer (q, k, v in one
 *     [N, (H + 2 Hkv) D] row) are addressed by base pointer + stride.
 *   - ops/ knows nothing of models: no config structs here.
 */
#ifndef GRPO_OPS_OPS_H
#define GRPO_OPS_OPS_H

#include <stddef.h>
#include <stdint.h>

/* ---- linear layers (ops/matmul.c, through ops/gemm.h) ---- */

/* out[N,O] = in[N,I] · W[O,I]^T (+ bias[O]) */
void matmul_forward(float *out, const float *in, const float *W, const float *bias,
                    int N, int I, int O);
/* The same product for few rows (decoding), batch-invariant: row n of out depends
 * only on row n of in, bit for bit, whatever N is (ops/matmul_rowwise.c). Call it
 * outside parallel regions; it keeps its packed inputs (up to 64 x I floats) per
 * calling thread between calls. */
void matmul_forward_rowwise(float *out, const float *in, const float *W, const float *bias,
                            int N, int I, int O);
/* The same with W held in bf16 (each weight widened exactly to fp32): the same bits
 * as matmul_forward_rowwise on the widened W; half the bytes streamed. */
void matmul_forward_rowwise_bf16(float *out, const float *in, const uint16_t *W, const float *bias, int N, int I,
                                 int O);
/* The same under mixed precision, W the bf16 copy: the products in bf16, in rounded
 * to bf16 (nearest even) too, summed in fp32, as gemm_bf16's. Batch-invariant too.
 * Where the build has AVX512_BF16 (matmul_rowwise_bf16_dot() is 1), each output
 * element is vdpbf16ps's chain over pairs of values (acc += x[2i+1] w[2i+1], then
 * + x[2i] w[2i], each sum rounded, denormals flushed; ops/matmul_rowwise.c); elsewhere
 * matmul_forward_rowwise_bf16's chain on the rounded inputs. */
void matmul_forward_rowwise_bf16_products(float *out, const float *in, const uint16_t *W, const float *bias, int N,
                                          int I, int O);
int matmul_rowwise_bf16_dot(void);
/* bf16 -> fp32 is exact: the 16 bits are the float's upper half. */
static inline float bf16_to_f32(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)h << 16};
    return v.f;
}
/* fp32 -> bf16, rounded to nearest, ties to even (adding 0x7fff plus the lowest
 * kept bit; a carry out of the mantissa bumps the exponent, up to Inf, which is
 * right). A NaN stays a NaN: its upper payload bits, or the quiet bit when they are
 * 0. Written without branches, so that the loops below vectorise. */
static inline uint16_t f32_to_bf16(float f) {
    union {
        float f;
        uint32_t u;
    } v = {f};
    uint32_t u = v.u, h = u >> 16;
    uint32_t rounded = (u + 0x7fffu + (h & 1)) >> 16, nan = (h & 0x7f) ? h : (h | 0x40);
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}
/* x rounded to the nearest bf16 value, kept in fp32. */
static inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }
/* The same over n values (a pass over memory: one SIMD loop each). */
static inline void f32_to_bf16_n(uint16_t *restrict dst, const float *restrict src, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}
static inline void bf16_round_n(float *dst, const float *src, size_t n) { /* dst may be src */
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = bf16_round(src[i]);
}
static inline void bf16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

/* An fp32 value held as two 16-bit halves (mixed precision's master weights,
 * model/transformer.h): hi is x rounded to the nearest bf16 value, ties away from
 * zero, and so serves as x's bf16 copy; lo is the rest, (bits of x) - (hi << 16)
 * as a signed 16-bit integer, and f32_join gives x back exactly. Ties go away from
 * zero, not to even as f32_to_bf16 rounds: to even, an even hi would stand for
 * 65537 values and an odd one for 65535, which 16 bits cannot tell apart. A NaN's
 * hi is a NaN (quiet); f32_join gives a NaN back, its payload perhaps changed. */
static inline void f32_split(float x, uint16_t *hi, uint16_t *lo) {
    union {
        float f;
        uint32_t u;
    } v = {x};
    uint32_t u = v.u, h = (u + 0x8000u) >> 16, nan = (u >> 16) | 0x40u;
    h = (u & 0x7fffffffu) > 0x7f800000u ? nan : h;
    *hi = (uint16_t)h;
    *lo = (uint16_t)(u - (h << 16));
}
static inline float f32_join(uint16_t hi, uint16_t lo) {
    union {
        uint32_t u;
        float f;
    } v = {((uint32_t)hi << 16) + (uint32_t)(int32_t)(int16_t)lo};
    return v.f;
}
static inline void f32_split_n(uint16_t *restrict hi, uint16_t *restrict lo, const float *restrict x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) f32_split(x[i], hi + i, lo + i);
}
static inline void f32_join_n(float *restrict x, const uint16_t *restrict hi, const uint16_t *restrict lo, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = f32_join(hi[i], lo[i]);
}

/* Mixed precision (TRL's bf16: true): the same linear layers with bf16 operands.
 * in and dout are rounded to bf16 as the products read them, W is held in bf16,
 * the products accumulate in fp32 and every output is fp32 (ops/gemm.h:
 * gemm_bf16). Same contracts as matmul_forward / matmul_backward; dout16 is the
 * caller's memory for dout's N x O bf16 values, which both products read (rounded
 * once: gemm_bf16_round), where there are two. */
void matmul_forward_bf16(float *out, const float *in, const uint16_t *W, const float *bias, int N, int I, int O);
void matmul_backward_bf16(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16, const float *in,
                          const uint16_t *W, int N, int I, int O, int write_dw);
/* The same two with the input held in bf16 already (a saved activation, model/
 * transformer.h: acts_create's bf16): the values they would round in to. */
void matmul_forward_bf16_in16(float *out, const uint16_t *in, const uint16_t *W, const float *bias, int N, int I,
                              int O);
void matmul_backward_bf16_in16(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16,
                               const uint16_t *in, const uint16_t *W, int N, int I, int O, int write_dw);
/* The backward with dout the caller's scratch, not read again: where both products
 * read it, its bf16 values are rounded into its own memory (gemm_bf16_round_in_place;
 * its fp32 values lost) instead of dout16. The same results bit for bit. The input
 * in fp32 (in) or held in bf16 (in16), the other NULL. */
void matmul_backward_bf16_scratch(float *din, float *dW, float *dbias, float *dout, const float *in,
                                  const uint16_t *in16, const uint16_t *W, int N, int I, int O, int write_dw);
/* ... and with dout in bf16 too (written so by its producer: swiglu_backward_bf16); no bias. */
void matmul_backward_bf16_dout16(float *din, float *dW, const uint16_t *dout16, const uint16_t *in, const uint16_t *W,
                                 int N, int I, int O, int write_dw);
/* din[N,I] = dout·W (written over: its old values are not read, and a product
 * with beta 0 runs faster than one summing into them);  dW[O,I] += dout^T·in;
 * dbias[O] += Σ_n dout. write_dw: dW and dbias written over instead (the first
 * backward to reach a tensor in a step: model/grads.h). */
void matmul_backward(float *din, float *dW, float *dbias, const float *dout,
                     const float *in, const float *W, int N, int I, int O, int write_dw);

/* A weight matrix as the products read it: fp32 values w; or bf16 values w16 —
 * with bf16_products, the mixed-precision copy of trained weights (the products
 * run in bf16, their other operands rounded too: gemm_bf16); without, a frozen
 * model's weights held in bf16, read exactly, the products in fp32 on them widened
 * a block at a time (gemm_f32_b16: the arithmetic of fp32 on the widened values). */
typedef struct {
    const float *w;
    const uint16_t *w16;
    int bf16_products;
} WeightMatrix;
/* matmul_forward / matmul_backward (or their bf16 forms) on W as it is held; a
 * frozen matrix has no dW; dout16 as matmul_backward_bf16's (read with bf16_products only). */
void matmul_forward_weight(float *out, const float *in, WeightMatrix W, const float *bias, int N, int I, int O);
void matmul_backward_weight(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16, const float *in,
                            WeightMatrix W, int N, int I, int O, int write_dw);

/* ---- embedding (ops/embedding.c) ---- */

/* out[N,C] = table[ids[n]] */
void embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C);
/* The same from a table of bf16 values (a frozen model's), widened exactly. */
void embedding_forward_bf16(float *out, const int32_t *ids, const uint16_t *table, int N, int C);
/* The same from a table held as two halves (f32_join): the fp32 rows exactly. */
void embedding_forward_split(float *out, const int32_t *ids, const uint16_t *hi, const uint16_t *lo, int N, int C);
/* dtable[V,C] += scatter of dout[N,C] at ids (serial over n per row block: deterministic) */
void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N, int C);

/* ---- RMSNorm (ops/rmsnorm.c): y = x / sqrt(mean(x^2) + eps) * w ---- */

/* out[N,C] (row stride ld_out), rstd[N] written; in[N,C] (row stride ld_in), w[C] */
void rmsnorm_forward(float *out, float *rstd, const float *in, const float *w,
                     int N, int C, int ld_out, int ld_in, float eps);
/* din[N,C] += ..., dw[C] += ... (write_dw: dw = ...); dout[N,C], in[N,C], rstd[N] from forward */
void rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                      const float *rstd, const float *w, int N, int C,
                      int ld_din, int ld_dout, int ld_in, int write_dw);

/* ---- RoPE (ops/rope.c), Hugging Face's rotate_half convention ----
 * For pair (i, i + D/2), angle a = pos * inv_freq[i]:
 *   y[i] = x[i] cos a - x[i+D/2] sin a,   y[i+D/2] = x[i+D/2] cos a + x[i] sin a.
 * Angles are computed in double. */

/* x[N, nh, D] rotated in place; rows of nh*D floats at stride ld; pos[N] */
void rope_forward(float *x, const int32_t *pos, const float *inv_freq, int N, int nh, int D,
                  int ld);
/* dx[N, nh, D] in place: the gradient of a rotation is the inverse rotation */
void rope_backward(float *dx, const int32_t *pos, const float *inv_freq, int N, int nh, int D,
                   int ld);

/* ---- SwiGLU (ops/swiglu.c): out = silu(gate) * up ---- */

/* out[N,F]; gu[N,2F] holds gate in columns [0,F) and up in [F,2F) */
void swiglu_forward(float *out, const float *gu, int N, int F);
/* dgu[N,2F] written; dout[N,F], gu[N,2F] */
void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F);
/* Mixed precision's: out16[N,F] = swiglu_forward's values rounded to bf16 (nearest
 * even), and gu16[N,2F] = gu rounded, what the backward keeps of it */
void swiglu_forward_bf16(uint16_t *out16, uint16_t *gu16, const float *gu, int N, int F);
/* dgu16[N,2F] written: swiglu_backward's values on gu16 widened, rounded to bf16 */
void swiglu_backward_bf16(uint16_t *dgu16, const float *dout, const uint16_t *gu16, int N, int F);

/* ---- causal grouped-query attention over padded batches (ops/attention.c) ----
 * q[B,T,H,D] (row stride ldq), k/v[B,T,Hkv,D] (ldk, ldv), out[B,T,H,D] (ldo).
 * mask[B,T]: 1 real token, 0 padding. Query t attends key s iff s <= t and
 * mask[s]. A query with no key to attend (left padding) gets out = 0.
 * lse[B,H,T]: log-sum-exp of the scaled scores, saved for backward. */
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const uint8_t *mask, int B, int T, int H, int Hkv, int D,
                       int ldo, int ldq, int ldk, int ldv, float *scratch);
/* dq WRITTEN; dk, dv ACCUMULATED; dout, out, lse from forward */
void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, const uint8_t *mask, int B, int T, int H, int Hkv,
                        int D, int lddq, int lddk, int lddv, int lddo, int ldq, int ldk,
                        int ldv, int ldo, float *scratch);
/* Floats of the scratch both take, for any batch of at most N = B*T tokens (a row
 * block's scores; the backward's packed heads): the caller's, planned once. */
size_t attention_scratch_floats(int N, int H, int D);
/* Query rows per block (see ops/attention.c), at most 64; 0 restores the automatic
 * choice. For tests: small blocks at small T. */
void attention_set_row_block(int rows);

/* ---- log-probabilities of target tokens through the LM head (ops/logprob.c) ----
 * For each row n with targets[n] >= 0: z = (h[n] · W^T) * inv_temp,
 *   logprob[n] = z[target] - logsumexp(z), entropy[n] = -Σ p log p.
 * Rows with targets[n] < 0 get 0. Logits are computed chunk_rows at a time into
 * scratch[chunk_rows, V], so [N, V] is never materialised. W[V,C] is the LM head as
 * a WeightMatrix: fp32, the mixed-precision copy, or a frozen head held in bf16. */
typedef struct {
    int chunk_rows;        /* rows of logits computed at once */
    float *scratch;        /* [chunk_rows, V] */
    float *h_rows;         /* [chunk_rows, C] gathered hidden rows */
    float *d_rows;         /* [chunk_rows, C] */
    /* A mixed-precision head's weight gradient (dw_rows > 0): dz^T and h of up to
     * dw_rows rows gathered in bf16, chunk after chunk, then one dW product over all
     * of them (a product over 256 rows runs at ~3/4 the rate of one over 768:
     * dW[V,C] is read and written once per product) */
    int dw_rows, dw_n;     /* capacity, rows gathered */
    uint16_t *dzT;         /* [V, dw_rows] */
    uint16_t *h16;         /* [dw_rows, C] */
    int threads;           /* the threads a chunk's statistics run on (the OpenMP maximum at init) */
    float *exp_rows;       /* [threads, exp_stride] a row's exponentials, per thread, 64-byte aligned */
    size_t exp_stride;
} LogprobScratch;

/* The dw_rows of a mixed-precision head: LOGPROB_DW_CHUNKS chunks, at most max_rows
 * (no more can be gathered in one pass). The products' grouping, and so dW's bits,
 * depend on chunk_rows alone (and on whether the caller gathers: model/transformer.c
 * does without checkpointing). */
#define LOGPROB_DW_CHUNKS 4
int logprob_dw_rows(int chunk_rows, int max_rows);
size_t logprob_scratch_floats(int chunk_rows, int C, int V, int dw_rows);
void logprob_scratch_init(LogprobScratch *s, float *base, int chunk_rows, int C, int V, int dw_rows);

/* logprob[N], entropy[N] (may be NULL), lse[N] saved; h[N,C], W[V,C], targets[N].
 * pw[N,C] (may be NULL): also E_p[W] = Σ_v p_v W[v] of each row with a target
 * (one more [rows x V] product), which is all a backward through a frozen head
 * needs (logprob_backward_frozen): no logits recomputed. */
void logprob_forward(float *logprob, float *entropy, float *lse, float *pw, const float *h, WeightMatrix W,
                     const int32_t *targets, int N, int C, int V, float inv_temp, LogprobScratch *s);
/* With W frozen and no entropy gradient: dh[n] += dlogprob[n] · inv_temp ·
 * (W[target[n]] - pw[n]) for rows with a target — the same as logprob_backward's
 * dh, from the forward's pw. */
void logprob_backward_frozen(float *dh, const float *dlogprob, const float *pw, WeightMatrix W,
                             const int32_t *targets, int N, int C, float inv_temp);
/* dh[N,C] +=, dW[V,C] += from dlogprob[N] and dentropy[N] (the gradient with
 * respect to each row's entropy; NULL: none). write_dw: dW = instead (zeros where
 * no row has a target). */
void logprob_backward(float *dh, float *dW, const float *dlogprob, const float *dentropy, const float *h,
                      WeightMatrix W, const int32_t *targets, const float *lse, int N, int C, int V, float inv_temp,
                      LogprobScratch *s, int write_dw);

/* The gradient of a token-local objective: dlogprob[i] of the m rows rows[i], from
 * their log-probs logprob[i] alone (the rest of what it needs is in ctx).
 * objective (may be NULL): the same gradient as data (ops/token_objective.h), for a
 * device that evaluates it where the log-probs are; its inputs are indexed by row, or
 * by index's js[i] for rows[i] where index is given (ctx is then index's too; js may
 * be rows itself). */
struct TokenObjective;
typedef struct {
    void (*fn)(void *ctx, const int *rows, int m, const float *logprob, float *dlogprob);
    void *ctx;
    const struct TokenObjective *objective;
    void (*index)(void *ctx, const int *rows, int m, int *js);
} LogprobGrad;

/* dlogprob[rows[i]] = grad's gradient of the m rows from their logprob[rows[i]]. */
void logprob_grad_rows(const LogprobGrad *grad, const int *rows, int m, const float *logprob, float *dlogprob);

/* logprob_forward (pw NULL) and logprob_backward (dentropy NULL) in one pass, the
 * logits of each chunk computed once: after a chunk's log-probs, grad gives their
 * gradients (kept in dlogprob[N]), then dh[N,C] +=, dW[V,C] += (either may be
 * NULL). Bit-identical to the two calls with that dlogprob. */
void logprob_forward_backward(float *logprob, float *entropy, float *lse, float *dlogprob, float *dh, float *dW,
                              const LogprobGrad *grad, const float *h, WeightMatrix W, const int32_t *targets,
                              int N, int C, int V, float inv_temp, LogprobScratch *s, int write_dw);

#endif
