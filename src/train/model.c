/* train/model.c — the trainable model (model.h): setup and its plan, the passes an
 * algorithm asks for, and what the training loop asks of it. Not here: the
 * transformer's forward and backward (model/transformer.c), the adapters' own
 * arithmetic (model/lora_layers.c), AdamW (optim/). */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/rng.h"
#include "gen/pretrained.h"
#include "io/fsutil.h"
#include "model/lora.h"
#include "ops/gemm.h"
#include "train/adapters.h"
#include "train/checkpoint.h"
#include "train/model_gpu.h"

/* The KL reference: none, a second copy of the model directory's weights, the
 * base with the adapters off (new adapters), or the base under a frozen copy of
 * the adapters the run started from (--adapter: TRL's "ref" adapter). */
typedef enum { REF_NONE, REF_MODEL, REF_BASE, REF_ADAPTER } RefKind;

struct TrainModel {
    const TrainingArgs *args;
    Pretrained pre;          /* the policy and its tokenizer */
    int bf16;                /* mixed precision, resolved once */
    LoraLayers lora;
    int adapters;            /* lora trains; the policy's own weights are frozen */
    char base_digest[17];    /* with adapters: model_weights_digest of the base, which a checkpoint records */
    RefKind ref_kind;
    Model ref;               /* REF_MODEL */
    LoraLayers ref_lora;     /* REF_ADAPTER: --adapter as read, never trained */
    /* planned by train_model_plan */
    int max_seqs, max_len;
    Activations acts;
    const ParamTable *table; /* what the optimizer updates: the model's table or the adapters' */
    float *grads;            /* [table->total] */
    GradState gstate;        /* each tensor of grads: written this step or not (model/grads.h) */
    ModelView gview;         /* over grads, when the model's own weights train */
    ModelGrads g;
    AdamW opt;
    uint8_t *decay_mask;
    long step;               /* the optimizer step being computed (keys the adapters' dropout) */
    PaddedBatch pb;          /* the batch of the pass in progress */
    uint64_t *keys;          /* [max_seqs] its sequences' dropout keys */
    TrainGpu *gpu;           /* the device form (model_gpu.h), or NULL: the CPU */
    char device_note[400];   /* why a machine with a GPU trains on the CPU, or "" */
};

/* ---- setup ---- */

/* The policy's own weights train: full fine-tuning, in fp32 or mixed precision. */
static int full_tuning(const TrainModel *tm) { return !tm->adapters; }

TrainModel *train_model_open(const TrainingArgs *a, const TrainModelNeeds *needs, GenOpts *gen, GrpoErr *err) {
    TrainModel *tm = xcalloc(1, sizeof *tm);
    tm->args = a;
    int on_gpu = train_gpu_choose(a, needs, &tm->gpu, tm->device_note, sizeof tm->device_note, err);
    if (on_gpu < 0) {
        free(tm);
        return NULL;
    }
    tm->bf16 = on_gpu ? 1 : a->bf16 < 0 ? gemm_bf16_native() : a->bf16; /* the GPU trains under bf16 only */
    int adapters = a->use_peft || a->adapter;
    WeightForm trained = tm->bf16 ? WEIGHTS_MIXED : WEIGHTS_FP32;
    int rc = pretrained_open(&tm->pre, a->model_dir, adapters ? (tm->bf16 ? WEIGHTS_BF16 : WEIGHTS_FP32) : trained,
                             gen, err);
    /* weights nothing trains are held in bf16 under bf16, their products in bf16: the base under LoRA, the
     * reference */
    WeightForm frozen = tm->bf16 ? WEIGHTS_BF16 : WEIGHTS_FP32;
    if (!rc) {
        tm->adapters = train_adapters_attach(&tm->lora, &tm->pre.model, a, err);
        rc = tm->adapters < 0 ? -1 : 0;
    }
    if (!rc && tm->adapters > 0) rc = model_weights_digest(&tm->pre.model, a->model_dir, tm->base_digest, err);
    if (!rc && needs->reference && tm->adapters && a->adapter) {
        /* TRL re-training a PeftModel: the reference is a frozen copy of the adapter it started from (read again
         * from --adapter, also on a resume: the checkpoint holds the trained copy) */
        rc = lora_layers_load(&tm->ref_lora, a->adapter, &tm->pre.model, a->seed, err);
        if (!rc) tm->ref_kind = REF_ADAPTER;
    } else if (!rc && needs->reference && tm->adapters) {
        tm->ref_kind = REF_BASE;
    } else if (!rc && needs->reference) {
        rc = model_load_ex(&tm->ref, a->model_dir, needs->reference_moves ? WEIGHTS_FP32 : frozen, err);
        if (!rc) tm->ref_kind = REF_MODEL;
    }
    if (rc) {
        if (tm->adapters < 0) tm->adapters = 0;
        train_model_close(tm);
        return NULL;
    }
    return tm;
}

