/* gpu/device.h — one NVIDIA GPU, driven through the driver API (gpu/cuda.h): the
 * device and its primary context, the kernels (gpu/kernels/, compiled to PTX by
 * clang at build time and embedded in the program; the driver compiles the PTX for
 * the GPU it finds), device memory and launches.
 *
 * A machine without a usable GPU (no driver, no device, one older than compute
 * capability 8.0) is not an error: gpu_open says so and the program runs on the
 * CPU. Every call returns 0, or -1 with err naming the driver's error. */
#ifndef GRPO_GPU_DEVICE_H
#define GRPO_GPU_DEVICE_H

#include <stddef.h>

#include "core/check.h"
#include "gpu/cuda.h"

typedef enum {
    GPU_K_RMSNORM_FORWARD,
    GPU_K_RMSNORM_BACKWARD_INPUT,
    GPU_K_RMSNORM_BACKWARD_WEIGHT,
    GPU_K_SWIGLU_FORWARD,
    GPU_K_SWIGLU_BACKWARD,
    GPU_K_ADAMW_STEP,
    /* RoPE and attention (gpu/kernels/rope.cu, attention.cu) */
    GPU_K_ROPE_FORWARD,
    GPU_K_ROPE_BACKWARD,
    GPU_K_ATTENTION_FORWARD,
    GPU_K_ATTENTION_BACKWARD_QUERY,
    GPU_K_ATTENTION_BACKWARD_KEY,
    GPU_K_ATTENTION_DECODE,
    /* bf16 products (gpu/gemm.h): the operands rounded; linear layers (gpu/ops.h: gpu_matmul_*_bf16) */
    GPU_K_ROUND_BF16,
    GPU_K_LINEAR_BIAS_ROWS,
    GPU_K_LINEAR_BIAS_BACKWARD,
    /* the LM head's family: embedding, log-prob chunks, sampler */
    GPU_K_EMBEDDING_FORWARD,
    GPU_K_EMBEDDING_FORWARD_BF16,
    GPU_K_EMBEDDING_BACKWARD,
    GPU_K_LOGPROB_CHUNK_FORWARD,
    GPU_K_LOGPROB_CHUNK_BACKWARD,
    GPU_K_SAMPLER_SAMPLE,
    /* one decoder layer (gpu/layer.h): the residual add */
    GPU_K_RESIDUAL_ADD,
    /* rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) */
    GPU_K_ROWS_GATHER,
    GPU_K_ROWS_SCATTER,
    /* decoding: the batch-invariant row-wise product, the KV cache write (gpu/kernels/rowwise.cu, kv_write.cu) */
    GPU_K_MATMUL_ROWWISE_BF16,
    GPU_K_KV_WRITE,
    /* one decoder layer's training forward and backward (gpu/layer_train.h): SwiGLU's bf16 backward */
    GPU_K_SWIGLU_BACKWARD_BF16,
    /* Qwen3's q/k norm (gpu/kernels/qk_norm.cu) */
    GPU_K_QK_NORM_FORWARD,
    GPU_K_QK_NORM_BACKWARD_INPUT,
    GPU_K_QK_NORM_BACKWARD_WEIGHT_HEADS,
    GPU_K_QK_NORM_BACKWARD_WEIGHT_SUM,
    /* LoRA adapters' dropout (gpu/kernels/lora.cu, gpu/lora.h) */
    GPU_K_LORA_DROPOUT_MASK,
    GPU_K_LORA_DROPOUT_APPLY,
    /* the trainable model's device form (train/model_gpu.c): the master weights to the forward's copies */
    GPU_K_MASTER_TO_WEIGHTS,
    /* the step's gradient on the device (train/model_gpu.c): its norm's blocks, the clip */
    GPU_K_GRAD_SUMSQ_BLOCKS,
    GPU_K_GRAD_SCALE,
    /* LoRA adapters beside the base in decoding (gpu/kernels/lora_decode.cu, gpu/lora.h: gpu_lora_decode) */
    GPU_K_LORA_DECODE_DOWN,
    GPU_K_LORA_DECODE_UP,
    /* sync_ref_model on the device (train/model_gpu.c): the reference mixed with the policy */
    GPU_K_MIX_REFERENCE,
    /* a frozen LM head's shortcut (gpu/logprob.h: gpu_logprob_forward's pw, gpu_logprob_backward_frozen) */
    GPU_K_LOGPROB_CHUNK_PROBS,
    GPU_K_LOGPROB_BACKWARD_FROZEN,
    /* a token-local objective's gradient in the head's chunk loop (gpu/logprob.h: gpu_logprob_forward_backward) */
    GPU_K_TOKEN_OBJECTIVE_GRAD,
    /* attention's training forward and backward on the tensor cores (gpu/kernels/attention_mma.cu,
     * attention_backward_mma.cu) */
    GPU_K_ATTENTION_FORWARD_MMA,
    GPU_K_ATTENTION_BACKWARD_QUERY_MMA,
    GPU_K_ATTENTION_BACKWARD_KEY_MMA,
    /* decoding's attention, a kv head's group of query heads a block (gpu/kernels/attention.cu) */
    GPU_K_ATTENTION_DECODE_GROUP,
    GPU_N_KERNELS
} GpuKernel;

