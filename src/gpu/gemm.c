/* gpu/gemm.c — the products of gpu/gemm.h on cuBLASLt.
 *
 * cuBLASLt's matrices are column-major; ours are row-major, and a row-major X[r, c]
 * with row stride ld is the column-major X^T[c, r] with the same ld. So
 * C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B and
 * its "B" our A, each with its own transpose flag, and its m, n are our N, M. */
#include "gpu/gemm.h"

#include <stdlib.h>
#include <string.h>

enum { PLANS = 64 };
/* cuBLAS's documentation recommends 32 MiB of workspace on Hopper (4 MiB before). */
static const size_t WORKSPACE_BYTES = (size_t)32 << 20;

/* One shape's descriptors and cuBLASLt's algorithm for it. The key includes the
 * operands' alignments: the heuristic sees no pointers, only what the preference
 * promises of them, and an algorithm chosen for 256-byte aligned operands may not
 * run on a view that starts mid-row. */
typedef struct {
    int f32, trans_a, trans_b, M, N, K, lda, ldb, ldc;
    unsigned align_a, align_b, align_c;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
} GemmPlan;

struct GpuBlas {
    CublasLtApi api;
    cublasLtHandle_t handle;
    CUdeviceptr workspace;
    GemmPlan plan[PLANS];
    int n_plans, next_evict; /* full: plans are replaced in turn */
};

static int (*blas_open)(CublasLtApi *api, char *why, size_t n) = cublaslt_api_open;

void gpu_set_blas(int (*open_blas)(CublasLtApi *api, char *why, size_t n)) {
    blas_open = open_blas ? open_blas : cublaslt_api_open;
}

static void plan_free(const CublasLtApi *api, GemmPlan *p) {
    if (p->desc) api->MatmulDescDestroy(p->desc);
    if (p->a) api->MatrixLayoutDestroy(p->a);
    if (p->b) api->MatrixLayoutDestroy(p->b);
    if (p->c) api->MatrixLayoutDestroy(p->c);
    memset(p, 0, sizeof *p);
}

void gpu_blas_close(GpuDevice *d) {
    struct GpuBlas *s = d->blas;
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) plan_free(&s->api, &s->plan[i]);
    if (s->handle) s->api.Destroy(s->handle);
    gpu_free(d, s->workspace);
    cublaslt_api_close(&s->api);
    free(s);
    d->blas = NULL;
}

int gpu_gemm_plans(const GpuDevice *d) { return d->blas ? d->blas->n_plans : 0; }

static int blas_check(struct GpuBlas *s, cublasStatus_t r, const char *what, GrpoErr *err) {
    return r == CUBLAS_STATUS_SUCCESS ? 0 : err_set(err, "GPU: cuBLASLt: %s: %s", what, cublaslt_status_text(&s->api, r));
}

/* d's cuBLASLt, opened on the first product: the library, a handle, the workspace. */
static struct GpuBlas *blas_state(GpuDevice *d, GrpoErr *err) {
    if (d->blas) return d->blas;
    struct GpuBlas *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, "GPU: cuBLASLt: out of host memory"), NULL;
    char why[512];
    if (blas_open(&s->api, why, sizeof why)) {
        free(s);
        return err_set(err, "GPU: cuBLASLt is needed for the GPU's products and cannot be opened: %s", why), NULL;
    }
    d->blas = s;
    if (blas_check(s, s->api.Create(&s->handle), "cublasLtCreate", err) ||
        gpu_alloc(d, &s->workspace, WORKSPACE_BYTES, err)) {
        gpu_blas_close(d);
        return NULL;
    }
    return s;
}

/* The largest power of two, up to 256, that p's address is a multiple of. */
static unsigned alignment(CUdeviceptr p) {
    unsigned a = 256;
    while (a > 1 && p % a) a >>= 1;
    return a;
}

static int set_i32(struct GpuBlas *s, cublasLtMatmulDesc_t desc, int attr, int32_t v, GrpoErr *err) {
    return blas_check(s, s->api.MatmulDescSetAttribute(desc, attr, &v, sizeof v), "cublasLtMatmulDescSetAttribute",
                      err);
}

