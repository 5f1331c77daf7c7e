/* tests/ops/test_ops_fd.c — every op's backward against finite differences, and the
 * fp32 kernels (ops/ops.h) against the double references (tests/ref/ref_ops.h).
 *
 * (a) Finite differences. For each op, a random scalar loss L = Σ w·output (w random)
 *     is evaluated with the double reference forward; its central difference
 *     (L(x+h) - L(x-h)) / 2h, h = 1e-5·max(1,|x|), is taken over EVERY element of every
 *     input and weight and compared with the double reference backward fed dout = w.
 *     Rule: |bwd - fd| <= 1e-8·max|fd| + 1e-7·|fd| (max over the tensor).
 * (b) fp32 vs double. The fp32 kernels run on float data; the references run on the
 *     same values widened to double. Every output and gradient must satisfy
 *         |got - want| <= atol + rtol·|want|,  rtol = 1e-5,  atol = 1e-5·max|want|
 *     with max|want| taken over the tensor compared. Also checked: backward
 *     ACCUMULATES (two calls on a pre-filled gradient give prefill + 2·grad), "written"
 *     gradients (swiglu dgu, attention dq) ignore what was there, NULL gradients are
 *     skipped, kernels never write into the gaps of strided rows (inputs' gaps hold
 *     NaN, outputs' gaps a sentinel that must survive), and logprob gives the same
 *     result for chunk_rows 1, 3 and N.
 * Undefined entries are not compared: attention lse of a query with no key, logprob
 * lse of a row with target < 0.
 *
 * Shapes are small (tens to hundreds of elements per tensor) so the O(n) forward
 * evaluations of (a) stay well under a second even under ASan/UBSan at -O1. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/ops.h"
#include "ref/ref_ops.h"
#include "testutil.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) * 0x1.0p-52 - 1.0; } /* [-1,1) */
static int irand(int n) { return (int)(rng_next() % (uint64_t)n); }

static double *dnew(long n) { return xcalloc((size_t)n, sizeof(double)); }
static float *fnew(long n) { return xcalloc((size_t)n, sizeof(float)); }

/* Random values, exactly representable in float, in [-scale, scale). */
static void fill(double *x, long n, double scale) {
    for (long i = 0; i < n; i++) x[i] = (float)(scale * urand());
}
static void fill_strided(double *x, int rows, int cols, int ld, double scale, double gap) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++) x[(long)r * ld + c] = c < cols ? (float)(scale * urand()) : gap;
}
static float *to_f(const double *x, long n) {
    float *f = fnew(n);
    for (long i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static double *dup_d(const double *x, long n) {
    double *d = dnew(n);
    memcpy(d, x, sizeof(double) * n);
    return d;
}
static double dot_strided(const double *a, const double *b, int rows, int cols, int lda, int ldb) {
    double s = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) s += a[(long)r * lda + c] * b[(long)r * ldb + c];
    return s;
}

/* ---- (a) finite differences ---- */

#define FD_RTOL 1e-7
#define FD_ATOL_REL 1e-8

typedef double (*LossFn)(void *ctx);

/* grad (row stride ldg) against central differences of loss() w.r.t. x[rows, cols]
 * (row stride ldx), which loss() reads through ctx. */
static void fd_check(const char *what, double *x, int ldx, const double *grad, int ldg, int rows,
                     int cols, LossFn loss, void *ctx) {
    long n = (long)rows * cols;
    double *fd = dnew(n), maxfd = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double *p = x + (long)r * ldx + c, x0 = *p, h = 1e-5 * fmax(1.0, fabs(x0));
            *p = x0 + h;
            double lp = loss(ctx), xp = *p;
            *p = x0 - h;
            double lm = loss(ctx), xm = *p;
            *p = x0;
            fd[(long)r * cols + c] = (lp - lm) / (xp - xm);
            maxfd = fmax(maxfd, fabs(fd[(long)r * cols + c]));
        }
    double atol = FD_ATOL_REL * maxfd + 1e-300, worst = 0, worst_ratio = 0;
    long worst_i = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double f = fd[(long)r * cols + c], g = grad[(long)r * ldg + c];
            double err = fabs(g - f), ratio = err / (atol + FD_RTOL * fabs(f));
            if (isnan(g) || ratio > worst_ratio) {
                worst_ratio = isnan(g) ? INFINITY : ratio;
                worst = err;
                worst_i = (long)r * cols + c;
            }
        }
    printf("  fd  %-28s n=%-5ld max|g|=%-9.3g worst err %.2e (%.2e of max, %.2f of tol)\n", what,
           n, maxfd, worst, maxfd > 0 ? worst / maxfd : 0.0, worst_ratio);
    T_CHECK(maxfd > 0, "%s: gradient is identically zero", what);
    T_CHECK(worst_ratio <= 1.0, "%s: element %ld bwd %.12g fd %.12g", what, worst_i,
            grad[worst_i / cols * ldg + worst_i % cols], fd[worst_i]);
    free(fd);
}

/* ---- (b) fp32 vs double ---- */

#define RTOL 1e-5
#define ATOL_REL 1e-5
#define GAP_SENTINEL -12345.0f

/* got[rows, cols] (stride ldg) against want (stride ldw); keep[r] (may be NULL) selects
 * rows. Rule in the header comment. */
static void cmp_rows(const char *what, const float *got, int ldg, const double *want, int ldw,
                     int rows, int cols, const uint8_t *keep) {
    long n = 0;
    float *g = fnew((long)rows * cols);
    double *w = dnew((long)rows * cols), maxw = 0, worst = 0;
    for (int r = 0; r < rows; r++) {
        if (keep && !keep[r]) continue;
        for (int c = 0; c < cols; c++, n++) {
            g[n] = got[(long)r * ldg + c];
            w[n] = want[(long)r * ldw + c];
            maxw = fmax(maxw, fabs(w[n]));
        }
    }
    for (long i = 0; i < n; i++) worst = fmax(worst, fabs(g[i] - w[i]));
    printf("  f32 %-28s n=%-5ld max|want|=%-9.3g worst err %.2e (%.2e of max)\n", what, n, maxw,
           worst, maxw > 0 ? worst / maxw : 0.0);
    if (!T_CLOSE_ARRAY(what, g, w, n, ATOL_REL * maxw, RTOL))
        fprintf(stderr, "     (element i is row i / %d, column i %% %d of the %s compared)\n",
                cols, cols, keep ? "selected rows" : "rows");
    free(g);
    free(w);
}
static void cmp(const char *what, const float *got, const double *want, long n) {
    cmp_rows(what, got, (int)n, want, (int)n, 1, (int)n, NULL);
}

