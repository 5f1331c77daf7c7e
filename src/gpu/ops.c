/* gpu/ops.c — launch shapes for the kernels of gpu/kernels/ (see ops.h): a block of
 * 256 threads per row for the row-wise ones, grid-stride loops over as many blocks
 * as fill the GPU a few times for the element-wise ones. */
#include "gpu/ops.h"

#include "gpu/gemm.h"
#include "gpu/kernels/attention_sizes.h"
#include "optim/optim.h"

enum { ROW_THREADS = 256, FLAT_THREADS = 256 };
enum { ROPE_THREADS = 128 }; /* gpu/kernels/rope.cu */

/* Blocks for n elements: enough for one element a thread, at most 8 per multiprocessor
 * (the kernels loop over the rest). */
static unsigned flat_blocks(const GpuDevice *d, unsigned long long n) {
    unsigned long long want = (n + FLAT_THREADS - 1) / FLAT_THREADS, most = 8ULL * (d->sms > 0 ? d->sms : 1);
    return (unsigned)(want < most ? want : most);
}

int gpu_rmsnorm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr w, int N, int C,
                        int ld_out, int ld_in, float eps, GrpoErr *err) {
    void *args[] = {&out, &rstd, &in, &w, &C, &ld_out, &ld_in, &eps};
    return gpu_launch(d, GPU_K_RMSNORM_FORWARD, (unsigned)N, ROW_THREADS, args, err);
}

int gpu_rmsnorm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dw, CUdeviceptr dout, CUdeviceptr in,
                         CUdeviceptr rstd, CUdeviceptr w, int N, int C, int ld_din, int ld_dout, int ld_in, int write_dw,
                         GrpoErr *err) {
    if (din) {
        void *args[] = {&din, &dout, &in, &rstd, &w, &C, &ld_din, &ld_dout, &ld_in};
        if (gpu_launch(d, GPU_K_RMSNORM_BACKWARD_INPUT, (unsigned)N, ROW_THREADS, args, err)) return -1;
    }
    if (dw) {
        void *args[] = {&dw, &dout, &in, &rstd, &N, &C, &ld_dout, &ld_in, &write_dw};
        if (gpu_launch(d, GPU_K_RMSNORM_BACKWARD_WEIGHT, (unsigned)((C + FLAT_THREADS - 1) / FLAT_THREADS),
                       FLAT_THREADS, args, err))
            return -1;
    }
    return 0;
}

int gpu_swiglu_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr gu, int N, int F, GrpoErr *err) {
    void *args[] = {&out, &gu, &N, &F};
    return gpu_launch(d, GPU_K_SWIGLU_FORWARD, flat_blocks(d, (unsigned long long)N * F), FLAT_THREADS, args, err);
}

int gpu_swiglu_backward(GpuDevice *d, CUdeviceptr dgu, CUdeviceptr dout, CUdeviceptr gu, int N, int F, GrpoErr *err) {
    void *args[] = {&dgu, &dout, &gu, &N, &F};
    return gpu_launch(d, GPU_K_SWIGLU_BACKWARD, flat_blocks(d, (unsigned long long)N * F), FLAT_THREADS, args, err);
}

int gpu_adamw_step(GpuDevice *d, CUdeviceptr p, CUdeviceptr m, CUdeviceptr v, CUdeviceptr g, CUdeviceptr mask,
                   size_t n, const AdamWStep *s, GrpoErr *err) {
    unsigned long long count = n;
    float step_size = s->step_size, bc2_sqrt = s->bc2_sqrt, decay = s->decay, b1c = s->one_minus_b1, b2 = s->b2,
          b2c = s->one_minus_b2, eps = s->eps;
    int use_decay = s->use_decay;
    void *args[] = {&p, &m, &v, &g, &mask, &count, &step_size, &bc2_sqrt, &decay, &b1c, &b2, &b2c, &eps, &use_decay};
    return gpu_launch(d, GPU_K_ADAMW_STEP, flat_blocks(d, count), FLAT_THREADS, args, err);
}

/* ---- RoPE and attention ---- */