/* Floats of what the optimizer updates: the adapters, or every weight. */
static size_t trainable_floats(const TrainModel *tm) {
    return tm->adapters ? tm->lora.table.total : tm->pre.model.table.total;
}

static double activation_bytes(const TrainModel *tm, long tokens) {
    const TrainingArgs *a = tm->args;
    const ModelConfig *cfg = &tm->pre.model.cfg;
    if (tokens > INT32_MAX) return INFINITY;
    double acts = (double)acts_plan_bytes(cfg, (int)tokens, training_args_ckpt(a), a->logprob_chunk_rows,
                                          tm->pre.model.mixed != NULL);
    if (tm->adapters && isfinite(acts))
        acts += (double)acts_lora_plan_bytes(cfg, &tm->lora, (int)tokens, training_args_ckpt(a));
    return acts;
}

/* The plan's words for the checkpointing and what it keeps (acts_describe). */
static void ckpt_describe(const TrainModel *tm, char *out, size_t n) {
    acts_describe(&tm->pre.model.cfg, training_args_ckpt(tm->args), tm->pre.model.mixed != NULL, out, n);
}

int train_model_plan(TrainModel *tm, int max_seqs, int max_len, const char *length_option, GrpoErr *err) {
    const TrainingArgs *a = tm->args;
    long tokens = (long)max_seqs * max_len;
    if (tm->gpu && tokens > INT32_MAX) return err_set(err, "a micro-batch of %d x %d tokens", max_seqs, max_len);
    /* on the GPU the activations are the device's (train_gpu_plan checks them there) */
    double mb = 1048576.0, acts = tm->gpu ? 0 : activation_bytes(tm, tokens), avail = (double)mem_available_bytes();
    double opt = 3.0 * sizeof(float) * (double)trainable_floats(tm); /* gradients, AdamW's m and v */
    if (acts + opt > avail) {
        char kept[200];
        ckpt_describe(tm, kept, sizeof kept);
        const char *less = training_args_ckpt_less(training_args_ckpt(a));
        return err_set(err, "the memory plan does not fit: activations %.0f MB (micro-batch of %d x %d tokens; %s) + "
                       "gradients and AdamW state %.0f MB, with %.0f MB available; lower per_device_train_batch_size "
                       "or %s%s%s", acts / mb, max_seqs, max_len, kept, opt / mb, avail / mb, length_option,
                       less ? ", or " : "", less ? less : "");
    }
    Model *m = &tm->pre.model;
    tm->max_seqs = max_seqs, tm->max_len = max_len;
    tm->table = tm->adapters ? &tm->lora.table : &m->table;
    size_t P = tm->table->total;
    tm->grads = xaligned(sizeof(float) * (P ? P : 1));
    memset(tm->grads, 0, sizeof(float) * P); /* the gaps between tensors, which no backward writes, stay 0 */
    if (!tm->gpu) { /* mixed precision: the products' inputs saved in bf16 */
        acts_create(&tm->acts, &m->cfg, (int)tokens, training_args_ckpt(a), a->logprob_chunk_rows, m->mixed != NULL);
        if (tm->adapters) acts_reserve_lora(&tm->acts, &m->cfg, &tm->lora);
        grad_state_create(&tm->gstate, tm->table, tm->grads);
        if (tm->adapters) {
            tm->g = (ModelGrads){NULL, tm->grads, NULL, &tm->gstate};
        } else {
            params_view(&tm->gview, &m->table, &m->cfg, tm->grads);
            tm->g = (ModelGrads){&tm->gview, NULL, &tm->gstate, NULL};
        }
    }
    adamw_init(&tm->opt, P);
    tm->decay_mask = xmalloc(P ? P : 1);
    adamw_decay_mask_build(tm->decay_mask, tm->table);
    /* packed: a micro-batch costs its real tokens; on the CPU the reference's forwards take as many sequences
     * as their shared layout fits in those tokens (train_model_logprobs_fit), each at least a row */
    padded_batch_reserve(&tm->pb, tm->gpu ? max_seqs : (int)tokens, (int)tokens, 1);
    tm->keys = xmalloc(sizeof(uint64_t) * max_seqs);
    if (tm->gpu) /* the host keeps the gradient's staging, the model's halves and AdamW's copy for checkpoints */
        return train_gpu_plan(tm->gpu, m, tm->ref_kind == REF_MODEL ? &tm->ref : NULL, tm->ref_kind == REF_BASE,
                              tm->ref_kind == REF_ADAPTER ? &tm->ref_lora : NULL, &tm->opt, tm->decay_mask,
                              (int)tokens, a->logprob_chunk_rows, length_option, err);
    return 0;
}

