/* rollout/groups.h — one round of sampled groups: P prompts x G completions
 * each, their decoded texts and every reward function's score, in memory sized
 * once for the run (each completion a row of max_completion_length tokens), so a
 * round drawn into a used one allocates nothing again. Group p is completions
 * p*G .. p*G+G-1. What an online algorithm adds per completion (advantages,
 * recorded log-probs) it keeps beside this (grpo/trainer_internal.h). */
#ifndef GRPO_ROLLOUT_GROUPS_H
#define GRPO_ROLLOUT_GROUPS_H

#include <stdint.h>

#include "data/dataset.h"
#include "gen/generate.h"
#include "log/metrics.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"
#include "train/world.h"

typedef struct {
    int n, P, G;           /* n = P * G completions */
    int F;                 /* reward functions */
    int maxc;              /* max_completion_length: each completion's row */
    int *example;          /* [P] dataset index of each prompt */
    const DatasetExample **prompt; /* [P] the prompts (borrowed from the dataset) */
    Completion *comp;      /* [n] on the rows of ids_buf, logp_buf, mask_buf */
    char **text;           /* [n] decoded completion (special tokens skipped), NULL before scoring */
    double *per_func;      /* [F][n] each reward function's score */
    int *tool_calls, *tool_failures; /* [n] with tools: each completion's calls and failed calls, else NULL */
    double *env_reward;    /* [n] with an environment: its reward for each completion (NAN: none), else NULL;
                              this process's range only, read when it scores */
    /* the memory behind the fields above, and the scratch of drawing and sharing */
    int32_t *ids_buf;      /* [n][maxc] */
    float *logp_buf;       /* [n][maxc] the sampling log-probs */
    uint8_t *mask_buf;     /* [n][maxc] with turns (tools, an environment): Completion.mask, else NULL */
    TokDecodeWork *decode; /* the tokenizer's buffers for decoding, kept from round to round */
    RewardItem *items;     /* [n] */
    double *scores;        /* [F][n] this process's range */
    double **score_rows;   /* [n] */
    int *len;              /* [n] */
    GenGroup *parts;       /* [P] this process's parts of the groups, decoded together (gen_groups) */
    void **share;          /* [n] */
} RolloutGroups;

/* n completions in groups of G, scored by F functions, rows of maxc tokens; with
 * turns, tool-call counts (tools) or environment rewards (env). */
void rollout_groups_init(RolloutGroups *g, int n, int G, int F, int maxc, int tools, int env);
void rollout_groups_free(RolloutGroups *g);
/* Every completion empty on its row, its text freed. */
void rollout_groups_clear(RolloutGroups *g);
/* The texts freed (the rows kept). */
void rollout_groups_free_texts(RolloutGroups *g);
/* Group k of dst := group j of src: its prompt, completions (copied into dst's
 * rows), texts (moved) and scores. */
void rollout_groups_move(RolloutGroups *dst, int k, RolloutGroups *src, int j);
/* After this process filled rows[i] for i in [lo, hi) (len[i] elements of elem
 * bytes, rows of g's memory): every process has every row. with_len: the lengths
 * travel too. */
void rollout_groups_share_rows(const TrainWorld *w, RolloutGroups *g, void *const *rows, int *len, size_t elem,
                               int with_len, int lo, int hi);
/* After each process generated the completions of its range [lo, hi): every
 * process has all of them (ids, sampling log-probs, stops; with turns the masks
 * and tool-call counts). */
void rollout_groups_share(const TrainWorld *w, RolloutGroups *g, int lo, int hi);
/* TRL's completion metrics: lengths (the model's tokens only), the clipped ratio,
 * with tools the call and failure frequencies. */
void rollout_groups_metrics(const RolloutGroups *g, MetricAcc *m);

#endif
