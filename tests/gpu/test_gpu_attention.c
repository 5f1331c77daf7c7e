/* tests/gpu/test_gpu_attention.c — the GPU's RoPE and attention (gpu/ops.h) against
 * the CPU's ops on random inputs: on the GPU where gpu_open finds one (GRPO_REQUIRE_GPU=1,
 * as tools/gpu-check.sh runs it: nothing else), on the tests' emulated GPU otherwise.
 *
 * - RoPE forward and backward against ops/rope.c, positions up to 40000 (angles in
 *   double on both sides; the GPU's sine and cosine are its own): 1e-6 + 1e-6 |cpu|.
 * - Training attention against ops/attention.c, packed (one CPU call per sequence,
 *   as model/transformer.c makes them) and padded with a mask (left padding: queries
 *   with no key; holes): out, lse, dq (written), dk and dv (accumulated) within
 *   1e-5 + 1e-4 |cpu| (fp32 dot products in another order than the CPU's GEMMs,
 *   ex2.approx against the CPU's exp). A sequence alone gives the same bits as in
 *   its batch. Three head shapes: H 4, Hkv 2, D 64 (Qwen2-0.5B's head dim), with a
 *   packed sequence longer than a tile of 128 keys; H 3, Hkv 1, D 256 (two output
 *   columns a thread); H 2, Hkv 2, D 128 (no grouping).
 * - Decoding against a cache with a shared prefix (parent slot) against the CPU's
 *   attention_forward over the same keys (the last query row of the sequence
 *   prefix + own keys), 1e-5 + 1e-4 |cpu|; each row alone gives the same bits as in
 *   the batch (a row's result never depends on the other rows). Groups of up to 8
 *   query heads and D up to 128 take attention_decode_group (every case but D 256).
 * - Bad sizes (odd or too large D, H not a multiple of Hkv, dk without dv): -1 and a
 *   message naming them.
 * - GRPO_GPU_ATTENTION=plain: D 64 on the plain kernels within the same bounds, the
 *   forward's bits not the tensor cores'; its values read by gpu_open, a bad one
 *   refused in one line. Run with it set (tools/gpu-check.sh's fallback), every case
 *   runs on the plain kernels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 35
#include "gpu_test.h"

/* The worst |got - want| over n values; a NaN or a value outside atol + rtol |want| fails
 * (NaN on both sides passes: a padding column neither side writes). */
static void compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol) {
    double worst = 0;
    size_t bad = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue;
        double e = fabs((double)got[i] - want[i]);
        if (isnan(got[i]) || e > atol + rtol * fabs(want[i])) bad++;
        if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e; /* a NaN on one side: inf */
        differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
    printf("  %-34s max |gpu - cpu| %.3g (%zu of %zu differ in bits)\n", what, worst, differ, n);
    T_CHECK(bad == 0, "%s: %zu of %zu outside %g + %g |cpu| (max error %.3g)", what, bad, n, atol, rtol, worst);
}

static void same_bits(const char *what, const float *a, const float *b, size_t n) {
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("  %-34s %zu of %zu values differ\n", what, differ, n);
    T_CHECK(differ == 0, "%s: %zu of %zu values differ", what, differ, n);
}


/* ---- RoPE ---- */

static void check_rope(int D) {
    enum { N = 29, NH = 6 };
    int half = D / 2, ld = NH * D + 3;
    float *x = randoms((size_t)N * ld, 2.0f), *y = malloc(sizeof(float) * N * ld), *inv = malloc(sizeof(float) * half);
    int32_t pos[N];
    for (int i = 0; i < half; i++) inv[i] = (float)pow(1e6, -2.0 * i / D); /* Qwen2's rope_theta */
    for (int n = 0; n < N; n++) pos[n] = n < 8 ? n : (int32_t)((frand() + 1) * 20000);
    CUdeviceptr d_x = upload(x, sizeof(float) * N * ld), d_pos = upload(pos, sizeof pos),
                d_inv = upload(inv, sizeof(float) * half);
    char what[64];
    for (int back = 0; back <= 1; back++) {
        (back ? rope_backward : rope_forward)(x, pos, inv, N, NH, D, ld);
        T_CHECK(!(back ? gpu_rope_backward : gpu_rope_forward)(&dev, d_x, d_pos, d_inv, N, NH, D, ld, &err), "%s",
                err.msg);
        download(y, d_x, sizeof(float) * N * ld);
        snprintf(what, sizeof what, "rope %s, D %d", back ? "backward" : "forward", D);
        compare(what, y, x, (size_t)N * ld, 1e-6, 1e-6);
    }
    gpu_free(&dev, d_x), gpu_free(&dev, d_pos), gpu_free(&dev, d_inv);
    free(x), free(y), free(inv);
}

