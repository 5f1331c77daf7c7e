/* gpu/kernels/rowwise.cu — decoding's batch-invariant product, the GPU's form of
 * ops/matmul_rowwise.c's matmul_forward_rowwise_bf16_products: out[n, O] = bf16(x)[n, I]
 * W16[O, I]^T (+ bias), the products exact in fp32 (bf16 times bf16), summed in fp32.
 *
 * Why not cuBLASLt: its order of sums is its algorithm's, chosen per shape, so a row's
 * result may change with the number of rows; a completion would then depend on how
 * generation is chunked and batched. Here every output element (o, r) is summed in
 * one order that depends on I alone:
 *   - k is cut in groups of 8 (group g: k = 8g .. 8g+7, the last one short when I % 8);
 *     thread t of ROWWISE_THREADS owns the groups g = t, t + 256, ... and sums its
 *     products in increasing k, one fused multiply-add each (the CPU's fmaf chain);
 *   - the 32 lanes of a warp are summed by a butterfly (lane ^ 16, ^ 8, ^ 4, ^ 2, ^ 1),
 *     then the 8 warps' sums in warp order, then the bias added (the CPU's s + b).
 * Which block, warp task or launch an element falls in changes none of this, nor do
 * the other rows: a row alone gets the bits it gets in any batch.
 *
 * The work: a block owns ROWWISE_OT = 8 output rows (W's bandwidth is the cost of a
 * decoding step: each W value is read from memory once by its block, then from the
 * cache for each further pass) and goes over the input rows ROWWISE_RT = 4 at a time:
 * each thread holds 8 x 4 accumulators, its weights for the 8 outputs (16-byte loads)
 * against each row's 8 inputs (two 16-byte loads, rounded here as the CPU rounds
 * them: f32_to_bf16, nearest even). The 32 sums of a warp are reduced by a
 * reduce-scatter butterfly (each level halves what a lane holds: 16 + 8 + 4 + 2 + 1
 * shuffles for the 32, each summed in the butterfly's tree), leaving sum e = o RT + r
 * in lane e, which the block then adds over its warps in shared memory. 8 x 8 tiles
 * were tried first: 233-255 registers and spills on sm_80 (ptxas 13.0), though then
 * with the butterfly's selects still sending arrays to local memory (rowwise_pick
 * fixed that later; 8 x 8 not retried since); 8 x 4 now: 205, none spilled.
 * Needs f32_to_bf16_rne (bf16.cu, included before this in all.cu). */
#include "device.h"

#define ROWWISE_THREADS 256 /* part of the order of sums: the host launches exactly this */
#define ROWWISE_WARPS (ROWWISE_THREADS / 32)
#define ROWWISE_OT 8 /* output rows a block */
#define ROWWISE_RT 4 /* input rows a pass */

/* 16 bytes, one vector load (ld.global.v4 on the GPU). */
typedef struct __attribute__((aligned(16))) {
    unsigned a, b, c, d;
} RowwiseU4;

/* The 8 bf16 weights W16[o, k0 .. k0+7] as 4 words (bf16 2i in the low half of word i);
 * vec: the row is 16-byte aligned there. */
DEVICE_INLINE void rowwise_load_w(unsigned *w, const unsigned short *p, int vec) {
    if (vec) {
        RowwiseU4 v = *(const RowwiseU4 *)p;
        w[0] = v.a, w[1] = v.b, w[2] = v.c, w[3] = v.d;
    } else {
        UNROLL for (int i = 0; i < 4; i++) w[i] = (unsigned)p[2 * i] | ((unsigned)p[2 * i + 1] << 16);
    }
}

DEVICE float rowwise_widen(unsigned short h) {
    union {
        unsigned u;
        float f;
    } v;
    v.u = (unsigned)h << 16;
    return v.f;
}

DEVICE float rowwise_round(float f) { return rowwise_widen(f32_to_bf16_rne(f)); }

/* bf16 i (0..7) of the 4 words, widened (exact). */
DEVICE_INLINE float rowwise_w(const unsigned *w, int i) {
    union {
        unsigned u;
        float f;
    } v;
    v.u = i & 1 ? w[i >> 1] & 0xffff0000u : w[i >> 1] << 16;
    return v.f;
}

/* x[k0 .. k0+7] rounded to bf16; vec: 16-byte aligned there. */
DEVICE_INLINE void rowwise_load_x(float *xr, const float *p, int vec) {
    if (vec) {
        RowwiseU4 v0 = *(const RowwiseU4 *)p, v1 = *(const RowwiseU4 *)(p + 4);
        unsigned u[8] = {v0.a, v0.b, v0.c, v0.d, v1.a, v1.b, v1.c, v1.d};
        UNROLL for (int j = 0; j < 8; j++) {
            union {
                unsigned u;
                float f;
            } c;
            c.u = u[j];
            xr[j] = rowwise_round(c.f);
        }
    } else {
        UNROLL for (int j = 0; j < 8; j++) xr[j] = rowwise_round(p[j]);
    }
}

/* This thread's chains for outputs o0.. (no of them real) and rows r0.. (nr real):
 * acc[o][r] over its groups in increasing k. */
