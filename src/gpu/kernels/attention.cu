/* gpu/kernels/attention.cu — causal grouped-query attention as ops/attention.c
 * computes it (training: forward, and backward from the saved log-sum-exp) and as
 * model/kvcache.c's decoding does (one new query row against a slot's cached keys,
 * the shared prompt prefix first).
 *
 * Sequences are given by starts[B + 1]: sequence b is rows starts[b] ..
 * starts[b+1]-1 (packed end to end; a padded batch is starts b T, with its mask).
 * Query t of a sequence attends its key s iff s <= t and mask[s] (mask NULL: every
 * row real); a query with no key gets out = 0 and lse = 0, as on the CPU. lse of
 * sequence b is the block [H, len] from H starts[b] — the CPU's [B, H, T] when padded,
 * and where model/transformer.c's per-sequence calls put it when packed.
 *
 * The design is the plain one, correct before fast: a block of ATT_THREADS threads
 * per (query row, head), a thread per key of a tile of ATT_THREADS keys (its score a
 * dot product in fp32, dimensions in order), an online softmax over the tiles (the
 * running maximum and sum, the output rescaled per tile), the weighted sum of the
 * values by a thread per output column, keys in order. Every sum has a fixed order
 * and belongs to one block, so results are deterministic and a row's never depends
 * on the other rows of the launch (generation is then independent of batching).
 *
 * The backward has no float atomics: dQ is written by the block owning the query
 * row, dK and dV are summed by the block owning the key row (over the group's
 * query heads, then the later queries in order) and added once.
 *
 * The training forward and backward run on the tensor cores where the head dim allows
 * (attention_mma.cu, attention_backward_mma.cu: gpu/ops.c chooses); these kernels
 * serve the other head dims, and decoding. */
#include "attention.h"

/* The keys a query attends: nk keys, the first n_first of them rows of first (a
 * cached prefix), the rest rows of own (mask_own: which are real; NULL: all). */
typedef struct {
    const float *k_first, *v_first, *k_own, *v_own;
    const unsigned char *mask_own;
    int n_first, nk, ldk, ldv;
} KeySpan;

/* The shared memory of a block attending one query. */
typedef struct {
    float *q, *acc, *p, *scratch; /* [D], [D], [ATT_THREADS], [32] */
} AttShared;

/* out[D] = softmax(scale q . k_s) . v_s over the span's keys (q[D] in shared memory,
 * read after the caller's barrier); lse = the log-sum-exp of the scaled scores, or
 * both 0 for no key. Online over tiles of a key a thread. */
DEVICE void attend_one(float *out, float *lse, const KeySpan *ks, int D, float scale, AttShared sh) {
    int tid = thread_x();
    for (int j = tid; j < D; j += block_dim_x()) sh.acc[j] = 0.0f; /* a thread's own columns */
    float m = -__builtin_inff(), l = 0.0f;
    for (int k0 = 0; k0 < ks->nk; k0 += ATT_THREADS) {
        int s = k0 + tid, n_tile = ks->nk - k0 < ATT_THREADS ? ks->nk - k0 : ATT_THREADS;
        float score = -__builtin_inff();
        if (s < ks->nk) {
            int own = s - ks->n_first;
            const float *kr = own < 0 ? ks->k_first + (u64)s * ks->ldk : ks->k_own + (u64)own * ks->ldk;
            if (own < 0 || !ks->mask_own || ks->mask_own[own]) score = dot_serial(sh.q, kr, D) * scale;
        }
        float m_new = block_max(score, sh.scratch);
        m_new = m > m_new ? m : m_new;
        float p = score == -__builtin_inff() ? 0.0f : exp_fast(score - m_new);
        sh.p[tid] = p; /* the previous tile's p were read before block_max's barriers */
        float alpha = m == -__builtin_inff() ? 0.0f : exp_fast(m - m_new);
        l = l * alpha + block_sum(p, sh.scratch); /* its barriers publish sh.p */
        m = m_new;
        for (int j = tid; j < D; j += block_dim_x()) {
            float a = 0.0f;
            for (int i = 0; i < n_tile; i++) {
                int own = k0 + i - ks->n_first;
                const float *vr = own < 0 ? ks->v_first + (u64)(k0 + i) * ks->ldv : ks->v_own + (u64)own * ks->ldv;
                a += sh.p[i] * vr[j];
            }
            sh.acc[j] = sh.acc[j] * alpha + a;
        }
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int j = tid; j < D; j += block_dim_x()) out[j] = sh.acc[j] * inv;
    if (tid == 0 && lse) *lse = l > 0.0f ? m + log_fast(l) : 0.0f;
}