void train_model_close(TrainModel *tm) {
    if (!tm) return;
    if (tm->grads) {
        if (!tm->gpu) {
            acts_free(&tm->acts);
            if (full_tuning(tm)) params_view_free(&tm->gview);
            grad_state_free(&tm->gstate);
        }
        free(tm->grads);
        adamw_free(&tm->opt);
        free(tm->decay_mask);
        padded_batch_free(&tm->pb);
        free(tm->keys);
    }
    train_gpu_close(tm->gpu); /* before the host models it borrows */
    if (tm->ref_kind == REF_MODEL) model_free(&tm->ref);
    if (tm->ref_kind == REF_ADAPTER) lora_layers_free(&tm->ref_lora);
    if (tm->adapters) lora_layers_free(&tm->lora);
    pretrained_close(&tm->pre);
    free(tm);
}

Model *train_model_policy(TrainModel *tm) { return &tm->pre.model; }
const GenDevice *train_model_gen_device(TrainModel *tm) { return tm->gpu ? train_gpu_gen_device(tm->gpu) : NULL; }
const char *train_model_device_note(const TrainModel *tm) { return tm->device_note[0] ? tm->device_note : NULL; }
Tokenizer *train_model_tokenizer(TrainModel *tm) { return tm->pre.tok; }
const ModelConfig *train_model_config(const TrainModel *tm) { return &tm->pre.model.cfg; }
int32_t train_model_eos(const TrainModel *tm) { return pretrained_eos(&tm->pre); }
int train_model_bf16(const TrainModel *tm) { return tm->bf16; }
int train_model_has_adapters(const TrainModel *tm) { return tm->adapters; }
const char *train_model_base_digest(const TrainModel *tm) { return tm->adapters ? tm->base_digest : NULL; }

/* Bytes of the weights (what trains: its fp32 values, then gradients and AdamW's m
 * and v) and of the reference. */
static double weight_bytes(const TrainModel *tm) {
    double t = sizeof(float) * (double)trainable_floats(tm);
    return (double)model_weight_bytes(&tm->pre.model) + (tm->adapters ? 4 : 3) * t;
}

static double reference_bytes(const TrainModel *tm) {
    if (tm->ref_kind == REF_ADAPTER) return sizeof(float) * (double)tm->ref_lora.table.total;
    return tm->ref_kind == REF_MODEL ? (double)model_weight_bytes(&tm->ref) : 0;
}

double train_model_bytes(const TrainModel *tm) {
    return weight_bytes(tm) + reference_bytes(tm) + (tm->gpu ? train_gpu_bytes(tm->gpu) : tm->acts.bytes);
}

/* What auto chose here and how to choose otherwise, or "" when bf16 was given. */
static const char *bf16_note(const TrainModel *tm) {
    if (tm->args->bf16 >= 0) return "";
    if (tm->gpu) return "; bf16 by default on the GPU (its only form)";
    return tm->bf16 ? "; bf16 by default on this CPU (--bf16 false: fp32 throughout)"
                    : "; fp32 by default: this CPU has no bf16 matrix instructions (--bf16 true: bf16 products "
                      "anyway, slower here)";
}

