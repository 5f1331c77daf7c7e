/* tests/machine/bf16_matmul.c — see bf16_matmul.h. Compiled with
 * -DTEST_BF16_MATMUL=1 (or 0), the binary it is linked into starts as a machine with
 * (or without) a bf16 matmul: make test-isa runs the whole suite so, for the kind of
 * CPU it is not on. */
#include "machine/bf16_matmul.h"

static int widened(int trans_a, int trans_b, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                   const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    gemm_bf16_widened(trans_a, trans_b, M, N, K, alpha, (GemmBf16Operand){.h = A, .ld = lda},
                      (GemmBf16Operand){.h = B, .ld = ldb}, beta, C, ldc);
    return 0;
}

const GemmBf16Matmul test_bf16_matmul = {1, widened, "a bf16 matmul emulated for tests (widened sums)"};

GemmBf16Matmul test_bf16_machine(int on) {
    return gemm_bf16_set_matmul(on ? test_bf16_matmul : (GemmBf16Matmul){0, NULL, NULL});
}

#ifdef TEST_BF16_MATMUL
__attribute__((constructor)) static void start_as_the_other_kind(void) { test_bf16_machine(TEST_BF16_MATMUL); }
#endif
