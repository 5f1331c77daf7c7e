/* gpu/kernels/attention_sizes.h — the attention kernels' block shapes and shared memory,
 * one source for the kernels (attention.h includes it) and for the host that launches
 * them (gpu/ops.c): plain C constants, no device code. */
#ifndef GRPO_GPU_KERNELS_ATTENTION_SIZES_H
#define GRPO_GPU_KERNELS_ATTENTION_SIZES_H

enum {
    ATT_THREADS = 128, /* a block: 4 warps; a tile of keys (or queries) is one a thread */
    ATT_MAX_D = 256,   /* head dims up to this (gpu/ops.c checks) */
    /* attention_mma.cu: a block's query rows (16 a warp), a tile's keys, the head dims
     * it takes (multiples of 8 up to this; gpu/ops.c sends the others to attention.cu) */
    ATT_MMA_ROWS = 64,
    ATT_MMA_KEYS = 32,
    ATT_MMA_MAX_D = 128,
    /* attention_backward_mma.cu: a block's rows (queries for dQ, keys for dK and dV: 16 a
     * pair of warps, each warp half the output's columns) */
    ATT_MMA_BWD_ROWS = 32,
    ATT_MMA_BWD_QUERIES = 16, /* dK/dV's tile of queries (fewer live scores: no spill at D 128) */
    /* their tiles' row stride in shared memory, in floats, for every D: a constant, so
     * that every fragment's address is the lane's base and an immediate; 4 past a
     * multiple of 32, so that a fragment's 32 reads fall in 32 banks */
    ATT_MMA_SD = ATT_MMA_MAX_D + 4,
    /* attention_decode_group: a block's warps; the groups (query heads a kv head) and
     * head dims it takes (gpu/ops.c sends the others to attention_decode) */
    ATT_DEC_WARPS = 4,
    ATT_DEC_MAX_G = 8,
    ATT_DEC_MAX_D = 128
};

/* The backward kernels' dynamic shared memory in bytes (gpu/ops.c launches with these;
 * attention_backward_mma.cu lays it out): dQ's Q and dO rows and a key tile's K and V;
 * dK/dV's K and V rows and a query tile's Q and dO, lse and dO . O. */
enum {
    ATT_MMA_BWD_Q_SHARED = (int)sizeof(float) * (2 * ATT_MMA_BWD_ROWS + 2 * ATT_MMA_KEYS) * ATT_MMA_SD,
    ATT_MMA_BWD_K_SHARED =
        (int)sizeof(float) * ((2 * ATT_MMA_BWD_ROWS + 2 * ATT_MMA_BWD_QUERIES) * ATT_MMA_SD + 2 * ATT_MMA_BWD_QUERIES)
};

#endif
