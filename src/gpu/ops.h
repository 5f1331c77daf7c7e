/* gpu/ops.h — the GPU's forms of the CPU's kernels (ops/ops.h, optim/optim.h), on
 * device pointers, launched on d's stream in order: the same arguments and the same
 * results, within the tolerances tests/gpu/test_gpu_ops.c states (AdamW: the CPU's
 * bits). Each returns 0, or -1 with err (a launch the driver refused). */
#ifndef GRPO_GPU_OPS_H
#define GRPO_GPU_OPS_H

#include "gpu/device.h"
#include "gen/sampler.h"
#include "ops/token_objective.h"
#include "optim/optim.h"

/* rmsnorm_forward: out[N, C] (ld_out), rstd[N], in[N, C] (ld_in), w[C]. */
int gpu_rmsnorm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr w, int N, int C,
                        int ld_out, int ld_in, float eps, GrpoErr *err);
/* rmsnorm_backward: din += (din 0: none), dw (+)= (dw 0: none; write_dw: written). */
int gpu_rmsnorm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dw, CUdeviceptr dout, CUdeviceptr in,
                         CUdeviceptr rstd, CUdeviceptr w, int N, int C, int ld_din, int ld_dout, int ld_in, int write_dw,
                         GrpoErr *err);
/* swiglu_forward / swiglu_backward: gu[N, 2F] = [gate | up], out[N, F], dgu written. */
int gpu_swiglu_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr gu, int N, int F, GrpoErr *err);
int gpu_swiglu_backward(GpuDevice *d, CUdeviceptr dgu, CUdeviceptr dout, CUdeviceptr gu, int N, int F, GrpoErr *err);
/* One AdamW step over n values: p, m, v updated, g read, mask[n] (or 0: every
 * element decays); s from adamw_step_scalars. */
int gpu_adamw_step(GpuDevice *d, CUdeviceptr p, CUdeviceptr m, CUdeviceptr v, CUdeviceptr g, CUdeviceptr mask,
                   size_t n, const AdamWStep *s, GrpoErr *err);

/* ---- RoPE and attention (gpu/kernels/rope.cu, attention.cu, attention_backward.cu) ----
 * Their arguments are the CPU ops' on device pointers, except that attention takes
 * its sequences as starts[B + 1] (device ints; sequence b is rows starts[b] ..
 * starts[b+1]-1, N = starts[B] given on the host too): a padded batch is starts
 * b T with its mask, a packed one its sequences end to end, one launch either way
 * (the CPU's model/transformer.c calls ops/attention.c once per packed sequence).
 * D even, at most 256; H a multiple of Hkv. Bad sizes: -1 with err naming them. */

/* rope_forward / rope_backward: x[N, nh, D] in place (row stride ld), pos[N] int32,
 * inv_freq[D/2]. */
int gpu_rope_forward(GpuDevice *d, CUdeviceptr x, CUdeviceptr pos, CUdeviceptr inv_freq, int N, int nh, int D, int ld,
                     GrpoErr *err);
int gpu_rope_backward(GpuDevice *d, CUdeviceptr dx, CUdeviceptr pos, CUdeviceptr inv_freq, int N, int nh, int D,
                      int ld, GrpoErr *err);
/* attention_forward: out[N, H D] (ldo), lse[H N] (sequence b's [H, len] block from
 * H starts[b]), q[N, H D] (ldq), k/v[N, Hkv D] (ldk, ldv), mask[N] (0: every row
 * real). Head dims that are multiples of 8 up to 128 run on the tensor cores
 * (kernels/attention_mma.cu: split TF32 products, fp32's accuracy),
 * the others on attention.cu's fp32 kernel (every head dim with d->attention_plain:
 * GRPO_GPU_ATTENTION=plain, gpu/device.h; the backward and decoding alike). */
int gpu_attention_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr lse, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v,
                          CUdeviceptr mask, CUdeviceptr starts, int B, int N, int H, int Hkv, int D, int ldo, int ldq,
                          int ldk, int ldv, GrpoErr *err);
/* attention_backward: dq WRITTEN (0: not wanted), dk and dv ACCUMULATED (both, or
 * both 0); dout, q, k, v, out and lse as the forward's. */
int gpu_attention_backward(GpuDevice *d, CUdeviceptr dq, CUdeviceptr dk, CUdeviceptr dv, CUdeviceptr dout,
                           CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr out, CUdeviceptr lse,
                           CUdeviceptr mask, CUdeviceptr starts, int B, int N, int H, int Hkv, int D, int lddq,
                           int lddk, int lddv, int lddo, int ldq, int ldk, int ldv, int ldo, GrpoErr *err);
