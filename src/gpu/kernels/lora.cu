/* gpu/kernels/lora.cu — LoRA dropout on the GPU (model/lora_layers.c's draw_mask and
 * apply_mask): the keep bits of a module drawn on the device from the CPU's streams,
 * and x * keep / (1 - p) applied with them. The bits are the CPU's: row n of module
 * mod in layer l reads Philox stream rng_mix(rng_mix(key[seq[n]], pos[n]), l 7 + mod)
 * of the adapters' dropout seed, byte i of the row from block i of the stream (its
 * four words' eight 16-bit halves, bit k from half k: kept when >= thresh), as
 * core/rng.c's rng_keep_bits. philox_word is sampler.cu's (all.cu includes it first). */
#include "device.h"

/* core/rng.c's splitmix64 finaliser and rng_mix. */
DEVICE u64 lora_splitmix_final(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
DEVICE u64 lora_rng_mix(u64 a, u64 b) {
    u64 h = lora_splitmix_final(a + 0x9E3779B97F4A7C15ULL);
    return lora_splitmix_final(h ^ (b + 0x3C6EF372FE94F82AULL));
}

/* bits[n, i] for n < N, i < row_bytes: a thread per byte (grid-stride). */
KERNEL void lora_dropout_mask(unsigned char *bits, const u64 *keys, const int *seq, const int *pos, int N,
                              int row_bytes, u64 seed, u64 site, unsigned thresh) {
    u64 total = (u64)N * row_bytes;
    for (u64 e = (u64)block_x() * block_dim_x() + thread_x(); e < total; e += (u64)grid_dim_x() * block_dim_x()) {
        int n = (int)(e / row_bytes), i = (int)(e % row_bytes);
        u64 stream = lora_rng_mix(lora_rng_mix(keys[seq[n]], (u64)(long long)pos[n]), site);
        unsigned char b = 0;
        for (int w = 0; w < 4; w++) {
            unsigned word = philox_word(seed, stream, 4 * (u64)i + w);
            b |= (unsigned char)(((word & 0xffffu) >= thresh) << (2 * w));
            b |= (unsigned char)(((word >> 16) >= thresh) << (2 * w + 1));
        }
        bits[e] = b;
    }
}

/* out[n, j] (+)= keep(n, j) ? x[n, j] scale : 0 for N rows of `in` (out may be x). */
KERNEL void lora_dropout_apply(float *out, const float *x, const unsigned char *bits, int N, int in, int row_bytes,
                               float scale, int accumulate) {
    u64 total = (u64)N * in;
    for (u64 e = (u64)block_x() * block_dim_x() + thread_x(); e < total; e += (u64)grid_dim_x() * block_dim_x()) {
        u64 n = e / in, j = e % in;
        float v = bits[n * row_bytes + (j >> 3)] >> (j & 7) & 1 ? x[e] * scale : 0.0f;
        out[e] = accumulate ? out[e] + v : v;
    }
}
