/* gpu/kernels/attention.h — what attention.cu and attention_backward.cu share: the
 * block's shape, and the helpers that must give both the same bits. */
#ifndef GRPO_GPU_KERNELS_ATTENTION_H
#define GRPO_GPU_KERNELS_ATTENTION_H

#include "device.h"

enum {
    ATT_THREADS = 128, /* a block: 4 warps; a tile of keys (or queries) is one a thread */
    ATT_MAX_D = 256,   /* head dims up to this (gpu/ops.c checks) */
    /* attention_mma.cu: a block's query rows (16 a warp), a tile's keys, the head dims
     * it takes (multiples of 8 up to this; gpu/ops.c sends the others to attention.cu) */
    ATT_MMA_ROWS = 64,
    ATT_MMA_KEYS = 32,
    ATT_MMA_MAX_D = 128
};

/* a . b over n floats, in order (every thread computing it gets the same bits). */
DEVICE float dot_serial(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
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