/* Decoding attention, as model/kvcache.c's for one layer: n rows, row r token own[r]
 * of slot slots[r], its key and value already in the layer's cache kc/vc [n_slots,
 * cap, Hkv D]; it attends parent[slot]'s first parent_len[slot] keys (parent -1:
 * none) then its own 0 .. own[r]. out[n, H D] (ldo), q[n, H D] (ldq); slots, own
 * [n], parent, parent_len [n_slots]: device ints. Each row's result is its own
 * (never depends on the other rows of the call). */
int gpu_attention_decode(GpuDevice *d, CUdeviceptr out, CUdeviceptr q, CUdeviceptr kc, CUdeviceptr vc,
                         CUdeviceptr slots, CUdeviceptr own, CUdeviceptr parent, CUdeviceptr parent_len, int n, int cap,
                         int H, int Hkv, int D, int ldo, int ldq, GrpoErr *err);
/* ---- bf16 products (gpu/gemm.h): the operands rounded; linear layers ---- */
/* dst[rows, cols] (bf16, row stride ld_dst) = src[rows, cols] (fp32, ld_src) rounded
 * to nearest, ties to even, NaN kept: ops.h's f32_to_bf16, bit for bit. */
int gpu_round_bf16(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, int rows, int cols, int ld_dst, int ld_src,
                   GrpoErr *err);
/* matmul_forward_bf16 / matmul_backward_bf16_in16 (ops/ops.h) on gpu_gemm_bf16:
 * forward out[N, O] = in[N, I] W[O, I]^T (+ bias[O]; 0: none), W16 bf16; in fp32 is
 * rounded into in16 (N x I bf16, the caller's: what the backward reads), or in 0:
 * in16 holds the input already. Backward: din[N, I] = dout W (written; 0: none),
 * dW[O, I] += dout^T in16, dbias[O] += sum_n dout (write_dw: both written over; 0:
 * none), dout fp32 rounded once into dout16 (N x O bf16, the caller's) for both
 * products. The products' sums in cuBLASLt's order; dbias the CPU's bits. */
int gpu_matmul_forward_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr in, CUdeviceptr in16, CUdeviceptr W16,
                            CUdeviceptr bias, int N, int I, int O, GrpoErr *err);
int gpu_matmul_backward_bf16(GpuDevice *d, CUdeviceptr din, CUdeviceptr dW, CUdeviceptr dbias, CUdeviceptr dout,
                             CUdeviceptr dout16, CUdeviceptr in16, CUdeviceptr W16, int N, int I, int O, int write_dw,
                             GrpoErr *err);
/* ---- the LM head's family: embedding, log-prob chunks, sampler ---- */

/* embedding_forward(_bf16): out[N, C] = table[ids[n]] (fp32 table, or bf16 widened). */
int gpu_embedding_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr ids, CUdeviceptr table, int N, int C,
                          GrpoErr *err);
int gpu_embedding_forward_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr ids, CUdeviceptr table16, int N, int C,
                               GrpoErr *err);
/* embedding_backward: dtable[V, C] += dout[N, C] at rows ids[N], each element summed
 * over n in increasing order, no atomics: the CPU's bits. */
int gpu_embedding_backward(GpuDevice *d, CUdeviceptr dtable, CUdeviceptr dout, CUdeviceptr ids, int N, int C,
                           GrpoErr *err);
/* A chunk of m rows of LM-head logits[m, V] (already times 1/T: the GEMM's alpha),
 * targets[m]: logprob[m], entropy[m] (0: none) and lse[m] as ops/logprob.c's
 * logprob_forward gives them; a target outside [0, V) gives 0s. */
int gpu_logprob_chunk_forward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse,
                              CUdeviceptr logits, CUdeviceptr targets, int m, int V, GrpoErr *err);
/* The chunk's backward in place: logits[m, V] (z) become dz, the gradient of
 * sum dlogprob logprob + dentropy entropy (dentropy 0: none) with respect to the
 * logits before the 1/T scaling (inv_temp), as logprob_backward forms it. */
int gpu_logprob_chunk_backward(GpuDevice *d, CUdeviceptr logits, CUdeviceptr dlogprob, CUdeviceptr dentropy,
                               CUdeviceptr lse, CUdeviceptr targets, int m, int V, float inv_temp, GrpoErr *err);

/* A frozen head's shortcut (gpu/logprob.h): the chunk's logits[m, V] (z) become
 * p = e^(z - lse[m]) in place, as ops/logprob.c's pw path forms them. */
