/* grpo/trainer_internal.h — the state shared by the GRPO trainer's files:
 * rollout.c (a round from the rollouts' source; advantages, old/reference log-probs), microbatch.c
 * (a micro-batch's loss and its gradient with respect to the log-probs),
 * checkpoint.c (what a GRPO checkpoint adds), trainer.c (setup and the step the
 * training loop calls). */
#ifndef GRPO_GRPO_TRAINER_INTERNAL_H
#define GRPO_GRPO_TRAINER_INTERNAL_H

#include <stdio.h>

#include "grpo/trainer.h"
#include "log/metrics.h"
#include "rollout/source.h"
#include "train/model.h"
#include "train/world.h"

/* Completion i of rollout r, as a micro-batch holds it. */
typedef struct {
    const struct Rollout *r;
    int i;
} CompletionRef;

/* One generation round: P prompts x G completions, scored, with advantages and
 * (when needed) the log-probs of the generating policy and of the reference.
 * Its memory is sized once for the run's generation batch and max_completion_length
 * (rollout_take): a used-up rollout goes back to the trainer's spares and the next
 * round is drawn into it, so a steady step allocates none of it again. */
typedef struct Rollout {
    RolloutGroups g;       /* the round's prompts, completions, texts and scores (rollout/groups.h) */
    long index;            /* round number since the start of training */
    double *rewards;       /* [n] aggregated */
    double *adv;           /* [n] */
    float **old_logp;      /* [n][len] or NULL */
    float **ref_logp;      /* [n][len] or NULL */
    double **is_w;         /* [n][len] the sampler/trainer correction's weights (is_correction.h), or NULL;
                              recomputed from old_logp and comp[i].logp, never saved */
    int *order;            /* [n] shuffled completion order: global micro-batch k of the round is
                              order[k * micro_size .. (k+1) * micro_size) */
    int uses;              /* micro-batches taken from it so far (of spg * num_iterations) */
    int pending;           /* micro-batches of the current step still reading it */
    float **old_rows, **ref_rows; /* [n] rows of old_buf, ref_buf: old_logp / ref_logp once recorded */
    double **isw_rows;     /* [n] rows of isw_buf: is_w once computed */
    float *old_buf, *ref_buf; /* [n][maxc], made when first recorded */
    double *isw_buf;       /* [n][maxc] */
    double *fmean, *fstd;  /* [F] the reward functions' means and deviations (add_metrics) */
    CompletionRef *seqs;   /* [train_model_logprobs_cap's] a forward of recorded log-probs */
    struct Rollout *next;  /* the trainer's next spare rollout */
} Rollout;


/* A micro-batch's buffers, sized once for the most completions one forward takes
 * (per_device_train_batch_size, or a reference forward's: train_model_logprobs_cap)
 * and the plan's tokens. */
typedef struct {
    BatchSeq *seqs;        /* [B] */
    uint64_t *ids;         /* [B] */
    int *off;              /* [B+1] */
    double *adv, *w;       /* [B] */
    uint8_t *trunc;        /* [B] */
    uint8_t *tmask;        /* [tokens] the tool mask (Completion.mask) */
    float *logp, *ent, *old, *ref, *dlp, *dent; /* [tokens] */
    double *dlogp, *dentropy, *isw; /* [tokens] */
    int *seq_of;           /* [tokens] */
} MicroScratch;

