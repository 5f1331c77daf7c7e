/* cli/cmd_score.c — `grpo score`: per-token log-probabilities of given completions.
 * Reads JSON lines {"prompt_ids": [...], "completion_ids": [...]} and writes one line
 * {"logprobs": [...]} per input line, in order: the natural-log probability of each
 * completion token given everything before it (likelihood evaluation, and the
 * contract that tests the forward pass from outside). Lines are batched up to
 * --batch_tokens padded tokens per forward (what the activations are planned for),
 * and run packed, without the padding; on the CPU rows that begin alike (a group's
 * completions after one prompt) have their common start computed once.
 *
 * On a machine with an NVIDIA GPU (gpu_open finds one) the forward runs there
 * (gpu/model.h), as transformers uses the GPU it finds; --use_cpu forces the CPU.
 * The GPU runs bf16 products only, so bf16 is its default, and an fp32 form (--bf16
 * false, --bf16_held) scores on the CPU, saying so in one line. An --adapter under
 * bf16 products (the GPU's, or --bf16 true on the CPU) is not folded in: the base's
 * products in bf16 and the adapter's own fp32 path beside them (gpu/layer.h's
 * adapters, model/lora_layers.h's on the CPU: PEFT's unmerged LoRA on a bf16 model);
 * under fp32 products it is folded into fp32 weights as grpo merge does. Without a
 * GPU nothing changes and nothing more is said. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/memory.h"
#include "dist/dist.h"
#include "gen/options.h"
#include "gen/pretrained.h"
#include "gpu/model.h"
#include "io/jsonl.h"
#include "model/batch.h"
#include "model/lora_layers.h"
#include "model/model_io.h"

typedef struct {
    int32_t *ids;       /* prompt then completion */
    int n_prompt, n;
} ScoreItem;

/* Reads one row into it; errors name the field (the reader adds FILE:LINE). */
static int parse_item(json_t *root, const ModelConfig *cfg, ScoreItem *it, GrpoErr *err) {
    int V = cfg->vocab_size;
    json_t *lists[2] = {json_object_get(root, "prompt_ids"), json_object_get(root, "completion_ids")};
    const char *names[2] = {"prompt_ids", "completion_ids"};
    for (int k = 0; k < 2; k++)
        if (!json_is_array(lists[k])) return err_set(err, "missing '%s' (a list of token ids)", names[k]);
    size_t np = json_array_size(lists[0]), nc = json_array_size(lists[1]);
    if (np == 0 && nc > 0) return err_set(err, "prompt_ids is empty: the first completion token needs a context");
    /* past the model's positions RoPE still runs (transformers only warns), but
     * the scores would not be the model's */
    if (np + nc > (size_t)cfg->max_position_embeddings)
        return err_set(err, "prompt_ids and completion_ids are %zu tokens, more than the model's "
                       "max_position_embeddings (%d)", np + nc, cfg->max_position_embeddings);
    it->n_prompt = (int)np;
    it->n = (int)(np + nc);
    it->ids = xmalloc(sizeof(int32_t) * (it->n ? it->n : 1));
    for (int k = 0, pos = 0; k < 2; k++) {
        for (size_t i = 0; i < json_array_size(lists[k]); i++, pos++) {
            json_t *v = json_array_get(lists[k], i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= V) {
                free(it->ids);
                return err_set(err, "%s[%zu] must be a token id in 0..%d", names[k], i, V - 1);
            }
            it->ids[pos] = (int32_t)json_integer_value(v);
        }
    }
    return 0;
}

/* The GPU's model and scratch (gpu/model.h), when scoring runs there. */
typedef struct {
    GpuDevice dev;
    GpuModel model;
    GpuModelScratch scratch;
} ScoreGpu;

/* Scores items[n] in one forward, packed (on the CPU each common start of the rows
 * once: padded_batch_fill_shared), and prints their
 * lines in order. An item with no tokens at all (both lists empty) has nothing to
 * score and stays out of the batch. -1 with err: the GPU's error. */
