/* tests/machine/gpu_emulator.c — see gpu_emulator.h. The kernels by name and the
 * driver's calls on host memory; a launch runs the kernel's host build through
 * gpu_emu_run (gpu_emulator_threads.c: the block's threads as coroutines, the
 * barrier and the warp shuffles). */
#include "machine/gpu_emulator.h"

#include "gpu/gemm.h"
#include "machine/gpu_emulator_blas.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the kernels, lowered for the host (KERNEL = static: only this file calls them) */
#include "gpu/kernels/all.cu"

/* ---- the kernels by name: each unpacks cuLaunchKernel's params as its prototype
 * reads them (the driver reads each by the kernel's parameter sizes likewise) ---- */

#define P(i, T) (*(T *)p[i])
typedef float *Fp;
typedef const float *Cfp;

static void run_rmsnorm_forward(void **p) {
    rmsnorm_forward(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, int), P(5, int), P(6, int), P(7, float));
}
static void run_rmsnorm_backward_input(void **p) {
    rmsnorm_backward_input(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, int), P(6, int), P(7, int),
                           P(8, int));
}
static void run_rmsnorm_backward_weight(void **p) {
    rmsnorm_backward_weight(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, int), P(5, int), P(6, int), P(7, int),
                            P(8, int));
}
static void run_swiglu_forward(void **p) { swiglu_forward(P(0, Fp), P(1, Cfp), P(2, int), P(3, int)); }
static void run_swiglu_backward(void **p) { swiglu_backward(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, int), P(4, int)); }
static void run_adamw_step(void **p) {
    adamw_step(P(0, Fp), P(1, Fp), P(2, Fp), P(3, Cfp), P(4, const unsigned char *), P(5, u64), P(6, float),
               P(7, float), P(8, float), P(9, float), P(10, float), P(11, float), P(12, float), P(13, int));
}
/* bf16 products (gpu/gemm.h): the operands rounded; linear layers (gpu/ops.h: gpu_matmul_*_bf16) */
static void run_round_bf16(void **p) {
    round_bf16(P(0, unsigned short *), P(1, Cfp), P(2, int), P(3, int), P(4, int), P(5, int));
}
static void run_linear_bias_rows(void **p) { linear_bias_rows(P(0, Fp), P(1, Cfp), P(2, int), P(3, int)); }
static void run_linear_bias_backward(void **p) {
    linear_bias_backward(P(0, Fp), P(1, Cfp), P(2, int), P(3, int), P(4, int));
}

/* RoPE and attention */
typedef const int *Cip;
typedef const unsigned char *Cu8p;
static void run_rope_forward(void **p) {
    rope_forward(P(0, Fp), P(1, Cip), P(2, Cfp), P(3, int), P(4, int), P(5, int));
}
static void run_rope_backward(void **p) {
    rope_backward(P(0, Fp), P(1, Cip), P(2, Cfp), P(3, int), P(4, int), P(5, int));
}
static void run_attention_forward(void **p) {
    attention_forward(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cu8p), P(6, Cip), P(7, int),
                      P(8, int), P(9, int), P(10, int), P(11, int), P(12, int), P(13, int), P(14, int));
}
static void run_attention_forward_mma(void **p) {
    attention_forward_mma(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cu8p), P(6, Cip), P(7, int),
                          P(8, int), P(9, int), P(10, int), P(11, int), P(12, int), P(13, int), P(14, int));
}
static void run_attention_backward_query(void **p) {
    attention_backward_query(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cfp), P(6, Cfp), P(7, Cu8p),
                             P(8, Cip), P(9, int), P(10, int), P(11, int), P(12, int), P(13, int), P(14, int),
                             P(15, int), P(16, int), P(17, int), P(18, int));
}
static void run_attention_backward_key(void **p) {
    attention_backward_key(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cfp), P(6, Cfp), P(7, Cfp),
                           P(8, Cu8p), P(9, Cip), P(10, int), P(11, int), P(12, int), P(13, int), P(14, int),
                           P(15, int), P(16, int), P(17, int), P(18, int), P(19, int), P(20, int));
}
static void run_attention_backward_query_mma(void **p) {
    attention_backward_query_mma(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cfp), P(6, Cfp),
                                 P(7, Cu8p), P(8, Cip), P(9, int), P(10, int), P(11, int), P(12, int), P(13, int),
                                 P(14, int), P(15, int), P(16, int), P(17, int), P(18, int));
}
static void run_attention_backward_key_mma(void **p) {
    attention_backward_key_mma(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cfp), P(6, Cfp), P(7, Cfp),
                               P(8, Cu8p), P(9, Cip), P(10, int), P(11, int), P(12, int), P(13, int), P(14, int),
                               P(15, int), P(16, int), P(17, int), P(18, int), P(19, int), P(20, int));
}
static void run_attention_decode(void **p) {
    attention_decode(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cip), P(5, Cip), P(6, Cip), P(7, Cip), P(8, int),
                     P(9, int), P(10, int), P(11, int), P(12, int), P(13, int));
}
static void run_attention_decode_group(void **p) {
    attention_decode_group(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cip), P(5, Cip), P(6, Cip), P(7, Cip), P(8, int),
                     P(9, int), P(10, int), P(11, int), P(12, int), P(13, int));
}