int gpu_rope_forward(GpuDevice *d, CUdeviceptr x, CUdeviceptr pos, CUdeviceptr inv_freq, int N, int nh, int D, int ld,
                     GrpoErr *err) {
    if (D < 2 || D % 2) return err_set(err, "gpu_rope_forward: head dim D = %d; expected an even number >= 2", D);
    void *args[] = {&x, &pos, &inv_freq, &nh, &D, &ld};
    return gpu_launch(d, GPU_K_ROPE_FORWARD, (unsigned)N, ROPE_THREADS, args, err);
}

int gpu_rope_backward(GpuDevice *d, CUdeviceptr dx, CUdeviceptr pos, CUdeviceptr inv_freq, int N, int nh, int D,
                      int ld, GrpoErr *err) {
    if (D < 2 || D % 2) return err_set(err, "gpu_rope_backward: head dim D = %d; expected an even number >= 2", D);
    void *args[] = {&dx, &pos, &inv_freq, &nh, &D, &ld};
    return gpu_launch(d, GPU_K_ROPE_BACKWARD, (unsigned)N, ROPE_THREADS, args, err);
}

/* The heads the attention kernels take: 0, or -1 with err naming what is wrong. */
static int attention_shape(const char *op, int H, int Hkv, int D, GrpoErr *err) {
    if (D < 2 || D % 2 || D > ATT_MAX_D)
        return err_set(err, "%s: head dim D = %d; expected an even number from 2 to %d", op, D, ATT_MAX_D);
    if (Hkv < 1 || H < Hkv || H % Hkv)
        return err_set(err, "%s: H = %d query heads, Hkv = %d key/value heads; expected H a multiple of Hkv >= 1", op,
                       H, Hkv);
    return 0;
}

/* Training attention on the tensor cores: head dims in multiples of 8 up to 128, unless
 * GRPO_GPU_ATTENTION=plain (gpu_open) asked for the plain kernels. */
static int attention_mma(const GpuDevice *d, int D) { return !d->attention_plain && D % 8 == 0 && D <= ATT_MMA_MAX_D; }

int gpu_attention_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr lse, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v,
                          CUdeviceptr mask, CUdeviceptr starts, int B, int N, int H, int Hkv, int D, int ldo, int ldq,
                          int ldk, int ldv, GrpoErr *err) {
    if (attention_shape("gpu_attention_forward", H, Hkv, D, err)) return -1;
    void *args[] = {&out, &lse, &q, &k, &v, &mask, &starts, &B, &H, &Hkv, &D, &ldo, &ldq, &ldk, &ldv};
    /* the tensor cores: a block per 64 rows of a sequence (at most N / 64 + B blocks) */
    if (attention_mma(d, D))
        return gpu_launch_xy(d, GPU_K_ATTENTION_FORWARD_MMA, (unsigned)((N + ATT_MMA_ROWS - 1) / ATT_MMA_ROWS + B),
                             (unsigned)H, ATT_THREADS, args, err);
    return gpu_launch_xy(d, GPU_K_ATTENTION_FORWARD, (unsigned)N, (unsigned)H, ATT_THREADS, args, err);
}

int gpu_attention_backward(GpuDevice *d, CUdeviceptr dq, CUdeviceptr dk, CUdeviceptr dv, CUdeviceptr dout,
                           CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr out, CUdeviceptr lse,
                           CUdeviceptr mask, CUdeviceptr starts, int B, int N, int H, int Hkv, int D, int lddq,
                           int lddk, int lddv, int lddo, int ldq, int ldk, int ldv, int ldo, GrpoErr *err) {
    if (attention_shape("gpu_attention_backward", H, Hkv, D, err)) return -1;
    if (!dk != !dv) return err_set(err, "gpu_attention_backward: dk and dv: expected both or neither");
    /* the tensor cores as the forward (a block per 32 rows of a sequence: at most N / 32 + B
     * blocks), else the plain kernels (a block per row) */
    int mma = attention_mma(d, D);
    unsigned rows = mma ? (unsigned)((N + ATT_MMA_BWD_ROWS - 1) / ATT_MMA_BWD_ROWS + B) : (unsigned)N;
    if (dq) {
        void *args[] = {&dq, &dout, &q, &k, &v, &out, &lse, &mask, &starts, &B, &H, &Hkv, &D,
                        &lddq, &lddo, &ldq, &ldk, &ldv, &ldo};
        if (gpu_launch_shared(d, mma ? GPU_K_ATTENTION_BACKWARD_QUERY_MMA : GPU_K_ATTENTION_BACKWARD_QUERY, rows,
                              (unsigned)H, ATT_THREADS, mma ? ATT_MMA_BWD_Q_SHARED : 0, args, err))
            return -1;
    }
    if (dk) {
        void *args[] = {&dk, &dv, &dout, &q, &k, &v, &out, &lse, &mask, &starts, &B, &H, &Hkv, &D,
                        &lddk, &lddv, &lddo, &ldq, &ldk, &ldv, &ldo};
        if (gpu_launch_shared(d, mma ? GPU_K_ATTENTION_BACKWARD_KEY_MMA : GPU_K_ATTENTION_BACKWARD_KEY, rows,
                              (unsigned)Hkv, ATT_THREADS, mma ? ATT_MMA_BWD_K_SHARED : 0, args, err))
            return -1;
    }
    return 0;
}