static int score_batch(Model *m, Activations *a, ScoreGpu *gpu, const ScoreItem *items, int n, float inv_temp,
                       GrpoErr *err) {
    BatchSeq *seqs = xmalloc(sizeof(BatchSeq) * n);
    int S = 0, rc = 0, tokens = 0;
    for (int i = 0; i < n; i++) {
        if (!items[i].n) continue;
        seqs[S++] = (BatchSeq){items[i].ids, items[i].n, NULL, 0, items[i].n_prompt};
        tokens += items[i].n;
    }
    PaddedBatch pb = {0};
    float *lp = NULL;
    if (S) {
        padded_batch_reserve(&pb, S, tokens, 1);
        if (gpu) padded_batch_fill(&pb, seqs, S);
        else padded_batch_fill_shared(&pb, seqs, S); /* a prompt the rows share computed once */
        lp = xmalloc(sizeof(float) * (pb.offsets[S] + 1));
        if (gpu) rc = gpu_model_batch_logprobs(&gpu->dev, &gpu->model, &gpu->scratch, &pb, inv_temp, lp, NULL, err);
        else padded_batch_logprobs(m, a, &pb, NULL, inv_temp, lp, NULL);
    }
    for (int i = 0, k = 0; i < n && !rc; i++) {
        fputs("{\"logprobs\": [", stdout);
        if (items[i].n) {
            for (int j = pb.offsets[k]; j < pb.offsets[k + 1]; j++) {
                fputs(j > pb.offsets[k] ? ", " : "", stdout);
                if (isfinite(lp[j])) printf("%.8g", lp[j]);
                else fputs("null", stdout); /* JSON has no NaN or Inf */
            }
            k++;
        }
        fputs("]}\n", stdout);
    }
    fflush(stdout);
    if (S) padded_batch_free(&pb);
    free(seqs), free(lp);
    return rc;
}

/* Lines are batched as they arrive, so scores stream out while stdin is read. */
typedef struct {
    Model *m;
    Activations *a;
    ScoreGpu *gpu;      /* NULL: the CPU */
    long batch_tokens;
    float inv_temp;
    ScoreItem *items;
    int n, cap, Tmax;   /* items waiting, their capacity, their longest length */
} ScoreStream;

static int flush_items(ScoreStream *st, GrpoErr *err) {
    int rc = st->n ? score_batch(st->m, st->a, st->gpu, st->items, st->n, st->inv_temp, err) : 0;
    for (int i = 0; i < st->n; i++) free(st->items[i].ids);
    st->n = st->Tmax = 0;
    return rc;
}

static int score_row(json_t *row, long line, void *ctx, GrpoErr *err) {
    ScoreStream *st = ctx;
    ScoreItem it;
    if (parse_item(row, &st->m->cfg, &it, err)) return -1;
    if (it.n > st->batch_tokens) {
        free(it.ids);
        return err_set(err, "%d tokens exceed --batch_tokens %ld", it.n, st->batch_tokens);
    }
    int T = it.n > st->Tmax ? it.n : st->Tmax;
    if (st->n > 0 && (long)(st->n + 1) * T > st->batch_tokens) {
        if (flush_items(st, err)) {
            free(it.ids);
            return -1;
        }
        T = it.n;
    }
    if (st->n == st->cap) st->items = xrealloc(st->items, sizeof(ScoreItem) * (st->cap = 2 * st->cap + 16));
    st->items[st->n++] = it;
    st->Tmax = T;
    return 0;
}

typedef struct {
    const char *model_dir, *data, *adapter;
    double temperature;
    long batch_tokens;
    int gradient_checkpointing, use_cpu;
    Bf16Options bf16;
} ScoreArgs;

