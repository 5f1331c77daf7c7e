/* tests/model/test_batch.c — model/batch: the padded layout written out by hand
 * for a mixed batch (prompt + completion, one piece with its first target inside
 * it, one with no target at all), the gather/scatter round trip, the log-probs
 * and entropies of a batch equal to each sequence run alone through
 * model_forward + model_logprobs (tests/fixtures/qwen2 and llama), and a broken
 * BatchSeq contract aborting; and the LM head's backward fused into its forward
 * bit-identical to the two passes. Packed batches (no padding): their layout by
 * hand, and log-probs, entropies and every gradient equal to the padded batch's on
 * sequences of spread lengths, and split into micro-batches of 2 and 4. Shared
 * starts (padded_batch_fill_shared): the layout by hand, how many sequences fit a
 * reservation (padded_batch_shared_fit), and a group's log-probs
 * and entropies with its prompt computed once equal to each sequence laid out whole.
 *
 * Tolerance: batched against alone differ only by GEMM shapes (fp32 summation
 * order), so atol = rtol = 1e-5. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/batch.h"
#include "model/model_io.h"
#include "testutil.h"

static const int32_t p0[3] = {1, 2, 3}, c0[2] = {4, 5};       /* prompt + completion */
static const int32_t s1[6] = {7, 8, 9, 10, 11, 12};          /* one piece, targets from token 2 */
static const int32_t p2[2] = {5, 6}, c2[1] = {7};             /* first_target == length: none */

static void mixed(BatchSeq seqs[3]) {
    seqs[0] = (BatchSeq){p0, 3, c0, 2, 3};
    seqs[1] = (BatchSeq){s1, 6, NULL, 0, 2};
    seqs[2] = (BatchSeq){p2, 2, c2, 1, 3};
}

static void test_layout(void) {
    BatchSeq seqs[3];
    mixed(seqs);
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, 3, 0);
    T_CHECK(pb.S == 3 && pb.T == 6, "S %d T %d", pb.S, pb.T);
    const int32_t ids[18] = {1, 2, 3, 4, 5, 0, 7, 8, 9, 10, 11, 12, 5, 6, 7, 0, 0, 0};
    const uint8_t mask[18] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    /* position t predicts token t+1: sequence 0's targets 4, 5 at positions 2, 3;
     * sequence 1's tokens 2..5 at positions 1..4; sequence 2 none */
    const int32_t targets[18] = {-1, -1, 4, 5, -1, -1, -1, 9, 10, 11, 12, -1, -1, -1, -1, -1, -1, -1};
    const int offsets[4] = {0, 2, 6, 6}, row0[3] = {2, 7, 14};
    T_CHECK(!memcmp(pb.ids, ids, sizeof ids), "ids");
    T_CHECK(!memcmp(pb.mask, mask, sizeof mask), "mask");
    T_CHECK(!memcmp(pb.targets, targets, sizeof targets), "targets");
    T_CHECK(!memcmp(pb.offsets, offsets, sizeof offsets), "offsets %d %d %d %d", pb.offsets[0], pb.offsets[1],
            pb.offsets[2], pb.offsets[3]);
    T_CHECK(!memcmp(pb.row0, row0, sizeof row0), "row0 %d %d %d", pb.row0[0], pb.row0[1], pb.row0[2]);
    padded_batch_free(&pb);
    T_CHECK(pb.ids == NULL && pb.offsets == NULL && pb.S == 0, "free zeroes");
    padded_batch_free(&pb);

    /* a single sequence of one token: T = 1, no targets */
    BatchSeq one = {p0, 1, NULL, 0, 1};
    padded_batch_build(&pb, &one, 1, 0);
    T_CHECK(pb.T == 1 && pb.offsets[1] == 0 && pb.targets[0] == -1 && pb.mask[0] == 1, "one token");
    padded_batch_free(&pb);
}

