/* gpu/kernels/attention_mma.cu — attention.cu's training forward on the tensor cores:
 * the same causal grouped-query attention over packed sequences (starts, mask, out and
 * lse as there), for head dims that are multiples of 8 up to ATT_MMA_MAX_D (Qwen2.5's
 * 64 and 128; gpu/ops.c sends the others to attention.cu).
 *
 * FlashAttention-2's split of the work: a block of 4 warps takes 64 query rows of one
 * sequence and one head, a warp 16 of them; tiles of 32 keys and their values are
 * staged in shared memory; the warp's scores S = Q K^T and its output's update P V
 * are mma_tf32 tiles with fp32 sums, an online softmax over the tiles in fp32 (each
 * row's running maximum and sum, its output rescaled). Each product is split in three
 * TF32 ones (x = xh + xl, both TF32 — 10 fraction bits each —, x y ~ xh yh + xh yl +
 * xl yh): fp32's accuracy, as the CPU's attention, where one TF32 product would move a
 * score s by ~2^-11 |s| and the attention's output by ~3e-4 relative. The
 * P V product takes P in the layout the S product left it: the 8 keys of a column
 * block enter the product's k dimension in the order 0 2 4 6 1 3 5 7 (lane t holds keys
 * 2t and 2t + 1, the A fragment's columns t and t + 4) and V's rows are read in the
 * same order, so p never goes through shared memory.
 *
 * A row's result depends on its own sequence alone: the query tiles and key tiles are
 * counted from the sequence's first row, and a tile none of whose keys a warp's rows
 * attend is skipped by the whole warp (what it would add is exactly nothing: p 0, the
 * rescale 1). Packing a sequence at another offset, beside other sequences, or alone,
 * gives it the same bits (split invariance), and a launch is deterministic.
 *
 * Shared memory: K and V tiles [32][D + 4] fp32 (33.8 KB at D 128; the row padding
 * spreads a fragment's 32 reads over the 32 banks). Registers: q's fragments and the
 * output's, D / 2 each, and the tile's scores. Not done yet (for a measured GPU):
 * staging with cp.async while the previous tile computes, one block for a group's
 * query heads (K and V read once for G heads). */
#include "attention.h"

/* grid: (sum over sequences of ceil(len / 64), or more) x H; 128 threads. Arguments as
 * attention_forward's. */