/* ---- training attention ---- */

/* The heads of the case at hand (set_heads), and the row strides of its operands:
 * every one wider than its heads, as the model's fused rows are. */
static int H, HKV, D, LDQ, LDK, LDV, LDO;
static int KVD, LDQD, LDOD; /* decoding's: the cache's rows, q's and out's */

static void set_heads(int h, int hkv, int d) {
    H = h, HKV = hkv, D = d;
    LDQ = H * D + 3, LDK = HKV * D + 5, LDV = HKV * D + 7, LDO = H * D + 1;
    KVD = HKV * D, LDQD = H * D + 9, LDOD = H * D + 2;
}

/* A batch: B sequences at rows starts[b] .. starts[b+1]-1, N rows; padded = the CPU
 * takes it in one call (B, T) rather than one a sequence. */
typedef struct {
    int B, N, T, padded;
    int starts[8];
    uint8_t *mask; /* [N] */
} Batch;

/* Every tensor of a case, host and device. */
typedef struct {
    float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
    CUdeviceptr d_q, d_k, d_v, d_out, d_lse, d_dout, d_dq, d_dk, d_dv, d_mask, d_starts;
} Tensors;

static void cpu_forward(const Batch *bt, Tensors *c, float *scratch) {
    if (bt->padded) {
        attention_forward(c->out, c->lse, c->q, c->k, c->v, bt->mask, bt->B, bt->T, H, HKV, D, LDO, LDQ, LDK, LDV,
                          scratch);
        return;
    }
    for (int b = 0; b < bt->B; b++) {
        size_t s0 = (size_t)bt->starts[b];
        int len = bt->starts[b + 1] - bt->starts[b];
        attention_forward(c->out + s0 * LDO, c->lse + s0 * H, c->q + s0 * LDQ, c->k + s0 * LDK, c->v + s0 * LDV,
                          bt->mask + s0, 1, len, H, HKV, D, LDO, LDQ, LDK, LDV, scratch);
    }
}

static void cpu_backward(const Batch *bt, Tensors *c, float *scratch) {
    int T = bt->padded ? bt->T : 0;
    for (int b = 0; b < (bt->padded ? 1 : bt->B); b++) {
        size_t s0 = bt->padded ? 0 : (size_t)bt->starts[b];
        int B = bt->padded ? bt->B : 1, len = bt->padded ? T : bt->starts[b + 1] - bt->starts[b];
        attention_backward(c->dq + s0 * LDQ, c->dk + s0 * LDK, c->dv + s0 * LDV, c->dout + s0 * LDO, c->q + s0 * LDQ,
                           c->k + s0 * LDK, c->v + s0 * LDV, c->out + s0 * LDO, c->lse + s0 * H, bt->mask + s0, B,
                           len, H, HKV, D, LDQ, LDK, LDV, LDO, LDQ, LDK, LDV, LDO, scratch);
    }
}

static void make_tensors(Tensors *c, int N) {
    c->q = randoms((size_t)N * LDQ, 1.5f), c->k = randoms((size_t)N * LDK, 1.5f), c->v = randoms((size_t)N * LDV, 1.0f);
    c->dout = randoms((size_t)N * LDO, 1.0f);
    c->dk = randoms((size_t)N * LDK, 0.5f), c->dv = randoms((size_t)N * LDV, 0.5f); /* accumulated into */
    c->out = malloc(sizeof(float) * N * LDO), c->lse = malloc(sizeof(float) * N * H);
    c->dq = malloc(sizeof(float) * N * LDQ);
    for (size_t i = 0; i < (size_t)N * LDO; i++) c->out[i] = NAN; /* the padding columns stay NaN on both sides */
    for (size_t i = 0; i < (size_t)N * LDQ; i++) c->dq[i] = NAN;
    c->d_q = upload(c->q, sizeof(float) * N * LDQ), c->d_k = upload(c->k, sizeof(float) * N * LDK);
    c->d_v = upload(c->v, sizeof(float) * N * LDV), c->d_dout = upload(c->dout, sizeof(float) * N * LDO);
    c->d_dk = upload(c->dk, sizeof(float) * N * LDK), c->d_dv = upload(c->dv, sizeof(float) * N * LDV);
    c->d_out = upload(c->out, sizeof(float) * N * LDO), c->d_dq = upload(c->dq, sizeof(float) * N * LDQ);
    T_CHECK(!gpu_alloc(&dev, &c->d_lse, sizeof(float) * N * H, &err), "%s", err.msg);
}