/* The training forward: a block per (row n = block_x, head h = block_y); grid
 * starts[B] x H. out[N, H D] (ldo), lse (see the top), q (ldq), k, v (ldk, ldv). */
KERNEL void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                              const unsigned char *mask, const int *starts, int B, int H, int Hkv, int D, int ldo,
                              int ldq, int ldk, int ldv) {
    SHARED float qs[ATT_MAX_D], acc[ATT_MAX_D], p[ATT_THREADS], scratch[32];
    int n = block_x(), h = block_y(), b = sequence_of(starts, B, n);
    if (b < 0) return; /* the whole block */
    int s0 = starts[b], len = starts[b + 1] - s0, t = n - s0, hk = h / (H / Hkv);
    for (int j = thread_x(); j < D; j += block_dim_x()) qs[j] = q[(u64)n * ldq + (u64)h * D + j];
    sync_block();
    KeySpan ks = {0, 0, k + (u64)s0 * ldk + (u64)hk * D, v + (u64)s0 * ldv + (u64)hk * D, mask ? mask + s0 : 0,
                  0, t + 1, ldk, ldv};
    AttShared sh = {qs, acc, p, scratch};
    attend_one(out + (u64)n * ldo + (u64)h * D, lse + (u64)H * s0 + (u64)h * len + t, &ks, D,
               1.0f / sqrt_rn((float)D), sh);
}

/* Decoding: a block per (row r = block_x, head h = block_y); grid n x H. Row r is
 * token own[r] of slot slots[r] of a cache layer kc/vc [n_slots, cap, Hkv D] whose
 * keys and values are already written; it attends the slot's parent's first
 * parent_len keys (parent[slot] >= 0) and its own keys 0 .. own[r], as
 * model/kvcache.c's attend_row. out[n, H D] (ldo), q[n, H D] (ldq). */
KERNEL void attention_decode(float *out, const float *q, const float *kc, const float *vc, const int *slots,
                             const int *own, const int *parent, const int *parent_len, int cap, int H, int Hkv,
                             int D, int ldo, int ldq) {
    SHARED float qs[ATT_MAX_D], acc[ATT_MAX_D], p[ATT_THREADS], scratch[32];
    int r = block_x(), h = block_y(), hk = h / (H / Hkv), slot = slots[r], par = parent[slot];
    int n_first = par >= 0 ? parent_len[slot] : 0, ld = Hkv * D;
    u64 own_at = ((u64)slot * cap) * ld + (u64)hk * D, first_at = ((u64)(par >= 0 ? par : 0) * cap) * ld + (u64)hk * D;
    for (int j = thread_x(); j < D; j += block_dim_x()) qs[j] = q[(u64)r * ldq + (u64)h * D + j];
    sync_block();
    KeySpan ks = {kc + first_at, vc + first_at, kc + own_at, vc + own_at, 0, n_first, n_first + own[r] + 1, ld, ld};
    AttShared sh = {qs, acc, p, scratch};
    attend_one(out + (u64)r * ldo + (u64)h * D, 0, &ks, D, 1.0f / sqrt_rn((float)D), sh);
}

