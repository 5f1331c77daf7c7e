/* tests/machine/bf16_matmul.h — a machine of the other kind for the tests: a bf16
 * matmul on any CPU, installed through the bf16 GEMM's seam (ops/gemm.h:
 * gemm_bf16_set_matmul). Linked into every test binary; `make test-isa` also links
 * it into build/grpo, compiled to take the CPU for the other kind from the start. */
#ifndef GRPO_TESTS_MACHINE_BF16_MATMUL_H
#define GRPO_TESTS_MACHINE_BF16_MATMUL_H

#include "ops/gemm.h"

/* A bf16 matmul that sums as the widened path does (gemm_bf16_widened on the bf16
 * operands): on any CPU, gemm_bf16's native path (every fp32 operand rounded into a
 * buffer, dout rounded once for two products, the LM head's dz rounded in place)
 * with the widened path's bits — so any operand read after its memory was reused
 * shows as a difference. */
extern const GemmBf16Matmul test_bf16_matmul;

/* Installs test_bf16_matmul (on = 1) or takes this CPU for one without a bf16
 * matmul (on = 0); returns the choice to restore with gemm_bf16_set_matmul. */
GemmBf16Matmul test_bf16_machine(int on);

#endif