int gpu_attention_decode(GpuDevice *d, CUdeviceptr out, CUdeviceptr q, CUdeviceptr kc, CUdeviceptr vc,
                         CUdeviceptr slots, CUdeviceptr own, CUdeviceptr parent, CUdeviceptr parent_len, int n, int cap,
                         int H, int Hkv, int D, int ldo, int ldq, GrpoErr *err) {
    if (attention_shape("gpu_attention_decode", H, Hkv, D, err)) return -1;
    void *args[] = {&out, &q, &kc, &vc, &slots, &own, &parent, &parent_len, &cap, &H, &Hkv, &D, &ldo, &ldq};
    if (!d->attention_plain && H / Hkv <= ATT_DEC_MAX_G && D <= ATT_DEC_MAX_D) /* a kv head's query heads together */
        return gpu_launch_xy(d, GPU_K_ATTENTION_DECODE_GROUP, (unsigned)n, (unsigned)Hkv, 32 * ATT_DEC_WARPS, args,
                             err);
    return gpu_launch_xy(d, GPU_K_ATTENTION_DECODE, (unsigned)n, (unsigned)H, ATT_THREADS, args, err);
}

/* ---- bf16 products (gpu/gemm.h): the operands rounded; linear layers ---- */

int gpu_round_bf16(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, int rows, int cols, int ld_dst, int ld_src,
                   GrpoErr *err) {
    if (rows < 0 || cols < 0 || ld_dst < cols || ld_src < cols)
        return err_set(err, "gpu_round_bf16: rows %d cols %d ld_dst %d ld_src %d: expected sizes >= 0 and strides >= cols",
                       rows, cols, ld_dst, ld_src);
    void *args[] = {&dst, &src, &rows, &cols, &ld_dst, &ld_src};
    return gpu_launch(d, GPU_K_ROUND_BF16, flat_blocks(d, (unsigned long long)rows * cols), FLAT_THREADS, args, err);
}

int gpu_matmul_forward_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr in, CUdeviceptr in16, CUdeviceptr W16,
                            CUdeviceptr bias, int N, int I, int O, GrpoErr *err) {
    if (in && gpu_round_bf16(d, in16, in, N, I, I, I, err)) return -1;
    if (bias) { /* out = bias, then the product added to it: the CPU's order */
        void *args[] = {&out, &bias, &N, &O};
        if (gpu_launch(d, GPU_K_LINEAR_BIAS_ROWS, flat_blocks(d, (unsigned long long)N * O), FLAT_THREADS, args, err))
            return -1;
    }
    return gpu_gemm_bf16(d, 0, 1, N, O, I, 1.0f, in16, I, W16, I, bias ? 1.0f : 0.0f, out, O, err);
}