DEVICE_INLINE void rowwise_chains(float acc[ROWWISE_OT][ROWWISE_RT], const float *x, const unsigned short *W16, int I,
                           int o0, int no, int r0, int nr, int vec) {
    UNROLL for (int o = 0; o < ROWWISE_OT; o++)
        UNROLL for (int r = 0; r < ROWWISE_RT; r++) acc[o][r] = 0.0f;
    for (int k0 = 8 * thread_x(); k0 < I; k0 += 8 * ROWWISE_THREADS) {
        if (k0 + 8 <= I) {
            unsigned w[ROWWISE_OT][4];
            UNROLL for (int o = 0; o < ROWWISE_OT; o++) {
                if (o < no) rowwise_load_w(w[o], W16 + (u64)(o0 + o) * I + k0, vec);
                else w[o][0] = w[o][1] = w[o][2] = w[o][3] = 0;
            }
            UNROLL for (int r = 0; r < ROWWISE_RT; r++) {
                if (r >= nr) continue;
                float xr[8];
                rowwise_load_x(xr, x + (u64)(r0 + r) * I + k0, vec);
                UNROLL for (int o = 0; o < ROWWISE_OT; o++)
                    UNROLL for (int j = 0; j < 8; j++) acc[o][r] = fma_rn(rowwise_w(w[o], j), xr[j], acc[o][r]);
            }
        } else { /* the short last group, element by element in the same order */
            UNROLL for (int r = 0; r < ROWWISE_RT; r++)
                UNROLL for (int o = 0; o < ROWWISE_OT; o++) {
                    if (r >= nr || o >= no) continue;
                    for (int k = k0; k < I; k++)
                        acc[o][r] = fma_rn(rowwise_widen(W16[(u64)(o0 + o) * I + k]),
                                           rowwise_round(x[(u64)(r0 + r) * I + k]), acc[o][r]);
                }
        }
    }
}

/* a where mask is 0, b where it is all ones: a select on the values' bits, which the
 * compiler cannot turn into a select of addresses into v (that sends v to local memory). */
DEVICE_INLINE float rowwise_pick(float a, float b, unsigned mask) {
    union {
        float f;
        unsigned u;
    } x, y;
    x.f = a, y.f = b;
    x.u = (x.u & ~mask) | (y.u & mask);
    return x.f;
}

/* One level of the butterfly below: lanes with bit m set keep v[half ..), the others
 * v[0 .. half), each adding its partner's copy; what is kept moves to v[0 .. half). */
DEVICE_INLINE void rowwise_level(float *v, int half, int m) {
    unsigned upper = (thread_x() & m) ? 0xffffffffu : 0u;
    UNROLL for (int e = 0; e < half; e++) {
        float keep = rowwise_pick(v[e], v[e + half], upper), send = rowwise_pick(v[e + half], v[e], upper);
        v[e] = keep + shfl_xor(send, m);
    }
}

/* The warp's 32 sums (e = o * RT + r) by a reduce-scatter butterfly (lane bits 16, 8,
 * 4, 2, 1 in turn): each sum is the butterfly tree's (a + b gives the same bits in
 * either lane), 31 shuffles for the 32. Returns sum e = lane. The levels are written
 * out so that every index is a constant: v stays in registers. */
DEVICE_INLINE float rowwise_warp_reduce(float acc[ROWWISE_OT][ROWWISE_RT]) {
    float v[32];
    UNROLL for (int e = 0; e < 32; e++) v[e] = acc[e / ROWWISE_RT][e % ROWWISE_RT];
    rowwise_level(v, 16, 16);
    rowwise_level(v, 8, 8);
    rowwise_level(v, 4, 4);
    rowwise_level(v, 2, 2);
    rowwise_level(v, 1, 1);
    return v[0];
}

/* out[n, O] = bf16(x)[n, I] W16[O, I]^T (+ bias[O]; NULL: none). Grid: ceil(O / 8)
 * blocks of ROWWISE_THREADS. vec: x and W16's rows are 16-byte aligned (I % 8 == 0 and
 * both pointers): the same sums, read by vectors. */
KERNEL void matmul_rowwise_bf16(float *out, const float *x, const unsigned short *W16, const float *bias, int n, int I,
                                int O, int vec) {
    SHARED float part[ROWWISE_WARPS][32];
    int o0 = block_x() * ROWWISE_OT, no = O - o0 < ROWWISE_OT ? O - o0 : ROWWISE_OT;
    int lane = thread_x() & 31, warp = thread_x() >> 5;
    for (int r0 = 0; r0 < n; r0 += ROWWISE_RT) {
        int nr = n - r0 < ROWWISE_RT ? n - r0 : ROWWISE_RT;
        float acc[ROWWISE_OT][ROWWISE_RT];
        rowwise_chains(acc, x, W16, I, o0, no, r0, nr, vec);
        float s = rowwise_warp_reduce(acc);
        sync_block(); /* part may still be read by the previous pass */
        part[warp][lane] = s;
        sync_block();
        int e = thread_x(), o = e / ROWWISE_RT, r = e % ROWWISE_RT;
        if (e < 32 && o < no && r < nr) {
            float sum = part[0][e];
            for (int w = 1; w < ROWWISE_WARPS; w++) sum += part[w][e];
            out[(u64)(r0 + r) * O + o0 + o] = sum + (bias ? bias[o0 + o] : 0.0f);
        }
    }
}