int gpu_logprob_chunk_probs(GpuDevice *d, CUdeviceptr logits, CUdeviceptr lse, int m, int V, GrpoErr *err);
/* logprob_backward_frozen on the m rows rows[m] with targets tgts[m] (device ints):
 * dh[row] += dlogprob[row] inv_temp (W[tgt] - pw[row]), W [V, C] in bf16 (W16) or
 * fp32 (W; the other 0); the CPU's bits. */
int gpu_logprob_backward_frozen_rows(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dlogprob, CUdeviceptr pw,
                                     CUdeviceptr W16, CUdeviceptr W, CUdeviceptr rows, CUdeviceptr tgts, int m, int C,
                                     float inv_temp, GrpoErr *err);
/* A token-local objective's gradient (ops/token_objective.h) of m rows: lp[i], their
 * log-probs, replaced by d objective / d logp from the inputs in the same order (w[m],
 * adv[m] doubles; isw[m] doubles, old[m], ref[m] floats, each 0: none). The host's
 * formulas in double; e^x within a few ulp of glibc's, the result rounded to float. */
int gpu_token_objective_grad(GpuDevice *d, CUdeviceptr lp, int m, const TokenObjectiveParams *p, CUdeviceptr w,
                             CUdeviceptr adv, CUdeviceptr isw, CUdeviceptr old, CUdeviceptr ref, GrpoErr *err);

/* A batch's rows for gpu_sampler_sample, device arrays of m: row r draws its uniform
 * from u32 words draw[r], draw[r] + 1 of Philox stream stream[r] of seed[r] (as
 * rng_uniform_f64 after draw[r] rng_u32 calls on rng_init(seed, stream)); its
 * context (prompt and completion so far, for the repetition penalty) is
 * ctx[ctx_first[r] .. + ctx_len[r]). */
typedef struct {
    CUdeviceptr seed, stream, draw; /* uint64_t[m] */
    CUdeviceptr ctx_first, ctx_len; /* int32_t[m] */
    CUdeviceptr ctx;                /* int32_t[] */
} GpuSampleRows;
/* sampler_sample_logp for m rows of logits[m, V] (V < 2^24): tok[m], logp[m] (0:
 * none); scratch: m * V doubles. Each row on its own (never dependent on the batch).
 * Temperature alone and greedy pick the CPU's token always (see
 * gpu/kernels/sampler.cu); the other processors agree but where the CPU's rounding
 * decides. force_sequential: the CPU's order of sums always (for tests). */
int gpu_sampler_sample(GpuDevice *d, CUdeviceptr tok, CUdeviceptr logp, CUdeviceptr logits, CUdeviceptr scratch,
                       const GpuSampleRows *rows, int m, int V, const SamplerOpts *o, int force_sequential,
                       GrpoErr *err);
/* ---- one decoder layer (gpu/layer.h): the residual add ---- */
/* y[n] += x[n] (model/transformer.c's add_inplace: the CPU's bits). */
int gpu_residual_add(GpuDevice *d, CUdeviceptr y, CUdeviceptr x, size_t n, GrpoErr *err);

/* ---- rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) ---- */
/* dst[m, C] = src[idx[i]] for i < m; idx[m] device ints. */
int gpu_rows_gather(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, CUdeviceptr idx, int m, int C, GrpoErr *err);
/* dst[idx[i]] = src[i] (add: +=) for i < m, rows of C floats; idx distinct. */
int gpu_rows_scatter(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, CUdeviceptr idx, int m, int C, int add,
                     GrpoErr *err);

/* ---- decoding: the batch-invariant row-wise product (gpu/kernels/rowwise.cu) ---- */
/* matmul_forward_rowwise_bf16_products (ops/ops.h) on the GPU: out[n, O] = in[n, I]
 * (fp32, each value rounded to bf16 as it is read) times W16[O, I]^T (bf16) (+ bias[O];
 * 0: none), the products exact in fp32, summed in fp32. Each output element is summed
 * in an order that depends on I alone (gpu/kernels/rowwise.cu), so a row's result is
 * the same bits whatever the other rows of the call, n, or how the rows are split
 * into calls; against the CPU's sequential chain, within 2 (I + 1) u of the sum of
 * the magnitudes it adds (tests/gpu/test_gpu_decode.c). n >= 0, I, O >= 1. */
int gpu_matmul_rowwise_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr in, CUdeviceptr W16, CUdeviceptr bias, int n,
                            int I, int O, GrpoErr *err);
