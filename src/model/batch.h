/* model/batch.h — a batch of token sequences, right-padded to one length or
 * packed end to end without padding, with the next-token targets the model is
 * scored on, in CSR form.
 *
 * Every user of the training forward (GRPO micro-batches, SFT, `grpo score`)
 * lays sequences out the same way: ids right-padded with 0, mask 1 on real tokens
 * (or, packed, sequence i at positions start[i] .. start[i+1]-1, attention and
 * positions per sequence: model_forward_packed), position t predicting token t+1, and only a suffix of each sequence counted
 * (a GRPO completion, the SFT tokens after the prompt). This is that one
 * layout, plus the gather/scatter between per-position arrays [N] and the
 * compact per-target arrays [offsets[S]] that losses work on. */
#ifndef GRPO_MODEL_BATCH_H
#define GRPO_MODEL_BATCH_H

#include <stdint.h>

#include "model/transformer.h"

/* One sequence of a batch: a[na] followed by b[nb] (b may be NULL with nb 0).
 * Tokens first_target .. na+nb-1 are targets: position t predicts token t+1, so
 * the first target is predicted at position first_target-1.
 * 1 <= first_target <= na+nb (first_target == na+nb: no targets). */
typedef struct {
    const int32_t *a;
    int na;
    const int32_t *b;
    int nb;
    int first_target;
} BatchSeq;

typedef struct {
    int packed;          /* 1: sequences end to end, no padding (TRL's padding_free); 0: right-padded */
    int S, T;            /* sequences, padded length = the longest na+nb (>= 1) */
    int N;               /* positions laid out: S*T padded, the sum of the lengths packed */
    int *start;          /* [S+1] sequence i's first position (i*T padded); start[S] = N */
    int shared;          /* padded_batch_fill_shared found common starts: sequence i's first skip[i] tokens
                            are sequence from[i]'s, not laid out again (model_forward_shared) */
    int *skip, *from;    /* [S] */
    int32_t *ids;        /* [N] right-padded with 0 */
    uint8_t *mask;       /* [N] 1 on real tokens */
    int32_t *targets;    /* [N] the id predicted at each position, -1 where none */
    int *offsets;        /* [S+1] CSR: sequence i's targets are entries offsets[i] .. offsets[i+1]-1 */
    int *row0;           /* [S] flat position predicting sequence i's first target */
    int cap_seqs, cap_tokens; /* what the arrays hold (padded_batch_reserve): sequences, positions N */
    float *full, *full2; /* [cap_tokens] per-position scratch of the passes below (log-probs, entropies, or
                            their gradients laid out for model_backward) */
    int *js;             /* [cap_tokens] target indices handed to a LogprobGrad */
} PaddedBatch;

/* Allocates pb's arrays for batches of up to max_seqs sequences and max_tokens
 * positions (N: S*T padded, the sum of the lengths packed), once: padded_batch_fill
 * then reuses them. packed: lay sequences end to end (model_forward_packed). */
void padded_batch_reserve(PaddedBatch *pb, int max_seqs, int max_tokens, int packed);
/* Lays seqs[S] (S >= 1) out in pb's reserved arrays. A sequence breaking the
 * BatchSeq contract, or a batch beyond the reservation, is a programmer error (CHECK). */
void padded_batch_fill(PaddedBatch *pb, const BatchSeq *seqs, int S);
/* The same for a packed pb whose log-probs are wanted without a backward: a
 * sequence beginning as an earlier one does (a GRPO group's completions, after
 * their common prompt) has those tokens computed once, in the earlier sequence,
 * up to the token before its first target (its own first row, predicting that
 * target). The same targets, offsets and log-probs (to the GEMMs' rounding at the
 * other shape; model_forward_shared) for fewer rows: 4 completions of 128 tokens
 * after a 64-token prompt are 579 rows instead of 768. */
void padded_batch_fill_shared(PaddedBatch *pb, const BatchSeq *seqs, int S);
/* How many of seqs[0 .. n-1], from the first, padded_batch_fill_shared lays out
 * within pb's reservation (at least one, which must fit: CHECK): a group's
 * completions after the first cost their own rows only, so more of them fit than
 * whole sequences would. */
int padded_batch_shared_fit(PaddedBatch *pb, const BatchSeq *seqs, int n);
/* padded_batch_reserve for exactly this batch, then padded_batch_fill. */
void padded_batch_build(PaddedBatch *pb, const BatchSeq *seqs, int S, int packed);
/* Frees what pb owns and zeroes it. Safe on a zeroed PaddedBatch. */
void padded_batch_free(PaddedBatch *pb);
/* full[N] per position -> csr[offsets[S]] of the target positions, sequence by sequence */
void padded_batch_gather(const PaddedBatch *pb, const float *full, float *csr);
/* csr[offsets[S]] -> full[N], zero elsewhere */
void padded_batch_scatter(const PaddedBatch *pb, const float *csr, float *full);
/* Forward of the batch through m (model_forward with pass, NULL for inference, then
 * model_logprobs with inv_temperature) and the target log-probs (and entropies, if entropy != NULL)
 * gathered CSR into logp[offsets[S]] / entropy. Leaves the activations in a for
 * a model_backward, whose dlogprob is per position: padded_batch_scatter it (into
 * pb->full, free again once the log-probs are gathered). Requires N <= the
 * max_tokens a was planned for. */
void padded_batch_logprobs(Model *m, Activations *a, PaddedBatch *pb, const ModelPass *pass,
                           float inv_temperature, float *logp, float *entropy);
/* The same, with the LM head's backward done alongside (model_logprobs_train): grad
 * gives the gradient of a token-local objective for targets named by CSR index
 * (rows[i] in [0, offsets[S])). Complete it with model_backward(m, a, grads, NULL, NULL). */
void padded_batch_logprobs_train(Model *m, Activations *a, PaddedBatch *pb, const ModelPass *pass,
                                 float inv_temperature, float *logp, float *entropy, const ModelGrads *grads,
                                 const LogprobGrad *grad);
/* grad, a token-local gradient over CSR indices (rows[i] in [0, offsets[S])), as one over
 * pb's flat rows (a head's chunk loop names its rows so, each with a target); r holds
 * what it reads (pb's js scratch: up to its rows at a call) and outlives the result. */
typedef struct {
    const PaddedBatch *pb;
    const LogprobGrad *grad;
} PaddedBatchRowGrad;
LogprobGrad padded_batch_row_grad(PaddedBatchRowGrad *r, const PaddedBatch *pb, const LogprobGrad *grad);

#endif