/* Columns [cols, ld) of every row must still hold the sentinel. */
static void check_gaps(const char *what, const float *x, int rows, int cols, int ld) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = cols; c < ld; c++) bad += x[(long)r * ld + c] != GAP_SENTINEL;
    T_CHECK(bad == 0, "%s: %ld gap elements overwritten", what, bad);
}

/* A gradient buffer pre-filled with random values, in both precisions. */
typedef struct {
    double *d;
    float *f;
} Prefill;
static Prefill prefill(long n) {
    Prefill p = {dnew(n), NULL};
    fill(p.d, n, 1.0);
    p.f = to_f(p.d, n);
    return p;
}
/* want = prefill + times·grad */
static double *plus(const double *pre, const double *grad, long n, double times) {
    double *w = dnew(n);
    for (long i = 0; i < n; i++) w[i] = pre[i] + times * grad[i];
    return w;
}

/* ================================================================= matmul */

typedef struct {
    double *out, *in, *W, *bias, *w;
    int N, I, O;
} MatmulCtx;
static double matmul_loss(void *p) {
    MatmulCtx *c = p;
    ref_matmul_forward(c->out, c->in, c->W, c->bias, c->N, c->I, c->O);
    return dot_strided(c->out, c->w, 1, c->N * c->O, 0, 0);
}

static void test_matmul(int N, int I, int O, int with_bias, int do_fd) {
    printf("matmul N=%d I=%d O=%d bias=%d\n", N, I, O, with_bias);
    MatmulCtx c = {dnew((long)N * O), dnew((long)N * I), dnew((long)O * I),
                   with_bias ? dnew(O) : NULL, dnew((long)N * O), N, I, O};
    fill(c.in, (long)N * I, 1.0);
    fill(c.W, (long)O * I, 1.0);
    if (c.bias) fill(c.bias, O, 1.0);
    fill(c.w, (long)N * O, 1.0);
    double *din = dnew((long)N * I), *dW = dnew((long)O * I), *db = dnew(O);
    ref_matmul_backward(din, dW, with_bias ? db : NULL, c.w, c.in, c.W, N, I, O);
    if (do_fd) {
        fd_check("matmul din", c.in, I, din, I, N, I, matmul_loss, &c);
        fd_check("matmul dW", c.W, I, dW, I, O, I, matmul_loss, &c);
        if (c.bias) fd_check("matmul dbias", c.bias, O, db, O, 1, O, matmul_loss, &c);
    }
    /* fp32 */
    ref_matmul_forward(c.out, c.in, c.W, c.bias, N, I, O);
    float *in = to_f(c.in, (long)N * I), *W = to_f(c.W, (long)O * I);
    float *bias = c.bias ? to_f(c.bias, O) : NULL, *dout = to_f(c.w, (long)N * O);
    float *out = fnew((long)N * O);
    matmul_forward(out, in, W, bias, N, I, O);
    cmp("matmul out", out, c.out, (long)N * O);
    Prefill pin = prefill((long)N * I), pW = prefill((long)O * I), pb = prefill(O);
    float *fdin = fnew((long)N * I), *fdW = fnew((long)O * I), *fdb = fnew(O);
    matmul_backward(fdin, fdW, bias ? fdb : NULL, dout, in, W, N, I, O, 0);
    cmp("matmul din", fdin, din, (long)N * I);
    cmp("matmul dW", fdW, dW, (long)O * I);
    if (bias) cmp("matmul dbias", fdb, db, O);
    for (int rep = 0; rep < 2; rep++)
        matmul_backward(pin.f, pW.f, bias ? pb.f : NULL, dout, in, W, N, I, O, 0);
    /* din is written over (its prefill not read), dW and dbias accumulate */
    double *w2 = plus(pW.d, dW, (long)O * I, 2), *w3 = plus(pb.d, db, O, bias ? 2 : 0);
    cmp("matmul din written over", pin.f, din, (long)N * I);
    cmp("matmul dW accumulates", pW.f, w2, (long)O * I);
    cmp("matmul dbias accum/NULL", pb.f, w3, O);
    /* write_dw: dW and dbias written over a NaN prefill (not read) */
    for (long i = 0; i < (long)O * I; i++) pW.f[i] = NAN;
    for (int o = 0; o < O; o++) pb.f[o] = NAN;
    matmul_backward(pin.f, pW.f, bias ? pb.f : NULL, dout, in, W, N, I, O, 1);
    cmp("matmul dW written (write_dw)", pW.f, dW, (long)O * I);
    if (bias) cmp("matmul dbias written (write_dw)", pb.f, db, O);
    /* NULL din and dbias: only dW */
    memset(fdW, 0, sizeof(float) * O * I);
    matmul_backward(NULL, fdW, NULL, dout, in, W, N, I, O, 0);
    cmp("matmul dW (din=NULL)", fdW, dW, (long)O * I);
    for (long i = 0; i < (long)N * I; i++) fdin[i] = NAN; /* not read */
    matmul_backward(fdin, NULL, NULL, dout, in, W, N, I, O, 0);
    cmp("matmul din (dW=NULL)", fdin, din, (long)N * I);
    free(c.out), free(c.in), free(c.W), free(c.bias), free(c.w), free(din), free(dW), free(db);
    free(in), free(W), free(bias), free(dout), free(out), free(fdin), free(fdW), free(fdb);
    free(pin.d), free(pin.f), free(pW.d), free(pW.f), free(pb.d), free(pb.f);
    free(w2), free(w3);
}

/* ================================================================= embedding */

