/* sft/sft.c — SFT as an algorithm of the training loop (see sft.h): examples
 * tokenized up front, a seeded order per epoch, micro-batches of whole examples,
 * the step's target-token count as the normaliser. The loop owns the optimizer,
 * the schedule, metrics, checkpoints and resume. */
#include "sft/sft.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "dist/dist.h"
#include "gen/pretrained.h"
#include "io/jsonl.h"
#include "model/batch.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/adapters.h"

typedef struct {
    int32_t *ids;
    int n;
    int loss_start;     /* tokens at index >= loss_start are predicted */
} SftExample;

typedef struct {
    const SftConfig *c;
    Model model;
    Tokenizer *tok;
    int32_t eos;
    SftExample *ex;
    int n_ex, cap_ex;
    DatasetSampler order;
    Activations acts;
    long pos;           /* examples consumed since the start of training */
    LoraLayers lora;    /* use_peft: the adapters trained on the frozen model */
    int have_lora;
    long step;          /* the optimizer step being computed (keys the adapters' dropout) */
} SftTrainer;

static const OptSpec sft_options[] = {
    {"max_length", OPT_INT, offsetof(SftConfig, max_length), 1024, NULL, 2, 1 << 24, NULL, NULL, 0,
     "tokens kept per example"},
    {"completion_only_loss", OPT_BOOL, offsetof(SftConfig, completion_only_loss), 1, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "prompt + completion: loss on the completion only"},
};

void sft_config_groups(OptGroup g[SFT_CONFIG_N_GROUPS]) {
    g[0] = TRAINING_ARGS_GROUP(offsetof(SftConfig, train));
    g[1] = (OptGroup){seed_option, 1, offsetof(SftConfig, train.seed)};
    g[2] = OPT_GROUP(sft_options, 0);
}

void sft_config_default(SftConfig *c) {
    memset(c, 0, sizeof *c);
    OptGroup g[SFT_CONFIG_N_GROUPS];
    sft_config_groups(g);
    opts_defaults(g, SFT_CONFIG_N_GROUPS, c);
    c->train.learning_rate = 2e-5; /* TRL's SFTConfig */
}

int sft_config_check(const SftConfig *c, GrpoErr *err) {
    OptGroup g[SFT_CONFIG_N_GROUPS];
    sft_config_groups(g);
    return opts_check(g, SFT_CONFIG_N_GROUPS, c, err) || training_args_check(&c->train, err) ? -1 : 0;
}

/* ---- examples ---- */

static int encode_append(Tokenizer *tok, const char *text, TokIds *ids, GrpoErr *err) {
    return tok_encode(tok, text, strlen(text), 0, ids, err);
}

static int encode_messages(Tokenizer *tok, json_t *messages, TokIds *ids, GrpoErr *err) {
    size_t n = json_array_size(messages);
    TokMessage *msgs = xcalloc(n, sizeof *msgs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *m = json_array_get(messages, i);
        json_t *r = json_object_get(m, "role"), *ct = json_object_get(m, "content");
        if (!json_is_string(r) || !json_is_string(ct))
            rc = err_set(err, "messages[%zu] needs string 'role' and 'content'", i);
        else msgs[i] = (TokMessage){json_string_value(r), json_string_value(ct)};
    }
    char *rendered = NULL;
    if (!rc) rc = tok_chat_render(tok, msgs, (int)n, 0, NULL, &rendered, err);
    if (!rc) rc = encode_append(tok, rendered, ids, err);
    free(rendered);
    free(msgs);
    return rc;
}

/* One JSON line into an example (the reader adds file:line to errors). */
static int parse_example(json_t *o, long line, void *ctx, GrpoErr *err) {
    SftTrainer *t = ctx;
    TokIds ids = {0};
    int rc = 0, start = 0;
    json_t *text = json_object_get(o, "text"), *prompt = json_object_get(o, "prompt"),
           *completion = json_object_get(o, "completion"), *messages = json_object_get(o, "messages");
    if (json_is_string(text)) {
        rc = encode_append(t->tok, json_string_value(text), &ids, err);
    } else if (json_is_string(prompt) && json_is_string(completion)) {
        rc = encode_append(t->tok, json_string_value(prompt), &ids, err);
        start = t->c->completion_only_loss ? (int)ids.n : 0;
        if (!rc) rc = encode_append(t->tok, json_string_value(completion), &ids, err);
    } else if (json_is_array(messages) && json_array_size(messages) > 0) {
        rc = encode_messages(t->tok, messages, &ids, err);
    } else {
        rc = err_set(err, "expected a 'text' string, 'prompt' and 'completion' strings, or a 'messages' list");
    }
    if (!rc && !json_is_array(messages) && t->eos >= 0) {
        if (ids.n == ids.cap) ids.ids = xrealloc(ids.ids, sizeof(int32_t) * (ids.cap = ids.cap * 2 + 1));
        ids.ids[ids.n++] = t->eos;
    }
    int n = (int)ids.n < t->c->max_length ? (int)ids.n : t->c->max_length;
    for (int i = 0; i < n && !rc; i++)
        if (ids.ids[i] >= t->model.cfg.vocab_size)
            rc = err_set(err, "token id %d is beyond the model's vocab_size %d", ids.ids[i], t->model.cfg.vocab_size);
    if (!rc && n > t->model.cfg.max_position_embeddings)
        rc = err_set(err, "%d tokens (after truncation to max_length %d) are more than the model's "
                     "max_position_embeddings (%d); lower max_length", n, t->c->max_length,
                     t->model.cfg.max_position_embeddings);
    if (!rc && (start < 1 ? 1 : start) >= n)
        rc = err_set(err, "no token left to learn (%d tokens after truncation to max_length %d, loss starts at %d)", n,
                     t->c->max_length, start < 1 ? 1 : start);
    if (rc) {
        tok_ids_free(&ids);
        return -1;
    }
    if (t->n_ex == t->cap_ex) t->ex = xrealloc(t->ex, sizeof(SftExample) * (t->cap_ex = t->cap_ex * 2 + 16));
    t->ex[t->n_ex++] = (SftExample){ids.ids, n, start < 1 ? 1 : start};
    return 0;
}