int gpu_matmul_backward_bf16(GpuDevice *d, CUdeviceptr din, CUdeviceptr dW, CUdeviceptr dbias, CUdeviceptr dout,
                             CUdeviceptr dout16, CUdeviceptr in16, CUdeviceptr W16, int N, int I, int O, int write_dw,
                             GrpoErr *err) {
    if (dbias) {
        void *args[] = {&dbias, &dout, &N, &O, &write_dw};
        if (gpu_launch(d, GPU_K_LINEAR_BIAS_BACKWARD, (unsigned)((O + FLAT_THREADS - 1) / FLAT_THREADS), FLAT_THREADS,
                       args, err))
            return -1;
    }
    if ((din || dW) && gpu_round_bf16(d, dout16, dout, N, O, O, O, err)) return -1;
    if (din && gpu_gemm_bf16(d, 0, 0, N, I, O, 1.0f, dout16, O, W16, I, 0.0f, din, I, err)) return -1;
    if (dW && gpu_gemm_bf16(d, 1, 0, O, I, N, 1.0f, dout16, O, in16, I, write_dw ? 0.0f : 1.0f, dW, I, err)) return -1;
    return 0;
}

/* ---- the LM head's family: embedding, log-prob chunks, sampler ---- */

/* A block per row for the head's row kernels: a power of two (their double sums
 * are trees in shared memory). */
enum { HEAD_THREADS = 512 };
/* The sampler's: a power of two, at most 256 (its shared buffer: 16 doubles a thread). */
enum { SAMPLER_THREADS = 256 };

int gpu_embedding_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr ids, CUdeviceptr table, int N, int C,
                          GrpoErr *err) {
    void *args[] = {&out, &ids, &table, &C};
    return gpu_launch(d, GPU_K_EMBEDDING_FORWARD, (unsigned)N, ROW_THREADS, args, err);
}

int gpu_embedding_forward_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr ids, CUdeviceptr table16, int N, int C,
                               GrpoErr *err) {
    void *args[] = {&out, &ids, &table16, &C};
    return gpu_launch(d, GPU_K_EMBEDDING_FORWARD_BF16, (unsigned)N, ROW_THREADS, args, err);
}

/* Blocks split the vocabulary rows (row % blocks), 8 a multiprocessor: every block
 * reads all N ids and adds only its own rows'. */
int gpu_embedding_backward(GpuDevice *d, CUdeviceptr dtable, CUdeviceptr dout, CUdeviceptr ids, int N, int C,
                           GrpoErr *err) {
    void *args[] = {&dtable, &dout, &ids, &N, &C};
    return gpu_launch(d, GPU_K_EMBEDDING_BACKWARD, N > 0 ? 8u * (unsigned)(d->sms > 0 ? d->sms : 1) : 0,
                      ROW_THREADS, args, err);
}

int gpu_logprob_chunk_forward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse,
                              CUdeviceptr logits, CUdeviceptr targets, int m, int V, GrpoErr *err) {
    void *args[] = {&logprob, &entropy, &lse, &logits, &targets, &V};
    return gpu_launch(d, GPU_K_LOGPROB_CHUNK_FORWARD, (unsigned)m, HEAD_THREADS, args, err);
}

int gpu_logprob_chunk_backward(GpuDevice *d, CUdeviceptr logits, CUdeviceptr dlogprob, CUdeviceptr dentropy,
                               CUdeviceptr lse, CUdeviceptr targets, int m, int V, float inv_temp, GrpoErr *err) {
    void *args[] = {&logits, &dlogprob, &dentropy, &lse, &targets, &V, &inv_temp};
    return gpu_launch(d, GPU_K_LOGPROB_CHUNK_BACKWARD, (unsigned)m, HEAD_THREADS, args, err);
}

int gpu_logprob_chunk_probs(GpuDevice *d, CUdeviceptr logits, CUdeviceptr lse, int m, int V, GrpoErr *err) {
    void *args[] = {&logits, &lse, &V};
    return gpu_launch(d, GPU_K_LOGPROB_CHUNK_PROBS, (unsigned)m, HEAD_THREADS, args, err);
}

int gpu_logprob_backward_frozen_rows(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dlogprob, CUdeviceptr pw,
                                     CUdeviceptr W16, CUdeviceptr W, CUdeviceptr rows, CUdeviceptr tgts, int m, int C,
                                     float inv_temp, GrpoErr *err) {
    void *args[] = {&dh, &dlogprob, &pw, &W16, &W, &rows, &tgts, &C, &inv_temp};
    return gpu_launch(d, GPU_K_LOGPROB_BACKWARD_FROZEN, (unsigned)m, ROW_THREADS, args, err);
}

