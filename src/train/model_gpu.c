/* train/model_gpu.c — the trainable model's device form (model_gpu.h): which runs
 * train on the GPU, the device's share of the plan, the passes on gpu/model.h and
 * gpu/model_train.h (full fine-tuning) or gpu/model_lora.h (LoRA), AdamW over the
 * master weights (gpu_adamw_step: the CPU's bits) and the forward's copies made from
 * them (LoRA: the adapters, read by the forward as they are), the policy's bf16
 * GpuModel lent to the generator (GRPO's rollouts and evaluation decode on it,
 * gen/device.c), and the host's copy kept in step where the host reads it;
 * sync_ref_model's moving reference (fp32 weights mixed on the device, its bf16
 * copies remade); gradient_checkpointing as the passes' recomputation (one layer's
 * saved tensors kept, each remade in the backward; selective: each layer's gate/up
 * kept too, and not remade). Not here: the loss, the sum over processes (the loop's,
 * on the host). */
#include "train/model_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "gpu/model_lora.h"
#include "gpu/model_train.h"
#include "gpu/ops.h"
#include "model/lora_layers.h"
#include "ops/ops.h"

/* One tensor the forward reads, made from the master weights at a table offset. */
typedef struct {
    CUdeviceptr dst;
    size_t offset, n; /* floats */
    int bf16;         /* the bf16 copy (f32_split's upper half), else fp32 */
} Span;

/* Every tensor of one GpuModel made from master weights: the policy's, or a moving reference's. */
typedef struct {
    Span *at;
    int n;
} Spans;

struct TrainGpu {
    GpuDevice dev;
    int planned, has_ref, max_tokens;
    int lora;                     /* the run trains the policy's adapters (host->lora) on a frozen bf16 base */
    int ref_base;                 /* the KL reference is the policy's base with the adapters off (REF_BASE) */
    CheckpointMode ckpt;          /* gradient_checkpointing and its policy, as the passes take them */
    int entropy_grad;             /* backwards take an entropy gradient (LoRA: no frozen-head shortcut) */
    /* --adapter with a KL reference (REF_ADAPTER): the starting adapter's fp32 values, frozen, and views of them
     * that the policy's base runs under for the reference (no second copy of the base) */
    CUdeviceptr ref_adapter;      /* fp32 [P] in the adapters' table layout, or 0 */
    GpuLayerLora *ref_adapter_views; /* [L] */
    size_t free_at_open;          /* the driver's free bytes before anything of ours */
    double fixed_bytes, ref_bytes, act_bytes;
    GpuModel policy, ref;
    GenDevice gen;                /* the device and policy, as a generator takes them (train_gpu_gen_device) */
    GpuModelScratch scratch;      /* log-probs without a backward */
    GpuModelTrain train;          /* full fine-tuning's pass */
    GpuModelLora ltrain;          /* LoRA's pass */
    CUdeviceptr master, m, v, mask; /* fp32 [P] x 3, bytes [P]; LoRA: master is policy.lora_params */
    CUdeviceptr parts;            /* [nb] doubles: the gradient's block sums of squares (gpu_grad_sumsq_blocks) */
    double *host_parts;           /* [nb] */
    size_t P, nb;
    Spans spans;                  /* the policy's copies from master */
    /* sync_ref_model: the moving reference's fp32 weights (the CPU holds it so), mixed on the device */
    CUdeviceptr ref_master;       /* fp32 [P] in the table's layout, or 0: a frozen reference (bf16 as uploaded) */
    Spans ref_spans;              /* the reference's copies from ref_master */
    Model *ref_host;              /* borrowed: the host's fp32 reference, which checkpoints write and read */
    int ref_host_behind, ref_device_behind;
    Model *host;                  /* borrowed: the host's policy (two halves) */
    AdamW *opt;                   /* borrowed: the host's AdamW (m, v, step) */
    int *rows;                    /* [max_tokens] 0, 1, ...: every CSR index, for logprob_grad_rows */
    float *dlogp;                 /* [max_tokens] a token-local objective's gradient, taken in the forward */
    int pending;                  /* a forward with grad ran: its backward reads dlogp */
    int grad_taken;               /* this step's gradient went to the host */
    int host_behind, opt_behind, device_behind;
};

/* A device error inside a pass: fatal (model_gpu.h). */
static void ok(int rc, const GrpoErr *e) {
    if (rc) DIE("the GPU: %s", e->msg);
}

