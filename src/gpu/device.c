/* gpu/device.c — see device.h. */
#include "gpu/device.h"

#include "gpu/gemm.h"
#include "core/text.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gpu_kernel_names[GPU_N_KERNELS] = {
    [GPU_K_RMSNORM_FORWARD] = "rmsnorm_forward",
    [GPU_K_RMSNORM_BACKWARD_INPUT] = "rmsnorm_backward_input",
    [GPU_K_RMSNORM_BACKWARD_WEIGHT] = "rmsnorm_backward_weight",
    [GPU_K_SWIGLU_FORWARD] = "swiglu_forward",
    [GPU_K_SWIGLU_BACKWARD] = "swiglu_backward",
    [GPU_K_ADAMW_STEP] = "adamw_step",
    /* RoPE and attention */
    [GPU_K_ROPE_FORWARD] = "rope_forward",
    [GPU_K_ROPE_BACKWARD] = "rope_backward",
    [GPU_K_ATTENTION_FORWARD] = "attention_forward",
    [GPU_K_ATTENTION_BACKWARD_QUERY] = "attention_backward_query",
    [GPU_K_ATTENTION_BACKWARD_KEY] = "attention_backward_key",
    [GPU_K_ATTENTION_DECODE] = "attention_decode",
    /* bf16 products (gpu/gemm.h): the operands rounded; linear layers (gpu/ops.h: gpu_matmul_*_bf16) */
    [GPU_K_ROUND_BF16] = "round_bf16",
    [GPU_K_LINEAR_BIAS_ROWS] = "linear_bias_rows",
    [GPU_K_LINEAR_BIAS_BACKWARD] = "linear_bias_backward",
    /* the LM head's family: embedding, log-prob chunks, sampler */
    [GPU_K_EMBEDDING_FORWARD] = "embedding_forward",
    [GPU_K_EMBEDDING_FORWARD_BF16] = "embedding_forward_bf16",
    [GPU_K_EMBEDDING_BACKWARD] = "embedding_backward",
    [GPU_K_LOGPROB_CHUNK_FORWARD] = "logprob_chunk_forward",
    [GPU_K_LOGPROB_CHUNK_BACKWARD] = "logprob_chunk_backward",
    [GPU_K_SAMPLER_SAMPLE] = "sampler_sample",
    /* one decoder layer (gpu/layer.h): the residual add */
    [GPU_K_RESIDUAL_ADD] = "residual_add",
    /* rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) */
    [GPU_K_ROWS_GATHER] = "rows_gather",
    [GPU_K_ROWS_SCATTER] = "rows_scatter",
    /* decoding: the batch-invariant row-wise product, the KV cache write */
    [GPU_K_MATMUL_ROWWISE_BF16] = "matmul_rowwise_bf16",
    [GPU_K_KV_WRITE] = "kv_write",
    /* one decoder layer's training forward and backward (gpu/layer_train.h): SwiGLU's bf16 backward */
    [GPU_K_SWIGLU_BACKWARD_BF16] = "swiglu_backward_bf16",
    /* Qwen3's q/k norm (gpu/kernels/qk_norm.cu) */
    [GPU_K_QK_NORM_FORWARD] = "qk_norm_forward",
    [GPU_K_QK_NORM_BACKWARD_INPUT] = "qk_norm_backward_input",
    [GPU_K_QK_NORM_BACKWARD_WEIGHT_HEADS] = "qk_norm_backward_weight_heads",
    [GPU_K_QK_NORM_BACKWARD_WEIGHT_SUM] = "qk_norm_backward_weight_sum",
    /* LoRA adapters' dropout (gpu/kernels/lora.cu, gpu/lora.h) */
    [GPU_K_LORA_DROPOUT_MASK] = "lora_dropout_mask",
    [GPU_K_LORA_DROPOUT_APPLY] = "lora_dropout_apply",
    /* the trainable model's device form (train/model_gpu.c) */
    [GPU_K_MASTER_TO_WEIGHTS] = "master_to_weights",
    [GPU_K_GRAD_SUMSQ_BLOCKS] = "grad_sumsq_blocks",
    [GPU_K_GRAD_SCALE] = "grad_scale",
    /* LoRA adapters beside the base in decoding (gpu/kernels/lora_decode.cu) */
    [GPU_K_LORA_DECODE_DOWN] = "lora_decode_down",
    [GPU_K_LORA_DECODE_UP] = "lora_decode_up",
    /* sync_ref_model on the device (train/model_gpu.c) */
    [GPU_K_MIX_REFERENCE] = "mix_reference",
    /* a frozen LM head's shortcut (gpu/logprob.h) */
    [GPU_K_LOGPROB_CHUNK_PROBS] = "logprob_chunk_probs",
    [GPU_K_LOGPROB_BACKWARD_FROZEN] = "logprob_backward_frozen",
    [GPU_K_TOKEN_OBJECTIVE_GRAD] = "token_objective_grad",
    [GPU_K_ATTENTION_FORWARD_MMA] = "attention_forward_mma",
    [GPU_K_ATTENTION_BACKWARD_QUERY_MMA] = "attention_backward_query_mma",
    [GPU_K_ATTENTION_BACKWARD_KEY_MMA] = "attention_backward_key_mma",
    [GPU_K_ATTENTION_DECODE_GROUP] = "attention_decode_group",
};