/* the LM head's family: embedding, log-prob chunks, sampler */
typedef const u64 *Cup;
static void run_embedding_forward(void **p) { embedding_forward(P(0, Fp), P(1, Cip), P(2, Cfp), P(3, int)); }
static void run_embedding_forward_bf16(void **p) {
    embedding_forward_bf16(P(0, Fp), P(1, Cip), P(2, const unsigned short *), P(3, int));
}
static void run_embedding_backward(void **p) {
    embedding_backward(P(0, Fp), P(1, Cfp), P(2, Cip), P(3, int), P(4, int));
}
static void run_logprob_chunk_forward(void **p) {
    logprob_chunk_forward(P(0, Fp), P(1, Fp), P(2, Fp), P(3, Cfp), P(4, Cip), P(5, int));
}
static void run_logprob_chunk_backward(void **p) {
    logprob_chunk_backward(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cip), P(5, int), P(6, float));
}
static void run_sampler_sample(void **p) {
    sampler_sample(P(0, int *), P(1, Fp), P(2, Cfp), P(3, double *), P(4, Cup), P(5, Cup), P(6, Cup), P(7, Cip),
                   P(8, Cip), P(9, Cip), P(10, int), P(11, float), P(12, int), P(13, float), P(14, float),
                   P(15, float), P(16, int));
}
/* rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) */
static void run_rows_gather(void **p) { rows_gather(P(0, Fp), P(1, Cfp), P(2, Cip), P(3, int), P(4, int)); }
static void run_rows_scatter(void **p) {
    rows_scatter(P(0, Fp), P(1, Cfp), P(2, Cip), P(3, int), P(4, int), P(5, int));
}

/* decoding: the batch-invariant row-wise product, the KV cache write */
static void run_matmul_rowwise_bf16(void **p) {
    matmul_rowwise_bf16(P(0, Fp), P(1, Cfp), P(2, const unsigned short *), P(3, Cfp), P(4, int), P(5, int), P(6, int),
                        P(7, int));
}
static void run_kv_write(void **p) {
    kv_write(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cip), P(4, Cip), P(5, int), P(6, int), P(7, int), P(8, int),
             P(9, int));
}

/* one decoder layer (gpu/layer.h): the residual add */
static void run_residual_add(void **p) { residual_add(P(0, Fp), P(1, Cfp), P(2, u64)); }

/* one decoder layer's training forward and backward (gpu/layer_train.h): SwiGLU's bf16 backward */
static void run_swiglu_backward_bf16(void **p) {
    swiglu_backward_bf16(P(0, unsigned short *), P(1, Cfp), P(2, const unsigned short *), P(3, int), P(4, int));
}