static void free_tensors(Tensors *c) {
    free(c->q), free(c->k), free(c->v), free(c->out), free(c->lse), free(c->dout), free(c->dq), free(c->dk), free(c->dv);
    CUdeviceptr p[] = {c->d_q, c->d_k, c->d_v, c->d_out, c->d_lse, c->d_dout, c->d_dq, c->d_dk, c->d_dv,
                       c->d_mask, c->d_starts};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) gpu_free(&dev, p[i]);
}

/* Sequence b of the batch alone (its rows' pointers, starts {0, len}) gives the bits
 * it got in the batch: out, lse, dq. */
static void check_alone(const Batch *bt, Tensors *c, int b, const float *out, const float *lse, const float *dq) {
    int s0 = bt->starts[b], len = bt->starts[b + 1] - s0, starts[2] = {0, len};
    size_t fo = sizeof(float);
    CUdeviceptr d_starts = upload(starts, sizeof starts), d_lse, d_dq, d_out;
    T_CHECK(!gpu_alloc(&dev, &d_lse, fo * len * H, &err) && !gpu_alloc(&dev, &d_dq, fo * len * LDQ, &err) &&
                !gpu_alloc(&dev, &d_out, fo * len * LDO, &err),
            "%s", err.msg);
    CUdeviceptr q = c->d_q + fo * s0 * LDQ, k = c->d_k + fo * s0 * LDK, v = c->d_v + fo * s0 * LDV,
                mask = c->d_mask + (size_t)s0;
    T_CHECK(!gpu_attention_forward(&dev, d_out, d_lse, q, k, v, mask, d_starts, 1, len, H, HKV, D, LDO, LDQ, LDK, LDV,
                                   &err) &&
                !gpu_attention_backward(&dev, d_dq, 0, 0, c->d_dout + fo * s0 * LDO, q, k, v, d_out, d_lse, mask,
                                        d_starts, 1, len, H, HKV, D, LDQ, 0, 0, LDO, LDQ, LDK, LDV, LDO, &err),
            "%s", err.msg);
    float *g_out = malloc(fo * len * LDO), *g_lse = malloc(fo * len * H), *g_dq = malloc(fo * len * LDQ);
    download(g_out, d_out, fo * len * LDO), download(g_lse, d_lse, fo * len * H), download(g_dq, d_dq, fo * len * LDQ);
    float *a = malloc(fo * len * H * D * 2), *x = a + (size_t)len * H * D;
    for (int pass = 0; pass < 2; pass++) { /* out, then dq: the H D values of each row */
        for (int t = 0; t < len; t++) {
            memcpy(a + (size_t)t * H * D, (pass ? g_dq + (size_t)t * LDQ : g_out + (size_t)t * LDO), fo * H * D);
            memcpy(x + (size_t)t * H * D, (pass ? dq + (size_t)(s0 + t) * LDQ : out + (size_t)(s0 + t) * LDO),
                   fo * H * D);
        }
        same_bits(pass ? "  alone = in the batch: dq" : "  alone = in the batch: out", a, x, (size_t)len * H * D);
    }
    same_bits("  alone = in the batch: lse", g_lse, lse + (size_t)H * s0, (size_t)len * H);
    gpu_free(&dev, d_starts), gpu_free(&dev, d_lse), gpu_free(&dev, d_dq), gpu_free(&dev, d_out);
    free(g_out), free(g_lse), free(g_dq), free(a);
}

/* dK and dV of sequence b, summed into zeros alone and in the batch: the same bits
 * (a micro-batch's split never changes a sequence's gradient). */