static void test_gather_scatter(void) {
    BatchSeq seqs[3];
    mixed(seqs);
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, 3, 0);
    int N = pb.S * pb.T, K = pb.offsets[pb.S];
    float full[18], back[18], csr[6], csr2[6];
    for (int n = 0; n < N; n++) full[n] = 100.0f + n;
    padded_batch_gather(&pb, full, csr);
    const float want[6] = {102, 103, 107, 108, 109, 110};
    T_CHECK(K == 6 && !memcmp(csr, want, sizeof want), "gather: %g %g %g %g %g %g", csr[0], csr[1], csr[2], csr[3],
            csr[4], csr[5]);
    for (int n = 0; n < N; n++) back[n] = -1.0f; /* scatter must overwrite everything */
    padded_batch_scatter(&pb, csr, back);
    int ok = 1;
    for (int n = 0; n < N; n++) ok &= back[n] == (pb.targets[n] >= 0 ? full[n] : 0.0f);
    T_CHECK(ok, "scatter: the target positions, zero elsewhere");
    padded_batch_gather(&pb, back, csr2);
    T_CHECK(!memcmp(csr, csr2, sizeof csr), "gather(scatter(x)) == x");
    padded_batch_free(&pb);
}

/* The mixed batch packed: sequence i at positions start[i] .., no padding. */
static void test_packed_layout(void) {
    BatchSeq seqs[3];
    mixed(seqs);
    PaddedBatch pb;
    padded_batch_build(&pb, seqs, 3, 1);
    T_CHECK(pb.packed && pb.S == 3 && pb.N == 14, "S %d N %d", pb.S, pb.N);
    const int32_t ids[14] = {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 5, 6, 7};
    const int32_t targets[14] = {-1, -1, 4, 5, -1, -1, 9, 10, 11, 12, -1, -1, -1, -1};
    const int start[4] = {0, 5, 11, 14}, offsets[4] = {0, 2, 6, 6}, row0[3] = {2, 6, 13};
    int ones = 1;
    for (int n = 0; n < 14; n++) ones &= pb.mask[n] == 1;
    T_CHECK(!memcmp(pb.ids, ids, sizeof ids) && ones, "packed ids and mask");
    T_CHECK(!memcmp(pb.targets, targets, sizeof targets), "packed targets");
    T_CHECK(!memcmp(pb.start, start, sizeof start), "packed starts %d %d %d %d", pb.start[0], pb.start[1],
            pb.start[2], pb.start[3]);
    T_CHECK(!memcmp(pb.offsets, offsets, sizeof offsets), "packed offsets");
    T_CHECK(!memcmp(pb.row0, row0, sizeof row0), "packed row0 %d %d %d", pb.row0[0], pb.row0[1], pb.row0[2]);
    float full[14], back[14], csr[6];
    for (int n = 0; n < 14; n++) full[n] = 100.0f + n, back[n] = -1.0f;
    padded_batch_gather(&pb, full, csr);
    const float want[6] = {102, 103, 106, 107, 108, 109};
    T_CHECK(!memcmp(csr, want, sizeof want), "packed gather: %g %g %g %g %g %g", csr[0], csr[1], csr[2], csr[3],
            csr[4], csr[5]);
    padded_batch_scatter(&pb, csr, back);
    int ok = 1;
    for (int n = 0; n < 14; n++) ok &= back[n] == (pb.targets[n] >= 0 ? full[n] : 0.0f);
    T_CHECK(ok, "packed scatter: the target positions, zero elsewhere");
    padded_batch_free(&pb);
    /* a reservation holds packed tokens: 3 sequences of up to 6 tokens pack in 14 */
    padded_batch_reserve(&pb, 3, 14, 1);
    padded_batch_fill(&pb, seqs, 3);
    T_CHECK(pb.N == 14 && pb.cap_tokens == 14, "packed fill within 14 positions");
    padded_batch_free(&pb);
}

/* tests/fixtures/NAME loaded; 1 (a failed check) when it does not load. */
static int load_fixture(const char *name, Model *m) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    GrpoErr err;
    if (!model_load(m, dir, &err)) return 0;
    T_CHECK(0, "model_load %s: %s", dir, err.msg);
    return 1;
}

/* The fixture loaded, and the mixed batch built; 1 (a failed check) when it does
 * not load. */
