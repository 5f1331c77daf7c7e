/* tests/zmm/emulate.h — builds the AVX-512 code of the library on a CPU without it.
 *
 * Force-included (gcc -include) into every file of `make test-isa`'s build where the
 * CPU lacks AVX-512 (see the Makefile): the compiler's own intrinsics are declared first, then
 * SIMDe (Debian's libsimde-dev) is asked to define the AVX-512 F / VL / BW intrinsic
 * names as its portable versions, and the build is told it targets AVX-512 F and VL
 * — so every `#ifdef __AVX512F__` / `__AVX512VL__` branch of src/ is compiled and
 * run by the test suite here, on the AVX2 + FMA machines CI and development have.
 * SIMDe computes each such intrinsic with the host's AVX2 / FMA halves (fused where
 * the instruction fuses), so results are the bits an AVX-512 CPU computes; only the
 * speed differs.
 *
 * Not emulated: oneDNN and OpenBLAS choose their kernels when they run, from the CPU
 * they find; their AVX-512 and bf16 kernels need a CPU that has them. */
#ifndef GRPO_TESTS_ZMM_EMULATE_H
#define GRPO_TESTS_ZMM_EMULATE_H

#if defined(__AVX512F__)
#error "tests/zmm/emulate.h: this CPU has AVX-512; the plain build already runs its code"
#endif

#include <immintrin.h> /* first: later includes of it are then empty, and the names below stand */

#define SIMDE_X86_AVX512F_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512VL_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512BW_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#undef I /* SIMDe brings <complex.h>, whose I and complex are names src/ uses */
#undef complex

/* the vector and mask types, by the names src/ uses (SIMDe's own typedefs of them
 * would clash with the compiler's) */
#define __m512 simde__m512
#define __m512i simde__m512i
#define __mmask8 simde__mmask8
#define __mmask16 simde__mmask16

/* The three src/ uses that SIMDe 0.7.4 lacks, written out here; the reduction adds
 * in the order of gcc's own _mm512_reduce_add_ps (halves, then quarters, then pairs),
 * so its bits are the compiler's. */
#include <stdint.h>
#include <string.h>

static inline simde__m128i emulate_mm512_cvtepi32_epi8(simde__m512i a) { /* vpmovdb: truncates */
    int32_t v[16];
    int8_t r[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++) r[i] = (int8_t)v[i];
    simde__m128i out;
    memcpy(&out, r, sizeof r);
    return out;
}
static inline float emulate_mm512_reduce_add_ps(simde__m512 a) {
    float v[16], h[8], q[4];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 8; i++) h[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++) q[i] = h[i + 4] + h[i];
    return (q[0] + q[2]) + (q[1] + q[3]);
}
static inline simde__m256 emulate_mm256_maskz_mul_ps(simde__mmask8 k, simde__m256 a, simde__m256 b) {
    float x[8], y[8], r[8];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    for (int i = 0; i < 8; i++) r[i] = (k >> i) & 1 ? x[i] * y[i] : 0.0f;
    simde__m256 out;
    memcpy(&out, r, sizeof r);
    return out;
}
#define _mm512_cvtepi32_epi8 emulate_mm512_cvtepi32_epi8
#define _mm512_reduce_add_ps emulate_mm512_reduce_add_ps
#define _mm256_maskz_mul_ps emulate_mm256_maskz_mul_ps

#define __AVX512F__ 1
#define __AVX512VL__ 1

#endif