#define A(f) offsetof(ScoreArgs, f)
static const OptSpec score_options[] = {
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_MODEL_PATH, "model directory (HF layout)"},
    {"adapter", OPT_STR, A(adapter), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "a PEFT LoRA adapter directory: with bf16 products (on the GPU, or --bf16 true) unmerged beside the bf16 "
     "base, as PEFT runs it on a bf16 model; else folded into fp32 weights as grpo merge does"},
    {"data", OPT_STR, A(data), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED,
     "JSON lines {prompt_ids, completion_ids}; - for stdin"},
    {"temperature", OPT_F64, A(temperature), 1.0, NULL, 1e-300, 1e300, NULL, NULL, 0, "score softmax(logits / temperature)"},
    {"batch_tokens", OPT_LONG, A(batch_tokens), 4096, NULL, 1, 1 << 30, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "padded tokens per forward pass"},
    {"gradient_checkpointing", OPT_BOOL, A(gradient_checkpointing), 1, NULL, OPT_NO_RANGE, NULL, NULL,
     OPT_IN(OPT_SEC_SPEED),
     "plan activations as a checkpointed training pass does: one layer's buffers, reused layer after layer "
     "(scoring runs no backward); false keeps every layer's, as training without checkpointing (no effect on "
     "results; the memory it would touch)"},
    {"use_cpu", OPT_BOOL, A(use_cpu), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "score on the CPU where there is a GPU (transformers' use_cpu); without it an NVIDIA GPU, when one is "
     "found, scores with bf16 products"},
};

/* Where to score: 1 with gpu->dev open and *form bf16's (a GPU found, not --use_cpu,
 * --bf16 true or left to auto, with an --adapter or without); 0 on the
 * CPU, in silence where there is no GPU, with one line where there is one and the
 * form is fp32's; -1 with err where a GPU is there but cannot be set up. */
static int score_device(const ScoreArgs *sa, ScoreGpu *gpu, int *form, GrpoErr *err) {
    if (sa->use_cpu) return 0;
    char why[256] = "";
    int r = gpu_open_local(&gpu->dev, dist_local_rank(), dist_local_size(), why, sizeof why, err);
    if (r < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return err_set(err, "the GPU: %s (--use_cpu true scores on the CPU)", msg);
    }
    if (r == 0) return 0;
    const char *fp32 = sa->bf16.held > 0 ? "--bf16_held" : sa->bf16.bf16 == 0 ? "--bf16 false" : NULL;
    if (fp32) { /* the GPU layers run bf16 products only (gpu/layer.h) */
        fprintf(stderr, "grpo score: %s: fp32 products, scored on the CPU (the GPU runs bf16 products only)\n", fp32);
        gpu_close(&gpu->dev);
        return 0;
    }
    *form = WEIGHTS_BF16;
    return 1;
}

/* The CPU's activations for --batch_tokens (and an unmerged adapter's), checked against
 * the memory available. The LM head's logits a chunk of 256 rows at a time, as
 * training's (--logprob_chunk_rows' default): 32 left its products a tenth slower
 * at the Qwen2-0.5B shape (155 MB of logits there instead of 19). */
static int score_plan_cpu(const Model *m, Activations *a, long batch_tokens, int ckpt, GrpoErr *err) {
    int chunk = batch_tokens < 256 ? (int)batch_tokens : 256;
    double mb = 1048576.0, need = (double)acts_plan_bytes(&m->cfg, (int)batch_tokens, ckpt, chunk, 0);
    if (m->lora) need += (double)acts_lora_plan_bytes(&m->cfg, m->lora, (int)batch_tokens, ckpt);
    double avail = (double)mem_available_bytes();
    if (need > avail)
        return err_set(err, "activations for --batch_tokens %ld need %.0f MB and %.0f MB is available; lower "
                       "--batch_tokens", batch_tokens, need / mb, avail / mb);
    acts_create(a, &m->cfg, (int)batch_tokens, ckpt, chunk, 0);
    if (m->lora) acts_reserve_lora(a, &m->cfg, m->lora);
    return 0;
}