typedef struct {
    double *out, *table, *w;
    int32_t *ids;
    int N, C;
} EmbCtx;
static double emb_loss(void *p) {
    EmbCtx *c = p;
    ref_embedding_forward(c->out, c->ids, c->table, c->N, c->C);
    return dot_strided(c->out, c->w, 1, c->N * c->C, 0, 0);
}

static void test_embedding(int N, int C, int V) {
    printf("embedding N=%d C=%d V=%d\n", N, C, V);
    EmbCtx c = {dnew((long)N * C), dnew((long)V * C), dnew((long)N * C), xmalloc(sizeof(int32_t) * N),
                N, C};
    for (int n = 0; n < N; n++) c.ids[n] = n < 2 ? 1 : irand(V); /* id 1 repeats */
    fill(c.table, (long)V * C, 1.0);
    fill(c.w, (long)N * C, 1.0);
    double *dt = dnew((long)V * C);
    ref_embedding_backward(dt, c.w, c.ids, N, C);
    fd_check("embedding dtable", c.table, C, dt, C, V, C, emb_loss, &c);
    emb_loss(&c);
    float *table = to_f(c.table, (long)V * C), *dout = to_f(c.w, (long)N * C), *out = fnew((long)N * C);
    embedding_forward(out, c.ids, table, N, C);
    cmp("embedding out", out, c.out, (long)N * C);
    Prefill pt = prefill((long)V * C);
    float *fdt = fnew((long)V * C);
    embedding_backward(fdt, dout, c.ids, N, C);
    cmp("embedding dtable", fdt, dt, (long)V * C);
    embedding_backward(pt.f, dout, c.ids, N, C);
    embedding_backward(pt.f, dout, c.ids, N, C);
    double *want = plus(pt.d, dt, (long)V * C, 2);
    cmp("embedding dtable accumulates", pt.f, want, (long)V * C);
    free(c.out), free(c.table), free(c.w), free(c.ids), free(dt), free(table), free(dout);
    free(out), free(pt.d), free(pt.f), free(fdt), free(want);
}

/* ================================================================= rmsnorm */

typedef struct {
    double *out, *rstd, *in, *w, *wl;
    int N, C, ld_out, ld_in;
    double eps;
} RmsCtx;
static double rms_loss(void *p) {
    RmsCtx *c = p;
    ref_rmsnorm_forward(c->out, c->rstd, c->in, c->w, c->N, c->C, c->ld_out, c->ld_in, c->eps);
    return dot_strided(c->out, c->wl, c->N, c->C, c->ld_out, c->C);
}

static void test_rmsnorm(int N, int C, int ld_out, int ld_in, int ld_dout, int ld_din) {
    printf("rmsnorm N=%d C=%d ld_out=%d ld_in=%d ld_dout=%d ld_din=%d\n", N, C, ld_out, ld_in,
           ld_dout, ld_din);
    RmsCtx c = {dnew((long)N * ld_out), dnew(N), dnew((long)N * ld_in), dnew(C), dnew((long)N * C),
                N, C, ld_out, ld_in, 1e-5};
    fill_strided(c.in, N, C, ld_in, 2.0, NAN);
    for (int j = 0; j < C; j++) c.w[j] = (float)(1.0 + 0.5 * urand());
    fill(c.wl, (long)N * C, 1.0);
    double *dout = dnew((long)N * ld_dout);
    for (int n = 0; n < N; n++) memcpy(dout + (long)n * ld_dout, c.wl + (long)n * C, sizeof(double) * C);
    rms_loss(&c);
    double *din = dnew((long)N * ld_din), *dw = dnew(C);
    ref_rmsnorm_backward(din, dw, dout, c.in, c.rstd, c.w, N, C, ld_din, ld_dout, ld_in);
    fd_check("rmsnorm din", c.in, ld_in, din, ld_din, N, C, rms_loss, &c);
    fd_check("rmsnorm dw", c.w, C, dw, C, 1, C, rms_loss, &c);
    rms_loss(&c);
    /* fp32: gaps of inputs hold NaN, gaps of outputs the sentinel */
    float *in = to_f(c.in, (long)N * ld_in), *w = to_f(c.w, C), *fdout = fnew((long)N * ld_dout);
    for (long i = 0; i < (long)N * ld_dout; i++)
        fdout[i] = (i % ld_dout) < C ? (float)dout[i] : NAN;
    float *out = fnew((long)N * ld_out), *rstd = fnew(N);
    for (long i = 0; i < (long)N * ld_out; i++) out[i] = GAP_SENTINEL;
    rmsnorm_forward(out, rstd, in, w, N, C, ld_out, ld_in, (float)c.eps);
    cmp_rows("rmsnorm out", out, ld_out, c.out, ld_out, N, C, NULL);
    cmp("rmsnorm rstd", rstd, c.rstd, N);
    check_gaps("rmsnorm out", out, N, C, ld_out);
    Prefill pin = prefill((long)N * ld_din), pw = prefill(C);
    for (int n = 0; n < N; n++)
        for (int j = C; j < ld_din; j++) pin.f[(long)n * ld_din + j] = GAP_SENTINEL;
    float *fdin = fnew((long)N * ld_din), *fdw = fnew(C);
    rmsnorm_backward(fdin, fdw, fdout, in, rstd, w, N, C, ld_din, ld_dout, ld_in, 0);
    cmp_rows("rmsnorm din", fdin, ld_din, din, ld_din, N, C, NULL);
    cmp("rmsnorm dw", fdw, dw, C);
    for (int rep = 0; rep < 2; rep++)
        rmsnorm_backward(pin.f, pw.f, fdout, in, rstd, w, N, C, ld_din, ld_dout, ld_in, 0);
    double *w1 = plus(pin.d, din, (long)N * ld_din, 2), *w2 = plus(pw.d, dw, C, 2);
    cmp_rows("rmsnorm din accumulates", pin.f, ld_din, w1, ld_din, N, C, NULL);
    cmp("rmsnorm dw accumulates", pw.f, w2, C);
    for (int j = 0; j < C; j++) pw.f[j] = NAN; /* write_dw: not read */
    rmsnorm_backward(NULL, pw.f, fdout, in, rstd, w, N, C, ld_din, ld_dout, ld_in, 1);
    cmp("rmsnorm dw written (write_dw)", pw.f, dw, C);
    check_gaps("rmsnorm din", pin.f, N, C, ld_din);
    memset(fdin, 0, sizeof(float) * N * ld_din);
    rmsnorm_backward(fdin, NULL, fdout, in, rstd, w, N, C, ld_din, ld_dout, ld_in, 0);
    cmp_rows("rmsnorm din (dw=NULL)", fdin, ld_din, din, ld_din, N, C, NULL);
    memset(fdw, 0, sizeof(float) * C);
    rmsnorm_backward(NULL, fdw, fdout, in, rstd, w, N, C, ld_din, ld_dout, ld_in, 0);
    cmp("rmsnorm dw (din=NULL)", fdw, dw, C);
    free(c.out), free(c.rstd), free(c.in), free(c.w), free(c.wl), free(dout), free(din), free(dw);
    free(in), free(w), free(fdout), free(out), free(rstd), free(fdin), free(fdw);
    free(pin.d), free(pin.f), free(pw.d), free(pw.f), free(w1), free(w2);
}