/* ---- where a run trains ---- */

static const char *option_reason(const TrainingArgs *a, const TrainModelNeeds *needs) {
    if (a->bf16 == 0) return "bf16 false (fp32 products)";
    return NULL;
}

static void train_gpu_note(char *note, size_t n, const char *why) {
    snprintf(note, n, "%s: trains on the CPU (the GPU trains full fine-tuning and LoRA under bf16 "
             "only; --use_cpu true chooses the CPU without this line)", why);
}

int train_gpu_choose(const TrainingArgs *a, const TrainModelNeeds *needs, TrainGpu **out, char *note, size_t n,
                     GrpoErr *err) {
    *out = NULL;
    if (n) note[0] = 0;
    if (a->use_cpu) return 0;
    TrainGpu *g = xcalloc(1, sizeof *g);
    char why[256] = "";
    int r = gpu_open_local(&g->dev, dist_local_rank(), dist_local_size(), why, sizeof why, err);
    if (r <= 0) {
        free(g);
        if (r < 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return err_set(err, "the GPU: %s (--use_cpu true trains on the CPU)", msg);
        }
        return 0; /* no GPU here: as before, in silence */
    }
    const char *reason = option_reason(a, needs);
    if (reason) {
        train_gpu_note(note, n, reason);
        gpu_close(&g->dev);
        free(g);
        return 0;
    }
    size_t total;
    if (g->dev.api.MemGetInfo(&g->free_at_open, &total) != CUDA_SUCCESS) g->free_at_open = g->dev.total_bytes;
    g->ckpt = training_args_ckpt(a); /* the CPU's recomputation, either policy */
    g->entropy_grad = needs && needs->entropy_grad;
    *out = g;
    return 1;
}

/* ---- the plan ---- */

/* The fp32 tensor `name` of the table into dst (n floats). */
static int span_f32(const TrainGpu *g, Spans *out, CUdeviceptr dst, const char *name, size_t n, GrpoErr *err) {
    int e = params_find(&g->host->table, name);
    if (e < 0 || g->host->table.entries[e].numel > n || !dst)
        return err_set(err, "GPU training: %s is not in the parameter table as the GPU model holds it", name);
    out->at[out->n++] = (Span){dst, g->host->table.entries[e].offset, n, 0};
    return 0;
}

/* The bf16 copy at dst of the host's bf16 values at w16 (into its upper halves: the
 * table's offset is where w16 sits in them). */
static void span_bf16(const TrainGpu *g, Spans *out, CUdeviceptr dst, const uint16_t *w16, size_t n) {
    const ModelMixed *x = g->host->mixed;
    CHECK(w16 >= x->hi && (size_t)(w16 - x->hi) + n <= g->P);
    out->at[out->n++] = (Span){dst, (size_t)(w16 - x->hi), n, 1};
}

/* Every tensor of gm (the policy's GpuModel, or a moving reference's of its shapes),
 * from the table: a layer's norms and biases in fp32, its matrices in bf16; the
 * embedding in fp32, the final norm, the head in bf16. */
static int make_spans(TrainGpu *g, const GpuModel *gm, Spans *out, GrpoErr *err) {
    const Model *m = g->host;
    const ModelConfig *c = &m->cfg;
    out->at = xcalloc((size_t)c->n_layers * 10 + 3, sizeof(Span));
    out->n = 0;
    int rc = 0;
    for (int l = 0; l < c->n_layers && !rc; l++) {
        const GpuLayerWeights *w = &gm->layers[l];
        const LayerView16 *w16 = m->mixed->w16 + l;
        size_t C = (size_t)w->C, F = (size_t)w->F, QKV = (size_t)(w->H + 2 * w->Hkv) * w->D, HD = (size_t)w->H * w->D;
        char name[128];
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        rc = span_f32(g, out, w->ln1, name, C, err);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        if (!rc) rc = span_f32(g, out, w->ln2, name, C, err);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.bias", l); /* q | k | v adjacent */
        if (!rc && w->bqkv) rc = span_f32(g, out, w->bqkv, name, QKV, err);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.bias", l);
        if (!rc && w->bo) rc = span_f32(g, out, w->bo, name, C, err);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", l); /* Qwen3 */
        if (!rc && w->qk_norm) rc = span_f32(g, out, w->q_norm, name, (size_t)w->D, err);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", l);
        if (!rc && w->qk_norm) rc = span_f32(g, out, w->k_norm, name, (size_t)w->D, err);
        span_bf16(g, out, w->wqkv, w16->wqkv, QKV * C);
        span_bf16(g, out, w->wo, w16->wo, C * HD);
        span_bf16(g, out, w->wgu, w16->wgu, 2 * F * C);
        span_bf16(g, out, w->wdown, w16->wdown, C * F);
    }
    size_t VC = (size_t)c->vocab_size * c->hidden_size;
    if (!rc) rc = span_f32(g, out, gm->embed, "model.embed_tokens.weight", VC, err);
    if (!rc) rc = span_f32(g, out, gm->norm, "model.norm.weight", (size_t)c->hidden_size, err);
    if (!rc) span_bf16(g, out, gm->head.w, m->mixed->head16, VC);
    return rc;
}