static int open_fixture(const char *name, Model *m, BatchSeq seqs[3], PaddedBatch *pb) {
    if (load_fixture(name, m)) return 1;
    mixed(seqs);
    padded_batch_build(pb, seqs, 3, 0);
    return 0;
}

static void check_model(const char *name) {
    Model m;
    BatchSeq seqs[3];
    PaddedBatch pb;
    if (open_fixture(name, &m, seqs, &pb)) return;
    Activations a;
    acts_create(&a, &m.cfg, pb.S * pb.T, 0, 4, 0);
    int K = pb.offsets[pb.S];
    float inv_temp = 1.0f / 0.7f, logp[6], ent[6], logp2[6];
    padded_batch_logprobs(&m, &a, &pb, NULL, inv_temp, logp, ent);
    padded_batch_logprobs(&m, &a, &pb, NULL, inv_temp, logp2, NULL);
    T_CHECK(!memcmp(logp, logp2, sizeof(float) * K), "%s: log-probs without entropies are the same", name);
    int finite = 1;
    for (int k = 0; k < K; k++) finite &= logp[k] < 0 && ent[k] > 0;
    T_CHECK(finite, "%s: log-probs < 0, entropies > 0", name);

    /* each sequence alone, unpadded, through the model directly */
    for (int i = 0; i < 3; i++) {
        int L = seqs[i].na + seqs[i].nb, ft = seqs[i].first_target, nt = L - ft;
        int32_t ids[8], tg[8];
        uint8_t mask[8];
        float lp[8], en[8];
        memcpy(ids, seqs[i].a, sizeof(int32_t) * seqs[i].na);
        if (seqs[i].nb) memcpy(ids + seqs[i].na, seqs[i].b, sizeof(int32_t) * seqs[i].nb);
        for (int t = 0; t < L; t++) mask[t] = 1, tg[t] = t + 1 >= ft && t + 1 < L ? ids[t + 1] : -1;
        model_forward(&m, &a, ids, mask, 1, L, NULL);
        model_logprobs(&m, &a, tg, inv_temp, lp, en);
        T_CHECK(pb.offsets[i + 1] - pb.offsets[i] == nt, "%s: sequence %d has %d targets", name, i, nt);
        double want_lp[8], want_en[8];
        for (int j = 0; j < nt; j++) want_lp[j] = lp[ft - 1 + j], want_en[j] = en[ft - 1 + j];
        char what[64];
        snprintf(what, sizeof what, "%s seq %d logp", name, i);
        T_CLOSE_ARRAY(what, logp + pb.offsets[i], want_lp, nt, 1e-5, 1e-5);
        snprintf(what, sizeof what, "%s seq %d entropy", name, i);
        T_CLOSE_ARRAY(what, ent + pb.offsets[i], want_en, nt, 1e-5, 1e-5);
    }
    acts_free(&a);
    padded_batch_free(&pb);
    model_free(&m);
}

/* A token-local objective's gradient: a function of the token's index and log-prob. */
static float grad_of(int j, float logp) { return (float)(0.01 * (j + 1) - 0.5 * exp((double)logp)); }

static void grad_fn(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    int *calls = ctx;
    (*calls)++;
    for (int i = 0; i < m; i++) dlogp[i] = grad_of(js[i], logp[i]);
}

/* The LM head's backward run alongside its forward (padded_batch_logprobs_train)
 * gives the log-probs, entropies and every gradient of the two-pass way bit for
 * bit, the head chunked (2 rows) so that several chunks call the gradient. */