KERNEL void attention_forward_mma(float *out, float *lse, const float *q, const float *k, const float *v,
                                  const unsigned char *mask, const int *starts, int B, int H, int Hkv, int D,
                                  int ldo, int ldq, int ldk, int ldv) {
    SHARED float ks[ATT_MMA_KEYS * (ATT_MMA_MAX_D + 4)], vs[ATT_MMA_KEYS * (ATT_MMA_MAX_D + 4)];
    enum { C8 = ATT_MMA_MAX_D / 8, J8 = ATT_MMA_KEYS / 8 };
    int b = 0, tile = row_tile(starts, B, block_x(), ATT_MMA_ROWS, &b);
    if (tile < 0) return; /* the whole block */
    int h = block_y(), hk = h / (H / Hkv), s0 = starts[b], len = starts[b + 1] - s0;
    int tid = thread_x(), g = (tid & 31) >> 2, t = tid & 3, sd = D + 4;
    int r0 = tile * ATT_MMA_ROWS + (tid >> 5) * 16, ra = r0 + g, rb = ra + 8; /* the warp's rows, the lane's two */
    int end = tile * ATT_MMA_ROWS + ATT_MMA_ROWS < len ? tile * ATT_MMA_ROWS + ATT_MMA_ROWS : len;
    int idle = r0 >= len; /* no row of the warp is real: it only stages tiles */
    const unsigned char *m_own = mask ? mask + s0 : 0;
    const float inf = __builtin_inff(), scale = 1.0f / sqrt_rn((float)D);
    float qa[C8][4], o[C8][4]; /* the warp's q as A fragments (fp32), its output's D fragments */
    UNROLL for (int c = 0; c < C8; c++) {
        int col = (int)h * D + 8 * c + t, in = 8 * c < D;
        qa[c][0] = in && ra < len ? q[(u64)(s0 + ra) * ldq + col] : 0.0f;
        qa[c][1] = in && rb < len ? q[(u64)(s0 + rb) * ldq + col] : 0.0f;
        qa[c][2] = in && ra < len ? q[(u64)(s0 + ra) * ldq + col + 4] : 0.0f;
        qa[c][3] = in && rb < len ? q[(u64)(s0 + rb) * ldq + col + 4] : 0.0f;
        o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
    }
    float m_a = -inf, m_b = -inf, l_a = 0.0f, l_b = 0.0f;
    for (int k0 = 0; k0 < end; k0 += ATT_MMA_KEYS) {
        sync_block(); /* every warp is done with the previous tile */
        stage_rows(ks, vs, k, v, ldk, ldv, (u64)hk * D, s0, k0, ATT_MMA_KEYS, len, D, sd);
        sync_block();
        if (idle || k0 > r0 + 15) continue; /* no key of the tile is attended by the warp's rows */
        /* S = Q K^T in three TF32 products (q = qh + ql, k = kh + kl, each part TF32;
         * qh kh + qh kl + ql kh, the small ones first): fp32's accuracy, where one TF32
         * product would move a score s by ~2^-11 |s| */
        float sc[J8][4];
        UNROLL for (int j = 0; j < J8; j++) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
        UNROLL for (int c = 0; c < C8; c++) {
            if (8 * c >= D) continue;
            UNROLL for (int j = 0; j < J8; j++) {
                float bk[2];
                frag_bt(bk, ks + 8 * j * sd + 8 * c, sd, g, t);
                mma_split(sc[j], qa[c], bk);
            }
        }
        /* scaled scores, -inf where the key is not attended; the rows' maxima over the
         * tile (a row's 8 values are in the 4 lanes of its quad) */
        float mx_a = -inf, mx_b = -inf;
        UNROLL for (int j = 0; j < J8; j++) {
            UNROLL for (int e = 0; e < 4; e++) {
                int key = k0 + 8 * j + 2 * t + (e & 1), row = e < 2 ? ra : rb;
                int ok = key <= row && key < len && (!m_own || m_own[key]);
                float s = ok ? sc[j][e] * scale : -inf;
                sc[j][e] = s;
                if (e < 2) mx_a = s > mx_a ? s : mx_a;
                else mx_b = s > mx_b ? s : mx_b;
            }
        }
        for (int x = 1; x <= 2; x <<= 1) {
            float oa = shfl_xor(mx_a, x), ob = shfl_xor(mx_b, x);
            mx_a = oa > mx_a ? oa : mx_a, mx_b = ob > mx_b ? ob : mx_b;
        }
        float mn_a = mx_a > m_a ? mx_a : m_a, mn_b = mx_b > m_b ? mx_b : m_b;
        float al_a = mn_a == m_a ? 1.0f : exp_fast(m_a - mn_a), al_b = mn_b == m_b ? 1.0f : exp_fast(m_b - mn_b);
        /* p = e^(s - max) */
        float sum_a = 0.0f, sum_b = 0.0f;
        UNROLL for (int j = 0; j < J8; j++) {
            UNROLL for (int e = 0; e < 4; e++) {
                float mn = e < 2 ? mn_a : mn_b, p = sc[j][e] == -inf ? 0.0f : exp_fast(sc[j][e] - mn);
                sc[j][e] = p;
                if (e < 2) sum_a += p;
                else sum_b += p;
            }
        }
        sum_a += shfl_xor(sum_a, 1), sum_b += shfl_xor(sum_b, 1);
        sum_a += shfl_xor(sum_a, 2), sum_b += shfl_xor(sum_b, 2);
        l_a = l_a * al_a + sum_a, l_b = l_b * al_b + sum_b;
        m_a = mn_a, m_b = mn_b;
        UNROLL for (int c = 0; c < C8; c++) o[c][0] *= al_a, o[c][1] *= al_a, o[c][2] *= al_b, o[c][3] *= al_b;
        products_p(o, sc, vs, J8, C8, 0, D / 8, sd, g, t); /* O += P V */
    }
    if (idle) return;
    float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
    UNROLL for (int c = 0; c < C8; c++) {
        if (8 * c >= D) continue;
        u64 col = (u64)h * D + 8 * c + 2 * t;
        float *oa = out + (u64)(s0 + ra) * ldo + col, *ob = out + (u64)(s0 + rb) * ldo + col;
        if (ra < len) oa[0] = o[c][0] * inv_a, oa[1] = o[c][1] * inv_a;
        if (rb < len) ob[0] = o[c][2] * inv_b, ob[1] = o[c][3] * inv_b;
    }
    if (t == 0 && ra < len) lse[(u64)H * s0 + (u64)h * len + ra] = l_a > 0.0f ? m_a + log_fast(l_a) : 0.0f;
    if (t == 0 && rb < len) lse[(u64)H * s0 + (u64)h * len + rb] = l_b > 0.0f ? m_b + log_fast(l_b) : 0.0f;
}
