/* grpo/advantages.c — group-relative advantages and reward statistics, as
 * TRL's GRPOTrainer._generate_and_score_completions (see advantages.h).
 *
 * Is: the arithmetic on a batch of rewards, in double. Is not: calling reward
 * functions, or slicing a batch across processes. */
#include "grpo/advantages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

const char *const grpo_scale_rewards_names[] = {"group", "batch", "none", NULL};
const char *const grpo_aggregation_names[] = {"sum_then_normalize", "normalize_then_sum", NULL};

/* The statistics below are taken of x / u, u a power of two: 1, so that they are
 * the plain formulas bit for bit, unless the values pass 2^500, where their sums
 * or squared deviations could overflow (finite rewards of 1e308 would give an
 * infinite std and advantages of 0: no learning, no word). Then u is the largest
 * magnitude's power of two, exact to divide by, and every result is in units of u. */
static double unit_of(const double *x, size_t k) {
    double m = 0;
    for (size_t i = 0; i < k; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    int e;
    frexp(m, &e);
    return m > 0x1p500 ? ldexp(1.0, e - 1) : 1.0; /* m / u in [1, 2) */
}

/* torch.mean / torch.std (Bessel) of the k values x[0..k), in units of u. */
static double mean_of(const double *x, int k, double u) {
    double s = 0;
    for (int i = 0; i < k; i++) s += x[i] / u;
    return s / k;
}
static double std_of(const double *x, int k, double u) {
    if (k < 2) return NAN;
    double mu = mean_of(x, k, u), s = 0;
    for (int i = 0; i < k; i++) s += (x[i] / u - mu) * (x[i] / u - mu);
    return sqrt(s / (k - 1));
}

/* torch.nanmean and TRL's nanstd (nanmean of squared deviations times
 * count / (count - 1)): NaN for no values, NaN for one value (0 * inf); in units of u. */
static double nanmean_of(const double *x, int k, double u) {
    double s = 0;
    int c = 0;
    for (int i = 0; i < k; i++)
        if (!isnan(x[i])) s += x[i] / u, c++;
    return c ? s / c : NAN;
}
static double nanstd_of(const double *x, int k, double u) {
    double mu = nanmean_of(x, k, u), s = 0;
    int c = 0;
    for (int i = 0; i < k; i++)
        if (!isnan(x[i])) s += (x[i] / u - mu) * (x[i] / u - mu), c++;
    if (c < 2) return NAN;
    return sqrt(s / c * ((double)c / (c - 1)));
}

/* torch.isclose(std, 0): |std| <= atol 1e-8 (rtol * 0 adds nothing). */
static int isclose_zero(double s) { return fabs(s) <= 1e-8; }

void grpo_aggregate_rewards(double *r, const double *rpf, const double *weights, int F, int n, int G,
                            GrpoRewardAggregation agg) {
    CHECK(F >= 1 && n > 0 && G >= 1 && n % G == 0);
    if (agg == GRPO_AGG_SUM_THEN_NORMALIZE) {
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int f = 0; f < F; f++) {
                double v = rpf[(size_t)f * n + i] * (weights ? weights[f] : 1.0);
                if (!isnan(v)) s += v;   /* nansum */
            }
            r[i] = s;
        }
        return;
    }
    double *z = xmalloc((size_t)G * sizeof(double));
    for (int i = 0; i < n; i++) r[i] = 0.0;
    for (int f = 0; f < F; f++) {
        double w = weights ? weights[f] : 1.0;
        for (int g = 0; g < n / G; g++) {
            const double *x = rpf + (size_t)f * n + (size_t)g * G;
            const double u = unit_of(x, (size_t)G);
            double mu = nanmean_of(x, G, u);
            double sd = G > 1 ? nanstd_of(x, G, u) : 0.0;
            for (int j = 0; j < G; j++) z[j] = (x[j] / u - mu) / (sd + 1e-4 / u) * w;
            for (int j = 0; j < G; j++)
                if (!isnan(z[j])) r[g * G + j] += z[j];   /* nansum over functions */
        }
    }
    free(z);
}

int grpo_group_rewards_equal(const double *r, int G) {
    for (int j = 1; j < G; j++)
        if (!(r[j] == r[0])) return 0;
    return 1;
}

void grpo_advantages(double *adv, double *rewards_out, GrpoRewardStats *stats,
                     const double *rpf, const double *weights, int F, int n, int G,
                     GrpoScaleRewards scale, GrpoRewardAggregation agg) {
    CHECK(F >= 1 && n > 0 && G >= 1 && n % G == 0);
    double *r = xmalloc((size_t)n * sizeof(double));
    double *stdv = xmalloc((size_t)n * sizeof(double));   /* std_rewards, per completion */
    const int ngroups = n / G;

    grpo_aggregate_rewards(r, rpf, weights, F, n, G, agg);
    if (agg == GRPO_AGG_SUM_THEN_NORMALIZE) {
        const double u = unit_of(r, (size_t)n);
        double batch_std = n > 1 ? std_of(r, n, u) : 0.0;
        for (int g = 0; g < ngroups; g++) {
            const double *rg = r + (size_t)g * G;
            double mu = mean_of(rg, G, u);
            double sd = scale == GRPO_SCALE_BATCH ? batch_std : (G > 1 ? std_of(rg, G, u) : 0.0);
            for (int j = 0; j < G; j++) {
                int i = g * G + j;
                stdv[i] = sd * u;
                adv[i] = r[i] / u - mu;
                if (scale != GRPO_SCALE_NONE) adv[i] /= sd + 1e-4 / u;
                else adv[i] *= u;
            }
        }
    } else {
        const double u = unit_of(r, (size_t)n);
        double mu = mean_of(r, n, u);
        double sd = n > 1 ? std_of(r, n, u) : 0.0;
        for (int i = 0; i < n; i++) {
            stdv[i] = sd * u;
            adv[i] = (r[i] / u - mu) / (sd + 1e-4 / u);
        }
    }

    if (stats) {
        /* TRL logs the unweighted nansum, whatever the aggregation: summed in units
         * of every value's power of two, so two rewards of 1e308 have a mean of 2e308
         * (inf, logged as null) only where the mean itself passes a double, and a
         * finite std otherwise. */
        double *plain = xmalloc((size_t)n * sizeof(double));
        const double u = unit_of(rpf, (size_t)F * n);
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int f = 0; f < F; f++) {
                double v = rpf[(size_t)f * n + i];
                if (!isnan(v)) s += v / u;
            }
            plain[i] = s;
        }
        stats->reward_mean = mean_of(plain, n, 1.0) * u;
        stats->reward_std = std_of(plain, n, 1.0) * u;
        int zero = 0;
        for (int i = 0; i < n; i++) zero += isclose_zero(stdv[i]);
        stats->frac_reward_zero_std = (double)zero / n;
        for (int f = 0; f < F; f++) {
            const double *x = rpf + (size_t)f * n, u = unit_of(x, (size_t)n);
            if (stats->func_mean) stats->func_mean[f] = nanmean_of(x, n, u) * u;
            if (stats->func_std) stats->func_std[f] = nanstd_of(x, n, u) * u;
        }
        free(plain);
    }
    if (rewards_out) memcpy(rewards_out, r, (size_t)n * sizeof(double));
    free(r);
    free(stdv);
}