static void check_fused_head(const char *name) {
    Model m;
    BatchSeq seqs[3];
    PaddedBatch pb;
    if (open_fixture(name, &m, seqs, &pb)) return;
    int N = pb.S * pb.T, K = pb.offsets[pb.S];
    Activations a;
    acts_create(&a, &m.cfg, N, 1, 2, 0);
    float inv_temp = 1.0f / 0.7f, lp[2][6], en[2][6], dcsr[6], *dfull = xmalloc(sizeof(float) * N);
    float *g[2];
    ModelView gv[2];
    for (int k = 0; k < 2; k++) {
        g[k] = xcalloc(m.table.total, sizeof(float));
        params_view(&gv[k], &m.table, &m.cfg, g[k]);
    }
    /* two passes into the same gradients: the second accumulates */
    for (int pass = 0; pass < 2; pass++) {
        padded_batch_logprobs(&m, &a, &pb, NULL, inv_temp, lp[0], en[0]);
        for (int j = 0; j < K; j++) dcsr[j] = grad_of(j, lp[0][j]);
        padded_batch_scatter(&pb, dcsr, dfull);
        model_backward(&m, &a, &(ModelGrads){&gv[0], NULL, NULL, NULL}, dfull, NULL);

        int calls = 0;
        ModelGrads fg = {&gv[1], NULL, NULL, NULL};
        padded_batch_logprobs_train(&m, &a, &pb, NULL, inv_temp, lp[1], en[1], &fg, &(LogprobGrad){.fn = grad_fn, .ctx = &calls});
        T_CHECK(calls == 3, "%s: the gradient was asked for chunk by chunk (%d calls, want 3)", name, calls);
        model_backward(&m, &a, &fg, NULL, NULL);
    }
    T_CHECK(!memcmp(lp[0], lp[1], sizeof(float) * K), "%s: fused log-probs differ", name);
    T_CHECK(!memcmp(en[0], en[1], sizeof(float) * K), "%s: fused entropies differ", name);
    size_t diff = 0, nonzero = 0;
    for (size_t i = 0; i < m.table.total; i++) diff += g[0][i] != g[1][i], nonzero += g[0][i] != 0.0f;
    T_CHECK(diff == 0 && nonzero > m.table.total / 2, "%s: fused gradients: %zu of %zu differ (%zu nonzero)", name,
            diff, m.table.total, nonzero);
    for (int k = 0; k < 2; k++) params_view_free(&gv[k]), free(g[k]);
    free(dfull);
    acts_free(&a);
    padded_batch_free(&pb);
    model_free(&m);
}

/* grad_fn for a micro-batch whose targets start at index base of the whole. */
typedef struct {
    int base, calls;
} ShiftedGrad;

static void shifted_grad_fn(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    ShiftedGrad *s = ctx;
    s->calls++;
    for (int i = 0; i < m; i++) dlogp[i] = grad_of(s->base + js[i], logp[i]);
}

/* Sequences of spread lengths (1 .. 40 tokens, targets from a varying first
 * one), padded and packed: the same log-probs, entropies and gradients of a
 * token-local objective (through the fused head, two micro-batches accumulated).
 * Each row's computation is the same either way but for the GEMMs' rounding at
 * the other shape (attention over T = the sequence's length instead of the
 * longest); measured: the largest difference is printed, held to 1e-5. */
