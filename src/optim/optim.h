/* optim/optim.h — AdamW over one flat fp32 buffer, gradient clipping and
 * learning-rate schedules, with the semantics of torch.optim.AdamW,
 * torch.nn.utils.clip_grad_norm_ and transformers' get_scheduler.
 *
 * The parameter buffer is the one laid out by model/params.h (ParamTable);
 * gradients, m and v use the same offsets. Alignment gaps between tensors
 * hold zeros in params and grads and stay zero.
 *
 * Names: adamw_* (optimizer), grad_* (gradient norm / clipping), sched_*
 * (schedules). Nothing here prints, exits or touches files. */
#ifndef GRPO_OPTIM_OPTIM_H
#define GRPO_OPTIM_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/check.h"
#include "model/params.h"

/* ---------------------------------------------------------------- AdamW */

typedef struct {
    double beta1;          /* 0.9   (TrainingArguments.adam_beta1) */
    double beta2;          /* 0.999 (adam_beta2) */
    double eps;            /* 1e-8  (adam_epsilon) */
    double weight_decay;   /* 0.0   (TRL's GRPOConfig keeps transformers' default 0.0) */
} AdamWConfig;

/* The optimizer state. m, v and step are the fields a checkpoint saves and
 * restores (torch's state['exp_avg'], state['exp_avg_sq'], state['step']);
 * they are public on purpose: the trainer writes m and v as safetensors with
 * the parameter table's names and offsets, and step as an integer. */
typedef struct {
    size_t n;              /* floats in params / grads / m / v */
    float *m;              /* [n] first moment (exp_avg), 64-byte aligned */
    float *v;              /* [n] second moment (exp_avg_sq), 64-byte aligned */
    long long step;        /* optimizer steps taken so far (0 before the first) */
} AdamW;

/* Fills c with torch/transformers defaults: 0.9, 0.999, 1e-8, weight decay 0. */
void adamw_config_default(AdamWConfig *c);

/* Allocates zeroed m and v for n floats and sets step = 0 (a fresh torch
 * optimizer: state is created lazily as zeros at the first step). */
void adamw_init(AdamW *opt, size_t n);
void adamw_free(AdamW *opt);

/* One AdamW step, torch.optim.AdamW (single-tensor path, amsgrad=False,
 * maximize=False) element by element:
 *     step += 1
 *     p  *= 1 - lr * wd                       (decoupled decay, only where decay_mask[i])
 *     m  += (1 - beta1) * (g - m)             (exp_avg.lerp_)
 *     v   = beta2 * v + (1 - beta2) * g * g
 *     p  -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization", Alg. 2.
 * params: [n] updated in place; grads: [n]; decay_mask: [n] 1 = decay this
 * element, 0 = not, or NULL = decay all; lr: this step's learning rate (see
 * sched_lr). OpenMP over elements; each element's result is independent of
 * the thread count. */
void adamw_step(AdamW *opt, float *params, const float *grads, const uint8_t *decay_mask,
                double lr, const AdamWConfig *c);

/* A step's scalars, computed once in double (as torch computes them in Python floats)
 * and rounded to fp32; step is the step being taken (1 for the first). The element
 * update is, in fp32 in this order:  p *= keep (decay, or 1);  m' = m + one_minus_b1
 * (g - m);  v' = b2 v + one_minus_b2 g g;  p -= step_size (m' / (sqrt(v') / bc2_sqrt
 * + eps)). adamw_step and the GPU's (gpu/kernels/adamw.cu) both run it. */
typedef struct {
    float step_size, bc2_sqrt, decay, one_minus_b1, b2, one_minus_b2, eps;
    int use_decay;
} AdamWStep;
AdamWStep adamw_step_scalars(long long step, double lr, const AdamWConfig *c);

/* The same step on parameters held as two 16-bit halves (f32_split, ops/ops.h;
 * mixed precision's master weights): each joined, updated as adamw_step updates
 * it, and split again, so the values are adamw_step's bit for bit. */
void adamw_step_split(AdamW *opt, uint16_t *hi, uint16_t *lo, const float *grads, const uint8_t *decay_mask,
                      double lr, const AdamWConfig *c);

