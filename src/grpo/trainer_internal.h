/* grpo/trainer_internal.h — the state shared by the trainer's files:
 * rollout.c (generate, score, advantages, old/ref log-probs), microbatch.c
 * (padded batches, log-probs, loss and backward), checkpoint.c, trainer.c. */
#ifndef GRPO_GRPO_TRAINER_INTERNAL_H
#define GRPO_GRPO_TRAINER_INTERNAL_H

#include <stdio.h>

#include "data/dataset.h"
#include "gen/generate.h"
#include "grpo/trainer.h"
#include "log/metrics.h"
#include "model/model_io.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

/* One generation round: P prompts x G completions, scored, with advantages and
 * (when needed) the log-probs of the generating policy and of the reference. */
typedef struct {
    long index;            /* round number since the start of training */
    int n, P, G;           /* n = P * G completions; group g = completions g*G .. g*G+G-1 */
    int *example;          /* [P] dataset index of each prompt */
    Completion *comp;      /* [n] */
    char **text;           /* [n] decoded completion (special tokens skipped) */
    double *per_func;      /* [F][n] */
    double *rewards;       /* [n] aggregated */
    double *adv;           /* [n] */
    float **old_logp;      /* [n][len] or NULL */
    float **ref_logp;      /* [n][len] or NULL */
    int *order;            /* [n] shuffled completion order; micro-batch k = order[k*B .. k*B+B) */
    int uses;              /* micro-batches taken from it so far (of spg * num_iterations) */
    int refs;              /* micro-batches of the current step still pointing at it */
} Rollout;

typedef struct {
    const TrainConfig *c;
    int spg;               /* steps_per_generation */
    int gen_batch;         /* completions per round */
    long total_steps;
    Model policy, ref;
    int have_ref;
    Tokenizer *tok;
    Dataset data;
    DatasetSampler sampler;
    RewardSet rewards;
    Generator gen;
    Activations acts;
    float *grads;          /* [table.total] */
    ModelView gview;
    AdamW opt;
    uint8_t *decay_mask;
    int need_old;          /* old log-probs are computed at generation time */
    /* progress */
    long step;             /* optimizer steps done */
    long rounds;           /* generation rounds started */
    long num_tokens;       /* prompt + completion tokens seen */
    int nonfinite_streak;
    Rollout *cur;          /* the round being consumed (NULL before the first) */
    /* output */
    FILE *metrics_f, *completions_f;
    MetricAcc acc;
    double t_gen, t_score, t_ref, t_train;   /* seconds, current step */
} Trainer;

/* rollout.c */
int rollout_make(Trainer *t, Rollout **out, GrpoErr *err);
void rollout_free(Rollout *r);
/* microbatch.c */
/* Log-probs (temperature-scaled) of the completion tokens of sequences
 * (rounds[i], idx[i]) under model m, written CSR to logp (offsets[S+1]); entropy
 * may be NULL. Uses t->acts. */
void micro_logprobs(Trainer *t, Model *m, const Rollout *const *rounds, const int *idx, int S,
                    const int *offsets, float *logp, float *entropy);
/* One micro-batch of the step: loss + gradient accumulated into t->grads.
 * normalizer from grpo_loss_normalizer over the step (or the micro-batch for bnpo).
 * Returns the loss contribution; stats +=. */
double micro_train(Trainer *t, const Rollout *const *rounds, const int *idx, int S,
                   double normalizer, GrpoLossStats *stats);
/* checkpoint.c */
int checkpoint_save(Trainer *t, GrpoErr *err);
int checkpoint_load(Trainer *t, const char *dir, GrpoErr *err);

#endif
