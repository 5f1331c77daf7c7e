/* tests/gpu/api_values.c — every constant, type size and struct offset grpo.c's own
 * declarations of the CUDA driver API and cuBLASLt use (src/gpu/cuda.h,
 * src/gpu/cublaslt.h), printed one per line. tests/gpu/test_api_headers.sh compiles it
 * twice — against those declarations, and with -DNVIDIA_HEADERS against a CUDA
 * toolkit's cuda.h and cublasLt.h — and compares the two lists: a value copied wrong
 * would pass every emulated test and fail only on a GPU. */
#include <stddef.h>
#include <stdio.h>

#ifdef NVIDIA_HEADERS
#include <cublasLt.h>
#include <cuda.h>
#else
#include "gpu/cublaslt.h"
#include "gpu/cuda.h"
#endif

#define V(x) printf("%-48s %lld\n", #x, (long long)(x))

int main(void) {
    /* the driver API (gpu/cuda.h) */
    V(CUDA_SUCCESS);
    V(CUDA_ERROR_NO_DEVICE);
    V(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    V(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    V(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    V(CU_JIT_ERROR_LOG_BUFFER);
    V(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    V(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    V(sizeof(CUresult));
    V(sizeof(CUdevice));
    V(sizeof(CUdeviceptr));
    /* cuBLASLt (gpu/cublaslt.h) */
    V(CUBLAS_STATUS_SUCCESS);
    V(CUBLAS_STATUS_NOT_INITIALIZED);
    V(CUBLAS_STATUS_ALLOC_FAILED);
    V(CUBLAS_STATUS_INVALID_VALUE);
    V(CUBLAS_STATUS_ARCH_MISMATCH);
    V(CUBLAS_STATUS_EXECUTION_FAILED);
    V(CUBLAS_STATUS_INTERNAL_ERROR);
    V(CUBLAS_STATUS_NOT_SUPPORTED);
    V(CUBLAS_OP_N);
    V(CUBLAS_OP_T);
    V(CUBLAS_COMPUTE_32F);
    V(CUBLAS_COMPUTE_32F_FAST_TF32);
    V(CUDA_R_32F);
    V(CUDA_R_16BF);
    V(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
    V(CUBLASLT_MATMUL_DESC_SCALE_TYPE);
    V(CUBLASLT_MATMUL_DESC_POINTER_MODE);
    V(CUBLASLT_MATMUL_DESC_TRANSA);
    V(CUBLASLT_MATMUL_DESC_TRANSB);
    V(CUBLASLT_MATMUL_DESC_TRANSC);
    V(CUBLASLT_MATMUL_DESC_EPILOGUE);
    V(CUBLASLT_POINTER_MODE_HOST);
    V(CUBLASLT_EPILOGUE_DEFAULT);
    V(CUBLASLT_MATRIX_LAYOUT_TYPE);
    V(CUBLASLT_MATRIX_LAYOUT_ORDER);
    V(CUBLASLT_MATRIX_LAYOUT_ROWS);
    V(CUBLASLT_MATRIX_LAYOUT_COLS);
    V(CUBLASLT_MATRIX_LAYOUT_LD);
    V(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    V(CUBLASLT_ORDER_COL);
    V(CUBLASLT_ORDER_ROW);
    V(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
    V(sizeof(cublasStatus_t));
    V(sizeof(cublasLtMatmulAlgo_t));
    V(sizeof(cublasLtMatmulHeuristicResult_t));
    V(offsetof(cublasLtMatmulHeuristicResult_t, algo));
    V(offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
    V(offsetof(cublasLtMatmulHeuristicResult_t, state));
    V(offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));
    V(offsetof(cublasLtMatmulHeuristicResult_t, reserved));
    return 0;
}