/* 1 when transformers' Trainer applies weight decay to the parameter named
 * hf_name, else 0. Trainer.get_decay_parameter_names (transformers >= 4.50)
 * excludes parameters of nn.LayerNorm modules and every parameter whose
 * lower-cased full name matches one of the regexes
 *     bias | layernorm | rmsnorm | (^|\.)norm($|\.) | _norm($|\.)
 * (our models have no nn.LayerNorm, so the names decide). Embeddings and
 * lm_head are decayed. Examples: "model.layers.0.input_layernorm.weight" 0,
 * "model.norm.weight" 0, "model.layers.0.self_attn.q_norm.weight" 0,
 * "model.layers.0.self_attn.q_proj.bias" 0, "model.embed_tokens.weight" 1. */
int adamw_decays(const char *hf_name);

/* Fills mask[0 .. t->total) per element from the table: adamw_decays() of the
 * owning tensor, 0 in the alignment gaps. mask: [t->total]. */
void adamw_decay_mask_build(uint8_t *mask, const ParamTable *t);

/* ---------------------------------------------------------------- gradients */

/* The L2 norm of g[0..n), accumulated in double in fixed 4096-element blocks
 * whose partial sums are added in block order, so the result does not depend
 * on the number of threads. NaN or Inf when any element is. */
double grad_norm(const float *g, size_t n);
/* grad_norm's blocks, for a gradient held elsewhere (the GPU's gpu_grad_sumsq_blocks):
 * block b is g[b GRAD_NORM_BLOCK .. (b + 1) GRAD_NORM_BLOCK), its sum of squares
 * taken in order in double; grad_norm_parts = the square root of part[nb] added in
 * block order, grad_norm's result for the same blocks, bit for bit. */
#define GRAD_NORM_BLOCK 4096
double grad_norm_parts(const double *part, size_t nb);

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2): computes the
 * total norm, and scales g by clip = max_norm / (norm + 1e-6) when clip < 1
 * (torch clamps the coefficient to 1 and multiplies; multiplying by 1 is the
 * identity, so we skip it). Returns the norm before clipping. When the norm is
 * NaN or Inf the gradients are left unchanged (torch would multiply them by
 * NaN) and the non-finite norm is returned so that the caller can skip the
 * optimizer step. max_norm <= 0 disables clipping (the norm is still returned). */
double grad_clip_norm(float *g, size_t n, double max_norm);
/* The factor grad_clip_norm multiplies the gradient by for a norm (1: none). */
float grad_clip_factor(double norm, double max_norm);

/* ---------------------------------------------------------------- schedules */

typedef enum {
    SCHED_LINEAR,                 /* get_linear_schedule_with_warmup (transformers' default) */
    SCHED_COSINE,                 /* get_cosine_schedule_with_warmup (num_cycles 0.5) */
    SCHED_CONSTANT,               /* get_constant_schedule: ignores warmup */
    SCHED_CONSTANT_WITH_WARMUP,   /* get_constant_schedule_with_warmup */
    SCHED_COSINE_WITH_RESTARTS,   /* get_cosine_with_hard_restarts_schedule_with_warmup (num_cycles 1) */
    SCHED_POLYNOMIAL,             /* get_polynomial_decay_schedule_with_warmup (lr_end 1e-7, power 1) */
    SCHED_INVERSE_SQRT,           /* get_inverse_sqrt_schedule (timescale: warmup, else 10000) */
    SCHED_COSINE_WITH_MIN_LR,     /* get_cosine_with_min_lr_schedule_with_warmup (min_lr or min_lr_rate) */
    SCHED_COSINE_WARMUP_WITH_MIN_LR, /* get_cosine_with_min_lr_schedule_with_warmup_lr_rate */
    SCHED_WARMUP_STABLE_DECAY,    /* get_wsd_schedule (num_decay_steps required) */
} SchedType;

/* warmup_stable_decay's warmup_type and decay_type */
enum { SCHED_SHAPE_LINEAR, SCHED_SHAPE_COSINE, SCHED_SHAPE_1SQRT };