void train_model_describe(const TrainModel *tm, char *adapters_line, size_t na, char *memory, size_t nm) {
    const TrainingArgs *a = tm->args;
    const Model *m = &tm->pre.model;
    double mb = 1048576.0;
    char weights[400], bf16[160];
    if (na) adapters_line[0] = 0;
    if (tm->adapters) {
        train_adapters_describe(&tm->lora, a->adapter, adapters_line, na - 1);
        strcat(adapters_line, "\n");
        snprintf(weights, sizeof weights, "frozen weights %.0f%s, adapters+grads+AdamW %.0f%s",
                 model_weight_bytes(m) / mb, m->half ? " (in bf16)" : "",
                 4.0 * sizeof(float) * trainable_floats(tm) / mb, bf16_note(tm));
    } else {
        model_bf16_describe(m, bf16, sizeof bf16);
        snprintf(weights, sizeof weights, "weights+grads+AdamW %.0f%s%s", weight_bytes(tm) / mb, bf16, bf16_note(tm));
    }
    char ref[200] = "";
    if (tm->ref_kind != REF_NONE)
        snprintf(ref, sizeof ref, ", reference %.0f%s%s", reference_bytes(tm) / mb,
                 tm->ref_kind == REF_BASE      ? " (the base, adapters off)"
                 : tm->ref_kind == REF_ADAPTER ? " (the base under the starting adapter, frozen)"
                                               : "",
                 tm->ref_kind == REF_MODEL && tm->ref.half ? " (in bf16)" : "");
    if (tm->gpu) { /* the host holds the weights' halves, AdamW's copy and the gradient; the rest is the GPU's */
        char dev[600];
        train_gpu_describe(tm->gpu, dev, sizeof dev);
        snprintf(memory, nm, "%s; on the host: %s%s", dev, weights, ref);
        return;
    }
    char kept[200];
    ckpt_describe(tm, kept, sizeof kept);
    snprintf(memory, nm, "%s%s, activations %.0f (micro-batch of %d x %d tokens; %s)", weights, ref, tm->acts.bytes / mb,
             tm->max_seqs, tm->max_len, kept);
}

/* ---- passes ---- */

/* Lays the batch out — for the reference on the CPU, each common start of its
 * sequences once (padded_batch_fill_shared: a group's prompt) — and the adapters'
 * dropout keys of a training pass. The policy's log-probs are laid out as its
 * training pass lays them, so that the old policy's are that pass's bit for bit
 * (a first iteration's ratio exactly 1, as TRL's). */
static void prepare(TrainModel *tm, const TrainBatch *b, int training, int share) {
    if (share && !tm->gpu) padded_batch_fill_shared(&tm->pb, b->seqs, b->S);
    else padded_batch_fill(&tm->pb, b->seqs, b->S);
    if (training && b->ids)
        for (int i = 0; i < b->S; i++)
            tm->keys[i] = rng_mix(rng_mix(0x64726f70u /* "drop" */, (uint64_t)tm->step), b->ids[i]);
}

int train_model_logprobs_cap(const TrainModel *tm, TrainWhich which) {
    CHECK(tm->max_seqs >= 1); /* planned */
    return which == TRAIN_REFERENCE && !tm->gpu ? tm->pb.cap_seqs : tm->max_seqs;
}

int train_model_logprobs_fit(TrainModel *tm, TrainWhich which, const BatchSeq *seqs, int n) {
    CHECK(n >= 1 && n <= train_model_logprobs_cap(tm, which));
    if (which == TRAIN_REFERENCE && !tm->gpu) return padded_batch_shared_fit(&tm->pb, seqs, n);
    return n;
}