static void check_alone_kv(const Batch *bt, Tensors *c, int b) {
    int s0 = bt->starts[b], len = bt->starts[b + 1] - s0, starts[2] = {0, len}, N = bt->N;
    size_t fo = sizeof(float), nk = (size_t)N * LDK, nv = (size_t)N * LDV;
    float *zero = calloc(nk + nv, fo), *got = malloc(fo * (nk + nv) * 2), *alone = got + nk + nv;
    CUdeviceptr d_starts = upload(starts, sizeof starts), d_kv = upload(zero, fo * (nk + nv)),
                d_kv1 = upload(zero, fo * (nk + nv));
    T_CHECK(!gpu_attention_backward(&dev, 0, d_kv, d_kv + fo * nk, c->d_dout, c->d_q, c->d_k, c->d_v, c->d_out,
                                    c->d_lse, c->d_mask, c->d_starts, bt->B, N, H, HKV, D, 0, LDK, LDV, LDO, LDQ, LDK,
                                    LDV, LDO, &err),
            "%s", err.msg);
    T_CHECK(!gpu_attention_backward(&dev, 0, d_kv1, d_kv1 + fo * nk, c->d_dout + fo * s0 * LDO, c->d_q + fo * s0 * LDQ,
                                    c->d_k + fo * s0 * LDK, c->d_v + fo * s0 * LDV, c->d_out + fo * s0 * LDO,
                                    c->d_lse + fo * s0 * H, c->d_mask + (size_t)s0, d_starts, 1, len, H, HKV, D, 0,
                                    LDK, LDV, LDO, LDQ, LDK, LDV, LDO, &err),
            "%s", err.msg);
    download(got, d_kv, fo * (nk + nv)), download(alone, d_kv1, fo * (nk + nv));
    same_bits("  alone = in the batch: dk", alone, got + (size_t)s0 * LDK, (size_t)len * LDK);
    same_bits("  alone = in the batch: dv", alone + nk, got + nk + (size_t)s0 * LDV, (size_t)len * LDV);
    gpu_free(&dev, d_starts), gpu_free(&dev, d_kv), gpu_free(&dev, d_kv1);
    free(zero), free(got);
}

static void check_attention(const char *name, const Batch *bt) {
    int N = bt->N;
    size_t fo = sizeof(float);
    printf(" attention, %s: %d sequences, %d rows, H %d, Hkv %d, D %d\n", name, bt->B, N, H, HKV, D);
    Tensors c;
    make_tensors(&c, N);
    c.d_mask = upload(bt->mask, (size_t)N), c.d_starts = upload(bt->starts, sizeof(int) * (bt->B + 1));
    float *scratch = malloc(fo * attention_scratch_floats(N, H, D));
    cpu_forward(bt, &c, scratch);
    T_CHECK(!gpu_attention_forward(&dev, c.d_out, c.d_lse, c.d_q, c.d_k, c.d_v, c.d_mask, c.d_starts, bt->B, N, H, HKV,
                                   D, LDO, LDQ, LDK, LDV, &err),
            "%s", err.msg);
    float *out = malloc(fo * N * LDO), *lse = malloc(fo * N * H), *dq = malloc(fo * N * LDQ),
          *dk = malloc(fo * N * LDK), *dv = malloc(fo * N * LDV);
    download(out, c.d_out, fo * N * LDO), download(lse, c.d_lse, fo * N * H);
    compare("forward: out", out, c.out, (size_t)N * LDO, 1e-5, 1e-4);
    compare("forward: lse", lse, c.lse, (size_t)N * H, 1e-5, 1e-4);
    cpu_backward(bt, &c, scratch);
    T_CHECK(!gpu_attention_backward(&dev, c.d_dq, c.d_dk, c.d_dv, c.d_dout, c.d_q, c.d_k, c.d_v, c.d_out, c.d_lse,
                                    c.d_mask, c.d_starts, bt->B, N, H, HKV, D, LDQ, LDK, LDV, LDO, LDQ, LDK, LDV, LDO,
                                    &err),
            "%s", err.msg);
    download(dq, c.d_dq, fo * N * LDQ), download(dk, c.d_dk, fo * N * LDK), download(dv, c.d_dv, fo * N * LDV);
    compare("backward: dq (written)", dq, c.dq, (size_t)N * LDQ, 1e-5, 1e-4);
    compare("backward: dk (accumulated)", dk, c.dk, (size_t)N * LDK, 1e-5, 1e-4);
    compare("backward: dv (accumulated)", dv, c.dv, (size_t)N * LDV, 1e-5, 1e-4);
    if (!bt->padded) check_alone(bt, &c, 1, out, lse, dq), check_alone_kv(bt, &c, 1);
    free(out), free(lse), free(dq), free(dk), free(dv), free(scratch);
    free_tensors(&c);
}

