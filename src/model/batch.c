/* model/batch.c — padded or packed batches and their CSR targets (see batch.h).
 *
 * Is: the one place that lays sequences out for model_forward / model_logprobs
 * and maps per-position arrays to per-target ones and back. Is not: a planner
 * (callers choose which sequences share a batch and check S*T against their
 * activation plan). */
#include "model/batch.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

void padded_batch_reserve(PaddedBatch *pb, int max_seqs, int max_tokens, int packed) {
    CHECK(max_seqs >= 1 && max_tokens >= max_seqs);
    memset(pb, 0, sizeof *pb);
    size_t N = (size_t)max_tokens;
    pb->packed = packed != 0;
    pb->start = xmalloc(sizeof(int) * (max_seqs + 1));
    pb->skip = xmalloc(sizeof(int) * max_seqs);
    pb->from = xmalloc(sizeof(int) * max_seqs);
    pb->cap_seqs = max_seqs;
    pb->cap_tokens = max_tokens;
    pb->ids = xmalloc(sizeof(int32_t) * N);
    pb->mask = xmalloc(N);
    pb->targets = xmalloc(sizeof(int32_t) * N);
    pb->offsets = xmalloc(sizeof(int) * (max_seqs + 1));
    pb->row0 = xmalloc(sizeof(int) * max_seqs);
    pb->full = xmalloc(sizeof(float) * N);
    pb->full2 = xmalloc(sizeof(float) * N);
    pb->js = xmalloc(sizeof(int) * N);
}

/* Token t of a sequence (a then b). */
static int32_t token(const BatchSeq *q, int t) { return t < q->na ? q->a[t] : q->b[t - q->na]; }

/* Lays seqs out, sequence i without its first skip[i] tokens (skip NULL: none). */
static void lay_out(PaddedBatch *pb, const BatchSeq *seqs, int S, const int *skip) {
    CHECK(S >= 1 && S <= pb->cap_seqs);
    int T = 1;
    long sum = 0;
    for (int i = 0; i < S; i++) {
        const BatchSeq *q = &seqs[i];
        CHECK(q->na >= 0 && q->nb >= 0 && (q->na == 0 || q->a) && (q->nb == 0 || q->b));
        int len = q->na + q->nb;
        CHECK(q->first_target >= 1 && q->first_target <= len);
        T = len > T ? len : T;
        sum += len - (skip ? skip[i] : 0);
    }
    long need = pb->packed ? sum : (long)S * T;
    CHECK(need <= pb->cap_tokens);
    int N = (int)need;
    pb->S = S;
    pb->T = T;
    pb->N = N;
    pb->start[0] = 0;
    for (int i = 0; i < S; i++)
        pb->start[i + 1] = pb->packed ? pb->start[i] + seqs[i].na + seqs[i].nb - (skip ? skip[i] : 0) : (i + 1) * T;
    memset(pb->ids, 0, sizeof(int32_t) * N);
    memset(pb->mask, 0, N);
    for (int n = 0; n < N; n++) pb->targets[n] = -1;
    pb->offsets[0] = 0;
    for (int i = 0; i < S; i++) {
        const BatchSeq *q = &seqs[i];
        int len = q->na + q->nb, k = skip ? skip[i] : 0, base = pb->start[i] - k; /* token t at row base + t */
        for (int t = k; t < len; t++) pb->ids[base + t] = token(q, t);
        memset(pb->mask + base + k, 1, len - k);
        /* position t-1 predicts token t */
        for (int t = q->first_target; t < len; t++) pb->targets[base + t - 1] = token(q, t);
        pb->row0[i] = base + q->first_target - 1;
        pb->offsets[i + 1] = pb->offsets[i] + len - q->first_target;
    }
}

void padded_batch_fill(PaddedBatch *pb, const BatchSeq *seqs, int S) {
    pb->shared = 0;
    lay_out(pb, seqs, S, NULL);
}

/* Sequence i's longest common start with an earlier sequence not itself shortened,
 * up to the row before its first target: pb->skip[i] tokens of sequence pb->from[i]
 * (0 and -1: none). */
static void find_skip(PaddedBatch *pb, const BatchSeq *seqs, int i) {
    const BatchSeq *q = &seqs[i];
    int most = q->first_target - 1; /* rows up to the first predicting one */
    pb->skip[i] = 0, pb->from[i] = -1;
    for (int j = 0; j < i && most > 0; j++) {
        if (pb->skip[j]) continue;
        int lim = seqs[j].na + seqs[j].nb < most ? seqs[j].na + seqs[j].nb : most, k = 0;
        while (k < lim && token(q, k) == token(&seqs[j], k)) k++;
        if (k > pb->skip[i]) pb->skip[i] = k, pb->from[i] = j;
    }
}

void padded_batch_fill_shared(PaddedBatch *pb, const BatchSeq *seqs, int S) {
    CHECK(pb->packed && S >= 1 && S <= pb->cap_seqs);
    pb->shared = 0;
    for (int i = 0; i < S; i++) {
        find_skip(pb, seqs, i);
        pb->shared |= pb->skip[i] > 0;
    }
    lay_out(pb, seqs, S, pb->shared ? pb->skip : NULL);
}

int padded_batch_shared_fit(PaddedBatch *pb, const BatchSeq *seqs, int n) {
    CHECK(pb->packed && n >= 1);
    long rows = 0;
    int S = 0;
    for (; S < n && S < pb->cap_seqs; S++) {
        find_skip(pb, seqs, S);
        long own = seqs[S].na + seqs[S].nb - pb->skip[S];
        if (rows + own > pb->cap_tokens) break;
        rows += own;
    }
    CHECK(S >= 1); /* a sequence alone fits the reservation */
    return S;
}

