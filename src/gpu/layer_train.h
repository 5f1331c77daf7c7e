/* gpu/layer_train.h — one decoder layer's training forward and backward on the GPU
 * (Qwen2's, and Qwen3's with its q/k norm), for a packed batch, as model/transformer.c's layer_forward
 * and layer_backward run them on a model under mixed precision with bf16 activations
 * (acts_create's bf16, what train/model.c makes for such a model): the same saved
 * tensors, the same rounding points, the same formulas.
 *
 * Forward: gpu/layer.h's forward, keeping what the backward reads — the norms'
 * rstd, the products' inputs as they read them (h1, h2 and act in bf16), q/k after
 * RoPE with v (one [N, (H+2Hkv)D] buffer), attention's output and log-sum-exp, the
 * residual after attention (xmid), and gate/up in bf16 (SwiGLU's backward reads
 * those values, as the CPU's swiglu_backward_bf16). With Qwen3's q/k norm, qkv keeps
 * q and k as the product left them (the norm's input, the CPU's L->qkv) and qk the
 * heads normed then RoPE'd (the CPU's L->qk), with the norm's rstd.
 * Backward: dx_out -> dx_in in place, and the weight gradients of the qkv, o,
 * gate|up and down matrices, the q/k/v (and o) biases, both norms' weights and
 * (Qwen3) q_norm and k_norm:
 * written over on the step's first backward (write_dw), else added to. Every
 * product reads its gradient rounded to bf16 once (the CPU's dx16, dgu16, dqkv);
 * bias gradients sum the fp32 gradient; norms, RoPE and attention in fp32. */
#ifndef GRPO_GPU_LAYER_TRAIN_H
#define GRPO_GPU_LAYER_TRAIN_H

#include "gpu/layer.h"

/* What one layer's forward keeps for its backward, for up to max_tokens rows
 * (N = the batch's rows). */
typedef struct {
    int max_tokens;
    CUdeviceptr rstd1, rstd2;          /* fp32 [N] */
    CUdeviceptr qkv;                   /* fp32 [N, (H+2Hkv)D]: q and k after RoPE (q/k norm: before
                                        * the norm), v */
    CUdeviceptr att;                   /* fp32 [N, H D] attention's output */
    CUdeviceptr lse;                   /* fp32 [H N]: sequence b's [H, len] block from H starts[b] */
    CUdeviceptr xmid;                  /* fp32 [N, C] the residual after attention */
    CUdeviceptr h1_16, h2_16, act16;   /* bf16 [N, C], [N, C], [N, F]: the products' inputs */
    CUdeviceptr gu16;                  /* bf16 [N, 2F] gate | up */
    /* Qwen3's q/k norm (0 without one) */
    CUdeviceptr qk;                    /* fp32 [N, (H+Hkv)D]: q and k normed, then RoPE'd */
    CUdeviceptr qk_rstd;               /* fp32 [H+Hkv, N]: the norm's statistics, per head */
    int shares;                        /* 1: every buffer but gu16 and act16 is another set's, which frees it
                                        * (selective recomputation: each layer keeps its gate/up alone) */
} GpuLayerActs;

/* Temporaries shared by every layer's forward and backward (one per device). */
typedef struct {
    int max_tokens;
    CUdeviceptr h;      /* fp32 [N, C]: the forward's normed rows; the backward's dh */
    CUdeviceptr wide;   /* fp32 [N, max(2F, QKV)]: the forward's gate/up; the backward's dqkv */
    CUdeviceptr mid;    /* fp32 [N, max(F, H D)]: the forward's act; the backward's dact, then datt */
    CUdeviceptr dx16;   /* bf16 [N, C]: the layer's output gradient as wdown's and wo's products read it */
    CUdeviceptr wide16; /* bf16 [N, max(2F, QKV)]: dgu16, then dqkv's bf16 values */
    CUdeviceptr mid16;  /* bf16 [N, max(F, H D)]: att as wo's products read it (forward and backward) */
    /* Qwen3's q/k norm (0 without one) */
    CUdeviceptr dqk;    /* fp32 [N, (H+Hkv)D]: attention's dq, dk, then RoPE's backward, the norm's dout */
    CUdeviceptr qk_part; /* fp32 [(H+Hkv) D]: the norm weights' per-head sums */
} GpuLayerTrainScratch;

