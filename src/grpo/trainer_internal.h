/* grpo/trainer_internal.h — the state shared by the GRPO trainer's files:
 * rollout.c (generate, score, advantages, old/reference log-probs), microbatch.c
 * (a micro-batch's log-probs, loss and backward), checkpoint.c (what a GRPO
 * checkpoint adds), trainer.c (setup and the step the training loop calls). */
#ifndef GRPO_GRPO_TRAINER_INTERNAL_H
#define GRPO_GRPO_TRAINER_INTERNAL_H

#include <stdio.h>

#include "data/dataset.h"
#include "gen/generate.h"
#include "gen/pretrained.h"
#include "grpo/trainer.h"
#include "log/metrics.h"
#include "model/lora_layers.h"
#include "model/model_io.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

/* One generation round: P prompts x G completions, scored, with advantages and
 * (when needed) the log-probs of the generating policy and of the reference. */
typedef struct {
    long index;            /* round number since the start of training */
    int n, P, G;           /* n = P * G completions; group p = completions p*G .. p*G+G-1 */
    int *example;          /* [P] dataset index of each prompt */
    const DatasetExample **prompt; /* [P] the prompts (borrowed from the dataset) */
    Completion *comp;      /* [n] */
    char **text;           /* [n] decoded completion (special tokens skipped) */
    double *per_func;      /* [F][n] */
    double *rewards;       /* [n] aggregated */
    double *adv;           /* [n] */
    float **old_logp;      /* [n][len] or NULL */
    float **ref_logp;      /* [n][len] or NULL */
    int *order;            /* [n] shuffled completion order; global micro-batch k = order[k*B*world ..
                              (k+1)*B*world), of which rank r trains on the r-th B */
    int *gen_rank;         /* [n] the process that generates and scores each completion */
    int *train_rank;       /* [n] the process that trains on it (its old/reference log-probs) */
    int uses;              /* micro-batches taken from it so far (of spg * num_iterations) */
    int pending;           /* micro-batches of the current step still reading it */
} Rollout;

/* Completion i of rollout r, as a micro-batch holds it. */
typedef struct {
    const Rollout *r;
    int i;
} CompletionRef;

/* The model pass of a micro-batch: which model, its activations, the temperature. */
typedef struct {
    Model *model;
    Activations *acts;
    float inv_temperature;
    long step;             /* the optimizer step being computed: keys the adapters' dropout */
    int base_only;         /* log-probs of the base without the adapters (the KL reference of a LoRA run) */
} MicroPass;

typedef struct {
    TrainConfig c;         /* the options, derived values resolved (epsilon_high, gen seed) */
    int spg;               /* steps_per_generation: global micro-batches per round */
    int gen_batch;         /* completions per round, over all processes (B x world x spg) */
    int world, rank;       /* processes of the run, and this one (dist/dist.h) */
    int need_old;          /* old log-probs are recorded at generation time */
    GenSession sess;       /* the policy (sess.pre.model), tokenizer, prompts, generator */
    int longest_train;     /* longest training prompt (the activations are planned for it) */
    double entropy_coef;       /* the bonus's coefficient now (use_adaptive_entropy moves it) */
    double last_world_entropy; /* the last step's kept-token entropy (adaptive control; +inf before one) */
    Dataset eval_data;     /* eval_dataset, tokenized (eval_strategy steps) */
    int have_eval;
    Model ref;             /* the frozen reference (beta > 0) */
    int have_ref;
    LoraLayers lora;       /* use_peft: the adapters trained on the frozen policy model */
    int have_lora;
    int ref_is_base;       /* beta > 0 with adapters: the reference is the policy with them switched off */
    DatasetSampler data_order;
    RewardSet rewards;
    Activations acts;
    long rounds_made;      /* generation rounds started */
    Rollout *cur;          /* the round being consumed (NULL before the first) */
    int resumed;           /* completions.jsonl is appended to */
    FILE *completions_f;
    /* the step in progress */
    long step;             /* optimizer steps done before it */
    MetricAcc *metrics;
    long tokens;
    double t_gen, t_score, t_ref;
} GrpoTrainer;

/* rollout.c */
int rollout_make(GrpoTrainer *t, Rollout **out, GrpoErr *err);
void rollout_free(Rollout *r);
/* Fills r->gen_rank and r->train_rank from r->order (after it is drawn or loaded). */
void rollout_assign(const GrpoTrainer *t, Rollout *r);
/* microbatch.c */
/* Log-probs (temperature-scaled) of the completion tokens of seqs[S], CSR in
 * logp (offsets[S+1]); entropy may be NULL. */
void micro_logprobs(const MicroPass *p, const CompletionRef *seqs, int S, const int *offsets, float *logp,
                    float *entropy);
/* One micro-batch of the step: loss + gradient accumulated into grads.
 * normalizer from grpo_loss_normalizer over the step (or the micro-batch for
 * bnpo). Returns the loss contribution; stats +=. */
double micro_train(const MicroPass *p, const ModelGrads *grads, const GrpoLossConfig *loss, const CompletionRef *seqs,
                   int S, double normalizer, GrpoLossStats *stats);
/* checkpoint.c: TrainAlgo.save / .load */
int grpo_checkpoint_save(void *self, const char *dir, json_t *state, GrpoErr *err);
int grpo_checkpoint_load(void *self, const char *dir, const json_t *state, GrpoErr *err);

#endif