static void check_packed(const char *name) {
    Model m;
    if (load_fixture(name, &m)) return;
    enum { S = 6 };
    static const int len[S] = {40, 3, 17, 1, 29, 8}, first[S] = {12, 1, 5, 1, 28, 2};
    int32_t ids[S][40];
    BatchSeq seqs[S];
    for (int i = 0; i < S; i++) {
        for (int t = 0; t < len[i]; t++) ids[i][t] = (int32_t)((7 * i + 13 * t + t * t) % m.cfg.vocab_size);
        seqs[i] = (BatchSeq){ids[i], len[i], NULL, 0, first[i]};
    }
    PaddedBatch pb[2];
    padded_batch_build(&pb[0], seqs, S, 0);
    padded_batch_build(&pb[1], seqs, S, 1);
    T_CHECK(pb[0].N == S * 40 && pb[1].N == 98, "%s: padded %d positions, packed %d (want 240, 98)", name, pb[0].N,
            pb[1].N);
    int K = pb[0].offsets[S];
    Activations a;
    acts_create(&a, &m.cfg, pb[0].N, 0, 16, 0);
    float lp[2][128], en[2][128];
    float *g[2];
    ModelView gv[2];
    for (int k = 0; k < 2; k++) {
        g[k] = xcalloc(m.table.total, sizeof(float));
        params_view(&gv[k], &m.table, &m.cfg, g[k]);
        for (int rep = 0; rep < 2; rep++) {
            int calls = 0;
            ModelGrads fg = {&gv[k], NULL, NULL, NULL};
            padded_batch_logprobs_train(&m, &a, &pb[k], NULL, 1.0f / 0.7f, lp[k], en[k], &fg,
                                        &(LogprobGrad){.fn = grad_fn, .ctx = &calls});
            model_backward(&m, &a, &fg, NULL, NULL);
        }
    }
    double dlp = 0, den = 0, dg = 0, gmax = 0;
    for (int j = 0; j < K; j++) dlp = fmax(dlp, fabs(lp[0][j] - lp[1][j])), den = fmax(den, fabs(en[0][j] - en[1][j]));
    for (size_t i = 0; i < m.table.total; i++) dg = fmax(dg, fabs(g[0][i] - g[1][i])), gmax = fmax(gmax, fabs(g[0][i]));
    /* split invariance, packed: the six as micro-batches of 2 and 4, accumulated,
     * give the one micro-batch's gradient (the objective's index j counted
     * over the six) */
    float *gs = xcalloc(m.table.total, sizeof(float));
    ModelView gsv;
    params_view(&gsv, &m.table, &m.cfg, gs);
    double dsplit_lp = 0;
    for (int rep = 0; rep < 2; rep++)
        for (int part = 0; part < 2; part++) {
            int s0 = part ? 2 : 0, ns = part ? 4 : 2;
            PaddedBatch mb;
            padded_batch_build(&mb, seqs + s0, ns, 1);
            ShiftedGrad sh = {pb[1].offsets[s0], 0};
            float slp[128];
            ModelGrads fg = {&gsv, NULL, NULL, NULL};
            padded_batch_logprobs_train(&m, &a, &mb, NULL, 1.0f / 0.7f, slp, NULL, &fg,
                                        &(LogprobGrad){.fn = shifted_grad_fn, .ctx = &sh});
            model_backward(&m, &a, &fg, NULL, NULL);
            for (int j = 0; j < mb.offsets[ns]; j++) dsplit_lp = fmax(dsplit_lp, fabs(slp[j] - lp[1][sh.base + j]));
            padded_batch_free(&mb);
        }
    double dsplit = 0;
    for (size_t i = 0; i < m.table.total; i++) dsplit = fmax(dsplit, fabs(gs[i] - g[1][i]));
    params_view_free(&gsv), free(gs);
    printf("%s packed vs padded: log-probs %.3g, entropies %.3g, gradients %.3g (of max |g| %.3g)\n", name, dlp, den,
           dg, gmax);
    printf("%s packed, split 2 + 4 vs one micro-batch: log-probs %.3g, gradients %.3g\n", name, dsplit_lp, dsplit);
    T_CHECK(dsplit_lp <= 1e-5 && dsplit <= 1e-5 * gmax, "%s: packed split changes the gradients by %.3g of %.3g", name, dsplit, gmax);
    T_CHECK(K == 49, "%s: %d targets, want 49", name, K);
    T_CHECK(dlp <= 1e-5 && den <= 1e-5, "%s: packed log-probs/entropies differ by %.3g/%.3g", name, dlp, den);
    T_CHECK(gmax > 0 && dg <= 1e-5 * gmax, "%s: packed gradients differ by %.3g of %.3g", name, dg, gmax);
    for (int k = 0; k < 2; k++) params_view_free(&gv[k]), free(g[k]), padded_batch_free(&pb[k]);
    acts_free(&a);
    model_free(&m);
}

/* Sequences that begin alike, laid out by padded_batch_fill_shared: each keeps from
 * the row predicting its first target on; what it skips is the earlier whole
 * sequence's that begins most like it. */