const char *gpu_ptx_missing_kernel(void) {
    for (int k = 0; k < GPU_N_KERNELS; k++) {
        char entry[96];
        snprintf(entry, sizeof entry, ".entry %s(", gpu_kernel_names[k]);
        if (!strstr(gpu_kernels_ptx, entry)) return gpu_kernel_names[k];
    }
    return NULL;
}

/* r as the call's result: 0, or -1 with err "what: the driver's text". */
static int check(GpuDevice *d, CUresult r, const char *what, GrpoErr *err) {
    return r == CUDA_SUCCESS ? 0 : err_set(err, "GPU: %s: %s", what, cuda_error_text(&d->api, r));
}

/* The PTX loaded as a module (the driver's JIT log in err when it refuses it) and
 * every kernel found in it. */
static int load_kernels(GpuDevice *d, GrpoErr *err) {
    char log[2048] = "";
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(size_t)sizeof log};
    CUresult r = d->api.ModuleLoadDataEx(&d->mod, gpu_kernels_ptx, 2, options, values);
    if (r != CUDA_SUCCESS) {
        log[sizeof log - 1] = 0;
        for (char *p = log; *p; p++)
            if (*p == '\n') *p = ' ';
        return err_set(err, "GPU: the kernels' PTX was refused: %s%s%s", cuda_error_text(&d->api, r), *log ? ": " : "",
                       log);
    }
    for (int k = 0; k < GPU_N_KERNELS; k++) {
        char what[96];
        snprintf(what, sizeof what, "kernel %s", gpu_kernel_names[k]);
        if (check(d, d->api.ModuleGetFunction(&d->fn[k], d->mod, gpu_kernel_names[k]), what, err)) return -1;
    }
    return 0;
}

static int (*driver_open)(CudaApi *api, char *why, size_t n) = cuda_api_open;

void gpu_set_driver(int (*open_driver)(CudaApi *api, char *why, size_t n)) {
    driver_open = open_driver ? open_driver : cuda_api_open;
}

int gpu_open(GpuDevice *d, char *why, size_t n, GrpoErr *err) { return gpu_open_local(d, 0, 1, why, n, err); }

/* GRPO_GPU_ATTENTION into d->attention_plain: 0, or -1 with err for a value of neither kind. */
static int attention_choice(GpuDevice *d, GrpoErr *err) {
    const char *v = getenv("GRPO_GPU_ATTENTION");
    if (!v || !*v || !strcmp(v, "tensor_cores")) return 0;
    if (!strcmp(v, "plain")) return d->attention_plain = 1, 0;
    char shown[80];
    return err_set(err, "GRPO_GPU_ATTENTION=\"%s\": expected tensor_cores (the default) or plain",
                   text_escaped(shown, sizeof shown, v, 40));
}

int gpu_open_local(GpuDevice *d, int local_rank, int local_size, char *why, size_t n, GrpoErr *err) {
    memset(d, 0, sizeof *d);
    if (driver_open(&d->api, why, n)) return 0;
    int count = 0;
    CUresult r = d->api.Init(0);
    if (r == CUDA_SUCCESS) r = d->api.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(why, n, "the NVIDIA driver reports no usable GPU (%s)",
                 r == CUDA_SUCCESS ? "no device" : cuda_error_text(&d->api, r));
        cuda_api_close(&d->api);
        return 0;
    }
    if (local_size > count) { /* two processes on one GPU: each plans against memory the other takes */
        cuda_api_close(&d->api);
        return err_set(err, "%d processes on this machine and %d GPU%s: one process per GPU (mpirun -np %d)",
                       local_size, count, count == 1 ? "" : "s", count);
    }
    char ordinal[32], name[sizeof d->name];
    snprintf(ordinal, sizeof ordinal, "device %d", local_rank);
    if (check(d, d->api.DeviceGet(&d->dev, local_rank), ordinal, err) ||
        check(d, d->api.DeviceGetName(name, sizeof name, d->dev), "its name", err) ||
        check(d, d->api.DeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev),
              "its compute capability", err) ||
        check(d, d->api.DeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev),
              "its compute capability", err) ||
        check(d, d->api.DeviceGetAttribute(&d->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev),
              "its multiprocessors", err) ||
        check(d, d->api.DeviceTotalMem(&d->total_bytes, d->dev), "its memory", err)) {
        cuda_api_close(&d->api);
        return -1;
    }
    d->ordinal = local_rank;
    if (count > 1) /* which of the machine's GPUs, as nvidia-smi numbers them */
        snprintf(d->name, sizeof d->name, "GPU %d: %.100s", local_rank, name);
    else
        snprintf(d->name, sizeof d->name, "%s", name);
    if (d->cc_major < 8) { /* the kernels are PTX for sm_80 (bf16 mma) */
        snprintf(why, n, "%s has compute capability %d.%d; grpo needs 8.0 or newer", d->name, d->cc_major, d->cc_minor);
        cuda_api_close(&d->api);
        return 0;
    }
    if (attention_choice(d, err)) {
        cuda_api_close(&d->api);
        return -1;
    }
    if (check(d, d->api.DevicePrimaryCtxRetain(&d->ctx, d->dev), "its context", err) ||
        check(d, d->api.CtxSetCurrent(d->ctx), "its context", err) || load_kernels(d, err)) {
        gpu_close(d);
        return -1;
    }
    return 1;
}