/* long_seq: the packed batch's second sequence spans two tiles of 128 keys. */
static void check_training(int long_seq) {
    int mid = long_seq ? 140 : 30;
    Batch p = {.B = 3, .starts = {0, 5, 5 + mid, 5 + mid + 23}};
    p.N = p.starts[3];
    p.mask = malloc((size_t)p.N);
    memset(p.mask, 1, (size_t)p.N);
    check_attention("packed", &p);
    /* padded: T 24, masks with left padding (queries with no key), holes, right padding */
    Batch q = {.B = 3, .T = 24, .padded = 1, .starts = {0, 24, 48, 72}, .N = 72};
    q.mask = malloc(72);
    for (int i = 0; i < 72; i++) {
        int b = i / 24, t = i % 24;
        q.mask[i] = b == 0 ? 1 : b == 1 ? t >= 4 && t != 9 && t != 10 : t < 17;
    }
    check_attention("padded", &q);
    free(p.mask), free(q.mask);
}

/* ---- decoding against a cache ---- */

enum { SLOTS = 5, CAP = 48 };

/* The CPU's attention of query q against keys/values kr/vr[nk] (rows of KVD): the last
 * row of attention_forward over a sequence of nk rows whose earlier queries are zero. */
static void cpu_decode_row(float *out, const float *q, const float *kr, const float *vr, int nk) {
    float *qs = calloc((size_t)nk * H * D, sizeof(float)), *os = malloc(sizeof(float) * nk * H * D);
    float *lse = malloc(sizeof(float) * nk * H), *scratch = malloc(sizeof(float) * attention_scratch_floats(nk, H, D));
    uint8_t *mask = malloc((size_t)nk);
    memset(mask, 1, (size_t)nk);
    memcpy(qs + (size_t)(nk - 1) * H * D, q, sizeof(float) * H * D);
    attention_forward(os, lse, qs, kr, vr, mask, 1, nk, H, HKV, D, H * D, H * D, KVD, KVD, scratch);
    memcpy(out, os + (size_t)(nk - 1) * H * D, sizeof(float) * H * D);
    free(qs), free(os), free(lse), free(scratch), free(mask);
}

