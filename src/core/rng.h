/* core/rng.h — counter-based random numbers: Philox4x32-10.
 *
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11) maps a 128-bit counter and a 64-bit key to 128 random
 * bits. A stream is (key = seed, counter = (stream, block index)), so draw k of
 * stream s depends only on (seed, s, k): never on batching, thread count or
 * the order in which streams are used. Derive stream ids from tuples with
 * rng_mix, e.g. rng_mix(rng_mix(step, prompt), sample). */
#ifndef GRPO_CORE_RNG_H
#define GRPO_CORE_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The bare block function: out = Philox4x32-10(ctr, key). Matches the
 * Random123 known-answer vectors. */
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

typedef struct {
    uint64_t key;        /* the seed */
    uint64_t counter_hi; /* the stream id: counter words 2, 3 */
    uint64_t counter_lo; /* next block index: counter words 0, 1 */
    uint32_t buf[4];     /* current block */
    int used;            /* words of buf consumed; 4 = empty */
} Rng;

/* Starts stream `stream` of `seed` at its first draw. */
void rng_init(Rng *r, uint64_t seed, uint64_t stream);
/* Next 32 random bits. */
uint32_t rng_u32(Rng *r);
/* Uniform in [0, 1) with 24 random bits (every value exact in float). */
float rng_uniform(Rng *r);
/* Uniform in [0, 1) with 53 random bits; uses two u32 draws. */
double rng_uniform_f64(Rng *r);
/* Standard normal by Box-Muller (in double, rounded to float); uses four u32
 * draws and discards the second variate so each call costs the same. */
float rng_normal(Rng *r);

/* Uniform integer in [0, bound), bound >= 1, without modulo bias: Lemire's
 * multiply-and-reject ("Fast random integer generation in an interval", ACM
 * TOMACS 2019). One u32 draw, more only on the rare rejection. */
uint32_t rng_below(Rng *r, uint32_t bound);
/* Shuffles v[n] in place: Fisher-Yates (Knuth's Algorithm P), i from n-1 down
 * to 1, j = rng_below(r, i+1), swap v[i] and v[j]. The sequence of draws is part
 * of the contract: the dataset order (data/) and so resumed runs depend on it. */
void rng_shuffle(Rng *r, int *v, int n);

/* Keep bits for dropout, 8 per block: out[i] (i < n) has bit 2w + h set when the
 * 16-bit half h (0 low, 1 high) of word w of block first + i of stream `stream` of
 * `seed` is >= thresh (drop probability thresh / 65536). The same draws, in the same
 * order, as rng_u32 from rng_init(seed, stream) halved low half first; 16 blocks
 * at a time with AVX-512. */
void rng_keep_bits(uint64_t seed, uint64_t stream, uint64_t first, size_t n, uint32_t thresh, uint8_t *out);

/* Hashes (a, b) into a 64-bit id, not symmetric: splitmix64's finalizer
 * (Steele, Lea, Flood 2014) applied to a, then to the result combined with b. */
uint64_t rng_mix(uint64_t a, uint64_t b);
/* splitmix64: advances *state and returns the next output (Vigna's reference). */
uint64_t rng_splitmix64(uint64_t *state);

#endif
