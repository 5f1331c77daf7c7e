/* tests/ref/ref_ops.h — double-precision references of every op in ops/ops.h, for tests
 * (built into libgrpo_testref.a, which only the tests link; never part of libgrpo).
 *
 * Same names with a `ref_` prefix, same argument order, same semantics as ops/ops.h
 * (read the shape comments there): backward ACCUMULATES (+=) into every gradient
 * except where ops.h says "written" (swiglu dgu, attention dq); a NULL gradient
 * pointer means "not needed"; row strides (ld*) are in elements. Only the types
 * differ: every float tensor is double here; ids/targets/pos stay int32_t and the
 * attention mask stays uint8_t.
 *
 * These are plain loops meant to be obviously correct, not fast: attention
 * materialises the [T,T] probabilities per (b, h), logprob computes one row of
 * logits at a time without chunking. They are checked against central finite
 * differences in tests/ops/test_ops_fd.c, and the fp32 kernels against them.
 *
 * Values ops.h leaves unspecified are fixed here: attention lse of a query with no
 * key to attend is -INFINITY (log of an empty sum); logprob lse of a row with
 * target < 0 is 0. Tests should not compare those entries. */
#ifndef GRPO_TESTS_REF_REF_OPS_H
#define GRPO_TESTS_REF_REF_OPS_H

#include <stdint.h>

/* out[N,O] = in[N,I] · W[O,I]^T (+ bias[O]) */
void ref_matmul_forward(double *out, const double *in, const double *W, const double *bias,
                        int N, int I, int O);
/* din[N,I] += dout·W;  dW[O,I] += dout^T·in;  dbias[O] += Σ_n dout */
void ref_matmul_backward(double *din, double *dW, double *dbias, const double *dout,
                         const double *in, const double *W, int N, int I, int O);

/* out[N,C] = table[ids[n]] */
void ref_embedding_forward(double *out, const int32_t *ids, const double *table, int N, int C);
/* dtable[V,C] += scatter of dout[N,C] at ids */
void ref_embedding_backward(double *dtable, const double *dout, const int32_t *ids, int N,
                            int C);

/* out[N,C] (ld_out), rstd[N] written; in[N,C] (ld_in), w[C] */
void ref_rmsnorm_forward(double *out, double *rstd, const double *in, const double *w, int N,
                         int C, int ld_out, int ld_in, double eps);
/* din[N,C] (ld_din) +=, dw[C] +=; dout[N,C] (ld_dout), in[N,C] (ld_in), rstd[N] */
void ref_rmsnorm_backward(double *din, double *dw, const double *dout, const double *in,
                          const double *rstd, const double *w, int N, int C, int ld_din,
                          int ld_dout, int ld_in);

/* x[N, nh, D] rotated in place (rotate_half), rows at stride ld; pos[N], inv_freq[D/2] */
void ref_rope_forward(double *x, const int32_t *pos, const double *inv_freq, int N, int nh,
                      int D, int ld);
/* dx[N, nh, D] in place: the inverse rotation */
void ref_rope_backward(double *dx, const int32_t *pos, const double *inv_freq, int N, int nh,
                       int D, int ld);

/* out[N,F] = silu(gate) * up; gu[N,2F] = [gate | up] */
void ref_swiglu_forward(double *out, const double *gu, int N, int F);
/* dgu[N,2F] WRITTEN; dout[N,F], gu[N,2F] */
void ref_swiglu_backward(double *dgu, const double *dout, const double *gu, int N, int F);

/* Causal GQA over a padded batch; see ops.h. out[B,T,H,D] (ldo), lse[B,H,T];
 * q[B,T,H,D] (ldq), k/v[B,T,Hkv,D] (ldk, ldv), mask[B,T]. Query head h reads kv head
 * h / (H / Hkv); scores are scaled by 1/sqrt(D). */
void ref_attention_forward(double *out, double *lse, const double *q, const double *k,
                           const double *v, const uint8_t *mask, int B, int T, int H, int Hkv,
                           int D, int ldo, int ldq, int ldk, int ldv);
/* dq WRITTEN; dk, dv ACCUMULATED. out and lse are accepted for parity with ops.h but
 * not used: the reference recomputes the probabilities from q and k. */
void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                            const double *q, const double *k, const double *v,
                            const double *out, const double *lse, const uint8_t *mask, int B,
                            int T, int H, int Hkv, int D, int lddq, int lddk, int lddv,
                            int lddo, int ldq, int ldk, int ldv, int ldo);

/* logprob[N], entropy[N] (may be NULL), lse[N]; h[N,C], W[V,C], targets[N].
 * z = (h[n] · W^T) * inv_temp; rows with targets[n] < 0 get 0 everywhere. */
void ref_logprob_forward(double *logprob, double *entropy, double *lse, const double *h,
                         const double *W, const int32_t *targets, int N, int C, int V,
                         double inv_temp);
/* dh[N,C] +=, dW[V,C] += from dlogprob[N]. lse is accepted for parity with ops.h but
 * not used: the reference recomputes it. */
void ref_logprob_backward(double *dh, double *dW, const double *dlogprob, const double *dentropy, const double *h,
                          const double *W, const int32_t *targets, const double *lse, int N,
                          int C, int V, double inv_temp);

#endif