/* Qwen3's q/k norm (gpu/kernels/qk_norm.cu) */
static void run_qk_norm_forward(void **p) {
    qk_norm_forward(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, int), P(6, int), P(7, int), P(8, int),
                    P(9, int), P(10, int), P(11, float));
}
static void run_qk_norm_backward_input(void **p) {
    qk_norm_backward_input(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, Cfp), P(5, Cfp), P(6, int), P(7, int),
                           P(8, int), P(9, int), P(10, int), P(11, int), P(12, int));
}
static void run_qk_norm_backward_weight_heads(void **p) {
    qk_norm_backward_weight_heads(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, Cfp), P(4, int), P(5, int), P(6, int),
                                  P(7, int), P(8, int));
}
static void run_qk_norm_backward_weight_sum(void **p) {
    qk_norm_backward_weight_sum(P(0, Fp), P(1, Fp), P(2, Cfp), P(3, int), P(4, int), P(5, int), P(6, int));
}
/* LoRA adapters' dropout (gpu/kernels/lora.cu) */
static void run_lora_dropout_mask(void **p) {
    lora_dropout_mask(P(0, unsigned char *), P(1, Cup), P(2, Cip), P(3, Cip), P(4, int), P(5, int), P(6, u64),
                      P(7, u64), P(8, unsigned));
}
static void run_lora_dropout_apply(void **p) {
    lora_dropout_apply(P(0, Fp), P(1, Cfp), P(2, Cu8p), P(3, int), P(4, int), P(5, int), P(6, float), P(7, int));
}
/* the trainable model's device form (train/model_gpu.c): the master weights to the forward's copies */
static void run_master_to_weights(void **p) {
    master_to_weights(P(0, unsigned short *), P(1, Fp), P(2, Cfp), P(3, u64));
}
/* the step's gradient on the device (gpu/kernels/grad.cu) */
static void run_grad_sumsq_blocks(void **p) { grad_sumsq_blocks(P(0, double *), P(1, Cfp), P(2, u64)); }
static void run_grad_scale(void **p) { grad_scale(P(0, Fp), P(1, u64), P(2, float)); }
/* LoRA adapters beside the base in decoding (gpu/kernels/lora_decode.cu) */
static void run_lora_decode_down(void **p) {
    lora_decode_down(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, int), P(4, int), P(5, float));
}
static void run_lora_decode_up(void **p) {
    lora_decode_up(P(0, Fp), P(1, int), P(2, int), P(3, Cfp), P(4, Cfp), P(5, int), P(6, int), P(7, int));
}
/* sync_ref_model on the device (gpu/kernels/mix.cu) */
static void run_mix_reference(void **p) { mix_reference(P(0, Fp), P(1, Cfp), P(2, u64), P(3, float)); }
/* a frozen LM head's shortcut (gpu/kernels/logprob.cu) */
static void run_logprob_chunk_probs(void **p) { logprob_chunk_probs(P(0, Fp), P(1, Cfp), P(2, int)); }
static void run_logprob_backward_frozen(void **p) {
    logprob_backward_frozen(P(0, Fp), P(1, Cfp), P(2, Cfp), P(3, const unsigned short *), P(4, Cfp), P(5, Cip),
                            P(6, Cip), P(7, int), P(8, float));
}
static void run_token_objective_grad(void **p) {
    token_objective_grad(P(0, Fp), P(1, int), P(2, TokenObjectiveParams), P(3, const double *), P(4, const double *),
                         P(5, const double *), P(6, Cfp), P(7, Cfp));
}

typedef struct {
    const char *name;
    void (*run)(void **params);
} EmuKernel;