/* ================================================================= rope */

typedef struct {
    double *x, *work, *w, *inv_freq;
    int32_t *pos;
    int N, nh, D, ld;
} RopeCtx;
static double rope_loss(void *p) {
    RopeCtx *c = p;
    memcpy(c->work, c->x, sizeof(double) * c->N * c->ld);
    ref_rope_forward(c->work, c->pos, c->inv_freq, c->N, c->nh, c->D, c->ld);
    return dot_strided(c->work, c->w, c->N, c->nh * c->D, c->ld, c->ld);
}

static void test_rope(int N, int nh, int D, int ld) {
    printf("rope N=%d nh=%d D=%d ld=%d\n", N, nh, D, ld);
    RopeCtx c = {dnew((long)N * ld), dnew((long)N * ld), dnew((long)N * ld), dnew(D / 2),
                 xmalloc(sizeof(int32_t) * N), N, nh, D, ld};
    float *inv_freq = fnew(D / 2);
    for (int i = 0; i < D / 2; i++) {
        inv_freq[i] = (float)(1.0 / pow(10000.0, 2.0 * i / D));
        c.inv_freq[i] = inv_freq[i];
    }
    for (int n = 0; n < N; n++) c.pos[n] = n == 0 ? 0 : n == 1 ? 4095 : irand(300);
    fill_strided(c.x, N, nh * D, ld, 1.0, GAP_SENTINEL);
    fill_strided(c.w, N, nh * D, ld, 1.0, GAP_SENTINEL);
    double *dx = dup_d(c.w, (long)N * ld);
    ref_rope_backward(dx, c.pos, c.inv_freq, N, nh, D, ld);
    fd_check("rope dx", c.x, ld, dx, ld, N, nh * D, rope_loss, &c);
    rope_loss(&c); /* c.work = y */
    float *x = to_f(c.x, (long)N * ld), *g = to_f(c.w, (long)N * ld);
    rope_forward(x, c.pos, inv_freq, N, nh, D, ld);
    cmp_rows("rope y", x, ld, c.work, ld, N, nh * D, NULL);
    check_gaps("rope y", x, N, nh * D, ld);
    rope_backward(g, c.pos, inv_freq, N, nh, D, ld);
    cmp_rows("rope dx", g, ld, dx, ld, N, nh * D, NULL);
    check_gaps("rope dx", g, N, nh * D, ld);
    free(c.x), free(c.work), free(c.w), free(c.inv_freq), free(c.pos), free(inv_freq);
    free(dx), free(x), free(g);
}

/* ================================================================= swiglu */

typedef struct {
    double *out, *gu, *w;
    int N, F;
} SwiCtx;
static double swiglu_loss(void *p) {
    SwiCtx *c = p;
    ref_swiglu_forward(c->out, c->gu, c->N, c->F);
    return dot_strided(c->out, c->w, 1, c->N * c->F, 0, 0);
}

static void test_swiglu(int N, int F) {
    printf("swiglu N=%d F=%d\n", N, F);
    SwiCtx c = {dnew((long)N * F), dnew((long)N * 2 * F), dnew((long)N * F), N, F};
    fill(c.gu, (long)N * 2 * F, 4.0);
    fill(c.w, (long)N * F, 1.0);
    double *dgu = dnew((long)N * 2 * F);
    ref_swiglu_backward(dgu, c.w, c.gu, N, F);
    fd_check("swiglu dgu", c.gu, 2 * F, dgu, 2 * F, N, 2 * F, swiglu_loss, &c);
    swiglu_loss(&c);
    float *gu = to_f(c.gu, (long)N * 2 * F), *dout = to_f(c.w, (long)N * F), *out = fnew((long)N * F);
    swiglu_forward(out, gu, N, F);
    cmp("swiglu out", out, c.out, (long)N * F);
    Prefill p = prefill((long)N * 2 * F); /* dgu is written: the prefill must vanish */
    swiglu_backward(p.f, dout, gu, N, F);
    cmp("swiglu dgu (written)", p.f, dgu, (long)N * 2 * F);
    free(c.out), free(c.gu), free(c.w), free(dgu), free(gu), free(dout), free(out), free(p.d), free(p.f);
}

/* ================================================================= attention */

typedef struct {
    double *out, *lse, *q, *k, *v, *w;
    const uint8_t *mask;
    int B, T, H, Hkv, D, ldo, ldq, ldk, ldv;
} AttnCtx;
static double attn_loss(void *p) {
    AttnCtx *c = p;
    ref_attention_forward(c->out, c->lse, c->q, c->k, c->v, c->mask, c->B, c->T, c->H, c->Hkv,
                          c->D, c->ldo, c->ldq, c->ldk, c->ldv);
    return dot_strided(c->out, c->w, c->B * c->T, c->H * c->D, c->ldo, c->ldo);
}

/* fused: q, k, v live in one [N, (H + 2 Hkv) D (+ pad)] row, and so do dq, dk, dv.
 * Otherwise each is its own buffer with a padded row stride. */
