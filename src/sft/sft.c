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
#include "data/sft_data.h"
#include "ops/token_objective.h"
#include "gen/pretrained.h"
#include "train/model.h"
#include "train/world.h"

typedef struct {
    const SftConfig *c;
    TrainModel *tm;
    Tokenizer *tok;
    SftData data;
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
    {"chat_template", OPT_STR, offsetof(SftConfig, chat_template), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "open-r1's: a Jinja chat template used instead of the model's (saved as the tokenizer's)"},
};

void sft_config_groups(OptGroup g[SFT_CONFIG_N_GROUPS]) {
    g[0] = TRAINING_ARGS_GROUP(offsetof(SftConfig, train));
    g[1] = SEED_OPTION_GROUP(offsetof(SftConfig, train.seed), OPT_SEC_OPTIM);
    g[2] = OPT_GROUP_IN(sft_options, 0, OPT_SEC_MODEL_DATA);
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

static int sft_setup(SftTrainer *t, const SftConfig *c, GrpoErr *err) {
    t->c = c;
    if (sft_config_check(c, err) || !(t->tm = train_model_open(&c->train, &(TrainModelNeeds){0}, NULL, err)))
        return -1;
    t->tok = train_model_tokenizer(t->tm);
    if (c->chat_template && tok_set_chat_template(t->tok, c->chat_template, err)) return -1;
    const ModelConfig *mc = train_model_config(t->tm);
    SftFormat f = {t->tok, train_model_eos(t->tm), mc->vocab_size, mc->max_position_embeddings, c->max_length,
                   c->completion_only_loss};
    if (sft_data_load(&t->data, c->train.dataset, &f, err)) return -1;
    int B = c->train.per_device_train_batch_size, longest = t->data.longest;
    if (train_model_plan(t->tm, B, longest, "max_length", err)) return -1;
    dataset_sampler_init(&t->order, t->data.n, c->train.shuffle_dataset, c->train.seed);
    t->mb = xmalloc(sizeof(SftExample *) * B * train_world_size(train_world_processes()) *
                    c->train.gradient_accumulation_steps);
    t->seqs = xmalloc(sizeof(BatchSeq) * B);
    t->ids = xmalloc(sizeof(uint64_t) * B);
    t->logp = xmalloc(sizeof(float) * B * longest);
    return 0;
}

static void sft_free(SftTrainer *t) {
    dataset_sampler_free(&t->order);
    sft_data_free(&t->data);
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
        t->mb[k] = &t->data.ex[dataset_sampler_index(&t->order, t->pos++)];
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
        t->ids[i] = (uint64_t)(b[i] - t->data.ex); /* adapter dropout: per example and step */
        sums->tokens += b[i]->n;
    }
    double norm = t->targets, w = 1.0 / norm;
    TrainBatch batch = {t->seqs, count, t->ids, 1.0f};
    TokenObjective mean_nll = {{TOKOBJ_NLL, 0, 0, 0, 0, 0, 0}, NULL, &w, NULL, NULL, NULL, NULL, NULL}; /* -w a token */
    train_model_forward(tm, &batch, t->logp, NULL, &(LogprobGrad){nll_grads, &norm, &mean_nll, NULL});
    int ntok = 0;
    for (int i = 0; i < count; i++) ntok += b[i]->n - b[i]->loss_start;
    double nll = 0;
    for (int j = 0; j < ntok; j++) nll -= t->logp[j];
    train_model_backward(tm, NULL, NULL);
    sums->loss += nll;
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
        TrainAlgo algo = {.name = "sft", .self = &t, .n_examples = t.data.n,
                          .examples_per_step = (long)a->per_device_train_batch_size * train_world_size(w) *
                                               a->gradient_accumulation_steps,
                          .begin_step = sft_begin_step, .micro_batch = sft_micro_batch,
                          .save = sft_save, .load = sft_load, .plan_line = line};
        OptGroup g[SFT_CONFIG_N_GROUPS];
        sft_config_groups(g);
        ModelSaveMeta meta;
        gen_save_meta(&meta, t.tok, NULL);
        meta.chat_template = c->chat_template; /* open-r1's: saved as the tokenizer's, as it sets it */
        TrainLoop L = {a, t.tm, &algo, g, SFT_CONFIG_N_GROUPS, c, hooks ? *hooks : (TrainHooks){0}, &meta, w};
        rc = train_loop_run(&L, err);
        json_decref((json_t *)meta.generation_config);
    }
    sft_free(&t);
    return rc;
}
