/* tests/machine/gpu_emulator_blas.c — see gpu_emulator_blas.h. Each object is a
 * host struct behind the library's opaque pointer, tagged so a wrong kind of handle
 * passed is refused rather than misread. */
#include "machine/gpu_emulator_blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

enum { TAG_HANDLE = 0x48414e44, TAG_DESC = 0x44455343, TAG_LAYOUT = 0x4c41594f, TAG_PREF = 0x50524546 };
enum { ALGO_TAG = 0x414c474f };
/* what the emulated algorithm asks of the workspace, at most (bytes) */
static const uint64_t EMU_WORKSPACE_BYTES = (uint64_t)1 << 20;

typedef struct {
    int tag;
} EmuHandle;
typedef struct {
    int tag;
    int32_t compute, scale, pointer_mode, transa, transb, transc;
    uint32_t epilogue;
} EmuDesc;
typedef struct {
    int tag;
    uint32_t type;
    int32_t order, batch;
    uint64_t rows, cols;
    int64_t ld;
} EmuLayout;
typedef struct {
    int tag;
    uint64_t max_workspace;
    uint32_t align[4]; /* A, B, C, D */
} EmuPref;

static int live;
static long heuristic_calls;
static unsigned long long multiply_adds;
int gpu_emulator_blas_live(void) { return live; }
long gpu_emulator_blas_heuristic_calls(void) { return heuristic_calls; }
unsigned long long gpu_emulator_blas_multiply_adds(void) { return multiply_adds; }

static void *make(size_t bytes, int tag) {
    int *p = calloc(1, bytes);
    if (p) *p = tag, live++;
    return p;
}
static cublasStatus_t destroy(void *p, int tag) {
    if (!p) return CUBLAS_STATUS_SUCCESS;
    if (*(int *)p != tag) return CUBLAS_STATUS_INVALID_VALUE;
    *(int *)p = 0, live--;
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}
#define IS(p, t) ((p) && *(const int *)(p) == (t))

