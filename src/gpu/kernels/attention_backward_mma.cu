/* gpu/kernels/attention_backward_mma.cu — attention_backward.cu's two kernels on the
 * tensor cores, for the head dims attention_mma.cu's forward takes (multiples of 8 up
 * to ATT_MMA_MAX_D): the same sums (P = exp(scale q.k - lse), dP = dO . v,
 * dS = P (dP - dO . O); dQ = scale dS K written, dV += P^T dO and dK += scale dS^T Q
 * added once), the same sequences, masks and lse layout, the same owners — no float
 * atomics:
 *
 * - attention_backward_query_mma: a block of 4 warps per 32 query rows of a sequence
 *   and a head, its Q and dO rows staged once, tiles of 32 keys and values staged in
 *   turn: S and dP, then dQ += dS K.
 * - attention_backward_key_mma: a block per 32 keys of a sequence and a kv head, its K
 *   and V rows staged once, then for each query head of the group and each tile of 32
 *   later queries (Q, dO, lse, dO . O staged): S^T = K Q^T and dP^T = V dO^T, then
 *   dV += P^T dO and dK += dS^T Q.
 *
 * A pair of warps takes 16 of the block's rows, each warp half of the output's column
 * blocks (the pair computes the rows' S and dP both): the accumulators of 16 rows x D
 * columns for two outputs would not fit a thread's 255 registers at D 128. Every
 * product is attention.h's mma_split (three TF32 products: fp32's accuracy), and a
 * tile's accumulator goes into the next product through frag_pa / frag_bp as in the
 * forward. dO . O is summed per row the same way in both kernels (the 4 lanes of a
 * quad: columns t mod 4 in order, then the quad's butterfly), so they see the same
 * bits. Tiles are counted from the sequence's first row and a tile none of whose pairs
 * a warp attends is skipped (it would add exactly nothing): a sequence's gradients do
 * not depend on where it is packed or what is packed beside it.
 *
 * Shared memory (dynamic, gpu_launch_shared; attention_sizes.h's ATT_MMA_BWD_*_SHARED):
 * four operands' rows at ATT_MMA_SD floats each (67.6 KB for dQ, 50.8 KB for dK/dV: past
 * the 48 KB a kernel may use unasked), and for dK/dV the query tile's lse and dO . O. */
#include "attention.h"

/* The quad's sum of a[c] b[c] over c < D (each lane the columns c = t mod 4, in order;
 * then xor 1 and 2): every lane of the quad the same bits. All lanes of the warp call it;
 * a and b are read only where `real`. */
DEVICE float quad_dot(const float *a, const float *b, int D, int t, int real) {
    float s = 0.0f;
    if (real)
        for (int c = t; c < D; c += 4) s += a[c] * b[c];
    s += shfl_xor(s, 1);
    return s + shfl_xor(s, 2);
}

/* The column blocks (of 8) warp w's half takes: [*lo, *hi) of D / 8. */
DEVICE void column_half(int w, int D, int *lo, int *hi) {
    int nc = D / 8, half = (nc + 1) / 2;
    *lo = w >> 1 ? half : 0, *hi = w >> 1 ? nc : half;
}

/* dq[N, H D] (lddq) WRITTEN. grid: (N / 32 + B) x H, 128 threads, dynamic shared memory
 * 4 x 32 (D + 4) floats. Arguments as attention_backward_query's. */
