/* tests/machine/gpu_emulator_blas.h — the emulated GPU's cuBLASLt (gpu/cublaslt.h's
 * functions on the emulator's device memory, which is host memory), installed
 * through the products' seam (gpu/gemm.h: gpu_set_blas) by test_gpu_machine, so
 * gpu/gemm.c's descriptors, layouts, heuristic query and row-major swap run in
 * `make test` where no GPU is.
 *
 * A model of cuBLASLt's documented behaviour, not of grpo.c's calls: it keeps every
 * attribute a descriptor is given (unset ones at the documented defaults: both
 * transposes CUBLAS_OP_N, column-major order, pointer mode host, a workspace of 0
 * bytes, 256-byte alignment), checks the sizes the reference states (op(A) is m x k,
 * op(B) k x n, C and D m x n; ld >= rows, column-major), and computes
 * D = alpha op(A) op(B) + beta C from what the descriptors say — so a wrong transpose,
 * leading dimension or row/column-major swap gives a wrong result or a refusal.
 * Products: each operand widened exactly to fp32 (bf16), or rounded to TF32 under
 * CUBLAS_COMPUTE_32F_FAST_TF32; summed in fp32 over k in order; C not read when beta
 * is 0 (the BLAS convention cuBLAS states for its gemm). Stricter than the library where the library's behaviour is "undefined" or
 * unstated: an algorithm is refused for a problem other than the one the heuristic
 * chose it for, a pointer less aligned than the preference promised is refused, and
 * the workspace is overwritten (so an operand placed in it shows). Not modelled:
 * batches, epilogues, other orders and types (refused as CUBLAS_STATUS_NOT_SUPPORTED),
 * streams (every call completes before it returns). */
#ifndef GRPO_TESTS_MACHINE_GPU_EMULATOR_BLAS_H
#define GRPO_TESTS_MACHINE_GPU_EMULATOR_BLAS_H

#include "gpu/cublaslt.h"

/* The emulated library's functions in api (the form of cublaslt_api_open). */
int gpu_emulator_blas_open(CublasLtApi *api, char *why, size_t n);
/* Handles, descriptors, layouts and preferences created and not yet destroyed. */
int gpu_emulator_blas_live(void);
/* cublasLtMatmulAlgoGetHeuristic calls so far (the tests check a shape is planned once). */
long gpu_emulator_blas_heuristic_calls(void);
/* Multiply-adds (m n k) of the products done so far: what a test counts to show a
 * product is run or not (recomputation's). */
unsigned long long gpu_emulator_blas_multiply_adds(void);

#endif
