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

#include "data/dataset.h"
#include "gen/pretrained.h"
#include "io/jsonl.h"
#include "tokenizer/tokenizer.h"
#include "train/model.h"
#include "train/world.h"

typedef struct {
    int32_t *ids;
    int n;
    int loss_start;     /* tokens at index >= loss_start are predicted */
} SftExample;

typedef struct {
    const SftConfig *c;
    TrainModel *tm;
    Tokenizer *tok;
    int vocab_size, max_positions;
    int32_t eos;
    SftExample *ex;
    int n_ex, cap_ex;
    DatasetSampler order;
    long pos;           /* examples consumed since the start of training */
    /* the step in progress: its examples over every process, and their buffers */
    SftExample **mb;    /* [GA x micro_size] */
    BatchSeq *seqs;     /* [B] */
    uint64_t *ids;      /* [B] */
    float *logp;        /* [B x longest] */
    double targets;     /* target tokens of the step: its normaliser */
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
        if (ids.ids[i] >= t->vocab_size)
            rc = err_set(err, "token id %d is beyond the model's vocab_size %d", ids.ids[i], t->vocab_size);
    if (!rc && n > t->max_positions)
        rc = err_set(err, "%d tokens (after truncation to max_length %d) are more than the model's "
                     "max_position_embeddings (%d); lower max_length", n, t->c->max_length, t->max_positions);
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

static int sft_setup(SftTrainer *t, const SftConfig *c, GrpoErr *err) {
    t->c = c;
    if (sft_config_check(c, err) || !(t->tm = train_model_open(&c->train, &(TrainModelNeeds){0}, NULL, err)))
        return -1;
    t->tok = train_model_tokenizer(t->tm);
    t->eos = train_model_eos(t->tm);
    t->vocab_size = train_model_config(t->tm)->vocab_size;
    t->max_positions = train_model_config(t->tm)->max_position_embeddings;
    if (jsonl_read(c->train.dataset, parse_example, t, err) < 0) return -1;
    if (t->n_ex == 0) return err_set(err, "%s: no examples", c->train.dataset);
    int longest = 2, B = c->train.per_device_train_batch_size;
    for (int i = 0; i < t->n_ex; i++) longest = t->ex[i].n > longest ? t->ex[i].n : longest;
    if (train_model_plan(t->tm, B, longest, "max_length", err)) return -1;
    dataset_sampler_init(&t->order, t->n_ex, c->train.shuffle_dataset, c->train.seed);
    t->mb = xmalloc(sizeof(SftExample *) * B * train_world_size(train_world_processes()) *
                    c->train.gradient_accumulation_steps);
    t->seqs = xmalloc(sizeof(BatchSeq) * B);
    t->ids = xmalloc(sizeof(uint64_t) * B);
    t->logp = xmalloc(sizeof(float) * B * longest);
    return 0;
}

static void sft_free(SftTrainer *t) {
    dataset_sampler_free(&t->order);
    for (int i = 0; i < t->n_ex; i++) free(t->ex[i].ids);
    free(t->ex);
    train_model_close(t->tm);
    free(t->mb), free(t->seqs), free(t->ids), free(t->logp);
}

/* ---- one optimizer step ---- */

/* d(-sum logp / norm) / d logp: the same for every target. */
static void nll_grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    double norm = *(const double *)ctx;
    for (int i = 0; i < m; i++) dlogp[i] = (float)(-1.0 / norm);
}

/* The step's examples over every process, in order; its normaliser, the target
 * tokens of them all. */
static int sft_begin_step(void *self, const TrainStep *s, TrainStepSums *sums, MetricAcc *m, GrpoErr *err) {
    SftTrainer *t = self;
    t->targets = 0;
    for (int k = 0; k < s->micro_size * s->micro_batches; k++) {
        t->mb[k] = &t->ex[dataset_sampler_index(&t->order, t->pos++)];
        t->targets += t->mb[k]->n - t->mb[k]->loss_start;
    }
    sums->loss_norm = t->targets;
    return 0;
}

/* A micro-batch's part: log-probs with the LM head's backward alongside, then the
 * rest of the backward; its loss -sum logp. */
static void sft_micro_batch(void *self, TrainModel *tm, const TrainStep *s, int k, int first, int count,
                            TrainStepSums *sums) {
    SftTrainer *t = self;
    SftExample **b = t->mb + first;
    for (int i = 0; i < count; i++) {
        t->seqs[i] = (BatchSeq){b[i]->ids, b[i]->n, NULL, 0, b[i]->loss_start};
        t->ids[i] = (uint64_t)(b[i] - t->ex); /* adapter dropout: per example and step */
        sums->tokens += b[i]->n;
    }
    double norm = t->targets;
    TrainBatch batch = {t->seqs, count, t->ids, 1.0f};
    train_model_forward(tm, &batch, t->logp, NULL, &(LogprobGrad){nll_grads, &norm});
    int ntok = 0;
    for (int i = 0; i < count; i++) ntok += b[i]->n - b[i]->loss_start;
    double nll = 0;
    for (int j = 0; j < ntok; j++) nll -= t->logp[j];
    train_model_backward(tm, NULL, NULL);
    sums->loss += nll;
}

static void sft_end_step(void *self, const TrainStep *s, const TrainStepSums *sums, MetricAcc *m) {
    SftTrainer *t = self;
    metric_add(m, "epoch", (double)t->pos / t->n_ex);
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
    const TrainWorld *w = train_world_processes();
    int rc = train_world_check(w, sft_setup(&t, c, err), err); /* inputs a process could not open stop every one */
    if (!rc) {
        const TrainingArgs *a = &c->train;
        char line[200];
        snprintf(line, sizeof line, "micro-batch %d, %d accumulation steps", a->per_device_train_batch_size,
                 a->gradient_accumulation_steps);
        TrainAlgo algo = {.name = "sft", .self = &t, .n_examples = t.n_ex,
                          .examples_per_step = (long)a->per_device_train_batch_size * train_world_size(w) *
                                               a->gradient_accumulation_steps,
                          .begin_step = sft_begin_step, .micro_batch = sft_micro_batch, .end_step = sft_end_step,
                          .save = sft_save, .load = sft_load, .plan_line = line};
        OptGroup g[SFT_CONFIG_N_GROUPS];
        sft_config_groups(g);
        ModelSaveMeta meta;
        gen_save_meta(&meta, t.tok, NULL);
        TrainLoop L = {a, t.tm, &algo, g, SFT_CONFIG_N_GROUPS, c, hooks ? *hooks : (TrainHooks){0}, &meta, w};
        rc = train_loop_run(&L, err);
        json_decref((json_t *)meta.generation_config);
    }
    sft_free(&t);
    return rc;
}