KERNEL void attention_backward_query_mma(float *dq, const float *dout, const float *q, const float *k, const float *v,
                                         const float *out, const float *lse, const unsigned char *mask,
                                         const int *starts, int B, int H, int Hkv, int D, int lddq, int lddo, int ldq,
                                         int ldk, int ldv, int ldo) {
    enum { R = ATT_MMA_BWD_ROWS, KT = ATT_MMA_KEYS, C4 = ATT_MMA_MAX_D / 16, J8 = ATT_MMA_KEYS / 8, sd = ATT_MMA_SD };
    int b = 0, tile = row_tile(starts, B, block_x(), R, &b);
    if (tile < 0) return; /* the whole block */
    int h = block_y(), hk = h / (H / Hkv), s0 = starts[b], len = starts[b + 1] - s0;
    int tid = thread_x(), w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3, c_lo, c_hi;
    column_half(w, D, &c_lo, &c_hi);
    int q0 = tile * R, w0 = (w & 1) * 16, ra = q0 + w0 + g, rb = ra + 8; /* the pair's rows from q0 + w0 */
    int end = q0 + R < len ? q0 + R : len, idle = q0 + w0 >= len;
    float *qs = (float *)dynamic_shared(), *dos = qs + R * sd, *ks = dos + R * sd, *vs = ks + KT * sd;
    const unsigned char *m_own = mask ? mask + s0 : 0;
    const float scale = 1.0f / sqrt_rn((float)D);
    stage_rows(qs, dos, q, dout, ldq, lddo, (u64)h * D, s0, q0, R, len, D, sd);
    sync_block();
    const float *o_a = out + (u64)(s0 + ra) * ldo + (u64)h * D, *o_b = out + (u64)(s0 + rb) * ldo + (u64)h * D;
    float di_a = quad_dot(dos + (ra - q0) * sd, o_a, D, t, ra < len);
    float di_b = quad_dot(dos + (rb - q0) * sd, o_b, D, t, rb < len);
    float l_a = ra < len ? lse[(u64)H * s0 + (u64)h * len + ra] : 0.0f;
    float l_b = rb < len ? lse[(u64)H * s0 + (u64)h * len + rb] : 0.0f;
    float acc[C4][4]; /* the warp's column blocks c_lo + i */
    UNROLL for (int i = 0; i < C4; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    for (int k0 = 0; k0 < end; k0 += KT) {
        sync_block(); /* every warp is done with the previous tile */
        stage_rows(ks, vs, k, v, ldk, ldv, (u64)hk * D, s0, k0, KT, len, D, sd);
        sync_block();
        if (idle || k0 > q0 + w0 + 15) continue; /* no key of the tile is attended by the warp's rows */
        float sc[J8][4], dp[J8][4]; /* S = Q K^T, dP = dO V^T: [the pair's 16 rows][8 keys] each */
        products_t(sc, dp, qs + w0 * sd, dos + w0 * sd, ks, vs, J8, D, sd, g, t);
        /* dS = P (dP - dO . O), P = e^(scale s - lse) where the key is attended, else 0 */
        UNROLL for (int j = 0; j < J8; j++) {
            UNROLL for (int e = 0; e < 4; e++) {
                int key = k0 + 8 * j + 2 * t + (e & 1), row = e < 2 ? ra : rb;
                int ok = key <= row && key < len && (!m_own || m_own[key]);
                float p = ok ? exp_fast(sc[j][e] * scale - (e < 2 ? l_a : l_b)) : 0.0f;
                sc[j][e] = p * (dp[j][e] - (e < 2 ? di_a : di_b));
            }
        }
        products_p(acc, sc, ks, J8, C4, c_lo, c_hi, sd, g, t); /* dQ += dS K (scaled once, at the end) */
    }
    if (idle) return;
    UNROLL for (int i = 0; i < C4; i++) {
        int c = c_lo + i;
        if (c >= c_hi) continue;
        u64 col = (u64)h * D + 8 * c + 2 * t;
        float *qa = dq + (u64)(s0 + ra) * lddq + col, *qb = dq + (u64)(s0 + rb) * lddq + col;
        if (ra < len) qa[0] = acc[i][0] * scale, qa[1] = acc[i][1] * scale;
        if (rb < len) qb[0] = acc[i][2] * scale, qb[1] = acc[i][3] * scale;
    }
}

/* dk[N, Hkv D] (lddk), dv (lddv) ACCUMULATED; a padding key (mask 0) gets nothing.
 * grid: (N / 32 + B) x Hkv, 128 threads, dynamic shared memory 4 x 32 (D + 4) + 64
 * floats. Arguments as attention_backward_key's. */
KERNEL void attention_backward_key_mma(float *dk, float *dv, const float *dout, const float *q, const float *k,
                                       const float *v, const float *out, const float *lse, const unsigned char *mask,
                                       const int *starts, int B, int H, int Hkv, int D, int lddk, int lddv, int lddo,
                                       int ldq, int ldk, int ldv, int ldo) {
    enum { R = ATT_MMA_BWD_ROWS, QT = ATT_MMA_BWD_QUERIES, C4 = ATT_MMA_MAX_D / 16, J8 = QT / 8, sd = ATT_MMA_SD };
    int b = 0, tile = row_tile(starts, B, block_x(), R, &b);
    if (tile < 0) return; /* the whole block */
    int hk = block_y(), G = H / Hkv, s0 = starts[b], len = starts[b + 1] - s0;
    int tid = thread_x(), w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3, c_lo, c_hi;
    column_half(w, D, &c_lo, &c_hi);
    int k0 = tile * R, w0 = (w & 1) * 16, ka = k0 + w0 + g, kb = ka + 8; /* the pair's keys from k0 + w0 */
    int idle = k0 + w0 >= len;
    float *ks = (float *)dynamic_shared(), *vs = ks + R * sd, *qs = vs + R * sd, *dos = qs + QT * sd;
    float *ls = dos + QT * sd, *dis = ls + QT;
    const unsigned char *m_own = mask ? mask + s0 : 0;
    const float scale = 1.0f / sqrt_rn((float)D);
    stage_rows(ks, vs, k, v, ldk, ldv, (u64)hk * D, s0, k0, R, len, D, sd);
    float ak[C4][4], av[C4][4]; /* the warp's column blocks c_lo + i */
    UNROLL for (int i = 0; i < C4; i++) {
        UNROLL for (int e = 0; e < 4; e++) ak[i][e] = av[i][e] = 0.0f;
    }
    for (int hg = 0; hg < G; hg++) {
        int h = hk * G + hg;
        for (int q0 = k0; q0 < len; q0 += QT) { /* the queries from the block's first key on */
            sync_block(); /* every warp is done with the previous tile */
            stage_rows(qs, dos, q, dout, ldq, lddo, (u64)h * D, s0, q0, QT, len, D, sd);
            { /* the tile's lse and dO . O: 4 threads a query (tid / 4), a quad of a warp */
                int r = tid >> 2, row = q0 + r;
                const float *dr = dout + (u64)(s0 + row) * lddo + (u64)h * D;
                const float *orow = out + (u64)(s0 + row) * ldo + (u64)h * D;
                float d = quad_dot(dr, orow, D, t, r < QT && row < len);
                if (t == 0 && r < QT) dis[r] = d, ls[r] = row < len ? lse[(u64)H * s0 + (u64)h * len + row] : 0.0f;
            }
            sync_block();
            if (idle || q0 + QT - 1 < k0 + w0) continue; /* every query of the tile before the warp's keys */
            float st[J8][4], dpt[J8][4]; /* S^T = K Q^T, dP^T = V dO^T: [the pair's 16 keys][8 queries] each */
            products_t(st, dpt, ks + w0 * sd, vs + w0 * sd, qs, dos, J8, D, sd, g, t);
            /* P^T and dS^T: query q0 + r sees key s iff s <= q0 + r and s real */
            UNROLL for (int j = 0; j < J8; j++) {
                UNROLL for (int e = 0; e < 4; e++) {
                    int r = 8 * j + 2 * t + (e & 1), key = e < 2 ? ka : kb;
                    int ok = key <= q0 + r && q0 + r < len && key < len && (!m_own || m_own[key]);
                    float p = ok ? exp_fast(st[j][e] * scale - ls[r]) : 0.0f;
                    st[j][e] = p;
                    dpt[j][e] = p * (dpt[j][e] - dis[r]);
                }
            }
            products_p(av, st, dos, J8, C4, c_lo, c_hi, sd, g, t); /* dV += P^T dO */
            products_p(ak, dpt, qs, J8, C4, c_lo, c_hi, sd, g, t); /* dK += dS^T Q (scaled once, at the end) */
        }
    }
    if (idle) return;
    int real_a = ka < len && (!m_own || m_own[ka]), real_b = kb < len && (!m_own || m_own[kb]);
    UNROLL for (int i = 0; i < C4; i++) {
        int c = c_lo + i;
        if (c >= c_hi) continue;
        u64 col = (u64)hk * D + 8 * c + 2 * t;
        float *dka = dk + (u64)(s0 + ka) * lddk + col, *dkb = dk + (u64)(s0 + kb) * lddk + col;
        float *dva = dv + (u64)(s0 + ka) * lddv + col, *dvb = dv + (u64)(s0 + kb) * lddv + col;
        if (real_a) dva[0] += av[i][0], dva[1] += av[i][1], dka[0] += ak[i][0] * scale, dka[1] += ak[i][1] * scale;
        if (real_b) dvb[0] += av[i][2], dvb[1] += av[i][3], dkb[0] += ak[i][2] * scale, dkb[1] += ak[i][3] * scale;
    }
}