/* The forward's copies from master weights: the policy's (refresh), a moving reference's. */
static int refresh_spans(TrainGpu *g, const Spans *spans, CUdeviceptr master, GrpoErr *err) {
    for (int i = 0; i < spans->n; i++) {
        const Span *s = &spans->at[i];
        CUdeviceptr src = master + 4 * s->offset;
        if (gpu_master_to_weights(&g->dev, s->bf16 ? s->dst : 0, s->bf16 ? 0 : s->dst, src, s->n, err)) return -1;
    }
    return 0;
}

static int refresh(TrainGpu *g, GrpoErr *err) { return refresh_spans(g, &g->spans, g->master, err); }

enum { PIECE = 1 << 20 }; /* floats a host <-> device copy of the master weights goes through at a time */

/* The host's weights (two halves joined; LoRA: the adapters) and AdamW's m and v to
 * the device, the copies made. */
static int upload_state(TrainGpu *g, GrpoErr *err) {
    if (g->lora) {
        int rc = gpu_model_lora_put(&g->dev, &g->policy, g->host->lora, err) ||
                 gpu_put(&g->dev, g->m, g->opt->m, 4 * g->P, err) || gpu_put(&g->dev, g->v, g->opt->v, 4 * g->P, err);
        if (!rc) g->device_behind = 0;
        return rc ? -1 : 0;
    }
    float *buf = xmalloc(sizeof(float) * PIECE);
    int rc = 0;
    for (size_t i0 = 0; i0 < g->P && !rc; i0 += PIECE) {
        size_t n = g->P - i0 < PIECE ? g->P - i0 : PIECE;
        model_get_params(g->host, i0, n, buf);
        rc = gpu_put(&g->dev, g->master + 4 * i0, buf, 4 * n, err);
    }
    free(buf);
    if (!rc) rc = gpu_put(&g->dev, g->m, g->opt->m, 4 * g->P, err);
    if (!rc) rc = gpu_put(&g->dev, g->v, g->opt->v, 4 * g->P, err);
    if (!rc) rc = refresh(g, err);
    if (!rc) g->device_behind = 0;
    return rc;
}

/* The host's fp32 reference to the device's ref_master, its copies made. */
static int upload_ref(TrainGpu *g, GrpoErr *err) {
    if (gpu_put(&g->dev, g->ref_master, g->ref_host->params, 4 * g->P, err) ||
        refresh_spans(g, &g->ref_spans, g->ref_master, err))
        return -1;
    g->ref_device_behind = 0;
    return 0;
}

/* sync_ref_model's reference (the host's fp32 Model ref, in the policy's table
 * layout): held as the CPU holds it, fp32 in ref_master, where the mixing reads and
 * writes it; the forward reads bf16 copies made from it as the policy's are from its
 * master weights (the GPU's products are bf16; the CPU's fp32 reference has fp32
 * products). The copies' buffers take the policy's shapes: uploaded from the host
 * policy, then overwritten from ref_master. */
static int upload_moving_ref(TrainGpu *g, Model *ref, GrpoErr *err) {
    CHECK(ref->params && !ref->half && ref->table.total == g->P);
    g->ref_host = ref;
    if (gpu_model_upload(&g->dev, &g->ref, g->host, err)) return -1;
    g->has_ref = 1;
    if (gpu_alloc(&g->dev, &g->ref_master, 4 * g->P, err) || make_spans(g, &g->ref, &g->ref_spans, err)) return -1;
    return upload_ref(g, err);
}

/* --adapter's KL reference: the starting adapter (lo, the host's frozen copy: read
 * from --adapter, also on a resume, as the CPU reads it) uploaded once, and each
 * layer's views of it, which the policy's base runs under for the reference. */
