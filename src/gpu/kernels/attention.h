/* gpu/kernels/attention.h — what the attention kernels share: their block shapes
 * (attention_sizes.h, which the host's launches read too), the helpers the plain
 * kernels need to give the same bits, and the tensor-core kernels' steps. */
#ifndef GRPO_GPU_KERNELS_ATTENTION_H
#define GRPO_GPU_KERNELS_ATTENTION_H

#include "attention_sizes.h"
#include "device.h"

/* a . b over n floats, in order (every thread computing it gets the same bits). */
DEVICE float dot_serial(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* The tensor cores' tiles (attention_mma.cu, attention_backward_mma.cu; device.h's
 * mma_tf32 for the fragments' layout), over fp32 tiles in shared memory of row stride
 * sd, g = lane / 4 and t = lane % 4. */

/* x ~ h + l, both TF32: x's leading 11 bits and the next 11 (x - h is exact in fp32). */
DEVICE_INLINE void split_tf32(float x, float *h, float *l) {
    *h = round_tf32(x);
    *l = round_tf32(x - *h);
}

/* d += A B with fp32's accuracy in three TF32 products (ah bh + ah bl + al bh, the small
 * ones first; al bl, 2^-22 of the product, left out): a and b fp32 fragments. */
DEVICE_INLINE void mma_split(float *d, const float *a, const float *b) {
    float ah[4], al[4], bh[2], bl[2];
    UNROLL for (int e = 0; e < 4; e++) split_tf32(a[e], &ah[e], &al[e]);
    split_tf32(b[0], &bh[0], &bl[0]);
    split_tf32(b[1], &bh[1], &bl[1]);
    mma_tf32(d, al, bh);
    mma_tf32(d, ah, bl);
    mma_tf32(d, ah, bh);
}

/* A's fragment from x (row-major from the tile's row 0, column 0): A = x's 16 rows x 8. */
DEVICE_INLINE void frag_a(float *a, const float *x, int sd, int g, int t) {
    a[0] = x[g * sd + t], a[1] = x[(g + 8) * sd + t], a[2] = x[g * sd + t + 4], a[3] = x[(g + 8) * sd + t + 4];
}

/* B's fragment for A y^T from y's 8 rows (columns 0..7): B[k][n] = y[n][k]. */
DEVICE_INLINE void frag_bt(float *b, const float *y, int sd, int g, int t) {
    b[0] = y[g * sd + t], b[1] = y[g * sd + t + 4];
}

/* B's fragment for P y from y's 8 rows (columns 0..7), the rows in the order P's
 * accumulator layout gives them as an A (frag_pa): rows 2t and 2t + 1. */
DEVICE_INLINE void frag_bp(float *b, const float *y, int sd, int g, int t) {
    b[0] = y[2 * t * sd + g], b[1] = y[(2 * t + 1) * sd + g];
}

/* An accumulator tile (16 x 8: lane's d = [g][2t], [g][2t+1], [g+8][2t], [g+8][2t+1])
 * as the A of a product over its 8 columns: its columns 2t, 2t + 1 are A's t and t + 4,
 * the order frag_bp reads the other side's rows in. */
DEVICE_INLINE void frag_pa(float *a, const float *d) { a[0] = d[0], a[1] = d[2], a[2] = d[1], a[3] = d[3]; }

/* Rows r0 .. r0 + n - 1 of a sequence (from row s0; those at or past len: zeros) of two
 * operands a (row stride lda) and b (ldb), their D columns from col, into the shared
 * tiles sa and sb [n][sd]: by the block's threads, coalesced along the columns. */
DEVICE void stage_rows(float *sa, float *sb, const float *a, const float *b, int lda, int ldb, u64 col, int s0, int r0,
                       int n, int len, int D, int sd) {
    for (int i = thread_x(); i < n * D; i += block_dim_x()) {
        int r = i / D, c = i - r * D, s = r0 + r;
        sa[r * sd + c] = s < len ? a[(u64)(s0 + s) * lda + col + c] : 0.0f;
        sb[r * sd + c] = s < len ? b[(u64)(s0 + s) * ldb + col + c] : 0.0f;
    }
}

/* x[j] = A1 B1^T and y[j] = A2 B2^T over D columns, for the 8 rows 8j .. 8j+7 of B1 and
 * B2 (j < nj): A1, A2 the warp's 16 rows of two tiles, B1, B2 two tiles (stride sd).
 * The column blocks are a loop kept a loop (NO_UNROLL: unrolled, the fragments of every
 * block were hoisted and spilled). */
DEVICE_INLINE void products_t(float (*x)[4], float (*y)[4], const float *a1, const float *a2, const float *b1,
                              const float *b2, int nj, int D, int sd, int g, int t) {
    UNROLL for (int j = 0; j < nj; j++) {
        UNROLL for (int e = 0; e < 4; e++) x[j][e] = y[j][e] = 0.0f;
    }
    NO_UNROLL for (int c = 0; c < ATT_MMA_MAX_D / 8; c++) {
        if (8 * c >= D) break;
        float f1[4], f2[4];
        frag_a(f1, a1 + 8 * c, sd, g, t);
        frag_a(f2, a2 + 8 * c, sd, g, t);
        UNROLL for (int j = 0; j < nj; j++) {
            float h1[2], h2[2];
            frag_bt(h1, b1 + 8 * j * sd + 8 * c, sd, g, t);
            frag_bt(h2, b2 + 8 * j * sd + 8 * c, sd, g, t);
            mma_split(x[j], f1, h1);
            mma_split(y[j], f2, h2);
        }
    }
}

/* acc[i] += P B for B's column blocks (of 8) c_lo + i < c_hi, i < ni: P the nj
 * accumulator tiles p[j] (16 x 8 each, as products_t leaves them), B the tile of 8 nj
 * rows (stride sd) whose row 8j + r pairs with p[j]'s column r. */
DEVICE_INLINE void products_p(float (*acc)[4], float (*p)[4], const float *b, int nj, int ni, int c_lo, int c_hi,
                              int sd, int g, int t) {
    UNROLL for (int j = 0; j < nj; j++) {
        float a[4];
        frag_pa(a, p[j]);
        UNROLL for (int i = 0; i < ni; i++) {
            int c = c_lo + i;
            if (c >= c_hi) continue;
            float f[2];
            frag_bp(f, b + 8 * j * sd + 8 * c, sd, g, t);
            mma_split(acc[i], a, f);
        }
    }
}

/* Block i's tile of `rows` rows: sequence *b's rows `rows` x (the result) on, the tiles
 * of sequence 0 first; -1 past the last tile (the grid is an upper bound: N / rows + B). */
DEVICE int row_tile(const int *starts, int B, int i, int rows, int *b) {
    for (int s = 0; s < B; s++) {
        int n = (starts[s + 1] - starts[s] + rows - 1) / rows;
        if (i < n) {
            *b = s;
            return i;
        }
        i -= n;
    }
    return -1;
}

/* The sequence holding row n: its index, or -1 past the last (B + 1 starts). */
DEVICE int sequence_of(const int *starts, int B, int n) {
    if (n >= starts[B]) return -1;
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (starts[mid] <= n) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

#endif
