/* train/model.h — the one trainable model every training algorithm runs on.
 *
 * Built once from TrainingArgs: the policy's weights in their resolved form — fp32;
 * mixed precision's fp32 master weights held as bf16 values and low halves
 * (model_use_bf16_compute); or, with LoRA, a frozen base (its matrices in bf16
 * under bf16) carrying trainable adapters — with the precision resolved here and
 * nowhere else; the frozen KL reference when the algorithm needs one; the
 * activations planned for the longest micro-batch and checked against the memory
 * available; the gradient of what trains, with its write-or-add state; AdamW's
 * state; and every buffer a pass uses, sized once.
 *
 * An algorithm sees log-probs only: it asks for the per-token log-probs (and
 * entropies) of a batch of sequences, and for a training pass hands back their
 * gradient. Where weights, activations and gradients live, in which precision,
 * with which adapters, is this module's business; the training loop (loop.h) asks
 * it for the step's gradient, the update, checkpoints and the final save. */
#ifndef GRPO_TRAIN_MODEL_H
#define GRPO_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"
#include "gen/generate.h"
#include "model/batch.h"
#include "model/model_io.h"
#include "optim/optim.h"
#include "tokenizer/tokenizer.h"
#include "train/args.h"

typedef struct TrainModel TrainModel;

/* What an algorithm needs beyond the policy. */
typedef struct {
    int reference;       /* a frozen KL reference (GRPO's beta > 0): the model directory's weights again;
                            under new LoRA adapters the base with the adapters off, under --adapter the base
                            with a frozen copy of that adapter (TRL with PEFT) */
    int reference_moves; /* it is mixed with the policy (sync_ref_model): held in fp32 and checkpointed */
    int entropy_grad;    /* a backward takes a gradient with respect to the entropies (GRPO's entropy bonus) */
} TrainModelNeeds;

/* Opens args->model_dir as the policy (its tokenizer too) in the form args ask
 * for, attaches the adapters (use_peft, adapter), and loads the reference when
 * needs ask for one. gen, when not NULL, gets the eos ids of the model and
 * tokenizer (gen/generate.h). Returns NULL with err on bad input. */
TrainModel *train_model_open(const TrainingArgs *args, const TrainModelNeeds *needs, GenOpts *gen, GrpoErr *err);
/* Plans micro-batches of up to max_seqs sequences of up to max_len tokens: the
 * memory they take against the memory available (err names the options to lower,
 * length_option the algorithm's own), then allocates activations, gradients, AdamW's
 * state and the passes' buffers. */
int train_model_plan(TrainModel *tm, int max_seqs, int max_len, const char *length_option, GrpoErr *err);
void train_model_close(TrainModel *tm);

/* The policy, for what runs it outside a training pass (generation, evaluation),
 * and its tokenizer. On a GPU (train_model_gen_device not NULL) its weights are
 * the host's copy, brought up to date only for a checkpoint, the final save or the
 * processes' hash: a generator takes the config from it and decodes on the device. */
Model *train_model_policy(TrainModel *tm);
/* Where a generator decodes the policy: NULL on the host (on train_model_policy's
 * weights, which every update writes); on a GPU, the device and the policy's bf16
 * copy there (GenOpts.device), which every update remakes, valid until
 * train_model_close. After train_model_plan; call it before each generation (a
 * round of rollouts, an evaluation): it makes the device's weights current first,
 * as a resume writes the host's and the device takes them only at its next call. */
const GenDevice *train_model_gen_device(TrainModel *tm);
/* On a machine with a GPU, why this run trains on the CPU (one line, use_cpu named), or NULL. */
const char *train_model_device_note(const TrainModel *tm);
Tokenizer *train_model_tokenizer(TrainModel *tm);
const ModelConfig *train_model_config(const TrainModel *tm);
/* The eos id a training example is closed with (gen/pretrained.h). */
int32_t train_model_eos(const TrainModel *tm);
/* 1: mixed precision (bf16 products), as resolved from args->bf16 (auto: the CPU). */
int train_model_bf16(const TrainModel *tm);
/* 1 when the run trains adapters on a frozen base. */
int train_model_has_adapters(const TrainModel *tm);
/* With adapters, the frozen base's model_weights_digest (model/model_io.h), which
 * a checkpoint records and a resume compares; NULL for full fine-tuning. */
const char *train_model_base_digest(const TrainModel *tm);
/* Bytes of everything planned (weights, reference, gradients, AdamW, activations),
 * and the plan's text: an adapters line ending in '\n' when there are adapters,
 * then the memory parts ("weights+grads+AdamW N, reference N, activations N (...)"). */
