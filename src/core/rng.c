/* core/rng.c — Philox4x32-10 streams and splitmix64 hashing (see rng.h).
 *
 * Is: the block function, a buffered stream of u32 / uniform / normal / bounded
 * integer draws, a shuffle, and tuple hashing for stream ids. Is not: a general
 * distributions library (sampling from logits lives in gen/), nor cryptographically
 * secure. */
#include "core/rng.h"

#include <math.h>

#include "core/check.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

/* Constants from Salmon et al. 2011, section 4.2 (also Random123's philox.h). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0, k1 += PHILOX_W1; /* the key bump before each next round */
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void rng_init(Rng *r, uint64_t seed, uint64_t stream) {
    r->key = seed;
    r->counter_hi = stream;
    r->counter_lo = 0;
    r->used = 4;
}

uint32_t rng_u32(Rng *r) {
    if (r->used >= 4) {
        uint32_t ctr[4] = {(uint32_t)r->counter_lo, (uint32_t)(r->counter_lo >> 32),
                           (uint32_t)r->counter_hi, (uint32_t)(r->counter_hi >> 32)};
        uint32_t key[2] = {(uint32_t)r->key, (uint32_t)(r->key >> 32)};
        philox4x32_10(ctr, key, r->buf);
        r->counter_lo++; /* 2^64 blocks per stream: never wraps in practice */
        r->used = 0;
    }
    return r->buf[r->used++];
}

float rng_uniform(Rng *r) { return (float)(rng_u32(r) >> 8) * 0x1p-24f; }

double rng_uniform_f64(Rng *r) {
    uint64_t hi = rng_u32(r), lo = rng_u32(r);
    return (double)(((hi << 32) | lo) >> 11) * 0x1p-53;
}

float rng_normal(Rng *r) {
    double u1 = 1.0 - rng_uniform_f64(r); /* (0, 1]: log is finite */
    double u2 = rng_uniform_f64(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t rng_below(Rng *r, uint32_t bound) {
    CHECK(bound >= 1);
    /* The high word of x * bound is uniform over [0, bound) except for the
     * (2^32 mod bound) values of x whose low word falls below that threshold:
     * redraw those. The threshold's modulo runs only when low < bound. */
    uint64_t m = (uint64_t)rng_u32(r) * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            m = (uint64_t)rng_u32(r) * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void rng_shuffle(Rng *r, int *v, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1);
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static uint64_t splitmix64_finalize(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rng_splitmix64(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return splitmix64_finalize(*state);
}

uint64_t rng_mix(uint64_t a, uint64_t b) {
    uint64_t h = splitmix64_finalize(a + 0x9E3779B97F4A7C15ull);
    return splitmix64_finalize(h ^ (b + 0x3C6EF372FE94F82Aull)); /* 2 * golden */
}

/* One byte of keep bits from one block's four words: bit 2w + h for half h of word w. */
static uint8_t keep_byte(const uint32_t w[4], uint32_t thresh) {
    uint8_t b = 0;
    for (int k = 0; k < 8; k++) {
        uint32_t h = k & 1 ? w[k >> 1] >> 16 : w[k >> 1] & 0xffffu;
        b |= (uint8_t)((h >= thresh) << k);
    }
    return b;
}

#ifdef __AVX512F__
/* hi and lo 32 bits of a * m in each of 16 lanes (m in every lane) */
static inline void mulhilo16(__m512i a, __m512i m, __m512i *hi, __m512i *lo) {
    __m512i pe = _mm512_mul_epu32(a, m), po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
}

/* Sixteen consecutive blocks b0 .. b0 + 15 of the stream (b0's high word constant
 * across them: the caller splits at 2^32 boundaries) to 16 keep bytes. */
static void keep_bytes16(uint64_t key, uint64_t stream, uint64_t b0, uint32_t thresh, uint8_t *out) {
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)b0),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i c1 = _mm512_set1_epi32((int)(uint32_t)(b0 >> 32)), c2 = _mm512_set1_epi32((int)(uint32_t)stream);
    __m512i c3 = _mm512_set1_epi32((int)(uint32_t)(stream >> 32));
    __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        __m512i h0, l0, h1, l1;
        mulhilo16(c0, m0, &h0, &l0);
        mulhilo16(c2, m1, &h1, &l1);
        c0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), _mm512_set1_epi32((int)k0));
        c1 = l1;
        c2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), _mm512_set1_epi32((int)k1));
        c3 = l0;
        k0 += PHILOX_W0, k1 += PHILOX_W1;
    }
    __m512i lowmask = _mm512_set1_epi32(0xffff), t = _mm512_set1_epi32((int)thresh), acc = _mm512_setzero_si512();
    __m512i words[4] = {c0, c1, c2, c3};
    for (int w = 0; w < 4; w++) {
        __mmask16 lo = _mm512_cmpge_epu32_mask(_mm512_and_si512(words[w], lowmask), t);
        __mmask16 hi = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(words[w], 16), t);
        acc = _mm512_mask_or_epi32(acc, lo, acc, _mm512_set1_epi32(1 << (2 * w)));
        acc = _mm512_mask_or_epi32(acc, hi, acc, _mm512_set1_epi32(1 << (2 * w + 1)));
    }
    _mm_storeu_si128((__m128i *)out, _mm512_cvtepi32_epi8(acc));
}
#endif

void rng_keep_bits(uint64_t seed, uint64_t stream, uint64_t first, size_t n, uint32_t thresh, uint8_t *out) {
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    size_t i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16) {
        uint64_t b0 = first + i;
        if ((uint32_t)b0 > UINT32_MAX - 15) break; /* the low word would carry: finish in scalar */
        keep_bytes16(seed, stream, b0, thresh, out + i);
    }
#endif
    for (; i < n; i++) {
        uint64_t b = first + i;
        uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}, w[4];
        philox4x32_10(ctr, key, w);
        out[i] = keep_byte(w, thresh);
    }
}