void gpu_close(GpuDevice *d) {
    gpu_blas_close(d); /* cuBLASLt's state lives in the context: freed before it goes */
    if (d->mod) d->api.ModuleUnload(d->mod);
    if (d->ctx) d->api.DevicePrimaryCtxRelease(d->dev);
    cuda_api_close(&d->api);
    memset(d, 0, sizeof *d);
}

int gpu_alloc(GpuDevice *d, CUdeviceptr *p, size_t bytes, GrpoErr *err) {
    char what[64];
    snprintf(what, sizeof what, "allocating %zu bytes", bytes);
    *p = 0;
    return check(d, d->api.MemAlloc(p, bytes ? bytes : 1), what, err);
}

void gpu_free(GpuDevice *d, CUdeviceptr p) {
    if (p) d->api.MemFree(p);
}

size_t gpu_free_bytes(GpuDevice *d) {
    size_t f = 0, t = 0;
    return d->api.MemGetInfo(&f, &t) == CUDA_SUCCESS ? f : 0;
}

/* Bytes gpu_put and gpu_get copied (gpu_copied_bytes), every device of the process; atomic: a tool's worker
 * thread never copies, but nothing here needs to know that. */
static atomic_size_t copied_up, copied_down;

int gpu_put(GpuDevice *d, CUdeviceptr dst, const void *src, size_t bytes, GrpoErr *err) {
    atomic_fetch_add_explicit(&copied_up, bytes, memory_order_relaxed);
    return bytes ? check(d, d->api.MemcpyHtoD(dst, src, bytes), "copy to the GPU", err) : 0;
}

int gpu_get(GpuDevice *d, void *dst, CUdeviceptr src, size_t bytes, GrpoErr *err) {
    atomic_fetch_add_explicit(&copied_down, bytes, memory_order_relaxed);
    return bytes ? check(d, d->api.MemcpyDtoH(dst, src, bytes), "copy from the GPU", err) : 0;
}

void gpu_copied_bytes(size_t *up, size_t *down) {
    *up = atomic_load_explicit(&copied_up, memory_order_relaxed);
    *down = atomic_load_explicit(&copied_down, memory_order_relaxed);
}

int gpu_launch(GpuDevice *d, GpuKernel k, unsigned grid, unsigned block, void **args, GrpoErr *err) {
    return gpu_launch_xy(d, k, grid, 1, block, args, err);
}

int gpu_zero(GpuDevice *d, CUdeviceptr p, size_t bytes, GrpoErr *err) {
    return p && bytes ? check(d, d->api.MemsetD8(p, 0, bytes), "zeroing GPU memory", err) : 0;
}

int gpu_launch_shared(GpuDevice *d, GpuKernel k, unsigned grid_x, unsigned grid_y, unsigned block,
                      unsigned shared_bytes, void **args, GrpoErr *err) {
    if (grid_x == 0 || grid_y == 0) return 0;
    if (shared_bytes > 48 * 1024 && shared_bytes > d->shared_max[k]) {
        char what[128];
        snprintf(what, sizeof what, "kernel %s: %u bytes of shared memory", gpu_kernel_names[k], shared_bytes);
        int attribute = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        if (check(d, d->api.FuncSetAttribute(d->fn[k], attribute, (int)shared_bytes), what, err)) return -1;
        d->shared_max[k] = shared_bytes;
    }
    return check(d, d->api.LaunchKernel(d->fn[k], grid_x, grid_y, 1, block, 1, 1, shared_bytes, NULL, args, NULL),
                 gpu_kernel_names[k], err);
}

int gpu_launch_xy(GpuDevice *d, GpuKernel k, unsigned grid_x, unsigned grid_y, unsigned block, void **args,
                  GrpoErr *err) {
    return gpu_launch_shared(d, k, grid_x, grid_y, block, 0, args, err);
}

int gpu_sync(GpuDevice *d, GrpoErr *err) { return check(d, d->api.CtxSynchronize(), "synchronize", err); }