static int upload_ref_adapter(TrainGpu *g, const LoraLayers *lo, GrpoErr *err) {
    const Model *m = g->host;
    CHECK(lo->table.total == g->P && lo->spec.r == m->lora->spec.r && lo->n_layers == m->cfg.n_layers);
    if (gpu_alloc(&g->dev, &g->ref_adapter, 4 * g->P, err) ||
        gpu_put(&g->dev, g->ref_adapter, lo->params, 4 * g->P, err))
        return -1;
    int L = m->cfg.n_layers;
    g->ref_adapter_views = xcalloc((size_t)(L ? L : 1), sizeof *g->ref_adapter_views);
    for (int l = 0; l < L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            g->ref_adapter_views[l].has[mod] =
                gpu_lora_view(&g->ref_adapter_views[l].mod[mod], lo, &m->cfg, l, (LoraModule)mod, g->ref_adapter, 0);
    return 0;
}

/* Weights, master weights, AdamW's state, the mask and the reference: -1 with err
 * when they do not fit or a copy fails. */
static int plan_fixed(TrainGpu *g, Model *ref, const LoraLayers *ref_adapter, const uint8_t *mask, GrpoErr *err) {
    GpuDevice *d = &g->dev;
    size_t P = g->P, before = gpu_free_bytes(&g->dev);
    /* full fine-tuning: 4 x 4 P (master, gradient, m, v) and 2 P of bf16 copies; LoRA: the base's bf16 copy and
     * the adapters' 4 x 4 P (their values are the master: the forward reads fp32 adapters); the reference's
     * copies, and a moving one's fp32 weights; --adapter's reference: the starting adapter's 4 P */
    double base = g->lora ? 2.0 * g->host->table.total : 0;
    double mb = 1048576.0,
           want = (g->lora ? 16.0 : 18.0) * P + base + (ref ? (ref->half ? 2.0 : 6.0) * ref->table.total : 0) +
                  (ref_adapter ? 4.0 * P : 0);
    if (want > (double)before)
        return err_set(err, "the memory plan does not fit on the GPU: the weights, their fp32 master copy, gradients "
                       "and AdamW state take about %.0f MB, %s has %.0f MB free; set use_cpu true to train on the CPU",
                       want / mb, d->name, before / mb);
    if (gpu_model_upload(d, &g->policy, g->host, err)) return -1;
    g->nb = (P + GRAD_NORM_BLOCK - 1) / GRAD_NORM_BLOCK;
    g->host_parts = xmalloc(sizeof(double) * (g->nb ? g->nb : 1));
    if (g->lora) g->master = g->policy.lora_params; /* AdamW updates the adapters the forward reads in place */
    if ((!g->lora && gpu_alloc(d, &g->master, 4 * P, err)) || gpu_alloc(d, &g->m, 4 * P, err) ||
        gpu_alloc(d, &g->v, 4 * P, err) || gpu_alloc(d, &g->mask, P ? P : 1, err) ||
        gpu_alloc(d, &g->parts, 8 * (g->nb ? g->nb : 1), err) || gpu_put(d, g->mask, mask, P, err) ||
        (!g->lora && make_spans(g, &g->policy, &g->spans, err)) || upload_state(g, err))
        return -1;
    size_t mid = gpu_free_bytes(&g->dev);
    if (ref && !ref->half) { /* fp32: sync_ref_model's, which moves (a frozen one is held in bf16) */
        if (upload_moving_ref(g, ref, err)) return -1;
    } else if (ref) {
        if (gpu_model_upload(d, &g->ref, ref, err)) return -1;
        g->has_ref = 1;
    } else if (ref_adapter && upload_ref_adapter(g, ref_adapter, err)) {
        return -1;
    }
    size_t after = gpu_free_bytes(&g->dev);
    g->fixed_bytes = (double)before - (double)mid, g->ref_bytes = (double)mid - (double)after;
    return 0;
}

/* The training pass's buffers for max_tokens rows: full fine-tuning's or LoRA's. */
static int create_pass(TrainGpu *g, int max_tokens, int chunk_rows, GrpoErr *err) {
    if (g->lora)
        return gpu_model_lora_create_ckpt(&g->dev, &g->ltrain, &g->policy, g->host, max_tokens, chunk_rows,
                                          g->ckpt, g->entropy_grad, err);
    return gpu_model_train_create_ckpt(&g->dev, &g->train, &g->policy, g->host, max_tokens, chunk_rows, g->ckpt,
                                       err);
}

/* The plan's words for the activations the passes keep. */
static const char *kept_words(const TrainGpu *g) {
    if (g->ckpt == CKPT_NONE) return "every layer's activations kept on the GPU: no recomputation";
    return g->ckpt == CKPT_SELECTIVE ? "gradient checkpointing, selective: layer inputs and gate/up products + one "
                                       "layer's activations kept, layers recomputed in the backward up to their "
                                       "gate/up product"
                                     : "gradient checkpointing, full: layer inputs + one layer's activations kept, "
                                       "layers recomputed in the backward";
}

int train_gpu_plan(TrainGpu *g, Model *policy, Model *ref, int ref_base, const LoraLayers *ref_adapter, AdamW *opt,
                   const uint8_t *decay_mask, int max_tokens, int chunk_rows, const char *length_option,
                   GrpoErr *err) {
    g->host = policy, g->opt = opt, g->max_tokens = max_tokens;
    g->lora = policy->lora != NULL, g->ref_base = ref_base;
    g->P = g->lora ? policy->lora->table.total : policy->table.total;
    CHECK((g->lora ? policy->half != NULL : policy->mixed != NULL) && opt->n == g->P &&
          (ref != NULL) + ref_base + (ref_adapter != NULL) <= 1 && (!ref_adapter || g->lora));
    if (g->lora && policy->half->products16 == 0)
        return err_set(err, "GPU LoRA training: the base's products are not bf16 (expected --bf16)");
    if (plan_fixed(g, ref, ref_adapter, decay_mask, err)) return -1;
    size_t before = gpu_free_bytes(&g->dev);
    GrpoErr e;
    if (create_pass(g, max_tokens, chunk_rows, &e) ||
        gpu_model_scratch_create(&g->dev, &g->scratch, &g->policy, max_tokens, chunk_rows, &e)) {
        double mb = 1048576.0;
        const char *less = training_args_ckpt_less(g->ckpt);
        return err_set(err, "the memory plan does not fit on the GPU: the activations of a micro-batch of %d tokens "
                       "(%s), with %.0f MB free after the weights (%s); lower per_device_train_batch_size or %s%s%s, "
                       "or set use_cpu true",
                       max_tokens, kept_words(g), before / mb, e.msg, length_option, less ? ", " : "",
                       less ? less : "");
    }
    g->act_bytes = (double)before - (double)gpu_free_bytes(&g->dev);
    g->rows = xmalloc(sizeof(int) * (size_t)max_tokens);
    for (int i = 0; i < max_tokens; i++) g->rows[i] = i;
    g->dlogp = xmalloc(sizeof(float) * (size_t)max_tokens);
    g->planned = 1;
    return 0;
}

void train_gpu_close(TrainGpu *g) {
    if (!g) return;
    GpuDevice *d = &g->dev;
    if (g->planned) {
        gpu_model_scratch_free(d, &g->scratch);
        if (g->lora) gpu_model_lora_free(d, &g->ltrain);
        else gpu_model_train_free(d, &g->train);
    }
    if (g->has_ref) gpu_model_free(d, &g->ref);
    if (g->policy.layers) gpu_model_free(d, &g->policy); /* LoRA's master with it */
    CUdeviceptr all[] = {g->lora ? 0 : g->master, g->m, g->v, g->mask, g->parts, g->ref_master, g->ref_adapter};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) gpu_free(d, all[i]);
    gpu_close(d);
    free(g->spans.at), free(g->ref_spans.at), free(g->rows), free(g->dlogp), free(g->host_parts);
    free(g->ref_adapter_views);
    free(g);
}