/* The model and scratch on the GPU, for packed batches of up to --batch_tokens rows;
 * the LM head 128 rows of logits at a time. What does not fit is one line naming the
 * part, the GPU's free memory and what to lower (the driver's own words beside it). */
static int score_plan_gpu(const Model *m, ScoreGpu *gpu, long batch_tokens, GrpoErr *err) {
    double mb = 1048576.0, before = gpu_free_bytes(&gpu->dev) / mb;
    GrpoErr e;
    if (gpu_model_upload(&gpu->dev, &gpu->model, m, &e))
        return err_set(err, "the memory plan does not fit on %s: the model's weights in bf16 with %.0f MB free (%s); "
                       "--use_cpu true scores on the CPU", gpu->dev.name, before, e.msg);
    double after = gpu_free_bytes(&gpu->dev) / mb;
    if (!gpu_model_scratch_create(&gpu->dev, &gpu->scratch, &gpu->model, (int)batch_tokens, 128, &e)) return 0;
    gpu_model_free(&gpu->dev, &gpu->model);
    return err_set(err, "the memory plan does not fit on %s: the activations of a forward of --batch_tokens %ld with "
                   "%.0f MB free after the weights (%.0f MB; %s); lower --batch_tokens, or --use_cpu true scores on "
                   "the CPU", gpu->dev.name, batch_tokens, after, before - after, e.msg);
}

int cmd_score(int argc, char **argv) {
    ScoreArgs sa;
    OptGroup g[] = {OPT_GROUP_IN(score_options, 0, OPT_SEC_MODEL_DATA), BF16_OPTIONS_GROUP(A(bf16))};
    opts_defaults(g, 2, &sa);
    int rc = args_parse("score", "--model DIR --data FILE.jsonl [options]", argc, argv, g, 2, &sa);
    if (rc) return rc == 1 ? 0 : rc;
    int form;
    const char *bad = bf16_options_form(&sa.bf16, !!sa.adapter, &form);
    if (bad) {
        fprintf(stderr, "grpo score: %s\n", bad);
        args_free();
        return 2;
    }
    cli_setup_threads();
    GrpoErr err;
    ScoreGpu gpu;
    LoraLayers lora;
    int has_lora = 0;
    int on_gpu = score_device(&sa, &gpu, &form, &err);
    if (on_gpu < 0) return cli_fail("score", err.msg);
    Model m;
    if (model_load_ex(&m, sa.model_dir, (WeightForm)form, &err)) {
        if (on_gpu) gpu_close(&gpu.dev);
        return cli_fail("score", err.msg);
    }
    Activations a = {0};
    if ((sa.adapter && pretrained_adapter_apply(&m, &lora, &has_lora, sa.adapter, &err)) ||
        (on_gpu ? score_plan_gpu(&m, &gpu, sa.batch_tokens, &err)
                : score_plan_cpu(&m, &a, sa.batch_tokens, sa.gradient_checkpointing, &err))) {
        model_free(&m);
        if (has_lora) lora_layers_free(&lora);
        if (on_gpu) gpu_close(&gpu.dev);
        return cli_fail("score", err.msg);
    }
    ScoreStream st = {&m, &a, on_gpu ? &gpu : NULL, sa.batch_tokens, (float)(1.0 / sa.temperature), NULL, 0, 0, 0};
    rc = jsonl_read(sa.data, score_row, &st, &err) < 0;
    if (!rc) rc = flush_items(&st, &err);
    for (int i = 0; i < st.n; i++) free(st.items[i].ids);
    free(st.items);
    if (on_gpu) {
        gpu_model_scratch_free(&gpu.dev, &gpu.scratch);
        gpu_model_free(&gpu.dev, &gpu.model);
        gpu_close(&gpu.dev);
    } else {
        acts_free(&a);
    }
    model_free(&m);
    if (has_lora) lora_layers_free(&lora);
    return rc ? cli_fail("score", err.msg) : 0;
}