/* A layer's weight gradients on the device, fp32, shaped as GpuLayerWeights; bqkv, bo,
 * q_norm, k_norm 0 where the model has none. */
typedef struct {
    CUdeviceptr ln1, ln2, bqkv, bo, wqkv, wo, wgu, wdown;
    CUdeviceptr q_norm, k_norm; /* [D] each: Qwen3's */
} GpuLayerGrads;

/* Allocation of each; -1 with err (a refused allocation: then nothing stays
 * allocated). The free functions take zeroed or created structs. */
int gpu_layer_acts_create(GpuDevice *d, GpuLayerActs *a, const GpuLayerWeights *w, int max_tokens, GrpoErr *err);
/* A set for another layer of w's shapes that owns only its gate/up (gu16, act16) and
 * shares every other buffer with owner (selective recomputation: owner's buffers hold
 * the layer at hand, remade by gpu_layer_forward_train_kept). */
int gpu_layer_acts_create_sharing(GpuDevice *d, GpuLayerActs *a, const GpuLayerActs *owner, const GpuLayerWeights *w,
                                  GrpoErr *err);
/* Frees what a owns (a sharing set: its gu16 and act16 alone). */
void gpu_layer_acts_free(GpuDevice *d, GpuLayerActs *a);
int gpu_layer_train_scratch_create(GpuDevice *d, GpuLayerTrainScratch *s, const GpuLayerWeights *w, int max_tokens,
                                   GrpoErr *err);
void gpu_layer_train_scratch_free(GpuDevice *d, GpuLayerTrainScratch *s);
/* Gradients for w's shapes (bqkv, bo, q_norm and k_norm where w has them); contents undefined until
 * a backward with write_dw. */
int gpu_layer_grads_create(GpuDevice *d, GpuLayerGrads *g, const GpuLayerWeights *w, GrpoErr *err);
void gpu_layer_grads_free(GpuDevice *d, GpuLayerGrads *g);

/* x_out[N, C] = the layer applied to x_in[N, C] (fp32; x_out may be x_in, though the
 * backward needs x_in again), saving into a. -1 with err for a batch larger than a's
 * or s's, or a launch refused. */
int gpu_layer_forward_train(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, GpuLayerTrainScratch *s,
                            const GpuLayerBatch *b, CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err);
/* Selective recomputation: the forward of x_in again into a, up to (not including) the
 * gate/up product — the norms, q/k/v, attention, o, h2 in bf16 — keeping a's gu16 and
 * act16 as gpu_layer_forward_train of the same batch and x_in left them (the gate/up,
 * SwiGLU and down products are not run; no output: the next layer's input is kept).
 * The kernels are deterministic, so a then holds that forward's bits. -1 with err as
 * the forward. */
int gpu_layer_forward_train_kept(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, GpuLayerTrainScratch *s,
                                 const GpuLayerBatch *b, CUdeviceptr x_in, GrpoErr *err);
/* After gpu_layer_forward_train of the same batch into a: dx[N, C] holds dL/dx_out on
 * entry and dL/dx_in on exit; x_in is the forward's input. Weight gradients into g
 * (write_dw: written over, else added to). -1 with err as the forward. */
int gpu_layer_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerActs *a, GpuLayerTrainScratch *s,
                       const GpuLayerBatch *b, const GpuLayerGrads *g, CUdeviceptr dx, CUdeviceptr x_in, int write_dw,
                       GrpoErr *err);

#endif