static void test_shared_layout(void) {
    static const int32_t P[4] = {1, 2, 3, 4}, c0[3] = {5, 6, 7}, c1[2] = {8, 9}, Q[3] = {1, 2, 7}, c2[2] = {3, 3},
                         s3[6] = {1, 2, 3, 4, 8, 9};
    BatchSeq seqs[5] = {
        {P, 4, c0, 3, 4},    /* whole: 7 rows */
        {P, 4, c1, 2, 4},    /* P[0..2] from 0: rows P[3] 8 9 */
        {Q, 3, c2, 2, 3},    /* shares 1 2 with 0 or 1; 0 is whole: rows 7 3 3 */
        {s3, 6, NULL, 0, 2}, /* its first target is token 2: skips 1 token only */
        {s3, 6, NULL, 0, 5}, /* the same tokens as 1 (skipped there): from 0, 4 tokens (1 2 3 4) */
    };
    PaddedBatch pb;
    padded_batch_reserve(&pb, 5, 40, 1);
    padded_batch_fill_shared(&pb, seqs, 5);
    const int skip[5] = {0, 3, 2, 1, 4}, from[5] = {-1, 0, 0, 0, 0}, start[6] = {0, 7, 10, 13, 18, 20};
    const int32_t ids[20] = {1, 2, 3, 4, 5, 6, 7, 4, 8, 9, 7, 3, 3, 2, 3, 4, 8, 9, 8, 9};
    const int32_t tg[20] = {-1, -1, -1, 5, 6, 7, -1, 8, 9, -1, 3, 3, -1, 3, 4, 8, 9, -1, 9, -1};
    const int row0[5] = {3, 7, 10, 13, 18}, offsets[6] = {0, 3, 5, 7, 11, 12};
    T_CHECK(pb.shared && pb.N == 20, "shared %d N %d (want 20)", pb.shared, pb.N);
    T_CHECK(!memcmp(pb.skip, skip, sizeof skip) && !memcmp(pb.from, from, sizeof from), "skip %d %d %d %d %d from %d %d %d %d %d",
            pb.skip[0], pb.skip[1], pb.skip[2], pb.skip[3], pb.skip[4], pb.from[0], pb.from[1], pb.from[2], pb.from[3],
            pb.from[4]);
    T_CHECK(!memcmp(pb.start, start, sizeof start), "shared starts");
    T_CHECK(!memcmp(pb.ids, ids, sizeof ids) && !memcmp(pb.targets, tg, sizeof tg), "shared ids and targets");
    T_CHECK(!memcmp(pb.row0, row0, sizeof row0) && !memcmp(pb.offsets, offsets, sizeof offsets), "shared row0, offsets");
    /* nothing alike: the packed layout, not marked shared */
    BatchSeq apart[2] = {{P, 4, c0, 3, 4}, {c1, 2, P, 4, 1}};
    padded_batch_fill_shared(&pb, apart, 2);
    T_CHECK(!pb.shared && pb.N == 13 && pb.start[1] == 7, "nothing alike: shared %d N %d", pb.shared, pb.N);
    padded_batch_fill(&pb, seqs, 5);
    T_CHECK(!pb.shared && pb.N == 30, "padded_batch_fill does not share: N %d", pb.N);
    padded_batch_free(&pb);
    /* how many fit a reservation: their own rows 7, 3, 3, 5, 2 (whole: 7, 6, 5, 6, 6) */
    static const int caps[][3] = {{5, 40, 5}, {5, 20, 5}, {5, 19, 4}, {5, 13, 3}, {5, 12, 2}, {5, 9, 1}, {2, 40, 2}};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        padded_batch_reserve(&pb, caps[k][0], caps[k][1], 1);
        int S = padded_batch_shared_fit(&pb, seqs, 5);
        padded_batch_fill_shared(&pb, seqs, S);
        T_CHECK(S == caps[k][2] && pb.N <= caps[k][1], "%d sequences, %d tokens reserved: %d fit (want %d), N %d", caps[k][0],
                caps[k][1], S, caps[k][2], pb.N);
        T_CHECK(padded_batch_shared_fit(&pb, seqs, 1) == 1, "one sequence fits");
        padded_batch_free(&pb);
    }
}

/* A group's completions after one prompt (and a sequence apart, one sharing part of
 * it): log-probs and entropies with the prompt computed once equal the packed
 * batch's, each completion laid out whole — the same rows through the same
 * attention call; measured, the largest difference printed, held to 1e-5 (the
 * GEMMs' rounding at the other shape). */
