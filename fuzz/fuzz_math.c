/* fuzz/fuzz_math.c — reward/math_parse.c and math_value.c: accuracy_reward's
 * reading of an answer and its comparison, on text a model wrote. The input is
 * split at its first NUL into a completion and a solution; both go through
 * reward_math_correct (extraction, normalisation, parse, comparison), and each
 * half is parsed alone and compared with itself. A value read from a text must
 * equal itself; the result of a comparison is 0 or 1. Not covered: the
 * reward's JSON column handling (reward.c). */
#include "fuzz.h"
#include "reward/math_expr.h"
#include "reward/reward_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 2);
    memcpy(text, data, size);
    text[size] = 0, text[size + 1] = 0;
    const char *completion = text, *solution = text + strlen(text) + 1;
    if (solution > text + size) solution = text + size;
    int r = reward_math_correct(completion, solution);
    FUZZ_ASSERT(r == -1 || r == 0 || r == 1);
    MathArena *arena = math_arena_new();
    const MathValue *a = math_parse(arena, completion), *b = math_parse(arena, solution);
    if (a) FUZZ_ASSERT(math_values_equal(a, a) == 1 || math_values_equal(a, a) == 0);
    if (a && b) FUZZ_ASSERT(math_values_equal(a, b) <= 1);
    math_arena_free(arena);
    free(text);
    return 0;
}