/* Attention's scratch for a batch of N tokens (attention_scratch_floats), kept and
 * grown here: the model plans it once, these tests call with many shapes. */
static float *att_scratch(int N, int H, int D) {
    static float *buf;
    static size_t have;
    size_t n = attention_scratch_floats(N, H, D);
    if (n > have) free(buf), buf = malloc(sizeof(float) * n), have = n;
    return buf;
}

static void test_attention(int B, int T, int H, int Hkv, int D, int fused, const uint8_t *mask) {
    int N = B * T, HD = H * D, KD = Hkv * D;
    int ldq, ldk, ldv, ldo = HD + 3;
    long nq, nk, nv;
    double *qkv = NULL, *q, *k, *v;
    if (fused) {
        ldq = ldk = ldv = HD + 2 * KD + 2;
        nq = nk = nv = (long)N * ldq;
        qkv = dnew(nq);
        fill_strided(qkv, N, HD + 2 * KD, ldq, 1.5, NAN);
        q = qkv, k = qkv + HD, v = qkv + HD + KD;
    } else {
        ldq = HD + 1, ldk = KD + 5, ldv = KD + 2;
        nq = (long)N * ldq, nk = (long)N * ldk, nv = (long)N * ldv;
        q = dnew(nq), k = dnew(nk), v = dnew(nv);
        fill_strided(q, N, HD, ldq, 1.5, NAN);
        fill_strided(k, N, KD, ldk, 1.5, NAN);
        fill_strided(v, N, KD, ldv, 1.5, NAN);
    }
    printf("attention B=%d T=%d H=%d Hkv=%d D=%d %s ldq=%d ldk=%d ldv=%d ldo=%d\n", B, T, H, Hkv,
           D, fused ? "fused qkv" : "separate", ldq, ldk, ldv, ldo);
    AttnCtx c = {dnew((long)N * ldo), dnew((long)B * H * T), q, k, v, dnew((long)N * ldo), mask,
                 B, T, H, Hkv, D, ldo, ldq, ldk, ldv};
    fill_strided(c.w, N, HD, ldo, 1.0, 0.0);
    /* gradients share the inputs' layout (a fused dqkv row when fused) */
    long ngrad = fused ? nq : nq + nk + nv;
    double *dgrad = dnew(ngrad), *dq = dgrad, *dk = fused ? dgrad + HD : dgrad + nq;
    double *dv = fused ? dgrad + HD + KD : dgrad + nq + nk;
    attn_loss(&c);
    ref_attention_backward(dq, dk, dv, c.w, q, k, v, c.out, c.lse, mask, B, T, H, Hkv, D, ldq, ldk,
                           ldv, ldo, ldq, ldk, ldv, ldo);
    /* the left-padded rows: no key => out 0 and dq 0 */
    fd_check("attention dq", q, ldq, dq, ldq, N, HD, attn_loss, &c);
    fd_check("attention dk", k, ldk, dk, ldk, N, KD, attn_loss, &c);
    fd_check("attention dv", v, ldv, dv, ldv, N, KD, attn_loss, &c);
    attn_loss(&c);
    uint8_t *has_key = xcalloc((size_t)B * H * T, 1), *row_key = xcalloc((size_t)N, 1);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            for (int s = 0; s <= t; s++) row_key[b * T + t] |= mask[b * T + s];
            for (int h = 0; h < H; h++) has_key[((long)b * H + h) * T + t] = row_key[b * T + t];
        }
    for (int n = 0; n < N; n++)
        if (!row_key[n])
            for (int j = 0; j < HD; j++) {
                T_CHECK(c.out[(long)n * ldo + j] == 0.0, "ref out of a keyless row");
                T_CHECK(dq[(long)n * ldq + j] == 0.0, "ref dq of a keyless row");
            }
    /* fp32 */
    float *fq = fused ? to_f(qkv, nq) : to_f(q, nq), *fk = fused ? fq + HD : to_f(k, nk);
    float *fv = fused ? fq + HD + KD : to_f(v, nv);
    float *fdo = fnew((long)N * ldo), *out = fnew((long)N * ldo), *lse = fnew((long)B * H * T);
    for (long i = 0; i < (long)N * ldo; i++) {
        fdo[i] = (i % ldo) < HD ? (float)c.w[i] : NAN;
        out[i] = GAP_SENTINEL;
    }
    attention_forward(out, lse, fq, fk, fv, mask, B, T, H, Hkv, D, ldo, ldq, ldk, ldv, att_scratch(B * T, H, D));
    cmp_rows("attention out", out, ldo, c.out, ldo, N, HD, NULL);
    check_gaps("attention out", out, N, HD, ldo);
    cmp_rows("attention lse (rows w/ keys)", lse, 1, c.lse, 1, B * H * T, 1, has_key);
    /* backward into a prefilled buffer, twice: dq must come out as dq (written),
     * dk and dv as prefill + 2 grad (accumulated); gaps keep the sentinel. */
    Prefill p = prefill(ngrad);
    int ldgap = fused ? HD + 2 * KD : 0;
    for (int pass = 0; pass < 2; pass++) {
        if (fused) { /* pass 0: zeros; pass 1: prefill, twice */
            float *g = pass ? p.f : fnew(ngrad);
            for (int n = 0; n < N; n++)
                for (int j = ldgap; j < ldq; j++) g[(long)n * ldq + j] = GAP_SENTINEL;
            for (int rep = 0; rep < 1 + pass; rep++)
                attention_backward(g, g + HD, g + HD + KD, fdo, fq, fk, fv, out, lse, mask, B, T, H,
                                   Hkv, D, ldq, ldk, ldv, ldo, ldq, ldk, ldv, ldo, att_scratch(B * T, H, D));
            double *wk = pass ? plus(p.d + HD, dk, ngrad - HD, 2) : NULL;
            double *wv = pass ? plus(p.d + HD + KD, dv, ngrad - HD - KD, 2) : NULL;
            cmp_rows(pass ? "attention dq (written)" : "attention dq", g, ldq, dq, ldq, N, HD, NULL);
            cmp_rows(pass ? "attention dk accumulates" : "attention dk", g + HD, ldk,
                     pass ? wk : dk, ldk, N, KD, NULL);
            cmp_rows(pass ? "attention dv accumulates" : "attention dv", g + HD + KD, ldv,
                     pass ? wv : dv, ldv, N, KD, NULL);
            check_gaps("attention dqkv", g, N, ldgap, ldq);
            free(wk), free(wv);
            if (!pass) free(g);
        } else {
            float *g = pass ? p.f : fnew(ngrad);
            float *gq = g, *gk = g + nq, *gv = g + nq + nk;
            for (int n = 0; n < N; n++) {
                for (int j = HD; j < ldq; j++) gq[(long)n * ldq + j] = GAP_SENTINEL;
                for (int j = KD; j < ldk; j++) gk[(long)n * ldk + j] = GAP_SENTINEL;
                for (int j = KD; j < ldv; j++) gv[(long)n * ldv + j] = GAP_SENTINEL;
            }
            for (int rep = 0; rep < 1 + pass; rep++)
                attention_backward(gq, gk, gv, fdo, fq, fk, fv, out, lse, mask, B, T, H, Hkv, D,
                                   ldq, ldk, ldv, ldo, ldq, ldk, ldv, ldo, att_scratch(B * T, H, D));
            double *wk = pass ? plus(p.d + nq, dk, nk, 2) : NULL;
            double *wv = pass ? plus(p.d + nq + nk, dv, nv, 2) : NULL;
            cmp_rows(pass ? "attention dq (written)" : "attention dq", gq, ldq, dq, ldq, N, HD, NULL);
            cmp_rows(pass ? "attention dk accumulates" : "attention dk", gk, ldk, pass ? wk : dk,
                     ldk, N, KD, NULL);
            cmp_rows(pass ? "attention dv accumulates" : "attention dv", gv, ldv, pass ? wv : dv,
                     ldv, N, KD, NULL);
            check_gaps("attention dq", gq, N, HD, ldq);
            check_gaps("attention dk", gk, N, KD, ldk);
            check_gaps("attention dv", gv, N, KD, ldv);
            free(wk), free(wv);
            if (!pass) free(g);
        }
    }
    if (!fused) free(fk), free(fv), free(k), free(v), free(q);
    free(qkv), free(fq), free(fdo), free(out), free(lse), free(has_key), free(row_key);
    free(c.out), free(c.lse), free(c.w), free(dgrad), free(p.d), free(p.f);
}

