/* train/model_gpu.h — the trainable model's device form (private to train/model.c):
 * full fine-tuning of a Qwen2/Llama-form model under mixed precision, or LoRA
 * adapters on its frozen bf16 base (gpu/model_lora.h's pass: the adapters' fp32
 * values are the master weights, AdamW's m and v theirs, the gradient in their
 * table's layout), on one NVIDIA GPU. The device holds the policy's bf16 copies and fp32 norms (gpu/model.h), the
 * training pass (gpu/model_train.h: recomputation with gradient_checkpointing, the gradient in
 * the parameter table's layout), fp32 master weights with AdamW's m and v in that
 * layout, the decay mask, and the KL reference when there is one: a frozen one's bf16
 * copy, or sync_ref_model's moving one as fp32 weights (mixed there) and bf16 copies;
 * under LoRA none (the base, adapters off) or, continuing --adapter, the starting
 * adapter's fp32 values, which the policy's base runs under for the reference.
 * The policy's GpuModel is also what a generator decodes (train_gpu_gen_device):
 * every update remakes it from the master weights (LoRA: AdamW writes the adapters
 * it holds views of in place), so generation after an update reads that update's
 * weights with nothing copied.
 * The host keeps the Model in its mixed-precision form (two halves) and AdamW's host
 * state: refreshed from the device when asked (train_gpu_host_sync: checkpoints, the
 * final save, the processes' hash), never per step; anything that may have written
 * them (a resume, train_model_weights) marks the device behind, and the next device
 * call (a pass, an update, train_gpu_gen_device) uploads them first.
 *
 * The step's gradient stays on the device in a world of one: clipped there
 * (train_gpu_clip: optim/grad.c's norm bit for bit, its block sums taken on the
 * device and 8 bytes per 4096 parameters brought up to be added in order) and read by
 * AdamW there. With several processes it crosses to the host once for the sum over
 * processes (train_gpu_gradient), is clipped there, and goes back for the update:
 * 2 x 4 P bytes a step, P the parameters.
 *
 * A device error in a pass is fatal (DIE): the passes cannot fail on the CPU either,
 * and a GPU that faulted mid-step leaves nothing to continue from. */
#ifndef GRPO_TRAIN_MODEL_GPU_H
#define GRPO_TRAIN_MODEL_GPU_H

#include <stddef.h>

#include "model/batch.h"
#include "optim/optim.h"
#include "train/model.h"

typedef struct TrainGpu TrainGpu;

/* Where a run trains. 1: on the GPU, *out made with the device open (the model
 * must be loaded under mixed precision); 0: on the CPU — silently where there is
 * no GPU or use_cpu is set, else with note[n] one line naming why and use_cpu
 * (bf16 false); -1 with
 * err: a GPU is there but cannot be set up. */
int train_gpu_choose(const TrainingArgs *a, const TrainModelNeeds *needs, TrainGpu **out, char *note, size_t n,
                     GrpoErr *err);
/* policy (and ref, the KL reference, or NULL: bf16 frozen, or fp32 moving under
 * sync_ref_model, borrowed like policy; ref_base: the reference is the policy's
 * base with its adapters off; ref_adapter: LoRA continuing --adapter, the reference
 * is the policy's base under this frozen starting adapter, of the policy adapters'
 * shapes, uploaded once; at most one of the three) onto the device with opt's m and v
 * (policy and opt stay the host's copies, borrowed until close), and everything
 * for micro-batches of up to max_tokens packed rows, against the GPU's free memory:
 * -1 with err naming the options to lower (length_option the algorithm's own). */
int train_gpu_plan(TrainGpu *g, Model *policy, Model *ref, int ref_base, const struct LoraLayers *ref_adapter,
                   AdamW *opt, const uint8_t *decay_mask, int max_tokens, int chunk_rows, const char *length_option,
                   GrpoErr *err);
void train_gpu_close(TrainGpu *g);
/* Device bytes planned (measured as the driver's free memory went down) and the
 * plan's words for them. */
double train_gpu_bytes(const TrainGpu *g);
void train_gpu_describe(const TrainGpu *g, char *out, size_t n);

/* ---- passes, on a packed batch (pb laid out by the caller) ---- */
void train_gpu_logprobs(TrainGpu *g, int reference, PaddedBatch *pb, float inv_temp, float *logp, float *entropy);
/* The training forward; with grad, dlogp is taken from its log-probs at once and
 * the backward that follows (dlogp NULL) uses it. */
void train_gpu_forward(TrainGpu *g, PaddedBatch *pb, const uint64_t *keys, float inv_temp, float *logp,
                       float *entropy, const LogprobGrad *grad);
/* dlogp and dentropy (or NULL) by CSR index, as train_model_backward's. */
void train_gpu_backward(TrainGpu *g, PaddedBatch *pb, const float *dlogp, const float *dentropy);

/* ---- the step ---- */
void train_gpu_begin_step(TrainGpu *g);
/* The step's gradient into host[P] (once a step: later calls leave host as the
 * caller made it: summed); from then on host's is the step's gradient. */
void train_gpu_gradient(TrainGpu *g, float *host);
/* grad_clip_norm on the step's gradient where it is (host[P] once taken there, else
 * the device's): the norm before clipping. */
double train_gpu_clip(TrainGpu *g, float *host, double max_norm);
/* AdamW over the master weights with the step's gradient (the host's grads[P] once
 * taken there, else the device's), then the forward's copies from them; opt->step
 * counts the step, as adamw_step does. */
void train_gpu_update(TrainGpu *g, const float *grads, double lr, const AdamWConfig *c);

/* ---- the host's copy ---- */
/* The policy's weights on the host (two halves, the fp32 norms and biases synced),
 * and AdamW's m and v, each from the device if behind. */
void train_gpu_host_sync(TrainGpu *g);
void train_gpu_host_sync_opt(TrainGpu *g);
/* The device and the policy's GpuModel for a generator (gen/generate.h's GenDevice,
 * valid until train_gpu_close), the device made current first: call it before each
 * generation, as after a resume the device holds the old weights until then. */
const GenDevice *train_gpu_gen_device(TrainGpu *g);
/* The host's weights or AdamW state may be written: the device takes them again
 * before its next pass or update. */
void train_gpu_host_written(TrainGpu *g);

/* ---- sync_ref_model: a moving reference, held on the device in fp32 ----
 * ref = alpha policy + (1 - alpha) ref over the fp32 weights (the policy's master
 * weights), train_model_mix_reference's arithmetic bit for bit, then the reference's
 * bf16 copies remade; the host's fp32 reference is behind until train_gpu_ref_sync
 * (a checkpoint writes it). train_gpu_ref_written: the host's was written (a resume
 * read it); the device takes it before its next pass. */
void train_gpu_mix_reference(TrainGpu *g, double alpha);
void train_gpu_ref_sync(TrainGpu *g);
void train_gpu_ref_written(TrainGpu *g);

#endif