/* Floats of what the optimizer updates: the adapters, or every weight. */
static double trainable_floats(const SftTrainer *t) {
    return t->have_lora ? (double)t->lora.table.total : (double)t->model.table.total;
}

static int sft_setup(SftTrainer *t, const SftConfig *c, GrpoErr *err) {
    t->c = c;
    if (sft_config_check(c, err) ||
        model_load_ex(&t->model, c->train.model_dir, training_args_frozen_bf16(&c->train), err))
        return -1;
    if (tok_load(&t->tok, c->train.model_dir, err)) return -1;
    t->eos = tok_special(t->tok)->eos >= 0 ? tok_special(t->tok)->eos
             : t->model.cfg.n_eos                ? t->model.cfg.eos_token_ids[0] : -1;
    if (jsonl_read(c->train.dataset, parse_example, t, err) < 0) return -1;
    if (t->n_ex == 0) return err_set(err, "%s: no examples", c->train.dataset);
    if ((t->have_lora = train_adapters_attach(&t->lora, &t->model, &c->train, err)) < 0) return -1;
    if (training_args_bf16_compute(&c->train)) model_use_bf16_compute(&t->model);
    int longest = 2;
    for (int i = 0; i < t->n_ex; i++) longest = t->ex[i].n > longest ? t->ex[i].n : longest;
    long tokens = (long)c->train.per_device_train_batch_size * longest;
    double mb = 1048576.0, avail = (double)mem_available_bytes(), opt = 12.0 * trainable_floats(t);
    double acts = tokens > INT32_MAX ? INFINITY
                                     : (double)acts_plan_bytes(&t->model.cfg, (int)tokens, c->train.gradient_checkpointing,
                                                               c->train.logprob_chunk_rows, t->model.mixed != NULL);
    if (t->have_lora && isfinite(acts))
        acts += (double)acts_lora_plan_bytes(&t->model.cfg, &t->lora, (int)tokens, c->train.gradient_checkpointing);
    if (acts + opt > avail)
        return err_set(err, "the memory plan does not fit: activations %.0f MB (micro-batch of %d x %d tokens) + "
                       "gradients and AdamW state %.0f MB, with %.0f MB available; lower per_device_train_batch_size "
                       "or max_length", acts / mb, c->train.per_device_train_batch_size, longest, opt / mb, avail / mb);
    acts_create(&t->acts, &t->model.cfg, c->train.per_device_train_batch_size * longest,
                c->train.gradient_checkpointing, c->train.logprob_chunk_rows, t->model.mixed != NULL);
    if (t->have_lora) acts_reserve_lora(&t->acts, &t->model.cfg, &t->lora);
    dataset_sampler_init(&t->order, t->n_ex, c->train.shuffle_dataset, c->train.seed);
    return 0;
}

static void sft_free(SftTrainer *t) {
    if (t->acts.arena) acts_free(&t->acts);
    dataset_sampler_free(&t->order);
    for (int i = 0; i < t->n_ex; i++) free(t->ex[i].ids);
    free(t->ex);
    tok_free(t->tok);
    if (model_loaded(&t->model)) model_free(&t->model);
    if (t->have_lora > 0) lora_layers_free(&t->lora);
}

/* ---- one optimizer step ---- */

/* d(-sum logp / norm) / d logp: the same for every target. */
static void nll_grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    double norm = *(const double *)ctx;
    for (int i = 0; i < m; i++) dlogp[i] = (float)(-1.0 / norm);
}

/* One micro-batch: forward, log-probs with the LM head's backward alongside,
 * the rest of the backward. Returns -sum logp. */
