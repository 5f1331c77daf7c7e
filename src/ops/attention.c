/* ops/attention.c — causal grouped-query attention over a padded batch, for training
 * (all positions at once). Decoding against a KV cache lives in model/kvcache.c.
 *
 * Per (sequence, head) the scores S = Q K^T / sqrt(D) are formed with one GEMM into
 * a [T,T] scratch, masked and soft-maxed in place, and multiplied into V. Only the
 * log-sum-exp per query is kept for backward, which recomputes P — so the saved
 * state is O(T) per head, not O(T^2). Work is split over (sequence, kv head) so a
 * thread owns its dk/dv slices and no two threads write the same gradient. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"
#include "ops/ops.h"

/* First real position of each sequence (T when none): query t has keys iff first <= t. */
static int first_real(const uint8_t *m, int T) {
    for (int s = 0; s < T; s++)
        if (m[s]) return s;
    return T;
}

/* S[T,T] holds raw scaled scores on entry; on exit P (zeros where masked).
 * Writes lse[T] (0 for rows without keys). */
static void masked_softmax_rows(float *S, float *lse, const uint8_t *m, int T, int first) {
    for (int t = 0; t < T; t++) {
        float *row = S + (size_t)t * T;
        if (t < first) {
            memset(row, 0, sizeof(float) * T);
            lse[t] = 0;
            continue;
        }
        float mx = -INFINITY;
        for (int s = 0; s <= t; s++)
            if (m[s] && row[s] > mx) mx = row[s];
        double sum = 0;
        for (int s = 0; s <= t; s++) {
            float e = m[s] ? expf(row[s] - mx) : 0.0f;
            row[s] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int s = 0; s <= t; s++) row[s] *= inv;
        for (int s = t + 1; s < T; s++) row[s] = 0;
        lse[t] = mx + (float)log(sum);
    }
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const uint8_t *mask, int B, int T, int H, int Hkv, int D,
                       int ldo, int ldq, int ldk, int ldv) {
    int G = H / Hkv;
    float scale = 1.0f / sqrtf((float)D);
    int nthreads = omp_get_max_threads();
    float *scratch = xaligned(sizeof(float) * (size_t)nthreads * T * T);
    /* num_threads: the team never outnumbers the scratch areas */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H, g = h / G, tid = omp_get_thread_num();
        CHECK(tid < nthreads);
        float *S = scratch + (size_t)tid * T * T;
        const uint8_t *m = mask + (size_t)b * T;
        const float *Q = q + (size_t)b * T * ldq + (size_t)h * D;
        const float *K = k + (size_t)b * T * ldk + (size_t)g * D;
        const float *Vv = v + (size_t)b * T * ldv + (size_t)g * D;
        float *O = out + (size_t)b * T * ldo + (size_t)h * D;
        gemm_f32(0, 1, T, T, D, scale, Q, ldq, K, ldk, 0.0f, S, T);
        masked_softmax_rows(S, lse + (size_t)bh * T, m, T, first_real(m, T));
        gemm_f32(0, 0, T, D, T, 1.0f, S, T, Vv, ldv, 0.0f, O, ldo);
    }
    free(scratch);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, const uint8_t *mask, int B, int T, int H, int Hkv,
                        int D, int lddq, int lddk, int lddv, int lddo, int ldq, int ldk,
                        int ldv, int ldo) {
    int G = H / Hkv;
    float scale = 1.0f / sqrtf((float)D);
    int nthreads = omp_get_max_threads();
    float *scratch = xaligned(sizeof(float) * (size_t)nthreads * (2 * (size_t)T * T + T));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (int bg = 0; bg < B * Hkv; bg++) {
        int b = bg / Hkv, g = bg % Hkv, tid = omp_get_thread_num();
        CHECK(tid < nthreads);
        float *P = scratch + (size_t)tid * (2 * (size_t)T * T + T);
        float *dP = P + (size_t)T * T, *rowdot = dP + (size_t)T * T;
        const uint8_t *m = mask + (size_t)b * T;
        int first = first_real(m, T);
        const float *K = k + (size_t)b * T * ldk + (size_t)g * D;
        const float *Vv = v + (size_t)b * T * ldv + (size_t)g * D;
        float *dK = dk + (size_t)b * T * lddk + (size_t)g * D;
        float *dV = dv + (size_t)b * T * lddv + (size_t)g * D;
        for (int h = g * G; h < (g + 1) * G; h++) {
            const float *Q = q + (size_t)b * T * ldq + (size_t)h * D;
            const float *O = out + (size_t)b * T * ldo + (size_t)h * D;
            const float *dO = dout + (size_t)b * T * lddo + (size_t)h * D;
            float *dQ = dq + (size_t)b * T * lddq + (size_t)h * D;
            const float *L = lse + ((size_t)b * H + h) * T;
            /* P = exp(S - lse) on allowed entries */
            gemm_f32(0, 1, T, T, D, scale, Q, ldq, K, ldk, 0.0f, P, T);
            for (int t = 0; t < T; t++) {
                float *row = P + (size_t)t * T;
                if (t < first) {
                    memset(row, 0, sizeof(float) * T);
                    rowdot[t] = 0;
                    continue;
                }
                for (int s = 0; s <= t; s++) row[s] = m[s] ? expf(row[s] - L[t]) : 0.0f;
                for (int s = t + 1; s < T; s++) row[s] = 0;
                double d = 0;
                for (int j = 0; j < D; j++) d += (double)dO[(size_t)t * lddo + j] * O[(size_t)t * ldo + j];
                rowdot[t] = (float)d;
            }
            /* dV += P^T dO ; dP = dO V^T ; dS = P (dP - rowdot) */
            gemm_f32(1, 0, T, D, T, 1.0f, P, T, dO, lddo, 1.0f, dV, lddv);
            gemm_f32(0, 1, T, T, D, 1.0f, dO, lddo, Vv, ldv, 0.0f, dP, T);
            for (int t = 0; t < T; t++) {
                float *pr = P + (size_t)t * T, *dr = dP + (size_t)t * T;
                for (int s = 0; s < T; s++) dr[s] = pr[s] * (dr[s] - rowdot[t]);
            }
            /* dQ = dS K * scale ; dK += dS^T Q * scale */
            gemm_f32(0, 0, T, D, T, scale, dP, T, K, ldk, 0.0f, dQ, lddq);
            gemm_f32(1, 0, T, D, T, scale, dP, T, Q, ldq, 1.0f, dK, lddk);
        }
    }
    free(scratch);
}