double train_gpu_bytes(const TrainGpu *g) { return g->fixed_bytes + g->ref_bytes + g->act_bytes; }

void train_gpu_describe(const TrainGpu *g, char *out, size_t n) {
    double mb = 1048576.0;
    char ref[128] = "";
    if (g->has_ref)
        snprintf(ref, sizeof ref, ", reference %.0f (%s)", g->ref_bytes / mb,
                 g->ref_master ? "fp32 weights, mixed in, and their bf16 copies" : "in bf16");
    if (g->ref_base) snprintf(ref, sizeof ref, ", reference: the base, adapters off (no copy)");
    if (g->ref_adapter)
        snprintf(ref, sizeof ref, ", reference %.0f (the base under the starting adapter, frozen: its fp32 values; "
                 "the base not copied)", g->ref_bytes / mb);
    const char *what = g->lora ? "the frozen base in bf16 + the adapters' fp32 values+grads+AdamW"
                               : "weights in bf16 + fp32 master weights+grads+AdamW";
    snprintf(out, n, "on the GPU (%s, %.0f MB free): %s %.0f%s, activations %.0f (micro-batch of %d tokens; %s)",
             g->dev.name, g->free_at_open / mb, what, g->fixed_bytes / mb, ref, g->act_bytes / mb, g->max_tokens,
             kept_words(g));
}