static const EmuKernel kernels[] = {
    {"rmsnorm_forward", run_rmsnorm_forward},
    {"rmsnorm_backward_input", run_rmsnorm_backward_input},
    {"rmsnorm_backward_weight", run_rmsnorm_backward_weight},
    {"swiglu_forward", run_swiglu_forward},
    {"swiglu_backward", run_swiglu_backward},
    {"adamw_step", run_adamw_step},
    /* RoPE and attention */
    {"rope_forward", run_rope_forward},
    {"rope_backward", run_rope_backward},
    {"attention_forward", run_attention_forward},
    {"attention_backward_query", run_attention_backward_query},
    {"attention_backward_key", run_attention_backward_key},
    {"attention_decode", run_attention_decode},
    /* bf16 products (gpu/gemm.h): the operands rounded; linear layers (gpu/ops.h: gpu_matmul_*_bf16) */
    {"round_bf16", run_round_bf16},
    {"linear_bias_rows", run_linear_bias_rows},
    {"linear_bias_backward", run_linear_bias_backward},
    /* the LM head's family: embedding, log-prob chunks, sampler */
    {"embedding_forward", run_embedding_forward},
    {"embedding_forward_bf16", run_embedding_forward_bf16},
    {"embedding_backward", run_embedding_backward},
    {"logprob_chunk_forward", run_logprob_chunk_forward},
    {"logprob_chunk_backward", run_logprob_chunk_backward},
    {"sampler_sample", run_sampler_sample},
    /* one decoder layer (gpu/layer.h): the residual add */
    {"residual_add", run_residual_add},
    /* rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) */
    {"rows_gather", run_rows_gather},
    {"rows_scatter", run_rows_scatter},
    /* decoding: the batch-invariant row-wise product, the KV cache write */
    {"matmul_rowwise_bf16", run_matmul_rowwise_bf16},
    {"kv_write", run_kv_write},
    /* one decoder layer's training forward and backward (gpu/layer_train.h): SwiGLU's bf16 backward */
    {"swiglu_backward_bf16", run_swiglu_backward_bf16},
    /* Qwen3's q/k norm (gpu/kernels/qk_norm.cu) */
    {"qk_norm_forward", run_qk_norm_forward},
    {"qk_norm_backward_input", run_qk_norm_backward_input},
    {"qk_norm_backward_weight_heads", run_qk_norm_backward_weight_heads},
    {"qk_norm_backward_weight_sum", run_qk_norm_backward_weight_sum},
    /* LoRA adapters' dropout (gpu/kernels/lora.cu) */
    {"lora_dropout_mask", run_lora_dropout_mask},
    {"lora_dropout_apply", run_lora_dropout_apply},
    /* the trainable model's device form (train/model_gpu.c): the master weights to the forward's copies */
    {"master_to_weights", run_master_to_weights},
    /* the step's gradient on the device (gpu/kernels/grad.cu) */
    {"grad_sumsq_blocks", run_grad_sumsq_blocks},
    {"grad_scale", run_grad_scale},
    /* LoRA adapters beside the base in decoding (gpu/kernels/lora_decode.cu) */
    {"lora_decode_down", run_lora_decode_down},
    {"lora_decode_up", run_lora_decode_up},
    /* sync_ref_model on the device (gpu/kernels/mix.cu) */
    {"mix_reference", run_mix_reference},
    /* a frozen LM head's shortcut (gpu/kernels/logprob.cu) */
    {"logprob_chunk_probs", run_logprob_chunk_probs},
    {"logprob_backward_frozen", run_logprob_backward_frozen},
    {"token_objective_grad", run_token_objective_grad},
    {"attention_forward_mma", run_attention_forward_mma},
    {"attention_backward_query_mma", run_attention_backward_query_mma},
    {"attention_backward_key_mma", run_attention_backward_key_mma},
    {"attention_decode_group", run_attention_decode_group},
};
enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

/* ---- a launch (gpu_emulator_threads.c runs it) ---- */

enum { CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_FOUND = 500, CUDA_ERROR_LAUNCH_FAILED = 719 };

/* The dynamic shared memory each kernel was let use past the 48 KB every kernel may
 * (cuFuncSetAttribute's MAX_DYNAMIC_SHARED_SIZE_BYTES), as the driver keeps it: a
 * launch asking for more is refused, as on a GPU. */
static int shared_max[N_KERNELS];
enum { SHARED_DEFAULT = 48 * 1024, SHARED_LIMIT = 227 * 1024 }; /* an H100's */

