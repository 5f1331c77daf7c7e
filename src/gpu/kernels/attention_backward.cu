/* gpu/kernels/attention_backward.cu — the training attention's backward
 * (ops/attention.c's attention_backward), the probabilities recomputed from the
 * forward's log-sum-exp: P = exp(scale q.k - lse), dP = dO . v, dS = P (dP - dO . O).
 * Sequences, masks and the lse layout as attention.cu's forward (see there).
 *
 * Deterministic without float atomics: two kernels, each sum owned by one block.
 * attention_backward_query writes dQ = scale dS K, a block per (query row, head),
 * a thread per key of a tile and the sum over keys in order per output column;
 * attention_backward_key adds dV += P^T dO and dK += scale dS^T Q, a block per
 * (key row, kv head), a thread per query of a tile, summed over the group's query
 * heads and then the later queries in order. Both recompute P and dS (the GPU does
 * the flops twice rather than keeping the [T, T] scores); dO . O is recomputed per
 * query by the same serial dot in both, so the two kernels see the same bits.
 *
 * attention_backward_mma.cu tiles both sides on the tensor cores (FlashAttention-2's
 * backward, dQ in its own kernel as here) for the head dims it takes. */
#include "attention.h"

/* dq[N, H D] (lddq) WRITTEN: a block per (query row n = block_x, head h = block_y),
 * grid starts[B] x H. */
KERNEL void attention_backward_query(float *dq, const float *dout, const float *q, const float *k, const float *v,
                                     const float *out, const float *lse, const unsigned char *mask, const int *starts,
                                     int B, int H, int Hkv, int D, int lddq, int lddo, int ldq, int ldk, int ldv,
                                     int ldo) {
    SHARED float qs[ATT_MAX_D], dos[ATT_MAX_D], acc[ATT_MAX_D], ds[ATT_THREADS];
    int n = block_x(), h = block_y(), b = sequence_of(starts, B, n), tid = thread_x();
    if (b < 0) return; /* the whole block */
    int s0 = starts[b], len = starts[b + 1] - s0, t = n - s0, hk = h / (H / Hkv);
    float scale = 1.0f / sqrt_rn((float)D);
    const float *kb = k + (u64)s0 * ldk + (u64)hk * D, *vb = v + (u64)s0 * ldv + (u64)hk * D;
    const float *o = out + (u64)n * ldo + (u64)h * D;
    for (int j = tid; j < D; j += block_dim_x()) {
        qs[j] = q[(u64)n * ldq + (u64)h * D + j];
        dos[j] = dout[(u64)n * lddo + (u64)h * D + j];
        acc[j] = 0.0f;
    }
    sync_block();
    float L = lse[(u64)H * s0 + (u64)h * len + t], rowdot = dot_serial(dos, o, D);
    for (int k0 = 0; k0 <= t; k0 += ATT_THREADS) {
        int s = k0 + tid, n_tile = t + 1 - k0 < ATT_THREADS ? t + 1 - k0 : ATT_THREADS;
        float d = 0.0f;
        if (s <= t && (!mask || mask[s0 + s])) {
            float p = exp_fast(dot_serial(qs, kb + (u64)s * ldk, D) * scale - L);
            d = p * (dot_serial(dos, vb + (u64)s * ldv, D) - rowdot);
        }
        sync_block(); /* the previous tile's ds are read */
        ds[tid] = d;
        sync_block();
        for (int j = tid; j < D; j += block_dim_x()) {
            float a = 0.0f;
            for (int i = 0; i < n_tile; i++) a += ds[i] * kb[(u64)(k0 + i) * ldk + j];
            acc[j] += a;
        }
    }
    for (int j = tid; j < D; j += block_dim_x()) dq[(u64)n * lddq + (u64)h * D + j] = acc[j] * scale;
}

/* dk[N, Hkv D] (lddk), dv (lddv) ACCUMULATED: a block per (key row n = block_x, kv
 * head = block_y), grid starts[B] x Hkv. A padding key (mask 0) gets nothing. */
KERNEL void attention_backward_key(float *dk, float *dv, const float *dout, const float *q, const float *k,
                                   const float *v, const float *out, const float *lse, const unsigned char *mask,
                                   const int *starts, int B, int H, int Hkv, int D, int lddk, int lddv, int lddo,
                                   int ldq, int ldk, int ldv, int ldo) {
    SHARED float ks[ATT_MAX_D], vs[ATT_MAX_D], acc_k[ATT_MAX_D], acc_v[ATT_MAX_D], ps[ATT_THREADS], ds[ATT_THREADS];
    int n = block_x(), hk = block_y(), b = sequence_of(starts, B, n), tid = thread_x(), G = H / Hkv;
    if (b < 0 || (mask && !mask[n])) return; /* the whole block */
    int s0 = starts[b], len = starts[b + 1] - s0, s = n - s0;
    float scale = 1.0f / sqrt_rn((float)D);
    for (int j = tid; j < D; j += block_dim_x()) {
        ks[j] = k[(u64)n * ldk + (u64)hk * D + j];
        vs[j] = v[(u64)n * ldv + (u64)hk * D + j];
        acc_k[j] = acc_v[j] = 0.0f;
    }
    sync_block();
    for (int g = 0; g < G; g++) {
        int h = hk * G + g;
        const float *qb = q + (u64)s0 * ldq + (u64)h * D, *db = dout + (u64)s0 * lddo + (u64)h * D;
        const float *ob = out + (u64)s0 * ldo + (u64)h * D, *Lb = lse + (u64)H * s0 + (u64)h * len;
        for (int t0 = s; t0 < len; t0 += ATT_THREADS) {
            int t = t0 + tid, n_tile = len - t0 < ATT_THREADS ? len - t0 : ATT_THREADS;
            float p = 0.0f, d = 0.0f;
            if (t < len) { /* query t >= s sees key s (real) */
                const float *dr = db + (u64)t * lddo;
                p = exp_fast(dot_serial(qb + (u64)t * ldq, ks, D) * scale - Lb[t]);
                d = p * (dot_serial(dr, vs, D) - dot_serial(dr, ob + (u64)t * ldo, D));
            }
            sync_block(); /* the previous tile's ps, ds are read */
            ps[tid] = p, ds[tid] = d;
            sync_block();
            for (int j = tid; j < D; j += block_dim_x()) {
                float av = 0.0f, ak = 0.0f;
                for (int i = 0; i < n_tile; i++) {
                    av += ps[i] * db[(u64)(t0 + i) * lddo + j];
                    ak += ds[i] * qb[(u64)(t0 + i) * ldq + j];
                }
                acc_v[j] += av, acc_k[j] += ak;
            }
        }
    }
    for (int j = tid; j < D; j += block_dim_x()) {
        dv[(u64)n * lddv + (u64)hk * D + j] += acc_v[j];
        dk[(u64)n * lddk + (u64)hk * D + j] += acc_k[j] * scale;
    }
}