/* A sequence's attention does not depend on how far its batch is padded: the same
 * 37 tokens alone (T 37) and right-padded beside a longer sequence (T 45) agree on
 * their rows (out, lse, dq, and dk, dv of their keys) up to the GEMM's rounding at
 * the other shape. The padding holds values that would show if a padded key
 * leaked in. rows: the row block (0: automatic). */
static void test_attention_padding(int rows) {
    enum { L = 37, T2 = 45, H = 4, Hkv = 2, D = 8, W = (H + 2 * Hkv) * D };
    attention_set_row_block(rows);
    float *x[2], *o[2], *lse[2], *dO[2], *g[2];
    uint8_t mask[2 * T2];
    for (int i = 0; i < 2; i++) {
        int B = i ? 2 : 1, T = i ? T2 : L;
        x[i] = fnew((long)B * T * W), o[i] = fnew((long)B * T * H * D), dO[i] = fnew((long)B * T * H * D);
        lse[i] = fnew((long)B * H * T), g[i] = fnew((long)B * T * W);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int real = b == 1 || t < L; /* sequence 0 is the 37 tokens, padded in the batch */
                mask[b * T + t] = (uint8_t)real;
                for (int j = 0; j < W; j++)
                    x[i][((long)b * T + t) * W + j] = real ? (float)sin(0.37 * (t + 1) * (j + 2) + 5.0 * b) : 9.0f;
                for (int j = 0; j < H * D; j++)
                    dO[i][((long)b * T + t) * H * D + j] = real ? (float)cos(0.23 * (t + 3) * (j + 1) + b) : 0.0f;
            }
        attention_forward(o[i], lse[i], x[i], x[i] + H * D, x[i] + (H + Hkv) * D, mask, B, T, H, Hkv, D, H * D, W, W,
                          W, att_scratch(B * T, H, D));
        memset(g[i], 0, sizeof(float) * B * T * W);
        attention_backward(g[i], g[i] + H * D, g[i] + (H + Hkv) * D, dO[i], x[i], x[i] + H * D, x[i] + (H + Hkv) * D,
                           o[i], lse[i], mask, B, T, H, Hkv, D, W, W, W, H * D, W, W, W, H * D,
                           att_scratch(B * T, H, D));
    }
    int same = !memcmp(o[0], o[1], sizeof(float) * L * H * D) && !memcmp(g[0], g[1], sizeof(float) * L * W);
    for (int h = 0; h < H; h++) same &= !memcmp(lse[0] + h * L, lse[1] + h * T2, sizeof(float) * L);
    double d = 0, mx = 0; /* over out, lse, and the gradients */
    for (long i = 0; i < L * H * D; i++) d = fmax(d, fabs(o[0][i] - o[1][i])), mx = fmax(mx, fabs(o[0][i]));
    for (long i = 0; i < L * W; i++) d = fmax(d, fabs(g[0][i] - g[1][i])), mx = fmax(mx, fabs(g[0][i]));
    for (int h = 0; h < H; h++)
        for (int t = 0; t < L; t++)
            d = fmax(d, fabs(lse[0][h * L + t] - lse[1][h * T2 + t])), mx = fmax(mx, fabs(lse[0][h * L + t]));
    printf("  attention padded (row block %d): differs by %.3g of max %.3g\n", rows, d, mx);
    T_CHECK(d <= 1e-6 * mx, "attention (row block %d): a sequence padded in its batch differs from it alone", rows);
    for (int i = 0; i < 2; i++) free(x[i]), free(o[i]), free(lse[i]), free(dO[i]), free(g[i]);
}

/* ================================================================= logprob */