void padded_batch_build(PaddedBatch *pb, const BatchSeq *seqs, int S, int packed) {
    CHECK(S >= 1);
    long T = 1, sum = 0;
    for (int i = 0; i < S; i++) {
        T = seqs[i].na + seqs[i].nb > T ? seqs[i].na + seqs[i].nb : T;
        sum += seqs[i].na + seqs[i].nb;
    }
    long N = packed ? sum : S * T;
    CHECK(N <= 0x7fffffffL);
    padded_batch_reserve(pb, S, (int)N, packed);
    padded_batch_fill(pb, seqs, S);
}

void padded_batch_free(PaddedBatch *pb) {
    free(pb->start), free(pb->skip), free(pb->from), free(pb->ids), free(pb->mask), free(pb->targets);
    free(pb->offsets), free(pb->row0);
    free(pb->full), free(pb->full2), free(pb->js);
    memset(pb, 0, sizeof *pb);
}

/* A sequence's targets are predicted at consecutive positions row0[i] ..
 * row0[i] + (offsets[i+1] - offsets[i]) - 1, so each copy is one memcpy. */
void padded_batch_gather(const PaddedBatch *pb, const float *full, float *csr) {
    for (int i = 0; i < pb->S; i++)
        memcpy(csr + pb->offsets[i], full + pb->row0[i], sizeof(float) * (pb->offsets[i + 1] - pb->offsets[i]));
}

void padded_batch_scatter(const PaddedBatch *pb, const float *csr, float *full) {
    memset(full, 0, sizeof(float) * pb->N);
    for (int i = 0; i < pb->S; i++)
        memcpy(full + pb->row0[i], csr + pb->offsets[i], sizeof(float) * (pb->offsets[i + 1] - pb->offsets[i]));
}

/* Row n of the flat batch -> its target's CSR index (n holds a target); the
 * sequence of row n is the last whose start is <= n. */

static int seq_of(const PaddedBatch *pb, int n) {
    if (!pb->packed) return n / pb->T;
    int lo = 0, hi = pb->S - 1; /* start[lo] <= n < start[hi+1] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (pb->start[mid] <= n) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The CSR index js[i] of each of the m flat rows rows[i] (each with a target). */
static void to_csr(const PaddedBatchRowGrad *r, const int *rows, int m, int *js) {
    for (int i = 0; i < m; i++) {
        int b = seq_of(r->pb, rows[i]);
        js[i] = r->pb->offsets[b] + rows[i] - r->pb->row0[b];
    }
}

/* The objective's index of each row: its CSR index, through the inner grad's index where it has one. */
static void csr_index(void *ctx, const int *rows, int m, int *js) {
    const PaddedBatchRowGrad *r = ctx;
    to_csr(r, rows, m, js);
    if (r->grad->index) r->grad->index(r->grad->ctx, js, m, js);
}

static void grad_by_csr(void *ctx, const int *rows, int m, const float *logp, float *dlogp) {
    const PaddedBatchRowGrad *r = ctx;
    to_csr(r, rows, m, r->pb->js); /* m: a chunk of the head, or every target of a frozen one */
    r->grad->fn(r->grad->ctx, r->pb->js, m, logp, dlogp);
}

LogprobGrad padded_batch_row_grad(PaddedBatchRowGrad *r, const PaddedBatch *pb, const LogprobGrad *grad) {
    *r = (PaddedBatchRowGrad){pb, grad};
    return (LogprobGrad){grad_by_csr, r, grad->objective, csr_index};
}

/* The forward and log-probs of the batch, gathered CSR; with grad, through
 * model_logprobs_train. */
static void batch_logprobs(Model *m, Activations *a, PaddedBatch *pb, const ModelPass *pass,
                           float inv_temperature, float *logp, float *entropy, const ModelGrads *grads,
                           const LogprobGrad *grad) {
    float *lp = pb->full, *ent = entropy ? pb->full2 : NULL;
    CHECK(!pb->shared || !grad);
    if (pb->shared) model_forward_shared(m, a, pb->ids, pb->start, pb->skip, pb->from, pb->S, pass);
    else if (pb->packed) model_forward_packed(m, a, pb->ids, pb->start, pb->S, pass);
    else model_forward(m, a, pb->ids, pb->mask, pb->S, pb->T, pass);
    if (grad) {
        PaddedBatchRowGrad r;
        LogprobGrad by_row = padded_batch_row_grad(&r, pb, grad);
        model_logprobs_train(m, a, pb->targets, inv_temperature, lp, ent, grads, &by_row);
    } else {
        model_logprobs(m, a, pb->targets, inv_temperature, lp, ent);
    }
    padded_batch_gather(pb, lp, logp);
    if (entropy) padded_batch_gather(pb, ent, entropy);
}

void padded_batch_logprobs(Model *m, Activations *a, PaddedBatch *pb, const ModelPass *pass,
                           float inv_temperature, float *logp, float *entropy) {
    batch_logprobs(m, a, pb, pass, inv_temperature, logp, entropy, NULL, NULL);
}

void padded_batch_logprobs_train(Model *m, Activations *a, PaddedBatch *pb, const ModelPass *pass,
                                 float inv_temperature, float *logp, float *entropy, const ModelGrads *grads,
                                 const LogprobGrad *grad) {
    batch_logprobs(m, a, pb, pass, inv_temperature, logp, entropy, grads, grad);
}