static CUresult emu_set_attribute(CUfunction fn, int attribute, int value) {
    if (!fn || attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 || value > SHARED_LIMIT)
        return CUDA_ERROR_INVALID_VALUE;
    shared_max[(const EmuKernel *)fn - kernels] = value;
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared_bytes, CUstream stream, void **params, void **extra) {
    if (!fn || gx == 0 || gy == 0 || gz != 1 || by != 1 || bz != 1 || bx == 0 || bx > 1024 || bx % 32 || extra) {
        fprintf(stderr, "gpu emulator: launch %ux%ux%u blocks of %ux%ux%u threads: the emulator takes a grid x*y*1 "
                        "of blocks of 32..1024 threads (a multiple of 32) x 1 x 1, params only\n",
                gx, gy, gz, bx, by, bz);
        return CUDA_ERROR_INVALID_VALUE;
    }
    const EmuKernel *k = (const EmuKernel *)fn;
    if (shared_bytes > SHARED_DEFAULT && shared_bytes > (unsigned)shared_max[k - kernels]) {
        fprintf(stderr, "gpu emulator: launch of %s with %u bytes of dynamic shared memory: past 48 KB the kernel must "
                        "be let use them first (cuFuncSetAttribute: %d)\n",
                k->name, shared_bytes, shared_max[k - kernels]);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return gpu_emu_run(k->name, k->run, gx, gy, bx, shared_bytes, params) ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

/* ---- what the host is given back (GRPO_EMU_DIGEST) ---- */
/* GRPO_EMU_DIGEST=FILE: every copy down to the host folded into one digest, a line
 * "N copies, B bytes down, digest H" appended to FILE at the last context's release
 * and at exit (what came after it). Two runs of a test under two orders
 * (GRPO_EMU_ORDER; tests/gpu/test_emu_order.sh) so compare all the host was given,
 * not only what the test prints: a race that moves a value below the printed digits
 * still changes the digest. Each step, (h ^ word) * odd then h ^= h >> 32, is a
 * bijection of h for a given word, and of the word for a given h: one word changed
 * always changes the digest. */
static struct {
    const char *path;
    uint64_t h, copies, bytes;
} digest;

static uint64_t digest_step(uint64_t h, uint64_t word) {
    h = (h ^ word) * 0xff51afd7ed558ccdull;
    return h ^ h >> 32;
}

static void digest_fold(const unsigned char *p, size_t bytes) {
    uint64_t h = digest_step(digest.h, bytes), word;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) memcpy(&word, p + i, 8), h = digest_step(h, word);
    word = 0;
    memcpy(&word, p + i, bytes - i);
    digest.h = digest_step(h, word), digest.copies++, digest.bytes += bytes;
}

static void digest_write(void) {
    if (!digest.path || !digest.copies) return;
    FILE *f = fopen(digest.path, "a");
    if (!f || fprintf(f, "%llu copies, %llu bytes down, digest %016llx\n", (unsigned long long)digest.copies,
                      (unsigned long long)digest.bytes, (unsigned long long)digest.h) < 0)
        fprintf(stderr, "gpu emulator: GRPO_EMU_DIGEST=%s: cannot append the digest there\n", digest.path);
    if (f) fclose(f);
    digest.h = digest.copies = digest.bytes = 0;
}

/* ---- the rest of the driver, on host memory ---- */

enum { EMU_SMS = 4 };
static const size_t EMU_BYTES = (size_t)8 << 30;
static size_t allocated;
static int context_refs;

static CUresult emu_init(unsigned flags) { return CUDA_SUCCESS; }
static unsigned devices_used; /* a bit per device whose context was retained */

/* GRPO_EMU_GPUS GPUs (1 when unset; up to 8): a machine of several, for one process per GPU. */
static int emu_gpus(void) {
    const char *v = getenv("GRPO_EMU_GPUS");
    int n = v ? atoi(v) : 1;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}
static CUresult emu_count(int *count) { return *count = emu_gpus(), CUDA_SUCCESS; }
static CUresult emu_get(CUdevice *dev, int ordinal) {
    return ordinal < 0 || ordinal >= emu_gpus() ? CUDA_ERROR_INVALID_VALUE : (*dev = ordinal, CUDA_SUCCESS);
}
unsigned gpu_emu_devices_used(void) { return devices_used; }
static CUresult emu_name(char *name, int len, CUdevice dev) {
    snprintf(name, (size_t)len, "grpo.c's GPU emulator (tests/machine)");
    return CUDA_SUCCESS;
}
static CUresult emu_attribute(int *value, int attribute, CUdevice dev) {
    switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = EMU_SMS; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 8; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}
static CUresult emu_total(size_t *bytes, CUdevice dev) { return *bytes = EMU_BYTES, CUDA_SUCCESS; }
static CUresult emu_retain(CUcontext *ctx, CUdevice dev) {
    context_refs++;
    devices_used |= 1u << dev;
    *ctx = (CUcontext)&context_refs;
    return CUDA_SUCCESS;
}
static CUresult emu_release(CUdevice dev) {
    if (--context_refs == 0) gpu_emu_free_threads(), digest_write();
    return CUDA_SUCCESS;
}
static CUresult emu_set_current(CUcontext ctx) { return CUDA_SUCCESS; }
static CUresult emu_sync(void) { return CUDA_SUCCESS; }
static CUresult emu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = EMU_BYTES - allocated, *total_bytes = EMU_BYTES;
    return CUDA_SUCCESS;
}
/* Each allocation is 256-byte aligned, as cuMemAlloc's are (cuBLASLt's plans depend
 * on it: gpu/gemm.c), and prefixed by its size, for MemGetInfo's count. */