double train_model_bytes(const TrainModel *tm);
void train_model_describe(const TrainModel *tm, char *adapters_line, size_t na, char *memory, size_t nm);

/* ---- passes ---- */

typedef enum { TRAIN_POLICY, TRAIN_REFERENCE } TrainWhich;

/* A batch for a pass: sequences and their targets (model/batch.h). */
typedef struct {
    const BatchSeq *seqs;   /* [S], S <= the planned max_seqs (train_model_logprobs: train_model_logprobs_fit's) */
    int S;
    const uint64_t *ids;    /* [S] each sequence's identity: a training pass's adapter-dropout masks are drawn
                               from (step, id), whichever micro-batch holds the sequence */
    float inv_temperature;  /* log-probs of softmax(logits * inv_temperature) */
} TrainBatch;

/* The most sequences one train_model_logprobs(which) call may take: on the CPU the
 * reference's, as many as can fit the plan's tokens (see below); else the planned
 * max_seqs, as a training pass. */
int train_model_logprobs_cap(const TrainModel *tm, TrainWhich which);
/* How many of seqs[0 .. n-1] (1 <= n <= that cap), from the first, one
 * train_model_logprobs(which) call takes: on the CPU the reference's as many as its
 * layout fits in the plan's tokens, a sequence beginning as an earlier one of the
 * call (a group's completions after their prompt) costing its own rows only — at
 * Qwen2-0.5B's plan of 4 x 192 tokens, 5 completions of 128 behind a 64-token prompt
 * where the micro-batch holds 4; with shorter completions more — at least one; else n
 * (the policy's log-probs keep the training pass's micro-batches). */
int train_model_logprobs_fit(TrainModel *tm, TrainWhich which, const BatchSeq *seqs, int n);
/* Log-probs logp[offsets[S]] of the batch's targets, sequence by sequence (CSR,
 * model/batch.h), and entropies (or NULL), under the policy or the reference; no
 * backward follows. S: at most train_model_logprobs_fit's. */
void train_model_logprobs(TrainModel *tm, TrainWhich which, const TrainBatch *b, float *logp, float *entropy);
/* A training pass's forward under the policy (adapter dropout on): log-probs and
 * entropies as above. With grad (a token-local objective's gradient, by CSR index;
 * ops/ops.h) the LM head's backward runs alongside; then train_model_backward(tm,
 * NULL, NULL). Without, train_model_backward(tm, dlogp, dentropy) with the
 * gradient with respect to each target's log-prob and entropy (CSR; dentropy may
 * be NULL). The backward adds into the step's gradient. */
void train_model_forward(TrainModel *tm, const TrainBatch *b, float *logp, float *entropy, const LogprobGrad *grad);
void train_model_backward(TrainModel *tm, const float *dlogp, const float *dentropy);

/* ---- for the training loop ---- */

/* Optimizer step `step` (0-based) begins: its first backward writes the gradient. */
void train_model_begin_step(TrainModel *tm, long step);
/* The step's gradient on the host, flat over what trains (zero when no backward
 * ran); *n floats: what the loop sums over processes in place. A device form brings
 * it up (4 *n bytes), so a world of one does not ask. */
float *train_model_gradient(TrainModel *tm, size_t *n);
/* The step's gradient clipped to max_norm (optim's grad_clip_norm; 0: none) where
 * it lives: the norm before clipping. */
double train_model_clip(TrainModel *tm, double max_norm);
/* AdamW with learning rate lr on the gradient. */
void train_model_update(TrainModel *tm, double lr, const AdamWConfig *c);
/* The trained weights' bits hashed (64-bit FNV-1a), to compare processes. */
uint64_t train_model_hash(const TrainModel *tm);
/* TRL's SyncRefModelCallback: reference = alpha * policy + (1 - alpha) * reference. */
void train_model_mix_reference(TrainModel *tm, double alpha);
/* The weights and optimizer state a checkpoint holds (train/checkpoint.h). */
Model *train_model_weights(TrainModel *tm);
AdamW *train_model_optimizer(TrainModel *tm);
/* What a checkpoint adds for the model (a moving reference: ref_model.safetensors),
 * and its restoration. */
int train_model_save_state(const TrainModel *tm, const char *dir, GrpoErr *err);
int train_model_load_state(TrainModel *tm, const char *dir, GrpoErr *err);
/* The trained model into out_dir: the adapters in PEFT's layout, or the model in
 * HF's (its files beside copied from copy_from, meta added). */
int train_model_save(TrainModel *tm, const char *out_dir, const char *copy_from, const ModelSaveMeta *meta,
                     GrpoErr *err);

#endif
