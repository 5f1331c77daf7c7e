/* tests/core/test_rng.c — core/rng and core/timer.
 *
 * Philox4x32-10 against the Random123 known-answer vectors (tests/kat_vectors
 * of DEShawResearch/random123), splitmix64 against Vigna's reference outputs
 * for seed 0, stream layout and batching independence, and statistical sanity
 * of uniforms and normals with tolerances of about 5 standard errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "core/rng.h"
#include "core/timer.h"
#include "testutil.h"

static void test_kat(void) {
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        philox4x32_10(kat[i].ctr, kat[i].key, out);
        T_CHECK(!memcmp(out, kat[i].want, sizeof out), "KAT %d: got %08x %08x %08x %08x", i,
                out[0], out[1], out[2], out[3]);
    }
    uint64_t st = 0;
    const uint64_t sm[5] = {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full,
                            0xf88bb8a8724c81ecull, 0x1b39896a51a8749bull};
    for (int i = 0; i < 5; i++) {
        uint64_t got = rng_splitmix64(&st);
        T_CHECK(got == sm[i], "splitmix64 output %d: %016llx", i, (unsigned long long)got);
    }
}

/* The stream is philox blocks at counter (block, stream) with key seed, in order. */
static void test_stream_layout(void) {
    uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
    Rng r;
    rng_init(&r, seed, stream);
    int same = 1;
    for (uint32_t blk = 0; blk < 5; blk++) {
        uint32_t ctr[4] = {blk, 0, (uint32_t)stream, (uint32_t)(stream >> 32)};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
        philox4x32_10(ctr, key, out);
        for (int j = 0; j < 4; j++) same &= rng_u32(&r) == out[j];
    }
    T_CHECK(same, "rng_u32 is the philox block sequence");
}

/* Draw k of a stream is the same however the streams are interleaved. */
static void test_batching_independence(void) {
    enum { S = 8, K = 257 };
    static uint32_t alone[S][K], inter[S][K];
    for (int s = 0; s < S; s++) {
        Rng r;
        rng_init(&r, 42, rng_mix(7, (uint64_t)s));
        for (int k = 0; k < K; k++) alone[s][k] = rng_u32(&r);
    }
    Rng rs[S];
    for (int s = S - 1; s >= 0; s--) rng_init(&rs[s], 42, rng_mix(7, (uint64_t)s));
    for (int k = 0; k < K; k++)
        for (int s = 0; s < S; s++) {
            int idx = (s * 5 + k) % S; /* a scrambled visiting order */
            inter[idx][k] = rng_u32(&rs[idx]);
        }
    T_CHECK(!memcmp(alone, inter, sizeof alone), "interleaving changed a stream");
    int differ = 0;
    for (int s = 1; s < S; s++) differ += memcmp(alone[0], alone[s], sizeof alone[0]) != 0;
    T_CHECK(differ == S - 1, "streams are distinct");
    Rng a, b;
    rng_init(&a, 1, 5);
    rng_init(&b, 2, 5);
    T_CHECK(rng_u32(&a) != rng_u32(&b), "seeds give distinct streams");
}

static void test_mix(void) {
    T_CHECK(rng_mix(1, 2) != rng_mix(2, 1), "rng_mix is not symmetric");
    T_CHECK(rng_mix(0, 0) != 0 && rng_mix(0, 1) != rng_mix(1, 0), "rng_mix zeros");
    enum { N = 256 };
    uint64_t *v = xmalloc(N * N * sizeof *v);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) v[i * N + j] = rng_mix((uint64_t)i, (uint64_t)j);
    int collisions = 0;
    for (int i = 0; i < N * N; i++) /* sparse check: against 64 neighbours */
        for (int j = i + 1; j < N * N && j < i + 64; j++) collisions += v[i] == v[j];
    T_CHECK(collisions == 0, "%d rng_mix collisions", collisions);
    /* avalanche: flipping one input bit flips about half the output bits */
    double flips = 0;
    for (int i = 0; i < 64; i++)
        flips += __builtin_popcountll(rng_mix(12345, 678) ^ rng_mix(12345, 678 ^ (1ull << i)));
    T_CHECK(flips / 64 > 28 && flips / 64 < 36, "mean bits flipped %.2f", flips / 64);
    free(v);
}

static void test_statistics(void) {
    enum { N = 1000000, BINS = 16 };
    Rng r;
    rng_init(&r, 2024, rng_mix(1, 2));
    double s1 = 0, s2 = 0, d1 = 0, d2 = 0, n1 = 0, n2 = 0, n3 = 0, n4 = 0, inside = 0;
    float umin = 1, umax = 0;
    double dmax = 0;
    long bins[BINS] = {0};
    for (int i = 0; i < N; i++) {
        float u = rng_uniform(&r);
        s1 += u, s2 += (double)u * u;
        umin = u < umin ? u : umin, umax = u > umax ? u : umax;
        bins[(int)(u * BINS)]++;
        double d = rng_uniform_f64(&r);
        d1 += d, d2 += d * d, dmax = d > dmax ? d : dmax;
        double z = rng_normal(&r);
        n1 += z, n2 += z * z, n3 += z * z * z, n4 += z * z * z * z;
        inside += fabs(z) < 1.0;
    }
    double mu = s1 / N, var = s2 / N - mu * mu;
    T_CHECK(fabs(mu - 0.5) < 1.5e-3 && fabs(var - 1.0 / 12) < 1e-3, "uniform mean %g var %g", mu, var);
    T_CHECK(umin >= 0 && umax < 1 && umin < 1e-4 && umax > 1 - 1e-4, "uniform range [%g, %g]",
            umin, umax);
    double chi2 = 0, e = (double)N / BINS;
    for (int b = 0; b < BINS; b++) chi2 += (bins[b] - e) * (bins[b] - e) / e;
    T_CHECK(chi2 < 40, "uniform chi-square %g over %d bins (15 dof; p < 1e-3 above 37.7)", chi2, BINS);
    mu = d1 / N, var = d2 / N - mu * mu;
    T_CHECK(fabs(mu - 0.5) < 1.5e-3 && fabs(var - 1.0 / 12) < 1e-3 && dmax < 1, "f64 mean %g var %g",
            mu, var);
    mu = n1 / N, var = n2 / N - mu * mu;
    double skew = n3 / N, kurt = n4 / N;
    T_CHECK(fabs(mu) < 5e-3 && fabs(var - 1) < 1e-2, "normal mean %g var %g", mu, var);
    T_CHECK(fabs(skew) < 1.5e-2 && fabs(kurt - 3) < 5e-2, "normal skew %g kurtosis %g", skew, kurt);
    T_CHECK(fabs(inside / N - 0.682689) < 2.5e-3, "P(|z| < 1) = %g", inside / N);
}

static void test_timer(void) {
    double t0 = time_now_s();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    double t1 = time_now_s();
    T_CHECK(t1 - t0 >= 0.019 && t1 - t0 < 5.0, "20 ms sleep measured %g s", t1 - t0);
    double prev = time_now_s();
    int monotonic = 1;
    for (int i = 0; i < 100000; i++) {
        double t = time_now_s();
        monotonic &= t >= prev;
        prev = t;
    }
    T_CHECK(monotonic, "time_now_s went backwards");
}

int main(void) {
    test_kat();
    test_stream_layout();
    test_batching_independence();
    test_mix();
    test_statistics();
    test_timer();
    return t_summary("test_rng");
}