int gpu_token_objective_grad(GpuDevice *d, CUdeviceptr lp, int m, const TokenObjectiveParams *p, CUdeviceptr w,
                             CUdeviceptr adv, CUdeviceptr isw, CUdeviceptr old, CUdeviceptr ref, GrpoErr *err) {
    if (m <= 0) return 0;
    TokenObjectiveParams params = *p;
    void *args[] = {&lp, &m, &params, &w, &adv, &isw, &old, &ref};
    return gpu_launch(d, GPU_K_TOKEN_OBJECTIVE_GRAD, flat_blocks(d, (unsigned long long)m), FLAT_THREADS, args, err);
}

int gpu_sampler_sample(GpuDevice *d, CUdeviceptr tok, CUdeviceptr logp, CUdeviceptr logits, CUdeviceptr scratch,
                       const GpuSampleRows *rows, int m, int V, const SamplerOpts *o, int force_sequential,
                       GrpoErr *err) {
    if (V <= 0 || V >= (1 << 24)) return err_set(err, "GPU sampler: vocabulary of %d tokens (1 .. 2^24 - 1)", V);
    GpuSampleRows r = *rows;
    float temperature = o->temperature, top_p = o->top_p, min_p = o->min_p, penalty = o->repetition_penalty;
    int top_k = o->top_k;
    void *args[] = {&tok,  &logp, &logits,      &scratch, &r.seed, &r.stream, &r.draw,   &r.ctx_first,
                    &r.ctx_len, &r.ctx, &V, &temperature, &top_k, &top_p, &min_p, &penalty, &force_sequential};
    return gpu_launch(d, GPU_K_SAMPLER_SAMPLE, (unsigned)m, SAMPLER_THREADS, args, err);
}

/* ---- one decoder layer (gpu/layer.h): the residual add ---- */
int gpu_residual_add(GpuDevice *d, CUdeviceptr y, CUdeviceptr x, size_t n, GrpoErr *err) {
    unsigned long long count = n;
    void *args[] = {&y, &x, &count};
    return gpu_launch(d, GPU_K_RESIDUAL_ADD, flat_blocks(d, count), FLAT_THREADS, args, err);
}

/* ---- rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) ---- */

int gpu_rows_gather(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, CUdeviceptr idx, int m, int C, GrpoErr *err) {
    void *args[] = {&dst, &src, &idx, &m, &C};
    return m > 0 ? gpu_launch(d, GPU_K_ROWS_GATHER, flat_blocks(d, (unsigned long long)m * C), FLAT_THREADS, args, err)
                 : 0;
}

int gpu_rows_scatter(GpuDevice *d, CUdeviceptr dst, CUdeviceptr src, CUdeviceptr idx, int m, int C, int add,
                     GrpoErr *err) {
    void *args[] = {&dst, &src, &idx, &m, &C, &add};
    return m > 0 ? gpu_launch(d, GPU_K_ROWS_SCATTER, flat_blocks(d, (unsigned long long)m * C), FLAT_THREADS, args,
                              err)
                 : 0;
}

/* ---- decoding: the batch-invariant row-wise product (gpu/kernels/rowwise.cu) ---- */
/* The kernel's block: its size is part of the order of sums (ROWWISE_THREADS, 256);
 * a block owns 8 output rows (ROWWISE_OT). */
enum { ROWWISE_BLOCK = 256, ROWWISE_OUTPUTS = 8 };

int gpu_matmul_rowwise_bf16(GpuDevice *d, CUdeviceptr out, CUdeviceptr in, CUdeviceptr W16, CUdeviceptr bias, int n,
                            int I, int O, GrpoErr *err) {
    if (n < 0 || I < 1 || O < 1)
        return err_set(err, "gpu_matmul_rowwise_bf16: n %d, I %d, O %d: expected n >= 0, I >= 1, O >= 1", n, I, O);
    /* 16-byte loads where every row starts on 16 bytes; elementwise loads otherwise
     * (the same sums either way) */
    int vec = I % 8 == 0 && in % 16 == 0 && W16 % 16 == 0;
    void *args[] = {&out, &in, &W16, &bias, &n, &I, &O, &vec};
    return n > 0 ? gpu_launch(d, GPU_K_MATMUL_ROWWISE_BF16, (unsigned)((O + ROWWISE_OUTPUTS - 1) / ROWWISE_OUTPUTS),
                              ROWWISE_BLOCK, args, err)
                 : 0;
}