static cublasStatus_t emu_create(cublasLtHandle_t *h) {
    return (*h = make(sizeof(EmuHandle), TAG_HANDLE)) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
static cublasStatus_t emu_destroy(cublasLtHandle_t h) {
    return IS(h, TAG_HANDLE) ? destroy(h, TAG_HANDLE) : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* The compute types modelled, each with the scale type it takes (fp32). */
static int compute_known(int c) { return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_FAST_TF32; }

static cublasStatus_t emu_desc_create(cublasLtMatmulDesc_t *out, int compute, int scale) {
    *out = NULL;
    if (!compute_known(compute) || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    EmuDesc *d = make(sizeof *d, TAG_DESC);
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    d->compute = compute, d->scale = scale, d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N, d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    *out = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t emu_desc_destroy(cublasLtMatmulDesc_t d) { return destroy(d, TAG_DESC); }

/* An attribute's value copied in when the size is the attribute's own (the
 * documented INVALID_VALUE otherwise). */
static cublasStatus_t set(void *field, size_t field_bytes, const void *buf, size_t bytes) {
    if (!buf || bytes != field_bytes) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(field, buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t emu_desc_set(cublasLtMatmulDesc_t desc, int attr, const void *buf, size_t bytes) {
    EmuDesc *d = (EmuDesc *)desc;
    if (!IS(d, TAG_DESC)) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set(&d->compute, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set(&d->scale, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set(&d->pointer_mode, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(&d->transa, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(&d->transb, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSC: return set(&d->transc, 4, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(&d->epilogue, 4, buf, bytes);
    default:
        fprintf(stderr, "emulated cuBLASLt: matmul descriptor attribute %d is not modelled\n", attr);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

static cublasStatus_t emu_layout_create(cublasLtMatrixLayout_t *out, int type, uint64_t rows, uint64_t cols,
                                        int64_t ld) {
    *out = NULL;
    EmuLayout *l = make(sizeof *l, TAG_LAYOUT);
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    l->type = (uint32_t)type, l->rows = rows, l->cols = cols, l->ld = ld;
    l->order = CUBLASLT_ORDER_COL, l->batch = 1;
    *out = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t emu_layout_destroy(cublasLtMatrixLayout_t l) { return destroy(l, TAG_LAYOUT); }

static cublasStatus_t emu_pref_create(cublasLtMatmulPreference_t *out) {
    EmuPref *p = make(sizeof *p, TAG_PREF);
    if (!p) return *out = NULL, CUBLAS_STATUS_ALLOC_FAILED;
    p->max_workspace = 0;
    for (int i = 0; i < 4; i++) p->align[i] = 256;
    *out = (cublasLtMatmulPreference_t)p;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t emu_pref_destroy(cublasLtMatmulPreference_t p) { return destroy(p, TAG_PREF); }
static cublasStatus_t emu_pref_set(cublasLtMatmulPreference_t pref, int attr, const void *buf, size_t bytes) {
    EmuPref *p = (EmuPref *)pref;
    if (!IS(p, TAG_PREF)) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return set(&p->max_workspace, 8, buf, bytes);
    if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
        return set(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], 4, buf, bytes);
    fprintf(stderr, "emulated cuBLASLt: preference attribute %d is not modelled\n", attr);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* ---- the problem the descriptors describe ---- */

typedef struct {
    const EmuDesc *d;
    const EmuLayout *l[4]; /* A, B, C, D */
    uint64_t m, n, k;
} Problem;

static cublasStatus_t refuse(cublasStatus_t s, const char *why) {
    fprintf(stderr, "emulated cuBLASLt: %s\n", why);
    return s;
}

/* The sizes and types of the documented problem, checked: 0 with pb's m, n, k. */
static cublasStatus_t problem(Problem *pb, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) {
    const void *in[4] = {a, b, c, d};
    pb->d = (const EmuDesc *)desc;
    if (!IS(pb->d, TAG_DESC)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "not a matmul descriptor");
    for (int i = 0; i < 4; i++) {
        const EmuLayout *l = pb->l[i] = in[i];
        if (!IS(l, TAG_LAYOUT)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "a matrix without a layout");
        if (l->batch != 1) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "batches are not modelled");
        if (l->order != CUBLASLT_ORDER_COL && l->order != CUBLASLT_ORDER_ROW)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "orders other than COL and ROW are not modelled");
        uint64_t need = l->order == CUBLASLT_ORDER_COL ? l->rows : l->cols;
        if (l->ld < 0 || (uint64_t)l->ld < need || l->rows == 0 || l->cols == 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "a layout's ld is less than its order requires, or it is empty");
    }
    const EmuDesc *o = pb->d;
    if (o->transc != CUBLAS_OP_N || o->epilogue != CUBLASLT_EPILOGUE_DEFAULT ||
        o->pointer_mode != CUBLASLT_POINTER_MODE_HOST || !compute_known(o->compute) || o->scale != CUDA_R_32F ||
        (o->transa != CUBLAS_OP_N && o->transa != CUBLAS_OP_T) || (o->transb != CUBLAS_OP_N && o->transb != CUBLAS_OP_T))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a descriptor setting that is not modelled");
    const EmuLayout *A = pb->l[0], *B = pb->l[1], *C = pb->l[2], *D = pb->l[3];
    int ta = o->transa == CUBLAS_OP_T, tb = o->transb == CUBLAS_OP_T;
    pb->m = D->rows, pb->n = D->cols, pb->k = ta ? A->rows : A->cols;
    if ((ta ? A->cols : A->rows) != pb->m || (tb ? B->cols : B->rows) != pb->k || (tb ? B->rows : B->cols) != pb->n ||
        C->rows != D->rows || C->cols != D->cols)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "op(A) m x k, op(B) k x n and C, D m x n do not agree");
    int in_type = A->type;
    if (B->type != A->type || (in_type != CUDA_R_16BF && in_type != CUDA_R_32F) || C->type != CUDA_R_32F ||
        D->type != CUDA_R_32F || (in_type == CUDA_R_16BF && o->compute != CUBLAS_COMPUTE_32F))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a type combination that is not modelled");
    return CUBLAS_STATUS_SUCCESS;
}

/* What an algorithm records of the problem it was chosen for. */
static void algo_describe(uint64_t out[8], const Problem *pb, uint64_t workspace, const uint32_t align[4]) {
    memset(out, 0, 8 * sizeof *out);
    out[0] = ALGO_TAG, out[1] = workspace;
    out[2] = align[0] | (uint64_t)align[1] << 16 | (uint64_t)align[2] << 32 | (uint64_t)align[3] << 48;
    out[3] = pb->m, out[4] = pb->n, out[5] = pb->k;
    out[6] = (uint64_t)pb->d->transa | (uint64_t)pb->d->transb << 8 | (uint64_t)pb->d->compute << 16 |
             (uint64_t)pb->l[0]->type << 32;
}

static cublasStatus_t emu_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                    cublasLtMatmulPreference_t pref, int requested,
                                    cublasLtMatmulHeuristicResult_t *results, int *returned) {
    const EmuPref *p = (const EmuPref *)pref;
    Problem pb;
    heuristic_calls++;
    if (!IS(h, TAG_HANDLE)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0 || !IS(p, TAG_PREF) || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t s = problem(&pb, desc, a, b, c, d);
    if (s) return s;
    memset(results, 0, sizeof *results);
    /* the algorithm uses what workspace it is allowed, up to its own need */
    uint64_t workspace = p->max_workspace < EMU_WORKSPACE_BYTES ? p->max_workspace : EMU_WORKSPACE_BYTES;
    algo_describe(results->algo.data, &pb, workspace, p->align);
    results->workspaceSize = workspace, results->state = CUBLAS_STATUS_SUCCESS, results->wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the product ---- */

/* x rounded to TF32 (10 mantissa bits, nearest, ties to even), Inf and NaN kept. */
static float tf32_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

/* Element (r, c) of the matrix at p laid out as l, in fp32. */
static float element(const void *p, const EmuLayout *l, uint64_t r, uint64_t c, int tf32) {
    uint64_t i = l->order == CUBLASLT_ORDER_COL ? r + c * (uint64_t)l->ld : r * (uint64_t)l->ld + c;
    if (l->type == CUDA_R_16BF) return bf16_to_f32(((const uint16_t *)p)[i]);
    float x = ((const float *)p)[i];
    return tf32 ? tf32_round(x) : x;
}
static float *at32(void *p, const EmuLayout *l, uint64_t r, uint64_t c) {
    return (float *)p + (l->order == CUBLASLT_ORDER_COL ? r + c * (uint64_t)l->ld : r * (uint64_t)l->ld + c);
}

static int aligned(const void *p, uint64_t align) { return align == 0 || (uintptr_t)p % align == 0; }

static cublasStatus_t emu_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                                 cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                                 const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                                 const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                                 void *stream) {
    Problem pb;
    if (!IS(h, TAG_HANDLE)) return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasStatus_t s = problem(&pb, desc, a, b, c, d);
    if (s) return s;
    if (!alpha || !beta || !A || !B || !D || !algo) return refuse(CUBLAS_STATUS_INVALID_VALUE, "a NULL argument");
    uint64_t want[8], align = algo->data[2];
    algo_describe(want, &pb, algo->data[1], (uint32_t[4]){align & 0xffff, align >> 16 & 0xffff, align >> 32 & 0xffff,
                                                          align >> 48});
    if (memcmp(want, algo->data, sizeof want))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "an algorithm chosen for another problem (or none)");
    if (algo->data[1] > workspace_bytes || (algo->data[1] && !workspace))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "less workspace than the algorithm needs");
    const void *ptr[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if (ptr[i] && !aligned(ptr[i], align >> (16 * i) & 0xffff))
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "a matrix less aligned than the preference promised");
    float al = *(const float *)alpha, be = *(const float *)beta;
    if (be != 0.0f && !C) return refuse(CUBLAS_STATUS_INVALID_VALUE, "beta != 0 and no C");
    if (workspace) memset(workspace, 0x5a, algo->data[1]); /* the algorithm's scratch */
    int ta = pb.d->transa == CUBLAS_OP_T, tb = pb.d->transb == CUBLAS_OP_T;
    int tf32 = pb.d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    for (uint64_t j = 0; j < pb.n; j++)
        for (uint64_t i = 0; i < pb.m; i++) {
            float sum = 0.0f;
            for (uint64_t q = 0; q < pb.k; q++) {
                float x = ta ? element(A, pb.l[0], q, i, tf32) : element(A, pb.l[0], i, q, tf32);
                float y = tb ? element(B, pb.l[1], j, q, tf32) : element(B, pb.l[1], q, j, tf32);
                sum += x * y;
            }
            float out = al * sum; /* C is not read when beta is 0 */
            if (be != 0.0f) out += be * *at32((void *)C, pb.l[2], i, j);
            *at32(D, pb.l[3], i, j) = out;
        }
    multiply_adds += pb.m * pb.n * pb.k;
    return CUBLAS_STATUS_SUCCESS;
}

static const char *emu_status(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (the emulated cuBLASLt: stderr says why)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED (the emulated cuBLASLt: stderr says why)";
    default: return NULL;
    }
}

int gpu_emulator_blas_open(CublasLtApi *api, char *why, size_t n) {
    *api = (CublasLtApi){
        .Create = emu_create,
        .Destroy = emu_destroy,
        .MatmulDescCreate = emu_desc_create,
        .MatmulDescDestroy = emu_desc_destroy,
        .MatmulDescSetAttribute = emu_desc_set,
        .MatrixLayoutCreate = emu_layout_create,
        .MatrixLayoutDestroy = emu_layout_destroy,
        .MatmulPreferenceCreate = emu_pref_create,
        .MatmulPreferenceDestroy = emu_pref_destroy,
        .MatmulPreferenceSetAttribute = emu_pref_set,
        .MatmulAlgoGetHeuristic = emu_heuristic,
        .Matmul = emu_matmul,
        .GetStatusString = emu_status,
    };
    return 0;
}
