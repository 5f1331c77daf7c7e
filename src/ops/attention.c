/* ops/attention.c — causal grouped-query attention over a padded batch, for training
 * (all positions at once). Decoding against a KV cache lives in model/kvcache.c.
 *
 * Queries go in row blocks of R rows counted from position 0: block [r0, r1) meets
 * keys 0 .. r1-1 only, since every later key is causally masked for all its rows,
 * so about half of the T x T score matrix is never formed. Each product of a block
 * is one batched GEMM over every (sequence, kv head, query head of the group)
 * (gemm_f32_batch), the key/value head broadcast over its query heads. Scores are
 * masked and soft-maxed in a scratch [B, H, rows, r1]. Only the log-sum-exp per
 * query is kept for backward, which recomputes P.
 *
 * Sequences start at row 0 (model/batch.c pads on the right), so a sequence's rows
 * fall in the same blocks however far its batch is padded; a longer T only adds
 * keys its rows cannot see, whose probabilities are exact zeros. Its results then
 * differ only by the GEMM's rounding at the other shape (test_ops_fd). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"
#include "ops/ops.h"
#include "ops/vec.h"

enum { MAX_ROWS = 64 };          /* a row block's rows at most */
static int row_block_override; /* attention_set_row_block; 0: chosen per call */

void attention_set_row_block(int rows) { row_block_override = rows > 0 ? (rows < MAX_ROWS ? rows : MAX_ROWS) : 0; }

/* R: 64 rows (a third of the scores skipped at T = 192), fewer where the batch's
 * score scratch [B H, R, T] would pass 2^23 floats, never under 16; never more than T
 * (one block then holds every row). */
static int row_block(int BH, int T) {
    long r = (1L << 23) / ((long)BH * T);
    int R = row_block_override ? row_block_override : r >= MAX_ROWS ? MAX_ROWS : r >= 16 ? (int)(r & ~15L) : 16;
    return R < T ? R : T;
}

/* The scratch of a batch: the scores [B H, R, T] (twice in backward, with dP), the
 * packed heads [B H, R, D] (twice in backward), rowdot [B H, T], and B ints. With
 * R <= min(64, T): at most N H 64, N H D and N H floats for N = B T tokens. */
size_t attention_scratch_floats(int N, int H, int D) {
    size_t n = (size_t)N, h = (size_t)H;
    return 2 * n * h * MAX_ROWS + 2 * n * h * D + n * h + n;
}

/* First real position of each sequence (T when none): query t has keys iff first <= t. */
static int first_real(const uint8_t *m, int T) {
    for (int s = 0; s < T; s++)
        if (m[s]) return s;
    return T;
}

/* The batch over (sequence, kv head, query head of its group) of a [T, ld] operand
 * whose head h sits at column h D: query heads, or (bcast) the kv head of the group. */
static void per_head(long s[3], int T, int ld, int G, int D, int bcast) {
    s[0] = (long)T * ld;
    s[1] = bcast ? D : (long)G * D;
    s[2] = bcast ? 0 : D;
}

/* ...and of a scratch [B, Hkv, G, rows, cols], contiguous. */
static void per_item(long s[3], int Hkv, int G, int rows, int cols) {
    s[2] = (long)rows * cols;
    s[1] = G * s[2];
    s[0] = Hkv * s[1];
}

/* P for the rows [r0, r1) of every (sequence, head): row t of item bh holds scaled
 * scores for keys 0 .. r1-1 on entry. In forward (lse_out) it is soft-maxed and
 * lse written; in backward P = exp(score - lse[t]). Masked and later keys get 0,
 * and so does every key of a row with none (left padding: t < first). */
static void block_probs(float *S, float *lse_out, const float *lse_in, const uint8_t *mask, const int *first, int B,
                        int H, int T, int r0, int r1) {
    int rows = r1 - r0;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * H * rows; i++) {
        long bh = i / rows;
        int t = r0 + (int)(i % rows), b = (int)(bh / H);
        const uint8_t *m = mask + (size_t)b * T;
        float *row = S + i * r1;
        int n = t + 1; /* keys 0 .. t */
        if (t < first[b]) {
            memset(row, 0, sizeof(float) * r1);
            if (lse_out) lse_out[bh * T + t] = 0;
            continue;
        }
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int s = 0; s < n; s++) {
            float x = m[s] ? row[s] : -INFINITY;
            row[s] = x;
            mx = x > mx ? x : mx;
        }
        if (lse_in) mx = lse_in[bh * T + t];
        double sum = vec_exp_sum(row, row, mx, 1.0f, n); /* masked: exp(-inf) = 0 */
        if (lse_out) {
            float inv = (float)(1.0 / sum);
            for (int s = 0; s < n; s++) row[s] *= inv;
            lse_out[bh * T + t] = mx + (float)log(sum);
        }
        if (r1 > n) memset(row + n, 0, sizeof(float) * (r1 - n));
    }
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const uint8_t *mask, int B, int T, int H, int Hkv, int D,
                       int ldo, int ldq, int ldk, int ldv, float *scratch) {
    int G = H / Hkv, R = row_block(B * H, T);
    float scale = 1.0f / sqrtf((float)D);
    float *S = scratch;
    int *first = (int *)(S + (size_t)B * H * R * T);
    for (int b = 0; b < B; b++) first[b] = first_real(mask + (size_t)b * T, T);
    GemmBatch qk = {.n = {B, Hkv, G}}, pv = {.n = {B, Hkv, G}};
    per_head(qk.b, T, ldk, G, D, 1), per_head(pv.b, T, ldv, G, D, 1);
    per_head(qk.a, T, ldq, G, D, 0), per_head(pv.c, T, ldo, G, D, 0);
    for (int r0 = 0; r0 < T; r0 += R) {
        int r1 = r0 + R < T ? r0 + R : T, rows = r1 - r0;
        per_item(qk.c, Hkv, G, rows, r1), per_item(pv.a, Hkv, G, rows, r1);
        /* S = Q K^T / sqrt(D); P = softmax; O = P V */
        gemm_f32_batch(&qk, 0, 1, rows, r1, D, scale, q + (size_t)r0 * ldq, ldq, k, ldk, 0.0f, S, r1);
        block_probs(S, lse, NULL, mask, first, B, H, T, r0, r1);
        gemm_f32_batch(&pv, 0, 0, rows, D, r1, 1.0f, S, r1, v, ldv, 0.0f, out + (size_t)r0 * ldo, ldo);
    }
}