static void check_decode(void) {
    /* slot 0: a prompt of 30 tokens; 1..3 continue it (3, 1 and 6 tokens of their own);
     * 4: a sequence of its own of 9 tokens. Rows: each child's last token, the
     * prefill of slot 3's six tokens, slot 4's last; the prompt's own last token. */
    int parent[SLOTS] = {-1, 0, 0, 0, -1}, parent_len[SLOTS] = {0, 30, 30, 30, 0}, len[SLOTS] = {30, 3, 1, 6, 9};
    int slots[] = {1, 2, 3, 3, 3, 3, 3, 3, 4, 0}, own[] = {2, 0, 0, 1, 2, 3, 4, 5, 8, 29};
    enum { R = sizeof slots / sizeof slots[0] };
    printf(" decoding: %d rows against %d slots (a 30-token prefix shared by 3), H %d, Hkv %d, D %d\n", R, SLOTS, H,
           HKV, D);
    size_t fo = sizeof(float), cache = (size_t)SLOTS * CAP * KVD;
    float *kc = randoms(cache, 1.5f), *vc = randoms(cache, 1.0f), *q = randoms((size_t)R * LDQD, 1.5f);
    float *want = malloc(fo * R * LDOD), *got = malloc(fo * R * LDOD), *one = malloc(fo * LDOD);
    float *kr = malloc(fo * (CAP * 2) * KVD), *vr = malloc(fo * (CAP * 2) * KVD);
    for (size_t i = 0; i < (size_t)R * LDOD; i++) want[i] = NAN;
    for (int r = 0; r < R; r++) { /* the row's keys: the parent's first parent_len, then its own */
        int s = slots[r], np = parent[s] >= 0 ? parent_len[s] : 0, nk = np + own[r] + 1;
        T_CHECK(own[r] < len[s], "row %d: token %d of slot %d's %d", r, own[r], s, len[s]);
        for (int i = 0; i < nk; i++) {
            size_t at = i < np ? ((size_t)parent[s] * CAP + i) * KVD : ((size_t)s * CAP + i - np) * KVD;
            memcpy(kr + (size_t)i * KVD, kc + at, fo * KVD), memcpy(vr + (size_t)i * KVD, vc + at, fo * KVD);
        }
        cpu_decode_row(want + (size_t)r * LDOD, q + (size_t)r * LDQD, kr, vr, nk);
    }
    CUdeviceptr d_kc = upload(kc, fo * cache), d_vc = upload(vc, fo * cache), d_q = upload(q, fo * R * LDQD),
                d_out = upload(want, fo * R * LDOD), d_slots = upload(slots, sizeof slots), d_own = upload(own, sizeof own),
                d_parent = upload(parent, sizeof parent), d_plen = upload(parent_len, sizeof parent_len);
    T_CHECK(!gpu_attention_decode(&dev, d_out, d_q, d_kc, d_vc, d_slots, d_own, d_parent, d_plen, R, CAP, H, HKV, D,
                                  LDOD, LDQD, &err),
            "%s", err.msg);
    download(got, d_out, fo * R * LDOD);
    compare("decode: out", got, want, (size_t)R * LDOD, 1e-5, 1e-4);
    size_t differ = 0; /* each row alone: the bits it got in the batch */
    for (int r = 0; r < R; r++) {
        T_CHECK(!gpu_attention_decode(&dev, d_out, d_q + fo * r * LDQD, d_kc, d_vc, d_slots + sizeof(int) * r,
                                      d_own + sizeof(int) * r, d_parent, d_plen, 1, CAP, H, HKV, D, LDOD, LDQD, &err),
                "%s", err.msg);
        download(one, d_out, fo * H * D);
        for (int j = 0; j < H * D; j++) differ += memcmp(&one[j], &got[(size_t)r * LDOD + j], fo) != 0;
    }
    printf("  %-34s %zu of %d values differ\n", "decode: each row alone = in batch", differ, R * H * D);
    T_CHECK(differ == 0, "decode: %zu values differ between a row alone and in the batch", differ);
    CUdeviceptr p[] = {d_kc, d_vc, d_q, d_out, d_slots, d_own, d_parent, d_plen};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) gpu_free(&dev, p[i]);
    free(kc), free(vc), free(q), free(want), free(got), free(one), free(kr), free(vr);
}

/* ---- bad sizes: refused before any launch, the message naming them ---- */

static void expect_refused(int r, const char *needle) {
    T_CHECK(r == -1 && strstr(err.msg, needle), "expected -1 and a message naming \"%s\"; got %d: %s", needle, r,
            err.msg);
    printf("  refused: %s\n", err.msg);
    err.msg[0] = 0;
}

static void check_bad_sizes(void) {
    CUdeviceptr x = 1;
    expect_refused(gpu_rope_forward(&dev, x, x, x, 4, 2, 63, 126, &err), "D = 63");
    expect_refused(gpu_attention_forward(&dev, x, x, x, x, x, 0, x, 1, 4, H, HKV, 258, 1, 1, 1, 1, &err), "D = 258");
    expect_refused(gpu_attention_forward(&dev, x, x, x, x, x, 0, x, 1, 4, 6, 4, D, 1, 1, 1, 1, &err), "H = 6");
    expect_refused(gpu_attention_backward(&dev, x, x, 0, x, x, x, x, x, x, 0, x, 1, 4, H, HKV, D, 1, 1, 1, 1, 1, 1, 1,
                                          1, &err),
                   "dk and dv");
    expect_refused(gpu_attention_decode(&dev, x, x, x, x, x, x, x, x, 1, 8, H, 0, D, 1, 1, &err), "Hkv = 0");
}

/* ---- GRPO_GPU_ATTENTION (gpu_open) ---- */

/* The switch's effect at Qwen2-0.5B's head shape: training and decoding on the plain
 * kernels within the same bounds, and a forward whose bits are not the tensor cores'
 * (the switch took the other kernels). */
