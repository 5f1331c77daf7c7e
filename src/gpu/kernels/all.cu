/* gpu/kernels/all.cu — every kernel, one PTX module (gpu/device.c loads it; the
 * build embeds it: Makefile, $(BUILD)/gpu/kernels.ptx). */
#include "rmsnorm.cu"
#include "swiglu.cu"
#include "adamw.cu"
/* RoPE and attention */
#include "rope.cu"
#include "attention.cu"
#include "attention_backward.cu"
#include "attention_mma.cu"
#include "attention_backward_mma.cu"
/* bf16 products (gpu/gemm.h): the operands rounded; linear layers (gpu/ops.h: gpu_matmul_*_bf16) */
#include "bf16.cu"
#include "linear.cu"
/* the LM head's family: embedding, log-prob chunks, sampler */
#include "embedding.cu"
#include "logprob.cu"
#include "sampler.cu"
/* one decoder layer (gpu/layer.h): the residual add */
#include "residual.cu"
/* rows gathered and scattered: the LM head's chunk loop (gpu/logprob.c) */
#include "rows.cu"
/* decoding: the batch-invariant row-wise product, the KV cache write (gpu/ops.h, gpu/decode.h) */
#include "rowwise.cu"
#include "kv_write.cu"
/* one decoder layer's training forward and backward (gpu/layer_train.h): SwiGLU's bf16 backward */
#include "swiglu_bf16.cu"
/* Qwen3's q/k norm (gpu/ops.h: gpu_qk_norm_*) */
#include "qk_norm.cu"
/* LoRA adapters' dropout (gpu/lora.h); after sampler.cu, whose philox_word it calls */
#include "lora.cu"
/* the trainable model's device form (train/model_gpu.c): the master weights to the forward's copies */
#include "master.cu"
/* the step's gradient on the device (train/model_gpu.c): its norm's blocks, the clip */
#include "grad.cu"
/* LoRA adapters beside the frozen base in a decoding step (gpu/lora.h: gpu_lora_decode) */
#include "lora_decode.cu"
/* sync_ref_model on the device (train/model_gpu.c): the reference mixed with the policy */
#include "mix.cu"
/* a token-local objective's gradient after each chunk of the LM head (gpu/logprob.c) */
#include "token_objective.cu"