void train_model_logprobs(TrainModel *tm, TrainWhich which, const TrainBatch *b, float *logp, float *entropy) {
    prepare(tm, b, 0, which == TRAIN_REFERENCE);
    if (tm->gpu) { /* REF_ADAPTER's there: the policy's base under its own copy of ref_lora */
        train_gpu_logprobs(tm->gpu, which == TRAIN_REFERENCE, &tm->pb, b->inv_temperature, logp, entropy);
        return;
    }
    Model *m = &tm->pre.model;
    ModelPass pass = {0};
    if (which == TRAIN_REFERENCE) {
        CHECK(tm->ref_kind != REF_NONE);
        if (tm->ref_kind == REF_MODEL) m = &tm->ref;
        else if (tm->ref_kind == REF_BASE) pass.base_only = 1; /* TRL with new PEFT adapters: adapters disabled */
    }
    LoraLayers *trained = m->lora;
    if (which == TRAIN_REFERENCE && tm->ref_kind == REF_ADAPTER) m->lora = &tm->ref_lora; /* same shapes */
    padded_batch_logprobs(m, &tm->acts, &tm->pb, &pass, b->inv_temperature, logp, entropy);
    m->lora = trained;
}

void train_model_forward(TrainModel *tm, const TrainBatch *b, float *logp, float *entropy, const LogprobGrad *grad) {
    prepare(tm, b, 1, 0);
    if (tm->gpu) {
        train_gpu_forward(tm->gpu, &tm->pb, b->ids ? tm->keys : NULL, b->inv_temperature, logp, entropy, grad);
        return;
    }
    ModelPass pass = {.backward = 1, .drop_keys = b->ids ? tm->keys : NULL};
    if (grad)
        padded_batch_logprobs_train(&tm->pre.model, &tm->acts, &tm->pb, &pass, b->inv_temperature, logp, entropy,
                                    &tm->g, grad);
    else
        padded_batch_logprobs(&tm->pre.model, &tm->acts, &tm->pb, &pass, b->inv_temperature, logp, entropy);
}

void train_model_backward(TrainModel *tm, const float *dlogp, const float *dentropy) {
    if (tm->gpu) {
        train_gpu_backward(tm->gpu, &tm->pb, dlogp, dentropy);
        return;
    }
    float *dlp = NULL, *dent = NULL;
    if (dlogp) { /* laid out per position, in the batch's scratch (its log-probs were gathered) */
        padded_batch_scatter(&tm->pb, dlogp, dlp = tm->pb.full);
        if (dentropy) padded_batch_scatter(&tm->pb, dentropy, dent = tm->pb.full2);
    }
    model_backward(&tm->pre.model, &tm->acts, &tm->g, dlp, dent);
}

/* ---- for the training loop ---- */

void train_model_begin_step(TrainModel *tm, long step) {
    tm->step = step;
    if (tm->gpu) train_gpu_begin_step(tm->gpu);
    else grad_state_begin(&tm->gstate); /* each tensor's first backward writes it: no pass over the gradients here */
}

float *train_model_gradient(TrainModel *tm, size_t *n) {
    if (tm->gpu) train_gpu_gradient(tm->gpu, tm->grads); /* once a step: the loop sums it over processes in place */
    else grad_state_settle(&tm->gstate); /* a tensor no backward reached: zeros, once */
    *n = tm->table->total;
    return tm->grads;
}

double train_model_clip(TrainModel *tm, double max_norm) {
    if (tm->gpu) return train_gpu_clip(tm->gpu, tm->grads, max_norm);
    grad_state_settle(&tm->gstate);
    return grad_clip_norm(tm->grads, tm->table->total, max_norm);
}

void train_model_update(TrainModel *tm, double lr, const AdamWConfig *c) {
    Model *m = &tm->pre.model;
    if (tm->gpu) {
        train_gpu_update(tm->gpu, tm->grads, lr, c);
    } else if (tm->adapters) {
        adamw_step(&tm->opt, tm->lora.params, tm->grads, tm->decay_mask, lr, c);
    } else if (m->params) {
        adamw_step(&tm->opt, m->params, tm->grads, tm->decay_mask, lr, c);
    } else { /* mixed precision: the master weights are two halves */
        adamw_step_split(&tm->opt, m->mixed->hi, m->mixed->lo, tm->grads, tm->decay_mask, lr, c);
        model_sync_bf16(m); /* the fp32 norms and biases the forward reads follow */
    }
}