/* Decoding's new keys and values into a layer's cache kc, vc [n_slots, cap, kv_dim]:
 * row r's k = qkv[r ld + k_off ..] and v = qkv[r ld + v_off ..] (kv_dim floats each)
 * at position own[r] of slot slots[r] (device ints [n]). Copies: the CPU's bits. */
int gpu_kv_write(GpuDevice *d, CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr qkv, CUdeviceptr slots, CUdeviceptr own,
                 int n, int cap, int kv_dim, int ld, int k_off, int v_off, GrpoErr *err);
/* ---- one decoder layer's training forward and backward (gpu/layer_train.h) ---- */
/* swiglu_backward_bf16: dgu16[N, 2F] (bf16, written) from dout[N, F] (fp32) and the
 * forward's gate/up kept in bf16, gu16[N, 2F]. */
int gpu_swiglu_backward_bf16(GpuDevice *d, CUdeviceptr dgu16, CUdeviceptr dout, CUdeviceptr gu16, int N, int F,
                             GrpoErr *err);
/* matmul_backward_bf16_dout16: gpu_matmul_backward_bf16 with dout held in bf16 already
 * (dout16[N, O], as its producer wrote it: gpu_swiglu_backward_bf16); no bias. din
 * written (0: none), dW added to (write_dw: written; 0: none). */
int gpu_matmul_backward_bf16_dout16(GpuDevice *d, CUdeviceptr din, CUdeviceptr dW, CUdeviceptr dout16,
                                    CUdeviceptr in16, CUdeviceptr W16, int N, int I, int O, int write_dw,
                                    GrpoErr *err);
/* ---- Qwen3's q/k norm (gpu/kernels/qk_norm.cu) ----
 * model/transformer.c's per-head rmsnorm_forward / rmsnorm_backward over the q and k
 * of N rows: H query heads then Hkv key heads of D, side by side from a row's start
 * (in[N, (H+Hkv) D], row stride ld_in), the query heads with wq[D], the key heads with
 * wk[D]; rstd[(H+Hkv), N] as the CPU saves it (L->qk_rstd). The CPU's bits, forward
 * and backward. Bad sizes: -1 with err naming them. */
/* out[N, (H+Hkv) D] (ld_out; may be in) = the heads normed. */
int gpu_qk_norm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr wq,
                        CUdeviceptr wk, int N, int H, int Hkv, int D, int ld_out, int ld_in, float eps, GrpoErr *err);
/* din += (0: none); dwq, dwk (+)= (0: none; write_dw: written), through part[(H+Hkv) D]
 * floats of the caller's (each head's sum, then the heads in order: the CPU's). */
int gpu_qk_norm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dwq, CUdeviceptr dwk, CUdeviceptr part,
                         CUdeviceptr dout, CUdeviceptr in, CUdeviceptr rstd, CUdeviceptr wq, CUdeviceptr wk, int N,
                         int H, int Hkv, int D, int ld_din, int ld_dout, int ld_in, int write_dw, GrpoErr *err);

/* ---- the trainable model's device form (train/model_gpu.c) ----
 * Mixed precision's master weights (fp32 src[n]) to a copy the forward reads: with
 * dst16 (not 0), the bf16 values the CPU's model holds for them (f32_split's upper
 * half: ties away from zero, unlike gpu_round_bf16); else dst32[n] = src[n]. The
 * CPU's bits. */
int gpu_master_to_weights(GpuDevice *d, CUdeviceptr dst16, CUdeviceptr dst32, CUdeviceptr src, size_t n, GrpoErr *err);
/* The step's gradient g[n] on the device: part[ceil(n / GRAD_NORM_BLOCK)] doubles =
 * optim/grad.c's block sums of squares, bit for bit (grad_norm_parts adds them on
 * the host: grad_norm's result); and g[n] *= c (grad_clip_factor's c). */
int gpu_grad_sumsq_blocks(GpuDevice *d, CUdeviceptr part, CUdeviceptr g, size_t n, GrpoErr *err);
int gpu_grad_scale(GpuDevice *d, CUdeviceptr g, size_t n, float c, GrpoErr *err);

/* ---- sync_ref_model on the device (train/model_gpu.c) ----
 * ref[n] = alpha policy[n] + (1 - alpha) ref[n] in float (TRL's SyncRefModelCallback,
 * train_model_mix_reference's arithmetic: its bits), over fp32 weights. */
int gpu_mix_reference(GpuDevice *d, CUdeviceptr ref, CUdeviceptr policy, size_t n, float alpha, GrpoErr *err);

#endif