/* ---- passes ---- */

/* The host's weights or AdamW state were written (a resume): the device takes them first. */
static void device_current(TrainGpu *g) {
    GrpoErr e;
    if (g->device_behind) ok(upload_state(g, &e), &e);
    if (g->ref_device_behind) ok(upload_ref(g, &e), &e);
}

void train_gpu_logprobs(TrainGpu *g, int reference, PaddedBatch *pb, float inv_temp, float *logp, float *entropy) {
    device_current(g);
    CHECK(!reference || g->has_ref || g->ref_base || g->ref_adapter);
    GrpoErr e;
    if (reference && g->ref_adapter) { /* TRL re-training a PeftModel: the "ref" adapter, the starting one, frozen */
        ok(gpu_model_batch_logprobs_lora(&g->dev, &g->policy, &g->scratch, pb, inv_temp, g->ref_adapter_views, logp,
                                         entropy, &e), &e);
        return;
    }
    ModelPass base = {.base_only = 1}; /* TRL with new PEFT adapters: the reference is the base, adapters disabled */
    ok(gpu_model_batch_logprobs_pass(&g->dev, reference && g->has_ref ? &g->ref : &g->policy, &g->scratch, pb,
                                     inv_temp, reference && g->ref_base ? &base : NULL, logp, entropy, &e), &e);
}

void train_gpu_forward(TrainGpu *g, PaddedBatch *pb, const uint64_t *keys, float inv_temp, float *logp,
                       float *entropy, const LogprobGrad *grad) {
    device_current(g);
    GrpoErr e;
    g->pending = grad != NULL;
    if (!g->lora) { /* a token-local objective's head backward in the same pass (its logits computed once) */
        ok(gpu_model_train_batch_forward(&g->dev, &g->policy, &g->train, pb, inv_temp, logp, entropy, grad, &e), &e);
        return;
    }
    ok(gpu_model_lora_batch_forward(&g->dev, &g->policy, &g->ltrain, pb, keys, inv_temp, logp, entropy, &e), &e);
    if (grad) logprob_grad_rows(grad, g->rows, pb->offsets[pb->S], logp, g->dlogp); /* token-local: any order */
}

void train_gpu_backward(TrainGpu *g, PaddedBatch *pb, const float *dlogp, const float *dentropy) {
    CHECK(dlogp || (g->pending && !dentropy));
    GrpoErr e;
    if (g->lora) ok(gpu_model_lora_batch_backward(&g->dev, &g->policy, &g->ltrain, pb, dlogp ? dlogp : g->dlogp,
                                                 dentropy, &e), &e);
    else ok(gpu_model_train_batch_backward(&g->dev, &g->policy, &g->train, pb, dlogp, dentropy, &e), &e);
    g->pending = 0;
}

/* ---- the step ---- */

/* The step's gradient on the device: full fine-tuning's (the model's table) or the adapters'. */
static CUdeviceptr grads_of(const TrainGpu *g) { return g->lora ? g->ltrain.grads : g->train.grads; }

/* Every tensor no backward reached this step: zeros. */
static void settle(TrainGpu *g) {
    GrpoErr e;
    ok(g->lora ? gpu_model_lora_settle(&g->dev, &g->ltrain, &e) : gpu_model_train_settle(&g->dev, &g->train, &e), &e);
}

void train_gpu_begin_step(TrainGpu *g) {
    if (g->lora) gpu_model_lora_begin(&g->ltrain);
    else gpu_model_train_begin(&g->train);
    g->grad_taken = 0;
}

void train_gpu_gradient(TrainGpu *g, float *host) {
    if (g->grad_taken) return;
    GrpoErr e;
    settle(g);
    ok(gpu_get(&g->dev, host, grads_of(g), 4 * g->P, &e), &e);
    g->grad_taken = 1;
}

