/* gpu/cublaslt.h — the part of NVIDIA's cuBLASLt grpo.c uses, declared here from
 * NVIDIA's published API and opened at run time with dlopen (libcublasLt.so.13, else
 * .so.12, else .so): the build needs no CUDA toolkit, and a machine without the
 * library is told so when a product is first asked for.
 *
 * Every value below is NVIDIA's, as published in cublasLt.h, cublas_api.h and
 * library_types.h (CUDA 11.4 to 13; the cuBLAS documentation, "cuBLASLt API
 * Reference", lists the same). Only what grpo.c calls is here. */
#ifndef GRPO_GPU_CUBLASLT_H
#define GRPO_GPU_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

/* cublas_api.h: cublasStatus_t */
typedef int cublasStatus_t;
enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
/* cublas_api.h: cublasOperation_t */
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
/* cublas_api.h: cublasComputeType_t. 32F: fp32 products and sums of the operands as
 * they are (bf16 operands: exact products); FAST_TF32 would round fp32 operands to
 * TF32 (10 mantissa bits) first, which grpo.c never asks for. */
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
/* library_types.h: cudaDataType_t */
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
/* cublasLt.h: cublasLtMatmulDescAttributes_t (an int32_t each; defaults: scale type =
 * compute type, pointer mode host, both transposes CUBLAS_OP_N, epilogue none) */
enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_TRANSC = 5,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7, /* uint32_t */
};
/* cublasLt.h: cublasLtPointerMode_t, cublasLtEpilogue_t's default */
enum { CUBLASLT_POINTER_MODE_HOST = 0, CUBLASLT_EPILOGUE_DEFAULT = 1 };
/* cublasLt.h: cublasLtMatrixLayoutAttribute_t (TYPE uint32_t, ORDER int32_t, ROWS and
 * COLS uint64_t, LD int64_t, BATCH_COUNT int32_t) and cublasLtOrder_t (default COL:
 * LD is the stride between columns) */
enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,
    CUBLASLT_MATRIX_LAYOUT_LD = 4,
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
};
enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 };
/* cublasLt.h: cublasLtMatmulPreferenceAttributes_t. MAX_WORKSPACE_BYTES uint64_t
 * (default 0: no workspace); MIN_ALIGNMENT_*_BYTES uint32_t (default 256: the
 * heuristic assumes every pointer 256-byte aligned unless told otherwise) */
enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

/* cublasLt.h's opaque handles (pointers to the library's objects) and its two
 * semi-opaque structs, by their published layouts */
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;  /* the workspace this algo needs, bytes */
    cublasStatus_t state;  /* CUBLAS_STATUS_SUCCESS: the other fields are valid */
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

/* The library's functions, by the names libcublasLt exports. */
typedef struct {
    void *lib;
    cublasStatus_t (*Create)(cublasLtHandle_t *handle);
    cublasStatus_t (*Destroy)(cublasLtHandle_t handle);
    cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t *desc, int compute_type, int scale_type);
    cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t desc);
    cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, int attr, const void *buf, size_t bytes);
    cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t *layout, int type, uint64_t rows, uint64_t cols,
                                         int64_t ld);
    cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t layout);
    cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t *pref);
    cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref);
    cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref, int attr, const void *buf,
                                                   size_t bytes);
    cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                             cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                             cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                             cublasLtMatmulPreference_t pref, int requested,
                                             cublasLtMatmulHeuristicResult_t *results, int *returned);
    /* D = alpha op(A) op(B) + beta C; alpha, beta host pointers (pointer mode host),
     * stream a CUstream (NULL: the context's default stream, where our kernels run) */
    cublasStatus_t (*Matmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                             cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                             const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                             const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes, void *stream);
    const char *(*GetStatusString)(cublasStatus_t status); /* optional (NULL where absent) */
} CublasLtApi;

/* Opens libcublasLt (.so.13, .so.12, .so, the first found) and finds every function
 * above: 0, or -1 with why[n] saying what is missing. */
int cublaslt_api_open(CublasLtApi *api, char *why, size_t n);
/* Forgets api's functions; the library itself stays loaded (see cublaslt.c). */
void cublaslt_api_close(CublasLtApi *api);
/* The library's text for s, or "cuBLAS status N". */
const char *cublaslt_status_text(const CublasLtApi *api, cublasStatus_t s);

#endif