typedef struct {
    double *logprob, *entropy, *lse, *h, *W, *w, *u, inv_temp;
    const int32_t *targets;
    int N, C, V;
} LpCtx;
/* Σ w · logprob + Σ u · entropy (the entropy bonus's term) */
static double logprob_loss(void *p) {
    LpCtx *c = p;
    ref_logprob_forward(c->logprob, c->entropy, c->lse, c->h, c->W, c->targets, c->N, c->C, c->V,
                        c->inv_temp);
    return dot_strided(c->logprob, c->w, 1, c->N, 0, 0) + dot_strided(c->entropy, c->u, 1, c->N, 0, 0);
}

static void test_logprob(int N, int C, int V, float inv_temp, int do_fd) {
    printf("logprob N=%d C=%d V=%d inv_temp=%g\n", N, C, V, inv_temp);
    int32_t *targets = xmalloc(sizeof(int32_t) * N);
    uint8_t *valid = xmalloc(N);
    for (int n = 0; n < N; n++) {
        targets[n] = (n == 1 || n == N - 1 || n % 5 == 3) ? -1 : irand(V);
        valid[n] = targets[n] >= 0;
    }
    LpCtx c = {dnew(N), dnew(N), dnew(N), dnew((long)N * C), dnew((long)V * C), dnew(N), dnew(N),
               inv_temp, targets, N, C, V};
    fill(c.h, (long)N * C, 1.0);
    fill(c.W, (long)V * C, 1.0);
    fill(c.w, N, 1.0);
    fill(c.u, N, 1.0);
    double *dh = dnew((long)N * C), *dW = dnew((long)V * C);
    logprob_loss(&c);
    ref_logprob_backward(dh, dW, c.w, c.u, c.h, c.W, targets, c.lse, N, C, V, inv_temp);
    if (do_fd) {
        fd_check("logprob dh", c.h, C, dh, C, N, C, logprob_loss, &c);
        fd_check("logprob dW", c.W, C, dW, C, V, C, logprob_loss, &c);
    }
    logprob_loss(&c);
    for (int n = 0; n < N; n++)
        if (!valid[n])
            T_CHECK(c.logprob[n] == 0 && c.entropy[n] == 0, "ref logprob row %d without target", n);
    /* fp32, for chunk_rows 1, 3 and N */
    float *h = to_f(c.h, (long)N * C), *W = to_f(c.W, (long)V * C), *dlp = to_f(c.w, N), *dent = to_f(c.u, N);
    WeightMatrix HW = {.w = W};
    float *lp0 = NULL, *ent0 = NULL, *dh0 = NULL, *dW0 = NULL;
    int chunks[3] = {N, 1, 3};
    for (int ci = 0; ci < 3; ci++) {
        int chunk = chunks[ci];
        printf(" chunk_rows=%d\n", chunk);
        float *base = xaligned(sizeof(float) * logprob_scratch_floats(chunk, C, V, 0));
        LogprobScratch s;
        logprob_scratch_init(&s, base, chunk, C, V, 0);
        float *lp = fnew(N), *ent = fnew(N), *lse = fnew(N);
        for (int n = 0; n < N; n++) lp[n] = ent[n] = lse[n] = GAP_SENTINEL;
        logprob_forward(lp, ent, lse, NULL, h, HW, targets, N, C, V, inv_temp, &s);
        cmp("logprob logprob", lp, c.logprob, N);
        cmp("logprob entropy", ent, c.entropy, N);
        cmp_rows("logprob lse (rows w/ target)", lse, 1, c.lse, 1, N, 1, valid);
        float *fdh = fnew((long)N * C), *fdW = fnew((long)V * C);
        logprob_backward(fdh, fdW, dlp, dent, h, HW, targets, lse, N, C, V, inv_temp, &s, 0);
        cmp("logprob dh (with dentropy)", fdh, dh, (long)N * C);
        cmp("logprob dW (with dentropy)", fdW, dW, (long)V * C);
        if (ci == 0) {
            lp0 = lp, ent0 = ent, dh0 = fdh, dW0 = fdW;
            /* entropy NULL */
            float *lp2 = fnew(N), *lse2 = fnew(N);
            logprob_forward(lp2, NULL, lse2, NULL, h, HW, targets, N, C, V, inv_temp, &s);
            cmp("logprob logprob (entropy=NULL)", lp2, c.logprob, N);
            free(lp2), free(lse2);
            /* without dentropy: the log-probs' gradient alone */
            {
                double *rdh = dnew((long)N * C), *rdW = dnew((long)V * C);
                ref_logprob_backward(rdh, rdW, c.w, NULL, c.h, c.W, targets, c.lse, N, C, V, inv_temp);
                float *gh = fnew((long)N * C), *gW = fnew((long)V * C);
                logprob_backward(gh, gW, dlp, NULL, h, HW, targets, lse, N, C, V, inv_temp, &s, 0);
                cmp("logprob dh (dentropy=NULL)", gh, rdh, (long)N * C);
                cmp("logprob dW (dentropy=NULL)", gW, rdW, (long)V * C);
                /* a frozen head: the forward's E_p[W] gives the same dh without logits in backward */
                float *pw = fnew((long)N * C), *lp3 = fnew(N), *lse3 = fnew(N), *fh = fnew((long)N * C);
                logprob_forward(lp3, NULL, lse3, pw, h, HW, targets, N, C, V, inv_temp, &s);
                cmp("logprob logprob (with pw)", lp3, c.logprob, N);
                logprob_backward_frozen(fh, dlp, pw, HW, targets, N, C, inv_temp);
                cmp("logprob dh (frozen head, from pw)", fh, rdh, (long)N * C);
                free(pw), free(lp3), free(lse3), free(fh);
                free(rdh), free(rdW), free(gh), free(gW);
            }
            /* accumulation and NULL gradients */
            Prefill ph = prefill((long)N * C), pW = prefill((long)V * C);
            for (int rep = 0; rep < 2; rep++)
                logprob_backward(ph.f, pW.f, dlp, dent, h, HW, targets, lse, N, C, V, inv_temp, &s, 0);
            double *w1 = plus(ph.d, dh, (long)N * C, 2), *w2 = plus(pW.d, dW, (long)V * C, 2);
            cmp("logprob dh accumulates", ph.f, w1, (long)N * C);
            cmp("logprob dW accumulates", pW.f, w2, (long)V * C);
            /* write_dw: dW written over a NaN prefill; zeros where no row has a target */
            for (long i = 0; i < (long)V * C; i++) pW.f[i] = NAN;
            logprob_backward(NULL, pW.f, dlp, dent, h, HW, targets, lse, N, C, V, inv_temp, &s, 1);
            cmp("logprob dW written (write_dw)", pW.f, dW, (long)V * C);
            {
                int32_t none[N];
                long bad = 0;
                for (int n = 0; n < N; n++) none[n] = -1;
                for (long i = 0; i < (long)V * C; i++) pW.f[i] = NAN;
                logprob_backward(NULL, pW.f, dlp, dent, h, HW, none, lse, N, C, V, inv_temp, &s, 1);
                for (long i = 0; i < (long)V * C; i++) bad += pW.f[i] != 0.0f;
                T_CHECK(bad == 0, "logprob dW without targets (write_dw): %ld values not 0", bad);
            }
            float *g = fnew((long)V * C);
            logprob_backward(NULL, g, dlp, dent, h, HW, targets, lse, N, C, V, inv_temp, &s, 0);
            cmp("logprob dW (dh=NULL)", g, dW, (long)V * C);
            memset(g, 0, sizeof(float) * N * C);
            logprob_backward(g, NULL, dlp, dent, h, HW, targets, lse, N, C, V, inv_temp, &s, 0);
            cmp("logprob dh (dW=NULL)", g, dh, (long)N * C);
            free(g), free(ph.d), free(ph.f), free(pW.d), free(pW.f), free(w1), free(w2);
        } else {
            /* chunking invariance against chunk_rows = N, same rule */
            double *d0 = dnew((long)N * C + (long)V * C + N);
            for (int n = 0; n < N; n++) d0[n] = lp0[n];
            cmp("logprob vs chunk N", lp, d0, N);
            for (int n = 0; n < N; n++) d0[n] = ent0[n];
            cmp("entropy vs chunk N", ent, d0, N);
            for (long i = 0; i < (long)N * C; i++) d0[i] = dh0[i];
            cmp("dh vs chunk N", fdh, d0, (long)N * C);
            for (long i = 0; i < (long)V * C; i++) d0[i] = dW0[i];
            cmp("dW vs chunk N", fdW, d0, (long)V * C);
            free(d0), free(lp), free(ent), free(fdh), free(fdW);
        }
        free(base), free(lse);
    }
    /* uniform logits: logprob = -log V and entropy = log V exactly in the reference */
    memset(c.W, 0, sizeof(double) * V * C);
    logprob_loss(&c);
    for (int n = 0; n < N; n++)
        if (valid[n])
            T_CHECK(fabs(c.logprob[n] + log(V)) < 1e-12 && fabs(c.entropy[n] - log(V)) < 1e-12,
                    "ref logprob/entropy of uniform logits, row %d", n);
    free(targets), free(valid), free(c.logprob), free(c.entropy), free(c.lse), free(c.h), free(c.W);
    free(c.w), free(c.u), free(dent), free(dh), free(dW), free(h), free(W), free(dlp), free(lp0), free(ent0), free(dh0);
    free(dW0);
}