uint64_t train_model_hash(const TrainModel *tm) {
    uint64_t h = 1469598103934665603ULL;
    size_t n = tm->table->total;
    if (tm->gpu) train_gpu_host_sync(tm->gpu);
    const float *w = tm->adapters ? tm->lora.params : tm->pre.model.params;
    if (w) {
        const uint32_t *u = (const uint32_t *)w;
        for (size_t i = 0; i < n; i++) h = (h ^ u[i]) * 1099511628211ULL;
        return h;
    }
    const ModelMixed *x = tm->pre.model.mixed;
    for (size_t i = 0; i < n; i++) h = (h ^ x->hi[i]) * 1099511628211ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ x->lo[i]) * 1099511628211ULL;
    return h;
}

void train_model_mix_reference(TrainModel *tm, double alpha) {
    CHECK(tm->ref_kind == REF_MODEL && tm->ref.params && !tm->ref.half);
    if (tm->gpu) { /* the reference's fp32 weights and the policy's master weights are the device's */
        train_gpu_mix_reference(tm->gpu, alpha);
        return;
    }
    float a = (float)alpha, *ref = tm->ref.params;
    const Model *pol = &tm->pre.model;
    size_t P = pol->table.total;
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < P; i0 += 4096) { /* 4096 at a time: the policy's weights may be two halves */
        float p[4096];
        size_t n = P - i0 < 4096 ? P - i0 : 4096;
        model_get_params(pol, i0, n, p);
        for (size_t i = 0; i < n; i++) ref[i0 + i] = a * p[i] + (1 - a) * ref[i0 + i];
    }
}

/* On the GPU the host's copies come up to date first, and the device takes them back before its next pass:
 * a caller may write them (a resume). */
static void lend_host(TrainModel *tm) {
    if (!tm->gpu) return;
    train_gpu_host_sync(tm->gpu);
    train_gpu_host_sync_opt(tm->gpu);
    train_gpu_host_written(tm->gpu);
}
Model *train_model_weights(TrainModel *tm) {
    lend_host(tm);
    return &tm->pre.model;
}
AdamW *train_model_optimizer(TrainModel *tm) {
    lend_host(tm);
    return &tm->opt;
}

/* A bf16 reference never moves: it is the model directory's, and no checkpoint holds it. */
static int reference_saved(const TrainModel *tm) { return tm->ref_kind == REF_MODEL && !tm->ref.half; }

int train_model_save_state(const TrainModel *tm, const char *dir, GrpoErr *err) {
    if (!reference_saved(tm)) return 0;
    if (tm->gpu) train_gpu_ref_sync(tm->gpu); /* the device's mixed reference */
    char *p = fs_join(dir, "ref_model.safetensors");
    int rc = ckpt_write_params(p, &tm->ref.table, tm->ref.params, err);
    free(p);
    return rc;
}

int train_model_load_state(TrainModel *tm, const char *dir, GrpoErr *err) {
    char *p = fs_join(dir, "ref_model.safetensors");
    int read = reference_saved(tm) && fs_exists(p);
    int rc = read ? ckpt_read_params(p, &tm->ref.table, tm->ref.params, err) : 0;
    if (read && tm->gpu) train_gpu_ref_written(tm->gpu); /* the device takes it before its next pass */
    free(p);
    return rc;
}

int train_model_save(TrainModel *tm, const char *out_dir, const char *copy_from, const ModelSaveMeta *meta,
                     GrpoErr *err) {
    if (tm->gpu) train_gpu_host_sync(tm->gpu);
    if (tm->adapters) {
        LoraSaveOpts lso = {copy_from, copy_from};
        int rc = lora_layers_save(&tm->lora, out_dir, &lso, err);
        /* the tokenizer beside the adapter carries a template set in its place (each file written whole) */
        if (!rc && copy_from && meta && meta->chat_template) rc = model_set_chat_template(out_dir, meta->chat_template, err);
        return rc;
    }
    ModelSaveOpts so;
    model_save_opts_default(&so);
    so.copy_from = copy_from;
    so.meta = meta;
    return model_save(&tm->pre.model, out_dir, &so, err);
}