/* The names, by SchedType, NULL-terminated: transformers' SchedulerType values. */
extern const char *const sched_names[];
/* A name of sched_names -> *out; 0, or -1 if unknown. */
int sched_parse(const char *name, SchedType *out);
const char *sched_name(SchedType t);

/* TrainingArguments.get_warmup_steps: warmup_steps when > 0, else
 * ceil(total_steps * warmup_ratio). total_steps is max_steps. */
long long sched_warmup_steps(long long warmup_steps, double warmup_ratio, long long total_steps);

/* A schedule with its arguments resolved (sched_init). */
typedef struct {
    SchedType type;
    long long warmup_steps, total_steps;
    double num_cycles;        /* cosine, cosine_with_min_lr, wsd: 0.5; cosine_with_restarts: 1 */
    double min_lr_rate;       /* cosine_with_min_lr: the floor as a fraction of learning_rate (min_lr / lr) */
    double warmup_lr_rate;    /* cosine_warmup_with_min_lr: NAN = unset */
    double lr_end_rate;       /* polynomial: lr_end / learning_rate */
    double power;             /* polynomial: 1 */
    long long num_stable_steps, num_decay_steps; /* wsd */
    int warmup_shape, decay_shape;               /* wsd: SCHED_SHAPE_* (linear, cosine) */
    double min_lr_ratio;      /* wsd: 0 */
} Schedule;

/* Resolves schedule t for a run of total_steps optimizer steps with warmup_steps of
 * warmup (sched_warmup_steps) from transformers' defaults and kwargs (the JSON object
 * of TrainingArguments.lr_scheduler_kwargs, or NULL): each key must be an argument
 * the schedule's transformers function takes (get_scheduler passes constant,
 * constant_with_warmup and inverse_sqrt none), of its type; cosine_with_min_lr needs
 * one of min_lr / min_lr_rate, warmup_stable_decay needs num_decay_steps (its
 * num_stable_steps default to total - warmup - decay), polynomial an lr_end below
 * base_lr. Returns 0, or -1 with "lr_scheduler_kwargs: 'x' is not an argument of
 * cosine (it takes num_cycles)" and the like. */
int sched_init(Schedule *s, SchedType t, const json_t *kwargs, double base_lr, long long warmup_steps,
               long long total_steps, GrpoErr *err);

/* The LambdaLR multiplier at optimizer step `step` (0-based: the first
 * optimizer.step() runs with step 0, because the Trainer calls
 * lr_scheduler.step() after each optimizer.step()); W warmup, T total,
 * p = (step - W) / max(1, T - W):
 *   warmup (all but constant, wsd, cosine_warmup_with_min_lr): step < W -> step / max(1, W)
 *   linear:  max(0, (T - step) / max(1, T - W))
 *   cosine:  max(0, 0.5 (1 + cos(2 pi num_cycles p)))
 *   cosine_with_min_lr: the cosine's c, then max(0, c (1 - r) + r), r = min_lr_rate
 *   cosine_warmup_with_min_lr: the same with step + 1 (warmup (step + 1) / max(1, W), or from
 *       warmup_lr_rate a: a + (1 - a) step / max(1, W - 1))
 *   cosine_with_restarts: 0 once p >= 1, else max(0, 0.5 (1 + cos(pi ((num_cycles p) mod 1))))
 *   polynomial: ((lr - lr_end) (1 - p)^power + lr_end) / lr; past T: lr_end / lr
 *   inverse_sqrt: 1 / sqrt((step + s - W) / s), s = W or 10000 when W = 0
 *   warmup_stable_decay: warmup by warmup_type, 1 for num_stable_steps, decay by
 *       decay_type over num_decay_steps, both scaled into [min_lr_ratio, 1], then min_lr_ratio
 *   constant: 1; constant_with_warmup after warmup: 1.
 * transformers/optimization.py. */
double sched_lr_factor(const Schedule *s, long long step);

/* base_lr * sched_lr_factor(s, step). */
double sched_lr(const Schedule *s, double base_lr, long long step);

#endif