int gpu_kv_write(GpuDevice *d, CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr qkv, CUdeviceptr slots, CUdeviceptr own,
                 int n, int cap, int kv_dim, int ld, int k_off, int v_off, GrpoErr *err) {
    void *args[] = {&kc, &vc, &qkv, &slots, &own, &cap, &kv_dim, &ld, &k_off, &v_off};
    return n > 0 ? gpu_launch(d, GPU_K_KV_WRITE, (unsigned)n, ROW_THREADS, args, err) : 0;
}

/* ---- one decoder layer's training forward and backward (gpu/layer_train.h) ---- */

int gpu_swiglu_backward_bf16(GpuDevice *d, CUdeviceptr dgu16, CUdeviceptr dout, CUdeviceptr gu16, int N, int F,
                             GrpoErr *err) {
    void *args[] = {&dgu16, &dout, &gu16, &N, &F};
    return gpu_launch(d, GPU_K_SWIGLU_BACKWARD_BF16, flat_blocks(d, (unsigned long long)N * F), FLAT_THREADS, args,
                      err);
}

int gpu_matmul_backward_bf16_dout16(GpuDevice *d, CUdeviceptr din, CUdeviceptr dW, CUdeviceptr dout16,
                                    CUdeviceptr in16, CUdeviceptr W16, int N, int I, int O, int write_dw,
                                    GrpoErr *err) {
    if (din && gpu_gemm_bf16(d, 0, 0, N, I, O, 1.0f, dout16, O, W16, I, 0.0f, din, I, err)) return -1;
    if (dW && gpu_gemm_bf16(d, 1, 0, O, I, N, 1.0f, dout16, O, in16, I, write_dw ? 0.0f : 1.0f, dW, I, err)) return -1;
    return 0;
}

/* ---- Qwen3's q/k norm (gpu/kernels/qk_norm.cu) ---- */

enum { QKN_THREADS = 128, QKN_HEADS_PER_BLOCK = 16 }; /* qk_norm.cu: 8 threads a head */

static int qk_norm_shape(const char *op, int N, int H, int Hkv, int D, int ld_a, int ld_b, GrpoErr *err) {
    int QK = (H + Hkv) * D;
    if (N < 0 || H < 1 || Hkv < 1 || D < 1 || ld_a < QK || ld_b < QK)
        return err_set(err, "%s: N %d, H %d, Hkv %d, D %d, strides %d and %d: expected N >= 0, heads and D >= 1, "
                       "strides >= (H + Hkv) D = %d", op, N, H, Hkv, D, ld_a, ld_b, QK);
    return 0;
}

int gpu_qk_norm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr wq,
                        CUdeviceptr wk, int N, int H, int Hkv, int D, int ld_out, int ld_in, float eps, GrpoErr *err) {
    if (qk_norm_shape("gpu_qk_norm_forward", N, H, Hkv, D, ld_out, ld_in, err)) return -1;
    int nh = H + Hkv;
    void *args[] = {&out, &rstd, &in, &wq, &wk, &N, &H, &nh, &D, &ld_out, &ld_in, &eps};
    return N ? gpu_launch_xy(d, GPU_K_QK_NORM_FORWARD, (unsigned)N,
                             (unsigned)((nh + QKN_HEADS_PER_BLOCK - 1) / QKN_HEADS_PER_BLOCK), QKN_THREADS, args, err)
             : 0;
}