/* dst[B, Hkv, G, rows, D] = the rows [r0, r0+rows) of x's heads, packed so that a
 * kv group's (query head, row) pairs are one run of rows for its dk / dv product. */
static void pack_heads(float *dst, const float *x, int ld, int B, int T, int H, int D, int r0, int rows) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * H * rows; i++) {
        long bh = i / rows;
        int t = r0 + (int)(i % rows), b = (int)(bh / H), h = (int)(bh % H);
        memcpy(dst + i * D, x + ((size_t)b * T + t) * ld + (size_t)h * D, sizeof(float) * D);
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, const uint8_t *mask, int B, int T, int H, int Hkv,
                        int D, int lddq, int lddk, int lddv, int lddo, int ldq, int ldk,
                        int ldv, int ldo, float *scratch) {
    int G = H / Hkv, R = row_block(B * H, T);
    float scale = 1.0f / sqrtf((float)D);
    size_t ns = (size_t)B * H * R * T, np = (size_t)B * H * R * D;
    float *P = scratch;
    float *dP = P + ns, *qp = dP + ns, *dop = qp + np, *rowdot = dop + np;
    int *first = (int *)(rowdot + (size_t)B * H * T);
    for (int b = 0; b < B; b++) first[b] = first_real(mask + (size_t)b * T, T);
    /* rowdot[bh, t] = dO . O, the softmax's backward term of each row */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * H * T; i++) {
        int t = (int)(i % T), b = (int)(i / T / H), h = (int)(i / T % H);
        const float *o = out + ((size_t)b * T + t) * ldo + (size_t)h * D;
        const float *d = dout + ((size_t)b * T + t) * lddo + (size_t)h * D;
        double s = 0;
        for (int j = 0; j < D; j++) s += (double)d[j] * o[j];
        rowdot[i] = (float)s;
    }
    GemmBatch qk = {.n = {B, Hkv, G}}, dov = {.n = {B, Hkv, G}}, dsk = {.n = {B, Hkv, G}}, grp = {.n = {B, Hkv, 1}};
    per_head(qk.a, T, ldq, G, D, 0), per_head(qk.b, T, ldk, G, D, 1);
    per_head(dov.a, T, lddo, G, D, 0), per_head(dov.b, T, ldv, G, D, 1);
    per_head(dsk.b, T, ldk, G, D, 1), per_head(dsk.c, T, lddq, G, D, 0);
    for (int r0 = 0; r0 < T; r0 += R) {
        int r1 = r0 + R < T ? r0 + R : T, rows = r1 - r0;
        per_item(qk.c, Hkv, G, rows, r1), per_item(dov.c, Hkv, G, rows, r1), per_item(dsk.a, Hkv, G, rows, r1);
        /* P = exp(Q K^T / sqrt(D) - lse) ; dP = dO V^T ; dS = P (dP - rowdot) */
        gemm_f32_batch(&qk, 0, 1, rows, r1, D, scale, q + (size_t)r0 * ldq, ldq, k, ldk, 0.0f, P, r1);
        block_probs(P, NULL, lse, mask, first, B, H, T, r0, r1);
        gemm_f32_batch(&dov, 0, 1, rows, r1, D, 1.0f, dout + (size_t)r0 * lddo, lddo, v, ldv, 0.0f, dP, r1);
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)B * H * rows; i++) {
            long bh = i / rows;
            float rd = rowdot[bh * T + r0 + i % rows];
            float *pr = P + i * r1, *dr = dP + i * r1;
            for (int s = 0; s < r1; s++) dr[s] = pr[s] * (dr[s] - rd);
        }
        /* dQ = dS K / sqrt(D), the block's rows written */
        gemm_f32_batch(&dsk, 0, 0, rows, D, r1, scale, dP, r1, k, ldk, 0.0f, dq + (size_t)r0 * lddq, lddq);
        /* dV += P^T dO ; dK += dS^T Q / sqrt(D): per kv group, summed over its query
         * heads and the block's rows at once (the packed [G rows, D] operands) */
        pack_heads(qp, q, ldq, B, T, H, D, r0, rows);
        pack_heads(dop, dout, lddo, B, T, H, D, r0, rows);
        per_item(grp.a, Hkv, G, rows, r1), per_item(grp.b, Hkv, G, rows, D);
        grp.a[2] = grp.b[2] = 0;
        per_head(grp.c, T, lddv, 1, D, 1);
        gemm_f32_batch(&grp, 1, 0, r1, D, G * rows, 1.0f, P, r1, dop, D, 1.0f, dv, lddv);
        per_head(grp.c, T, lddk, 1, D, 1);
        gemm_f32_batch(&grp, 1, 0, r1, D, G * rows, scale, dP, r1, qp, D, 1.0f, dk, lddk);
    }
}