double train_gpu_clip(TrainGpu *g, float *host, double max_norm) {
    if (g->grad_taken) return grad_clip_norm(host, g->P, max_norm); /* summed over processes there */
    GrpoErr e;
    settle(g);
    ok(gpu_grad_sumsq_blocks(&g->dev, g->parts, grads_of(g), g->P, &e), &e);
    ok(gpu_get(&g->dev, g->host_parts, g->parts, sizeof(double) * g->nb, &e), &e);
    double norm = grad_norm_parts(g->host_parts, g->nb); /* grad_norm's, bit for bit */
    float c = grad_clip_factor(norm, max_norm);
    if (c != 1.0f) ok(gpu_grad_scale(&g->dev, grads_of(g), g->P, c, &e), &e);
    return norm;
}

void train_gpu_update(TrainGpu *g, const float *grads, double lr, const AdamWConfig *c) {
    device_current(g);
    GrpoErr e;
    AdamWStep s = adamw_step_scalars(++g->opt->step, lr, c); /* adamw_step's count */
    if (g->grad_taken) ok(gpu_put(&g->dev, grads_of(g), grads, 4 * g->P, &e), &e); /* the host's, summed */
    else settle(g);
    ok(gpu_adamw_step(&g->dev, g->master, g->m, g->v, grads_of(g), g->mask, g->P, &s, &e), &e);
    g->host_behind = g->opt_behind = 1;
    /* the generator's weights too: it reads g->policy (LoRA: the adapters AdamW just wrote in place) */
    if (!g->lora) ok(refresh(g, &e), &e);
}

/* ---- the host's copy ---- */

void train_gpu_host_sync(TrainGpu *g) {
    if (!g->planned || !g->host_behind) return;
    GrpoErr e;
    if (g->lora) { /* the base is frozen: the adapters are all that moved */
        ok(gpu_get(&g->dev, g->host->lora->params, g->master, 4 * g->P, &e), &e);
        g->host_behind = 0;
        return;
    }
    float *buf = xmalloc(sizeof(float) * PIECE);
    ModelMixed *x = g->host->mixed;
    for (size_t i0 = 0; i0 < g->P; i0 += PIECE) {
        size_t n = g->P - i0 < PIECE ? g->P - i0 : PIECE;
        ok(gpu_get(&g->dev, buf, g->master + 4 * i0, 4 * n, &e), &e);
        f32_split_n(x->hi + i0, x->lo + i0, buf, n); /* what adamw_step_split leaves */
    }
    free(buf);
    model_sync_bf16(g->host); /* the fp32 norms and biases the host's forward reads */
    g->host_behind = 0;
}

void train_gpu_host_sync_opt(TrainGpu *g) {
    if (!g->planned || !g->opt_behind) return;
    GrpoErr e;
    ok(gpu_get(&g->dev, g->opt->m, g->m, 4 * g->P, &e), &e);
    ok(gpu_get(&g->dev, g->opt->v, g->v, 4 * g->P, &e), &e);
    g->opt_behind = 0;
}

const GenDevice *train_gpu_gen_device(TrainGpu *g) {
    CHECK(g->planned);
    device_current(g); /* a resume wrote the host's weights: without this the generator decodes the old ones */
    g->gen = (GenDevice){&g->dev, &g->policy};
    return &g->gen;
}

void train_gpu_host_written(TrainGpu *g) {
    if (g->planned) g->device_behind = 1;
}

/* ---- sync_ref_model ---- */

void train_gpu_mix_reference(TrainGpu *g, double alpha) {
    CHECK(g->ref_master);
    device_current(g);
    GrpoErr e;
    ok(gpu_mix_reference(&g->dev, g->ref_master, g->master, g->P, (float)alpha, &e), &e); /* the CPU's bits */
    ok(refresh_spans(g, &g->ref_spans, g->ref_master, &e), &e);
    g->ref_host_behind = 1;
}

void train_gpu_ref_sync(TrainGpu *g) {
    if (!g->ref_master || !g->ref_host_behind) return;
    GrpoErr e;
    ok(gpu_get(&g->dev, g->ref_host->params, g->ref_master, 4 * g->P, &e), &e);
    g->ref_host_behind = 0;
}

void train_gpu_ref_written(TrainGpu *g) {
    if (g->ref_master) g->ref_device_behind = 1, g->ref_host_behind = 0;
}