enum { EMU_ALIGN = 256 };
static CUresult emu_alloc(CUdeviceptr *ptr, size_t bytes) {
    if (bytes == 0 || bytes > EMU_BYTES - allocated) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    void *block = NULL;
    if (posix_memalign(&block, EMU_ALIGN, EMU_ALIGN + bytes)) return 2;
    *(size_t *)block = bytes;
    unsigned char *p = (unsigned char *)block + EMU_ALIGN;
    memset(p, 0xff, bytes);
    allocated += bytes;
    *ptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}
static CUresult emu_free(CUdeviceptr ptr) {
    if (!ptr) return CUDA_SUCCESS;
    unsigned char *block = (unsigned char *)ptr - EMU_ALIGN;
    allocated -= *(size_t *)block;
    free(block);
    return CUDA_SUCCESS;
}
static unsigned long long copies_up, copies_down;
unsigned long long gpu_emu_copies(int down) { return down ? copies_down : copies_up; }

static CUresult emu_put(CUdeviceptr dst, const void *src, size_t bytes) {
    memcpy((void *)dst, src, bytes);
    copies_up++;
    return CUDA_SUCCESS;
}

static CUresult emu_fetch(void *dst, CUdeviceptr src, size_t bytes) {
    memcpy(dst, (const void *)src, bytes);
    copies_down++;
    if (digest.path) digest_fold(dst, bytes);
    return CUDA_SUCCESS;
}
static CUresult emu_memset(CUdeviceptr dst, unsigned char value, size_t bytes) {
    memset((void *)dst, value, bytes);
    return CUDA_SUCCESS;
}
/* The module is the embedded PTX (checked to be it); its functions are the host
 * builds of the same kernels, found by the same names. */
static CUresult emu_load(CUmodule *mod, const void *image, unsigned n_options, int *options, void **values) {
    memset(shared_max, 0, sizeof shared_max); /* a module's functions start with the default */
    if (image != (const void *)gpu_kernels_ptx) return CUDA_ERROR_INVALID_VALUE;
    *mod = (CUmodule)kernels;
    return CUDA_SUCCESS;
}
static CUresult emu_unload(CUmodule mod) { return CUDA_SUCCESS; }
static CUresult emu_function(CUfunction *fn, CUmodule mod, const char *name) {
    for (int k = 0; k < N_KERNELS; k++)
        if (!strcmp(kernels[k].name, name)) return *fn = (CUfunction)&kernels[k], CUDA_SUCCESS;
    return CUDA_ERROR_NOT_FOUND;
}
static CUresult emu_error_string(CUresult error, const char **text) {
    *text = error == CUDA_ERROR_LAUNCH_FAILED ? "the emulated kernel failed (stderr says why)"
          : error == CUDA_ERROR_NOT_FOUND    ? "named symbol not found"
          : error == 2                        ? "out of memory"
                                              : "invalid argument";
    return CUDA_SUCCESS;
}

int gpu_emulator_open(CudaApi *api, char *why, size_t n) {
    if (gpu_emu_set_order(getenv("GRPO_EMU_ORDER"), why, n)) return -1;
    const char *path = getenv("GRPO_EMU_DIGEST");
    if (path && *path && !digest.path) atexit(digest_write);
    digest.path = path && *path ? path : NULL;
    *api = (CudaApi){
        .Init = emu_init,
        .DeviceGetCount = emu_count,
        .DeviceGet = emu_get,
        .DeviceGetName = emu_name,
        .DeviceGetAttribute = emu_attribute,
        .DeviceTotalMem = emu_total,
        .DevicePrimaryCtxRetain = emu_retain,
        .DevicePrimaryCtxRelease = emu_release,
        .CtxSetCurrent = emu_set_current,
        .CtxSynchronize = emu_sync,
        .MemGetInfo = emu_mem_info,
        .MemAlloc = emu_alloc,
        .MemFree = emu_free,
        .MemcpyHtoD = emu_put,
        .MemcpyDtoH = emu_fetch,
        .MemsetD8 = emu_memset,
        .ModuleLoadDataEx = emu_load,
        .ModuleUnload = emu_unload,
        .ModuleGetFunction = emu_function,
        .FuncSetAttribute = emu_set_attribute,
        .LaunchKernel = launch,
        .GetErrorString = emu_error_string,
    };
    return 0;
}

void test_gpu_machine(int on) {
    gpu_set_driver(on ? gpu_emulator_open : NULL);
    gpu_set_blas(on ? gpu_emulator_blas_open : NULL); /* its cuBLASLt: tests/machine/gpu_emulator_blas.c */
}