/* The optimizer step in progress, over every process. */
typedef struct {
    long step;             /* optimizer steps done before it */
    HfStateInfo state;     /* TrainerState as it begins: the rewards' trainer_state */
    MetricAcc *metrics;
    Rollout **mb;          /* [GA] the rollout each global micro-batch comes from */
    int *slice;            /* [GA] which micro-batch of its rollout */
    Rollout **retired;     /* [GA+1] used-up rollouts still read by this step */
    int n_retired;
    CompletionRef *seqs;   /* [GA x micro_size] the step's completions, micro-batch by micro-batch */
    int *off;              /* [GA x micro_size + 1] their tokens' CSR offsets */
    uint8_t *trunc;        /* [GA x micro_size] */
    uint8_t *tmask;        /* [GA x micro_size x max_completion_length] the tool mask over off, or NULL
                              when no completion of the step has tool turns */
    uint8_t *tmask_buf;    /* its memory, planned with tools on */
    double norm;           /* the step's loss normaliser (bnpo: per micro-batch) */
    GrpoLossConfig loss;   /* the loss options of this step (the entropy bonus's coefficient now) */
    double t_ref, t_train;
} GrpoStep;

typedef struct {
    TrainConfig c;         /* the options, derived values resolved (epsilon_high, gen seed) */
    int spg;               /* steps_per_generation: global micro-batches per round */
    int gen_batch;         /* completions per round, over all processes (B x processes x spg) */
    int need_old;          /* old log-probs are recorded at generation time */
    const TrainWorld *world; /* the run's processes: a rollout's work is spread over them (train/world.h) */
    TrainModel *tm;        /* the policy, its adapters, the reference (train/model.h) */
    RolloutArgs ra;        /* the options of the rollouts' source, pointing into c */
    RolloutSource src;     /* prompts, generator, tools or environment, rewards (rollout/source.h) */
    double entropy_coef;       /* the bonus's coefficient now (use_adaptive_entropy moves it) */
    double last_world_entropy; /* the last step's kept-token entropy (adaptive control; +inf before one) */
    long rounds_made;      /* generation batches made */
    Rollout *cur;          /* the round being consumed (NULL before the first) */
    Rollout *round;        /* dynamic sampling's buffer for each extra round drawn, made once and reused */
    Rollout *spare;        /* used-up rollouts kept for the next rounds (rollout_take), a list through next */
    int resumed;           /* completions.jsonl is appended to */
    FILE *completions_f;
    GrpoStep st;
    MicroScratch ms;
} GrpoTrainer;

/* rollout.c */
int rollout_make(GrpoTrainer *t, Rollout **out, GrpoErr *err);
/* A rollout for round `index`, empty (no completion, nothing recorded): a spare
 * one of the trainer's, else made with the run's sizes. */
Rollout *rollout_take(GrpoTrainer *t, long index);
/* r (used up, or dropped) goes back to the trainer's spares; its texts are freed. */
void rollout_release(GrpoTrainer *t, Rollout *r);
/* r's rows of the old / reference log-probs (made on first use), for old_logp / ref_logp. */
float **rollout_old_rows(Rollout *r);
float **rollout_ref_rows(Rollout *r);
void rollout_free(Rollout *r);
/* With vllm_importance_sampling_correction: r->is_w from r->old_logp and the
 * completions' sampling log-probs (a made or a resumed rollout). */
void rollout_is_weights(const GrpoTrainer *t, Rollout *r);
/* microbatch.c */
void micro_scratch_init(MicroScratch *ms, int B, int max_tokens);
void micro_scratch_free(MicroScratch *ms);
/* Completions seqs[S] as the model's batch (prompt + completion, the completion's
 * tokens the targets), in ms. */
void micro_batch_of(MicroScratch *ms, const CompletionRef *seqs, int S, TrainBatch *b, float inv_temperature);
/* One micro-batch of the step: loss + gradient accumulated through tm.
 * normalizer from grpo_loss_normalizer over the step (or the micro-batch for
 * bnpo). Returns the loss contribution; stats +=. */
double micro_train(TrainModel *tm, MicroScratch *ms, const GrpoLossConfig *loss, const CompletionRef *seqs, int S,
                   float inv_temperature, double normalizer, GrpoLossStats *stats);
/* checkpoint.c: TrainAlgo.save / .load */
int grpo_checkpoint_save(void *self, const char *dir, json_t *state, GrpoErr *err);
int grpo_checkpoint_load(void *self, const char *dir, const json_t *state, GrpoErr *err);

#endif
