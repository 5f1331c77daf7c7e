/* tests/core/test_rng.c — core/rng and core/timer.
 *
 * Philox4x32-10 against the Random123 known-answer vectors (tests/kat_vectors
 * of DEShawResearch/random123), splitmix64 against Vigna's reference outputs
 * for seed 0, stream layout and batching independence, and statistical sanity
 * of uniforms and normals with tolerances of about 5 standard errors; bounded
 * draws (in range, unbiased where a modulo or a plain multiply would not be, and
 * a zero bound refused) and the shuffle (a permutation, uniform, and the very
 * permutation the dataset order has always used). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The bounded draw and shuffle exactly as data/dataset.c wrote them before they
 * moved here: rng_below / rng_shuffle must consume and return the same. */
static uint32_t ref_uniform_below(Rng *r, uint32_t bound) {
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

static void ref_shuffle(Rng *r, int *perm, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ref_uniform_below(r, (uint32_t)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void test_below(void) {
    Rng r, q;
    const uint32_t bounds[] = {1, 2, 3, 7, 10, 1000, 0x80000001u, 0xC0000000u, 0xFFFFFFFFu};
    int in_range = 1, same = 1;
    for (int b = 0; b < (int)(sizeof bounds / sizeof bounds[0]); b++) {
        rng_init(&r, 99, (uint64_t)b), rng_init(&q, 99, (uint64_t)b);
        for (int i = 0; i < 20000; i++) {
            uint32_t v = rng_below(&r, bounds[b]);
            in_range &= v < bounds[b];
            same &= v == ref_uniform_below(&q, bounds[b]);
        }
        same &= rng_u32(&r) == rng_u32(&q); /* and the same number of draws consumed */
    }
    T_CHECK(in_range, "rng_below returned a value >= bound");
    T_CHECK(same, "rng_below differs from the reference draws");
    rng_init(&r, 5, 5);
    int zero = 1;
    for (int i = 0; i < 1000; i++) zero &= rng_below(&r, 1) == 0;
    T_CHECK(zero, "bound 1 always gives 0");

    /* chi-square on a small bound */
    enum { N = 600000, K = 6 };
    long count[K] = {0};
    rng_init(&r, 2024, 77);
    for (int i = 0; i < N; i++) count[rng_below(&r, K)]++;
    double chi2 = 0, e = (double)N / K;
    for (int k = 0; k < K; k++) chi2 += (count[k] - e) * (count[k] - e) / e;
    T_CHECK(chi2 < 25, "rng_below(6) chi-square %g (5 dof; p < 1.4e-4 above 25)", chi2);

    /* bound = 3 * 2^30: x % bound would make [0, 2^30) twice as likely (P = 1/2),
     * the multiply without rejection would double every multiple of 3 (P = 1/2);
     * unbiased, both are 1/3 (standard error 6e-4 at this N). */
    enum { M = 600000 };
    const uint32_t big = 0xC0000000u;
    long low = 0, mult3 = 0;
    rng_init(&r, 31337, 1);
    for (int i = 0; i < M; i++) {
        uint32_t v = rng_below(&r, big);
        low += v < 0x40000000u;
        mult3 += v % 3 == 0;
    }
    T_CHECK(fabs((double)low / M - 1.0 / 3) < 4e-3, "P(v < 2^30) = %g, want 1/3", (double)low / M);
    T_CHECK(fabs((double)mult3 / M - 1.0 / 3) < 4e-3, "P(v %% 3 == 0) = %g, want 1/3", (double)mult3 / M);

    /* bound 0 has no value to return: a programmer error that aborts */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        rng_init(&r, 1, 1);
        rng_below(&r, 0);
        _exit(0);
    }
    int status = 0;
    T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
            "rng_below(0) should abort (status %d)", status);
}

static void test_shuffle(void) {
    Rng r, q;
    /* The first epoch of the dataset order for seed 1234 (stream rng_mix("data", 0)),
     * as grpo has always produced it: resumed runs depend on it. */
    int v[10], want[10] = {5, 8, 6, 3, 0, 9, 2, 7, 4, 1};
    for (int i = 0; i < 10; i++) v[i] = i;
    rng_init(&r, 1234, rng_mix(0x64617461u, 0));
    rng_shuffle(&r, v, 10);
    T_CHECK(!memcmp(v, want, sizeof v), "golden permutation: %d %d %d %d %d %d %d %d %d %d", v[0], v[1], v[2],
            v[3], v[4], v[5], v[6], v[7], v[8], v[9]);

    const int sizes[] = {0, 1, 2, 3, 17, 1000};
    for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
        int n = sizes[s];
        int *a = malloc(sizeof(int) * (n + 1)), *b = malloc(sizeof(int) * (n + 1)), *seen = calloc(n + 1, sizeof(int));
        for (int i = 0; i < n; i++) a[i] = b[i] = i;
        rng_init(&r, 7, (uint64_t)n), rng_init(&q, 7, (uint64_t)n);
        rng_shuffle(&r, a, n);
        ref_shuffle(&q, b, n);
        int perm = 1;
        for (int i = 0; i < n; i++) perm &= a[i] >= 0 && a[i] < n && !seen[a[i]]++;
        T_CHECK(perm, "n = %d: not a permutation", n);
        T_CHECK(!memcmp(a, b, sizeof(int) * n) && rng_u32(&r) == rng_u32(&q),
                "n = %d: differs from the reference Fisher-Yates", n);
        free(a), free(b), free(seen);
    }

    /* every permutation of 3 equally likely */
    enum { N = 120000 };
    long count[9] = {0};
    rng_init(&r, 11, 12);
    for (int t = 0; t < N; t++) {
        int p[3] = {0, 1, 2};
        rng_shuffle(&r, p, 3);
        count[p[0] * 3 + p[1]]++;
    }
    double chi2 = 0, e = N / 6.0;
    int impossible = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            if (a == b) impossible += count[a * 3 + b] != 0;
            else chi2 += (count[a * 3 + b] - e) * (count[a * 3 + b] - e) / e;
        }
    T_CHECK(!impossible && chi2 < 22, "shuffle of 3: chi-square %g over 6 permutations (5 dof)", chi2);
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