/* Decoding as attention_decode, a block per (row r = block_x, kv head hk = block_y) for
 * the group's G query heads together (G <= ATT_DEC_MAX_G, D <= ATT_DEC_MAX_D; grid n x
 * Hkv, ATT_DEC_WARPS warps): each cached key and value row is read once for the G heads
 * (attention_decode reads it once a head), by a warp whose lanes take its columns
 * (lane + 32 i: coalesced) — decoding reads the whole cache every step, so this is its
 * bandwidth. Warp w takes the keys w, w + 4, ...: per head a score (the lanes' partial
 * dot products, in order of i, then warp_sum's butterfly), an online softmax, the
 * lanes' columns of the output; the 4 warps' states are then merged in order of w.
 * A row's result depends on its own keys alone (the batch's other rows never enter). */
KERNEL void attention_decode_group(float *out, const float *q, const float *kc, const float *vc, const int *slots,
                                   const int *own, const int *parent, const int *parent_len, int cap, int H, int Hkv,
                                   int D, int ldo, int ldq) {
    enum { GM = ATT_DEC_MAX_G, DL = ATT_DEC_MAX_D / 32, NW = ATT_DEC_WARPS };
    SHARED float wm[NW][GM], wl[NW][GM], wacc[NW][GM][ATT_DEC_MAX_D];
    int r = block_x(), hk = block_y(), G = H / Hkv, slot = slots[r], par = parent[slot];
    int n_first = par >= 0 ? parent_len[slot] : 0, nk = n_first + own[r] + 1, ld = Hkv * D;
    int lane = thread_x() & 31, w = thread_x() >> 5;
    u64 own_at = ((u64)slot * cap) * ld + (u64)hk * D, first_at = ((u64)(par >= 0 ? par : 0) * cap) * ld + (u64)hk * D;
    const float inf = __builtin_inff(), scale = 1.0f / sqrt_rn((float)D);
    float qv[GM][DL], acc[GM][DL], m[GM], l[GM];
    UNROLL for (int h = 0; h < GM; h++) {
        m[h] = -inf, l[h] = 0.0f;
        UNROLL for (int i = 0; i < DL; i++) {
            int d = lane + 32 * i;
            qv[h][i] = h < G && d < D ? q[(u64)r * ldq + (u64)(hk * G + h) * D + d] : 0.0f;
            acc[h][i] = 0.0f;
        }
    }
    for (int s = w; s < nk; s += NW) {
        u64 at = s < n_first ? first_at + (u64)s * ld : own_at + (u64)(s - n_first) * ld;
        float kv[DL], vv[DL];
        UNROLL for (int i = 0; i < DL; i++) {
            int d = lane + 32 * i;
            kv[i] = d < D ? kc[at + d] : 0.0f;
            vv[i] = d < D ? vc[at + d] : 0.0f;
        }
        UNROLL for (int h = 0; h < GM; h++) {
            if (h >= G) continue; /* the whole warp */
            float part = 0.0f;
            UNROLL for (int i = 0; i < DL; i++) part += qv[h][i] * kv[i];
            float sc = warp_sum(part) * scale, mn = sc > m[h] ? sc : m[h];
            float al = mn == m[h] ? 1.0f : exp_fast(m[h] - mn), p = exp_fast(sc - mn);
            l[h] = l[h] * al + p, m[h] = mn;
            UNROLL for (int i = 0; i < DL; i++) acc[h][i] = acc[h][i] * al + p * vv[i];
        }
    }
    UNROLL for (int h = 0; h < GM; h++) {
        if (lane == 0) wm[w][h] = m[h], wl[w][h] = l[h];
        UNROLL for (int i = 0; i < DL; i++) wacc[w][h][lane + 32 * i] = acc[h][i];
    }
    sync_block();
    for (int x = thread_x(); x < G * D; x += block_dim_x()) {
        int h = x / D, d = x - h * D;
        float M = wm[0][h];
        for (int v = 1; v < NW; v++) M = wm[v][h] > M ? wm[v][h] : M;
        float L = 0.0f, o = 0.0f;
        for (int v = 0; v < NW; v++) {
            float e = wm[v][h] == -inf ? 0.0f : exp_fast(wm[v][h] - M);
            L += wl[v][h] * e, o += wacc[v][h][d] * e;
        }
        out[(u64)r * ldo + (u64)(hk * G + h) * D + d] = o / L;
    }
}