static void check_plain_switch(void) {
    set_heads(4, 2, 64);
    if (dev.attention_plain) {
        printf(" GRPO_GPU_ATTENTION=plain is set: every case above ran on the plain kernels\n");
        return;
    }
    printf(" GRPO_GPU_ATTENTION=plain (dev.attention_plain) at D 64:\n");
    dev.attention_plain = 1;
    check_training(0);
    check_decode();
    Batch p = {.B = 2, .starts = {0, 7, 40}, .N = 40};
    p.mask = malloc((size_t)p.N);
    memset(p.mask, 1, (size_t)p.N);
    Tensors c;
    make_tensors(&c, p.N);
    c.d_mask = upload(p.mask, (size_t)p.N), c.d_starts = upload(p.starts, sizeof(int) * (p.B + 1));
    size_t n = (size_t)p.N * LDO, differ = 0;
    float *out[2];
    for (int plain = 0; plain < 2; plain++) {
        dev.attention_plain = plain;
        T_CHECK(!gpu_attention_forward(&dev, c.d_out, c.d_lse, c.d_q, c.d_k, c.d_v, c.d_mask, c.d_starts, p.B, p.N, H,
                                       HKV, D, LDO, LDQ, LDK, LDV, &err),
                "%s", err.msg);
        out[plain] = malloc(sizeof(float) * n);
        download(out[plain], c.d_out, sizeof(float) * n);
    }
    dev.attention_plain = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
    printf("  plain against tensor cores: %zu of %zu values differ in bits\n", differ, n);
    T_CHECK(differ > 0, "with attention_plain the forward gave the tensor cores' bits: the switch took no effect");
    free(out[0]), free(out[1]), free(p.mask);
    free_tensors(&c);
}

/* gpu_open reads GRPO_GPU_ATTENTION: plain sets attention_plain, tensor_cores and unset
 * leave it 0, anything else is refused in one line naming the variable, its value
 * escaped. Run with dev closed (a second open would load the module again). */
static void check_switch_values(void) {
    const char *had = getenv("GRPO_GPU_ATTENTION");
    char *saved = had ? strdup(had) : NULL;
    const char *values[] = {"plain", "tensor_cores", "", "Plain", "plain\n\x1b[2J"};
    int want[] = {1, 0, 0, -1, -1};
    for (int i = 0; i < 5; i++) {
        setenv("GRPO_GPU_ATTENTION", values[i], 1);
        GpuDevice d;
        char why[256] = "";
        GrpoErr e = {0};
        int r = gpu_open(&d, why, sizeof why, &e);
        if (want[i] < 0) {
            T_CHECK(r == -1 && strstr(e.msg, "GRPO_GPU_ATTENTION=\"") && strstr(e.msg, "tensor_cores") &&
                        !strchr(e.msg, '\n') && !strchr(e.msg, '\x1b'),
                    "GRPO_GPU_ATTENTION=%s: expected a one-line refusal, got %d: %s", values[i], r, e.msg);
            printf("  GRPO_GPU_ATTENTION refused: %s\n", e.msg);
        } else {
            T_CHECK(r == 1 && d.attention_plain == want[i], "GRPO_GPU_ATTENTION=\"%s\": open %d, attention_plain %d",
                    values[i], r, r == 1 ? d.attention_plain : -1);
        }
        if (r == 1) gpu_close(&d);
    }
    if (saved) setenv("GRPO_GPU_ATTENTION", saved, 1);
    else unsetenv("GRPO_GPU_ATTENTION");
    free(saved);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d, %d multiprocessors\n", dev.name, dev.cc_major, dev.cc_minor, dev.sms);
    check_rope(64);
    check_rope(300); /* 150 pairs: two runs of the block's 128 */
    /* Qwen2-0.5B's head dim and a group of 2; a group of 3 at D 256 (two columns a
     * thread, the fp32 kernel); no grouping at D 128; the tensor cores' smallest and an
     * odd number of their column blocks (D 8, 24); D 30 (the fp32 kernel) */
    int heads[6][3] = {{4, 2, 64}, {3, 1, 256}, {2, 2, 128}, {2, 1, 8}, {3, 3, 24}, {2, 1, 30}};
    for (int i = 0; i < 6; i++) {
        set_heads(heads[i][0], heads[i][1], heads[i][2]);
        check_training(i == 0);
        check_decode();
    }
    check_bad_sizes();
    check_plain_switch();
    gpu_close(&dev);
    check_switch_values();
}

int main(void) {
    return gpu_test_main("test_gpu_attention", check_all);
}
