/* tests/grpo/test_advantages.c — grpo_advantages against the float64 torch
 * re-statement of TRL's _generate_and_score_completions (fixture), for
 * sum_then_normalize with scale group / batch / none and normalize_then_sum;
 * rewards include a None (NaN) and a group with zero std.
 * Tolerance: both sides are double from identical inputs: atol 1e-12, rtol 1e-9
 * (the division by std + 1e-4 of a zero-std group amplifies rounding of
 * r - mean by 1e4, hence the atol). Plus hand-checked edge cases. */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "grpo/advantages.h"
#include "testutil.h"
#include "grpo/fixture.h"

int main(void) {
    StFile f;
    GrpoErr err;
    if (st_open(&f, GRPO_FIXTURE, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    long nr, nw;
    double *rpf = fx_f64(&f, "rewards_per_func", &nr), *w = fx_f64(&f, "reward_weights", &nw);
    const int F = (int)nw, n = (int)(nr / nw), G = 4;
    const GrpoRewardAggregation aggs[4] = {GRPO_AGG_SUM_THEN_NORMALIZE, GRPO_AGG_SUM_THEN_NORMALIZE,
                                           GRPO_AGG_SUM_THEN_NORMALIZE, GRPO_AGG_NORMALIZE_THEN_SUM};
    const GrpoScaleRewards scales[4] = {GRPO_SCALE_GROUP, GRPO_SCALE_BATCH, GRPO_SCALE_NONE, GRPO_SCALE_GROUP};
    for (int k = 0; k < 4; k++) {
        char name[64], what[64];
        snprintf(name, sizeof name, "adv%d.advantages", k);
        double *want_a = fx_f64(&f, name, NULL);
        snprintf(name, sizeof name, "adv%d.rewards", k);
        double *want_r = fx_f64(&f, name, NULL);
        snprintf(name, sizeof name, "adv%d.stats", k);
        double *want_s = fx_f64(&f, name, NULL);
        double *a = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n);
        double fm[8], fs[8];
        GrpoRewardStats st = {.func_mean = fm, .func_std = fs};
        grpo_advantages(a, r, &st, rpf, w, F, n, G, scales[k], aggs[k]);
        snprintf(what, sizeof what, "mode %d advantages", k);
        close_f64(what, a, want_a, n, 1e-12, 1e-9);
        snprintf(what, sizeof what, "mode %d rewards", k);
        close_f64(what, r, want_r, n, 1e-12, 1e-9);
        double got_s[3 + 2 * 8] = {st.reward_mean, st.reward_std, st.frac_reward_zero_std};
        for (int i = 0; i < F; i++) got_s[3 + 2 * i] = fm[i], got_s[4 + 2 * i] = fs[i];
        snprintf(what, sizeof what, "mode %d stats", k);
        close_f64(what, got_s, want_s, 3 + 2 * F, 1e-12, 1e-9);
        free(want_a), free(want_r), free(want_s), free(a), free(r);
    }
    /* zero-std group in scale group: frac 1/3 (one of three groups) */
    {
        double a[12];
        GrpoRewardStats st = {0};
        grpo_advantages(a, NULL, &st, rpf, w, F, n, G, GRPO_SCALE_GROUP, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(fabs(st.frac_reward_zero_std - 1.0 / 3) < 1e-15, "frac %g", st.frac_reward_zero_std);
        for (int i = 4; i < 8; i++) T_CHECK(a[i] == 0.0, "zero-std group advantage %g", a[i]);
    }
    /* hand-computed: one group {0, 1, 2, 3}, std = sqrt(5/3) */
    {
        double r[4] = {0, 1, 2, 3}, a[4];
        grpo_advantages(a, NULL, NULL, r, NULL, 1, 4, 4, GRPO_SCALE_GROUP, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(fabs(a[0] - (-1.5 / (sqrt(5.0 / 3.0) + 1e-4))) < 1e-15, "a0 %.17g", a[0]);
        grpo_advantages(a, NULL, NULL, r, NULL, 1, 4, 1, GRPO_SCALE_GROUP, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(a[0] == 0 && a[3] == 0, "G = 1 gives zero advantages");
        /* all None: nansum 0 */
        double nn[4] = {NAN, NAN, NAN, NAN};
        GrpoRewardStats st = {0};
        double fm, fs;
        st.func_mean = &fm, st.func_std = &fs;
        grpo_advantages(a, NULL, &st, nn, NULL, 1, 4, 2, GRPO_SCALE_BATCH, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(a[0] == 0 && st.reward_mean == 0 && isnan(fm) && isnan(fs) && st.frac_reward_zero_std == 1,
                "all-None rewards");
    }
    {
        /* rewards near DBL_MAX: their sums and squared deviations would overflow (a
         * std of inf, advantages of 0); taken in units of a power of two, the
         * advantages are those of the same rewards scaled down (the + 1e-4 on their
         * std then vanishes), and the statistics finite */
        const double x[4] = {1, -1, 0.5, 0}, mean = 0.125;
        double big[4], a[4], s2 = 0, fm, fs;
        for (int i = 0; i < 4; i++) big[i] = x[i] * 1e308, s2 += (x[i] - mean) * (x[i] - mean);
        double sd = sqrt(s2 / 3);
        for (int agg = 0; agg < 2; agg++) {
            GrpoRewardStats st = {0};
            st.func_mean = &fm, st.func_std = &fs;
            grpo_advantages(a, NULL, &st, big, NULL, 1, 4, 4, GRPO_SCALE_GROUP, (GrpoRewardAggregation)agg);
            for (int i = 0; i < 4; i++) { /* normalize_then_sum: z has std 1, then (z - 0) / (1 + 1e-4) */
                double want = (x[i] - mean) / sd / (agg ? 1 + 1e-4 : 1);
                T_CHECK(fabs(a[i] - want) < 1e-12, "aggregation %d: advantage %d of rewards near DBL_MAX: %.17g, "
                        "want %.17g", agg, i, a[i], want);
            }
            T_CHECK(fabs(st.reward_mean / 1.25e307 - 1) < 1e-12 && fabs(st.reward_std / (sd * 1e308) - 1) < 1e-12 &&
                        fabs(fm / 1.25e307 - 1) < 1e-12 && fabs(fs / (sd * 1e308) - 1) < 1e-12 &&
                        st.frac_reward_zero_std == 0,
                    "aggregation %d: statistics of rewards near DBL_MAX: mean %g std %g", agg, st.reward_mean,
                    st.reward_std);
        }
        grpo_advantages(a, NULL, NULL, big, NULL, 1, 4, 4, GRPO_SCALE_NONE, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(fabs(a[1] / -1.125e308 - 1) < 1e-12, "scale none near DBL_MAX: %g", a[1]);
    }
    {
        /* two functions near DBL_MAX, weights 0.5 (issue 38): the logged unweighted sum
         * of each completion passes a double, its mean (0.25e308) and std (1.7e308)
         * are taken in units and stay finite (they were inf) */
        const double x[4] = {1, -1, 0.5, 0};
        double two[8], a[4], fm[2], fs[2], w2[2] = {0.5, 0.5}, s2 = 0;
        for (int i = 0; i < 4; i++) two[i] = two[4 + i] = x[i] * 1e308; /* sums of 2e308 */
        for (int i = 0; i < 4; i++) s2 += (2 * x[i] - 0.25) * (2 * x[i] - 0.25);
        GrpoRewardStats st = {0};
        st.func_mean = fm, st.func_std = fs;
        grpo_advantages(a, NULL, &st, two, w2, 2, 4, 4, GRPO_SCALE_GROUP, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(fabs(st.reward_mean / (0.25 * 1e308) - 1) < 1e-12 &&
                    fabs(st.reward_std / (sqrt(s2 / 3) * 1e308) - 1) < 1e-12,
                "sums past DBL_MAX: mean %g std %g (want %g %g)", st.reward_mean, st.reward_std, 0.25 * 1e308,
                sqrt(s2 / 3) * 1e308);
        for (int i = 0; i < 4; i++) T_CHECK(isfinite(a[i]), "advantage %d finite: %g", i, a[i]);
    }
    {
        /* dynamic sampling's test of a group (filter_groups): the aggregate the
         * advantages come from equal within the group. Two functions, weights
         * {1, 2}, groups of 3: [0] every function constant; [1] the first varies
         * but its weight is 0 in the second call; [2] the functions vary and cancel
         * in the weighted sum (1*2 + 2*0 = 1*0 + 2*1); [3] a None (NaN, dropped by
         * nansum) beside an equal total; [4] differ in the last completion only. */
        enum { G3 = 3, NG = 5, N = G3 * NG };
        const double f1[N] = {1, 1, 1, 0, 1, 0, 2, 0, 0, NAN, 1, 1, 5, 5, 5},
                     f2[N] = {0, 0, 0, 3, 3, 3, 0, 1, 1, 1, 0.5, 0.5, 1, 1, 1.5};
        double rpf[2 * N], r[N], weights[2] = {1, 2};
        memcpy(rpf, f1, sizeof f1), memcpy(rpf + N, f2, sizeof f2);
        const int want_equal[NG] = {1, 0, 1, 1, 0};
        grpo_aggregate_rewards(r, rpf, weights, 2, N, G3, GRPO_AGG_SUM_THEN_NORMALIZE);
        double adv[N], r2[N];
        grpo_advantages(adv, r2, NULL, rpf, weights, 2, N, G3, GRPO_SCALE_GROUP, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(!memcmp(r, r2, sizeof r), "the aggregate is grpo_advantages' rewards");
        for (int g = 0; g < NG; g++) {
            int eq = grpo_group_rewards_equal(r + g * G3, G3);
            T_CHECK(eq == want_equal[g], "sum_then_normalize group %d: equal %d, want %d", g, eq, want_equal[g]);
            for (int j = 0; eq && j < G3; j++) T_CHECK(adv[g * G3 + j] == 0, "an equal group's advantage %g", adv[g * G3 + j]);
        }
        weights[0] = 0; /* group 1 then sums to 6, 6, 6 */
        grpo_aggregate_rewards(r, rpf, weights, 2, N, G3, GRPO_AGG_SUM_THEN_NORMALIZE);
        T_CHECK(grpo_group_rewards_equal(r + G3, G3), "a varying function of weight 0 gives no signal");
        /* normalize_then_sum: each function's group z-scores; a group whose every
         * function is constant sums to 0 everywhere, cancelling z-scores of unequal
         * weights do not */
        weights[0] = 1;
        grpo_aggregate_rewards(r, rpf, weights, 2, N, G3, GRPO_AGG_NORMALIZE_THEN_SUM);
        grpo_advantages(adv, r2, NULL, rpf, weights, 2, N, G3, GRPO_SCALE_GROUP, GRPO_AGG_NORMALIZE_THEN_SUM);
        T_CHECK(!memcmp(r, r2, sizeof r), "the normalize_then_sum aggregate is grpo_advantages' rewards");
        T_CHECK(grpo_group_rewards_equal(r, G3) && r[0] == 0, "constant functions: z-scores 0 (%g)", r[0]);
        T_CHECK(!grpo_group_rewards_equal(r + 2 * G3, G3), "z-scores of weights 1 and 2 do not cancel");
        T_CHECK(!grpo_group_rewards_equal(r + 4 * G3, G3), "normalize_then_sum: the last completion differs");
        const double nan_group[2] = {NAN, NAN};
        T_CHECK(!grpo_group_rewards_equal(nan_group, 2), "NaN is never equal");
    }
    {
        T_CHECK(!strcmp(grpo_scale_rewards_names[GRPO_SCALE_BATCH], "batch") && !grpo_scale_rewards_names[3], "names");
        T_CHECK(!strcmp(grpo_aggregation_names[GRPO_AGG_NORMALIZE_THEN_SUM], "normalize_then_sum"), "agg");
    }
    free(rpf), free(w);
    st_close(&f);
    return t_summary("grpo/test_advantages");
}