/* rng_keep_bits (AVX-512, 16 blocks at a time) against the scalar definition: the
 * stream's u32 draws from block `first` on, low half then high, each compared with
 * thresh; also across the 2^32 boundary of the block counter's low word. */
static void test_keep_bits(void) {
    const uint64_t firsts[] = {0, 5, 0xFFFFFFFFull - 20};
    const uint32_t threshes[] = {0, 3277, 32768, 65535, 65536};
    int same = 1;
    double kept = 0, total = 0;
    for (int fi = 0; fi < 3; fi++)
        for (int ti = 0; ti < 5; ti++) {
            uint8_t got[53];
            rng_keep_bits(7, 99, firsts[fi], 53, threshes[ti], got);
            Rng r;
            rng_init(&r, 7, 99);
            r.counter_lo = firsts[fi];
            for (int i = 0; i < 53; i++) {
                uint8_t want = 0;
                for (int w = 0; w < 4; w++) {
                    uint32_t x = rng_u32(&r);
                    want |= (uint8_t)(((x & 0xffffu) >= threshes[ti]) << (2 * w) | ((x >> 16) >= threshes[ti]) << (2 * w + 1));
                }
                same &= got[i] == want;
                if (ti == 1) kept += __builtin_popcount(got[i]), total += 8;
            }
        }
    T_CHECK(same, "rng_keep_bits equals the scalar draws");
    T_CHECK(fabs(kept / total - (1 - 3277 / 65536.0)) < 0.03, "keep rate %.3f for p = 0.05", kept / total);
}

int main(void) {
    test_keep_bits();
    test_kat();
    test_stream_layout();
    test_batching_independence();
    test_mix();
    test_statistics();
    test_below();
    test_shuffle();
    test_timer();
    return t_summary("test_rng");
}
