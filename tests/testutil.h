/* tests/testutil.h — a minimal harness shared by the C tests.
 *
 * Each test binary calls T_CHECK / T_CLOSE as it goes and ends with
 * `return t_summary("name");`, which prints the counts and returns non-zero
 * when anything failed, so a failing test can never exit 0. */
#ifndef GRPO_TESTS_TESTUTIL_H
#define GRPO_TESTS_TESTUTIL_H

#include <math.h>
#include <stdio.h>

static int t_failures = 0, t_checks = 0;

#define T_CHECK(cond, ...)                                                     \
    do {                                                                       \
        t_checks++;                                                            \
        if (!(cond)) {                                                         \
            t_failures++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* |got - want| <= atol + rtol * |want|, the tolerance rule of every numeric test. */
static inline int t_close(double got, double want, double atol, double rtol) {
    if (isnan(got) || isnan(want)) return 0;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Compares n values; reports the worst element. Returns 1 when all are close. */
static inline int t_close_array_at(const char *file, int line, const char *what,
                                   const float *got, const double *want, long n,
                                   double atol, double rtol) {
    long worst = -1;
    double worst_excess = 0;
    for (long i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        double tol = atol + rtol * fabs(want[i]);
        double excess = isnan(got[i]) ? INFINITY : err - tol;
        if (excess > worst_excess || (isnan(got[i]) && worst < 0)) {
            worst_excess = excess;
            worst = i;
        }
    }
    t_checks++;
    if (worst >= 0) {
        t_failures++;
        fprintf(stderr, "FAIL %s:%d: %s: element %ld got %.9g want %.9g (atol %g rtol %g)\n",
                file, line, what, worst, (double)got[worst], want[worst], atol, rtol);
        return 0;
    }
    return 1;
}
#define T_CLOSE_ARRAY(what, got, want, n, atol, rtol)                          \
    t_close_array_at(__FILE__, __LINE__, (what), (got), (want), (n), (atol), (rtol))

static inline int t_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, t_checks, t_failures);
    return t_failures ? 1 : 0;
}

#endif