int gpu_qk_norm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dwq, CUdeviceptr dwk, CUdeviceptr part,
                         CUdeviceptr dout, CUdeviceptr in, CUdeviceptr rstd, CUdeviceptr wq, CUdeviceptr wk, int N,
                         int H, int Hkv, int D, int ld_din, int ld_dout, int ld_in, int write_dw, GrpoErr *err) {
    if (qk_norm_shape("gpu_qk_norm_backward", N, H, Hkv, D, ld_dout, ld_in, err) ||
        (din && qk_norm_shape("gpu_qk_norm_backward", N, H, Hkv, D, ld_din, ld_in, err)))
        return -1;
    if ((dwq || dwk) && !part) return err_set(err, "gpu_qk_norm_backward: weight gradients wanted and no part scratch");
    int nh = H + Hkv;
    if (din && N) {
        void *args[] = {&din, &dout, &in, &rstd, &wq, &wk, &N, &H, &nh, &D, &ld_din, &ld_dout, &ld_in};
        if (gpu_launch_xy(d, GPU_K_QK_NORM_BACKWARD_INPUT, (unsigned)N,
                          (unsigned)((nh + QKN_HEADS_PER_BLOCK - 1) / QKN_HEADS_PER_BLOCK), QKN_THREADS, args, err))
            return -1;
    }
    if (!dwq && !dwk) return 0;
    void *heads[] = {&part, &dout, &in, &rstd, &N, &nh, &D, &ld_dout, &ld_in};
    if (gpu_launch_xy(d, GPU_K_QK_NORM_BACKWARD_WEIGHT_HEADS, (unsigned)((D + FLAT_THREADS - 1) / FLAT_THREADS),
                      (unsigned)nh, FLAT_THREADS, heads, err))
        return -1;
    void *sum[] = {&dwq, &dwk, &part, &H, &nh, &D, &write_dw};
    return gpu_launch(d, GPU_K_QK_NORM_BACKWARD_WEIGHT_SUM, (unsigned)((2 * D + FLAT_THREADS - 1) / FLAT_THREADS),
                      FLAT_THREADS, sum, err);
}

/* ---- the trainable model's device form (train/model_gpu.c) ---- */

int gpu_master_to_weights(GpuDevice *d, CUdeviceptr dst16, CUdeviceptr dst32, CUdeviceptr src, size_t n, GrpoErr *err) {
    if (!src || (!dst16 && !dst32)) return err_set(err, "gpu_master_to_weights: no source or no destination");
    unsigned long long count = n;
    void *args[] = {&dst16, &dst32, &src, &count};
    return n ? gpu_launch(d, GPU_K_MASTER_TO_WEIGHTS, flat_blocks(d, count), FLAT_THREADS, args, err) : 0;
}

enum { GRAD_SUMSQ_ROWS = 128 }; /* gpu/kernels/grad.cu's: gradient blocks (threads) per CUDA block */

int gpu_grad_sumsq_blocks(GpuDevice *d, CUdeviceptr part, CUdeviceptr g, size_t n, GrpoErr *err) {
    if (!n) return 0;
    if (!part || !g) return err_set(err, "gpu_grad_sumsq_blocks: no gradient or no part");
    unsigned long long count = n, nb = (count + GRAD_NORM_BLOCK - 1) / GRAD_NORM_BLOCK;
    void *args[] = {&part, &g, &count};
    return gpu_launch(d, GPU_K_GRAD_SUMSQ_BLOCKS, (unsigned)((nb + GRAD_SUMSQ_ROWS - 1) / GRAD_SUMSQ_ROWS),
                      GRAD_SUMSQ_ROWS, args, err);
}

int gpu_grad_scale(GpuDevice *d, CUdeviceptr g, size_t n, float c, GrpoErr *err) {
    unsigned long long count = n;
    void *args[] = {&g, &count, &c};
    return n ? gpu_launch(d, GPU_K_GRAD_SCALE, flat_blocks(d, count), FLAT_THREADS, args, err) : 0;
}

/* ---- sync_ref_model on the device (train/model_gpu.c) ---- */

int gpu_mix_reference(GpuDevice *d, CUdeviceptr ref, CUdeviceptr policy, size_t n, float alpha, GrpoErr *err) {
    if (!n) return 0;
    if (!ref || !policy) return err_set(err, "gpu_mix_reference: no reference or no policy");
    unsigned long long count = n;
    void *args[] = {&ref, &policy, &count, &alpha};
    return gpu_launch(d, GPU_K_MIX_REFERENCE, flat_blocks(d, count), FLAT_THREADS, args, err);
}