static double micro_step(SftTrainer *t, const ModelGrads *grads, SftExample **b, int S, double norm) {
    BatchSeq *seqs = xmalloc(sizeof(BatchSeq) * S);
    uint64_t *keys = xmalloc(sizeof(uint64_t) * S); /* adapter dropout: per example and step */
    for (int i = 0; i < S; i++) {
        seqs[i] = (BatchSeq){b[i]->ids, b[i]->n, NULL, 0, b[i]->loss_start};
        keys[i] = rng_mix(rng_mix(0x64726f70u /* "drop" */, (uint64_t)t->step), (uint64_t)(b[i] - t->ex));
    }
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, S);
    int ntok = pb.offsets[S];
    float *lp = xmalloc(sizeof(float) * (ntok + 1));
    padded_batch_logprobs_train(&t->model, &t->acts, &pb, &(ModelPass){.backward = 1, .drop_keys = keys}, 1.0f, lp,
                                NULL, grads, &(LogprobGrad){nll_grads, &norm});
    double nll = 0;
    for (int j = 0; j < ntok; j++) nll -= lp[j];
    model_backward(&t->model, &t->acts, grads, NULL, NULL);
    padded_batch_free(&pb);
    free(keys), free(seqs), free(lp);
    return nll;
}

static int sft_step(void *self, const ModelGrads *grads, long step, TrainStepOut *out, MetricAcc *m, GrpoErr *err) {
    SftTrainer *t = self;
    t->step = step;
    int B = t->c->train.per_device_train_batch_size, GA = t->c->train.gradient_accumulation_steps;
    int BN = B * dist_size(), R = dist_rank(); /* global micro-batch k: examples k BN .. (k+1) BN, rank R's the R-th B */
    SftExample **mb = xmalloc(sizeof(SftExample *) * BN * GA);
    long targets = 0; /* over every process: the step's normaliser */
    out->tokens = 0;
    for (int k = 0; k < BN * GA; k++) {
        mb[k] = &t->ex[dataset_sampler_index(&t->order, t->pos++)];
        targets += mb[k]->n - mb[k]->loss_start;
        if (k % BN / B == R) out->tokens += mb[k]->n;
    }
    double nll = 0;
    for (int k = 0; k < GA; k++) nll += micro_step(t, grads, mb + k * BN + R * B, B, (double)targets);
    free(mb);
    out->loss = nll / targets;
    metric_add(m, "epoch", (double)t->pos / t->n_ex);
    return 0;
}

static int sft_save(void *self, const char *dir, json_t *state, GrpoErr *err) {
    json_object_set_new(state, "data_position", json_integer(((SftTrainer *)self)->pos));
    return 0;
}

static int sft_load(void *self, const char *dir, const json_t *state, GrpoErr *err) {
    json_t *p = json_object_get(state, "data_position");
    if (!json_is_integer(p) || json_integer_value(p) < 0)
        return err_set(err, "%s/trainer_state.json: malformed (expected data_position of a grpo sft checkpoint)", dir);
    ((SftTrainer *)self)->pos = (long)json_integer_value(p);
    return 0;
}

int sft_run(const SftConfig *c, const TrainHooks *hooks, GrpoErr *err) {
    SftTrainer t;
    memset(&t, 0, sizeof t);
    int rc = dist_check(sft_setup(&t, c, err), err); /* inputs a process could not open stop every one */
    if (!rc) {
        const TrainingArgs *a = &c->train;
        TrainAlgo algo = {"sft", &t, t.n_ex,
                          (long)a->per_device_train_batch_size * dist_size() * a->gradient_accumulation_steps,
                          sft_step, NULL, sft_save, sft_load, NULL, 0};
        OptGroup g[SFT_CONFIG_N_GROUPS];
        sft_config_groups(g);
        json_t *options = opts_to_json(g, SFT_CONFIG_N_GROUPS, c);
        json_object_set_new(options, "bf16", json_boolean(training_args_bf16(a))); /* what auto chose */
        char plan[1600], lora[400] = "", bf16_text[160];
        model_bf16_describe(&t.model, bf16_text, sizeof bf16_text);
        double mb = 1048576.0, P = (double)model_weight_bytes(&t.model), T = 4.0 * trainable_floats(&t);
        if (t.have_lora) {
            train_adapters_describe(&t.lora, lora, sizeof lora - 2);
            strcat(lora, "; ");
        }
        snprintf(plan, sizeof plan,
                 "%s (%.2f M parameters), %d examples, %ld steps of %d x %d examples; %smemory plan %.0f MB "
                 "(weights %.0f%s, grads+AdamW %.0f, activations %.0f%s)",
                 a->model_dir, config_param_count(&t.model.cfg) / 1e6, t.n_ex,
                 train_loop_total_steps(a, algo.n_examples, algo.examples_per_step), a->gradient_accumulation_steps,
                 a->per_device_train_batch_size, lora, (P + 3 * T + (t.have_lora ? T : 0) + t.acts.bytes) / mb,
                 (P + (t.have_lora ? T : 0)) / mb, bf16_text,
                 3 * T / mb, t.acts.bytes / mb, training_args_bf16_note(a));
        ModelSaveMeta meta;
        gen_save_meta(&meta, t.tok, NULL);
        TrainLoop L = {a, &t.model, &algo, options, plan, hooks ? *hooks : (TrainHooks){0}, &meta};
        rc = train_loop_run(&L, err);
        json_decref((json_t *)meta.generation_config);
        json_decref(options);
    }
    sft_free(&t);
    return rc;
}