/* The kernels' names in the PTX, by GpuKernel. */
extern const char *const gpu_kernel_names[GPU_N_KERNELS];
/* The embedded PTX of gpu/kernels/all.cu, NUL-terminated (the build's kernels_ptx.o). */
extern const char gpu_kernels_ptx[];

struct GpuBlas; /* gpu/gemm.c: cuBLASLt, its handle, workspace and plans */
typedef struct {
    CudaApi api;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn[GPU_N_KERNELS];
    unsigned shared_max[GPU_N_KERNELS]; /* dynamic shared memory each kernel was let use (gpu_launch_shared) */
    char name[128];  /* "GPU 1: NVIDIA H100 80GB HBM3" on a machine of several */
    int ordinal;     /* the driver's device number (after CUDA_VISIBLE_DEVICES) */
    int cc_major, cc_minor, sms;
    size_t total_bytes;
    int attention_plain;  /* GRPO_GPU_ATTENTION=plain: attention on the plain kernels (gpu/ops.h) */
    struct GpuBlas *blas; /* made by the first product (gpu/gemm.h), freed by gpu_close */
} GpuDevice;

/* Opens the first GPU: 1 with d ready; 0 where there is none to use here (why[n]
 * says why: no driver, no device, compute capability below 8.0); -1 with err where
 * one is there but cannot be set up (the PTX refused: the driver's log in err), or
 * where, a GPU found, GRPO_GPU_ATTENTION is set to neither of its values:
 * `tensor_cores` (unset: the default) or `plain`, which runs attention on the first,
 * plain kernels for every head dim — a fallback should the tensor-core kernels
 * misbehave on some GPU, and what tools/gpu-check.sh switches to when
 * test_gpu_attention fails on them.
 * gpu_open_local: GPU local_rank, for the process of that local rank among
 * local_size on this machine (dist_local_rank, dist_local_size: one process per GPU
 * under mpirun, as torchrun's LOCAL_RANK places them); -1 with err when local_size
 * exceeds the machine's GPUs (CUDA_VISIBLE_DEVICES's, when it is set). */
int gpu_open(GpuDevice *d, char *why, size_t n, GrpoErr *err);
int gpu_open_local(GpuDevice *d, int local_rank, int local_size, char *why, size_t n, GrpoErr *err);
/* The tests' seam: the driver gpu_open opens, in place of libcuda (cuda_api_open);
 * NULL for libcuda. tests/machine/gpu_emulator.c installs an emulated GPU so. */
void gpu_set_driver(int (*open_driver)(CudaApi *api, char *why, size_t n));
void gpu_close(GpuDevice *d);

int gpu_alloc(GpuDevice *d, CUdeviceptr *p, size_t bytes, GrpoErr *err);
void gpu_free(GpuDevice *d, CUdeviceptr p);
/* The device's free memory in bytes now (cuMemGetInfo), 0 where it cannot be read: the memory
 * plans' measure (what an allocation took is the drop across it). */
size_t gpu_free_bytes(GpuDevice *d);
int gpu_put(GpuDevice *d, CUdeviceptr dst, const void *src, size_t bytes, GrpoErr *err);
int gpu_get(GpuDevice *d, void *dst, CUdeviceptr src, size_t bytes, GrpoErr *err);
/* Bytes gpu_put copied to a device (*up) and gpu_get from one (*down) so far in this
 * process, on every device: what a test counts to show a copy is made or gone. */
void gpu_copied_bytes(size_t *up, size_t *down);
/* bytes of zeros at p (p 0: nothing), in order with the launches (the default stream). */
int gpu_zero(GpuDevice *d, CUdeviceptr p, size_t bytes, GrpoErr *err);
/* Kernel k on a grid x 1 x 1 of blocks of block x 1 x 1 threads, args as cuLaunchKernel's. */
int gpu_launch(GpuDevice *d, GpuKernel k, unsigned grid, unsigned block, void **args, GrpoErr *err);
/* ...on a grid grid_x x grid_y x 1 (block_y() in the kernel counts grid_y). */
int gpu_launch_xy(GpuDevice *d, GpuKernel k, unsigned grid_x, unsigned grid_y, unsigned block, void **args,
                  GrpoErr *err);
/* ...with shared_bytes of dynamic shared memory (the kernel's dynamic_shared()); past
 * the 48 KB every kernel may use, the kernel is let use them first (the driver's
 * cuFuncSetAttribute; up to 227 KB on an H100, 163 KB on an A100). */
int gpu_launch_shared(GpuDevice *d, GpuKernel k, unsigned grid_x, unsigned grid_y, unsigned block,
                      unsigned shared_bytes, void **args, GrpoErr *err);
/* Waits for the launches so far; a fault in one of them is reported here. */
int gpu_sync(GpuDevice *d, GrpoErr *err);

/* The first kernel of the table the embedded PTX does not define (".entry NAME("),
 * or NULL: the table and the kernels' sources agree (checked on every machine). */
const char *gpu_ptx_missing_kernel(void);

#endif