static void check_shared(const char *name) {
    Model m;
    if (load_fixture(name, &m)) return;
    enum { S = 7, NP = 21 };
    static const int nc[S] = {9, 1, 30, 12, 5, 17, 8};
    int32_t prompt[NP], other[NP], comp[S][30];
    for (int t = 0; t < NP; t++) prompt[t] = (int32_t)((5 + 11 * t + t * t) % m.cfg.vocab_size), other[t] = prompt[t];
    for (int t = 9; t < NP; t++) other[t] = (int32_t)((3 + 7 * t) % m.cfg.vocab_size); /* shares 9 tokens */
    BatchSeq seqs[S];
    for (int i = 0; i < S; i++) {
        for (int t = 0; t < nc[i]; t++) comp[i][t] = (int32_t)((17 * i + 5 * t + 3 * t * t) % m.cfg.vocab_size);
        seqs[i] = (BatchSeq){i == 4 ? other : prompt, NP, comp[i], nc[i], NP};
    }
    PaddedBatch pb[2];
    padded_batch_reserve(&pb[0], S, S * (NP + 30), 1);
    padded_batch_reserve(&pb[1], S, S * (NP + 30), 1);
    padded_batch_fill(&pb[0], seqs, S);
    padded_batch_fill_shared(&pb[1], seqs, S);
    int K = pb[0].offsets[S];
    T_CHECK(pb[1].shared && pb[1].N == pb[0].N - 5 * (NP - 1) - 9 && pb[1].offsets[S] == K, "%s: shared %d rows, %d whole",
            name, pb[1].N, pb[0].N);
    Activations a;
    acts_create(&a, &m.cfg, pb[0].N, 0, 16, 0);
    float lp[2][128], en[2][128];
    for (int k = 0; k < 2; k++) padded_batch_logprobs(&m, &a, &pb[k], NULL, 1.0f / 0.7f, lp[k], en[k]);
    double dlp = 0, den = 0;
    for (int j = 0; j < K; j++) dlp = fmax(dlp, fabs(lp[0][j] - lp[1][j])), den = fmax(den, fabs(en[0][j] - en[1][j]));
    printf("%s prompt computed once vs each whole: log-probs %.3g, entropies %.3g (%d rows instead of %d)\n", name, dlp,
           den, pb[1].N, pb[0].N);
    T_CHECK(K == 82 && dlp <= 1e-5 && den <= 1e-5, "%s: shared log-probs/entropies differ by %.3g/%.3g", name, dlp, den);
    for (int k = 0; k < 2; k++) padded_batch_free(&pb[k]);
    acts_free(&a);
    model_free(&m);
}

/* 1 when building seqs[S] aborts (a CHECK), run in a child. */
static int build_aborts(const BatchSeq *seqs, int S) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        PaddedBatch pb;
        padded_batch_build(&pb, seqs, S, 0);
        _exit(0);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void test_contract(void) {
    BatchSeq bad[4] = {
        {p0, 3, c0, 2, 0},    /* first_target 0: position -1 */
        {p0, 3, c0, 2, 6},    /* past the end */
        {p0, 3, NULL, 2, 3},  /* nb without b */
        {p0, 0, NULL, 0, 1},  /* empty sequence */
    };
    for (int i = 0; i < 4; i++) T_CHECK(build_aborts(&bad[i], 1), "bad sequence %d accepted", i);
    T_CHECK(build_aborts(bad, 0), "S = 0 accepted");
    BatchSeq good = {p0, 3, c0, 2, 5};
    T_CHECK(!build_aborts(&good, 1), "first_target == length is allowed");
}

int main(void) {
    test_layout();
    test_gather_scatter();
    test_packed_layout();
    test_shared_layout();
    check_packed("qwen2");
    check_packed("llama");
    check_model("qwen2");
    check_model("llama");
    check_shared("qwen2");
    check_shared("llama");
    check_fused_head("qwen2"); /* tied embeddings */
    check_fused_head("llama");
    test_contract();
    return t_summary("test_batch");
}