int main(void) {
    test_matmul(5, 7, 6, 1, 1);
    test_matmul(4, 9, 3, 0, 1);
    test_matmul(33, 70, 45, 1, 0); /* fp32 only: exercises the GEMM's blocking */

    test_embedding(7, 6, 9);

    test_rmsnorm(4, 10, 10, 10, 10, 10);
    test_rmsnorm(5, 12, 15, 13, 14, 17);

    test_rope(5, 3, 8, 3 * 8);
    test_rope(4, 2, 12, 2 * 12 + 5); /* heads inside a wider fused row */
    test_rope(2, 2, 1100, 2 * 1100 + 3); /* D past the model config's 1024: 550 pairs, 3 angle blocks */

    test_swiglu(4, 6);
    test_swiglu(3, 21); /* eight at a time, and a tail */

    /* masks: left-padded (keyless first queries), right-padded, full, with a hole */
    static const uint8_t m3x6[3 * 6] = {0, 0, 1, 1, 1, 1, /**/ 1, 1, 1, 1, 0, 0, /**/ 1, 1, 1, 1, 1, 1};
    static const uint8_t m2x5[2 * 5] = {1, 1, 1, 0, 0, /**/ 0, 0, 0, 1, 1};
    static const uint8_t m1x7[7] = {0, 1, 1, 0, 1, 1, 0};
    test_attention(3, 6, 4, 2, 8, 1, m3x6);  /* GQA G=2, fused qkv */
    test_attention(2, 5, 4, 1, 12, 0, m2x5); /* GQA G=4, D=12, separate strided */
    test_attention(1, 7, 2, 2, 8, 0, m1x7);  /* MHA G=1 */
    test_attention(2, 5, 8, 2, 12, 1, m2x5); /* G=4, fused */
    /* query row blocks smaller than T: several blocks, a short last one */
    attention_set_row_block(2);
    test_attention(3, 6, 4, 2, 8, 1, m3x6);
    test_attention(2, 5, 4, 1, 12, 0, m2x5);
    attention_set_row_block(3);
    test_attention(1, 7, 2, 2, 8, 0, m1x7);
    attention_set_row_block(16);
    static uint8_t m2x37[2 * 37];
    for (int t = 0; t < 37; t++) m2x37[t] = 1, m2x37[37 + t] = t < 29;
    test_attention(2, 37, 4, 2, 8, 0, m2x37);
    test_attention_padding(16);
    test_attention_padding(0);
    attention_set_row_block(0);

    test_logprob(7, 12, 29, 1.0f / 0.7f, 1);
    test_logprob(11, 40, 300, 1.0f, 0); /* fp32 only, a larger vocabulary */

    return t_summary("test_ops_fd");
}