/* p's descriptors made (key fields set) and the heuristic's algorithm chosen. */
static int plan_make(struct GpuBlas *s, GemmPlan *p, GrpoErr *err) {
    const CublasLtApi *api = &s->api;
    int type = p->f32 ? CUDA_R_32F : CUDA_R_16BF;
    /* column-major shapes (rows, cols) of what each operand's memory holds */
    uint64_t a_rows = p->trans_b ? p->K : p->N, a_cols = p->trans_b ? p->N : p->K;
    uint64_t b_rows = p->trans_a ? p->M : p->K, b_cols = p->trans_a ? p->K : p->M;
    if (blas_check(s, api->MatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate",
                   err) ||
        set_i32(s, p->desc, CUBLASLT_MATMUL_DESC_TRANSA, p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, err) ||
        set_i32(s, p->desc, CUBLASLT_MATMUL_DESC_TRANSB, p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, err) ||
        blas_check(s, api->MatrixLayoutCreate(&p->a, type, a_rows, a_cols, p->ldb), "cublasLtMatrixLayoutCreate", err) ||
        blas_check(s, api->MatrixLayoutCreate(&p->b, type, b_rows, b_cols, p->lda), "cublasLtMatrixLayoutCreate", err) ||
        blas_check(s, api->MatrixLayoutCreate(&p->c, CUDA_R_32F, (uint64_t)p->N, (uint64_t)p->M, p->ldc),
                   "cublasLtMatrixLayoutCreate", err))
        return -1;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t max_workspace = WORKSPACE_BYTES;
    uint32_t align[4] = {p->align_b, p->align_a, p->align_c, p->align_c}; /* cuBLASLt's A, B, C, D */
    int r = blas_check(s, api->MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", err);
    if (!r)
        r = blas_check(s, api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &max_workspace, sizeof max_workspace),
                       "cublasLtMatmulPreferenceSetAttribute", err);
    for (int i = 0; i < 4 && !r; i++)
        r = blas_check(s, api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i,
                                                            &align[i], sizeof align[i]),
                       "cublasLtMatmulPreferenceSetAttribute", err);
    cublasLtMatmulHeuristicResult_t found;
    int n_found = 0;
    if (!r)
        r = blas_check(s, api->MatmulAlgoGetHeuristic(s->handle, p->desc, p->a, p->b, p->c, p->c, pref, 1, &found,
                                                      &n_found),
                       "cublasLtMatmulAlgoGetHeuristic", err);
    if (pref) api->MatmulPreferenceDestroy(pref);
    if (r) return -1;
    if (n_found < 1 || found.state != CUBLAS_STATUS_SUCCESS || found.workspaceSize > WORKSPACE_BYTES)
        return err_set(err, "GPU: cuBLASLt has no algorithm for a %s product M %d N %d K %d (trans %d %d)",
                       p->f32 ? "fp32" : "bf16", p->M, p->N, p->K, p->trans_a, p->trans_b);
    p->algo = found.algo;
    return 0;
}

/* The plan for key's shape: found, or made (in a free slot, else in place of the
 * oldest). NULL with err when cuBLASLt refuses it. */
static GemmPlan *plan_for(struct GpuBlas *s, const GemmPlan *key, GrpoErr *err) {
    for (int i = 0; i < s->n_plans; i++) {
        GemmPlan *p = &s->plan[i];
        if (p->f32 == key->f32 && p->trans_a == key->trans_a && p->trans_b == key->trans_b && p->M == key->M &&
            p->N == key->N && p->K == key->K && p->lda == key->lda && p->ldb == key->ldb && p->ldc == key->ldc &&
            p->align_a == key->align_a && p->align_b == key->align_b && p->align_c == key->align_c)
            return p;
    }
    GemmPlan made = *key;
    made.desc = NULL, made.a = made.b = made.c = NULL;
    if (plan_make(s, &made, err)) {
        plan_free(&s->api, &made);
        return NULL;
    }
    GemmPlan *p;
    if (s->n_plans < PLANS) p = &s->plan[s->n_plans++];
    else {
        p = &s->plan[s->next_evict];
        s->next_evict = (s->next_evict + 1) % PLANS;
        plan_free(&s->api, p);
    }
    *p = made;
    return p;
}

static int gemm(GpuDevice *d, int f32, int trans_a, int trans_b, int M, int N, int K, float alpha, CUdeviceptr A,
                int lda, CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc, GrpoErr *err) {
    const char *fn = f32 ? "gpu_gemm_f32" : "gpu_gemm_bf16";
    if (M < 0 || N < 0 || K < 1)
        return err_set(err, "%s: sizes M %d N %d K %d: expected M, N >= 0 and K >= 1", fn, M, N, K);
    if (lda < (trans_a ? M : K) || lda < 1)
        return err_set(err, "%s: lda %d is less than A's row length %d (A is %s)", fn, lda, trans_a ? M : K,
                       trans_a ? "[K, M]" : "[M, K]");
    if (ldb < (trans_b ? K : N) || ldb < 1)
        return err_set(err, "%s: ldb %d is less than B's row length %d (B is %s)", fn, ldb, trans_b ? K : N,
                       trans_b ? "[N, K]" : "[K, N]");
    if (ldc < N || ldc < 1) return err_set(err, "%s: ldc %d is less than C's row length N %d", fn, ldc, N);
    if (M == 0 || N == 0) return 0;
    struct GpuBlas *s = blas_state(d, err);
    if (!s) return -1;
    GemmPlan key = {.f32 = f32, .trans_a = !!trans_a, .trans_b = !!trans_b, .M = M, .N = N, .K = K,
                    .lda = lda, .ldb = ldb, .ldc = ldc, .align_a = alignment(A), .align_b = alignment(B),
                    .align_c = alignment(C)};
    GemmPlan *p = plan_for(s, &key, err);
    if (!p) return -1;
    void *a = (void *)(uintptr_t)A, *b = (void *)(uintptr_t)B, *c = (void *)(uintptr_t)C;
    return blas_check(s, s->api.Matmul(s->handle, p->desc, &alpha, b, p->a, a, p->b, &beta, c, p->c, c, p->c, &p->algo,
                                       (void *)(uintptr_t)s->workspace, WORKSPACE_BYTES, NULL),
                      "cublasLtMatmul", err);
}

int gpu_gemm_bf16(GpuDevice *d, int trans_a, int trans_b, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
                  CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc, GrpoErr *err) {
    return gemm(d, 0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, err);
}

int gpu_gemm_f32(GpuDevice *d, int trans_a, int trans_b, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
                 CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc, GrpoErr *err) {
    return gemm(d, 1, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, err);
}
