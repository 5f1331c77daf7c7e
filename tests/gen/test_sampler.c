/* tests/gen/test_sampler.c — the logits processors against exact distributions on
 * a 6-token vocabulary (kept sets worked out by hand from the transformers rules),
 * their order, temperature -> 0, and the inverse-CDF draw. */
#include <string.h>

#include "gen/sampler.h"
#include "testutil.h"

#define V 6
/* softmax of z: p ~ [0.2225, 0.0818, 0.0496, 0.0301, 0.0111, 0.6048] */
static const float z[V] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 3.0f};

/* expected: softmax of zz restricted to keep[] */
static void expect_kept(const char *what, const SamplerOpts *o, const int32_t *ctx, int nctx,
                        const double *zz, const int *keep) {
    SamplerScratch s;
    sampler_scratch_create(&s, V);
    double got[V], want[V], sum = 0;
    sampler_distribution(got, z, V, o, ctx, nctx, &s);
    for (int v = 0; v < V; v++) sum += keep[v] ? exp(zz[v]) : 0;
    for (int v = 0; v < V; v++) want[v] = keep[v] ? exp(zz[v]) / sum : 0;
    int ok = 1;
    for (int v = 0; v < V; v++) ok &= (want[v] == 0) == (got[v] == 0) && fabs(got[v] - want[v]) < 1e-12;
    T_CHECK(ok, "%s: got [%g %g %g %g %g %g]", what, got[0], got[1], got[2], got[3], got[4], got[5]);
    sampler_scratch_free(&s);
}

int main(void) {
    SamplerOpts o;
    double zz[V];
    for (int v = 0; v < V; v++) zz[v] = z[v];

    sampler_opts_default(&o);
    expect_kept("plain softmax", &o, NULL, 0, zz, (int[]){1, 1, 1, 1, 1, 1});

    o.top_k = 2;
    expect_kept("top_k 2 keeps the two largest", &o, NULL, 0, zz, (int[]){1, 0, 0, 0, 0, 1});
    o.top_k = 6;
    expect_kept("top_k = V keeps all", &o, NULL, 0, zz, (int[]){1, 1, 1, 1, 1, 1});

    sampler_opts_default(&o);
    /* ascending cumulative: 0.0111 (4), 0.0412 (3), 0.0908 (2), 0.1726 (1): <= 0.1 removed */
    o.top_p = 0.9f;
    expect_kept("top_p 0.9", &o, NULL, 0, zz, (int[]){1, 1, 0, 0, 0, 1});
    o.top_p = 0.5f;   /* only 5 (0.6048) is needed: 1 - 0.6048 = 0.3952 < 0.5 */
    expect_kept("top_p 0.5", &o, NULL, 0, zz, (int[]){0, 0, 0, 0, 0, 1});
    o.top_p = 0.01f;  /* at least one token is kept */
    expect_kept("top_p tiny keeps the argmax", &o, NULL, 0, zz, (int[]){0, 0, 0, 0, 0, 1});

    sampler_opts_default(&o);
    o.min_p = 0.1f;   /* threshold 0.0605: 2 (0.0496), 3, 4 removed */
    expect_kept("min_p 0.1", &o, NULL, 0, zz, (int[]){1, 1, 0, 0, 0, 1});
    o.min_p = 0.2f;   /* threshold 0.121 */
    expect_kept("min_p 0.2", &o, NULL, 0, zz, (int[]){1, 0, 0, 0, 0, 1});

    /* repetition penalty: positive logits divided, negative multiplied, once per token */
    sampler_opts_default(&o);
    o.repetition_penalty = 2.0f;
    int32_t ctx[] = {0, 4, 4, 0};
    double zr[V];
    memcpy(zr, zz, sizeof zr);
    zr[0] = 1.0, zr[4] = -2.0;
    expect_kept("repetition_penalty 2", &o, ctx, 4, zr, (int[]){1, 1, 1, 1, 1, 1});

    /* temperature then top_k: order matters only through ties here; temperature scales */
    sampler_opts_default(&o);
    o.temperature = 0.5f;
    double zt[V];
    for (int v = 0; v < V; v++) zt[v] = zz[v] / 0.5;
    expect_kept("temperature 0.5", &o, NULL, 0, zt, (int[]){1, 1, 1, 1, 1, 1});
    /* penalty before temperature before top_p: penalised token 5 (3 -> 1.5), T = 0.5
     * -> z' = [4, 2, 1, 0, -2, 3]; p' ~ [0.6572, 0.0889, 0.0327, 0.0120, 0.0016, 0.2418 ];
     * top_p 0.8 removes the ascending prefix with cumulative <= 0.2: 4, 3, 2, 1 */
    o.repetition_penalty = 2.0f;
    o.top_p = 0.8f;
    int32_t ctx5[] = {5};
    double zo[V] = {4, 2, 1, 0, -2, 3};
    expect_kept("penalty -> temperature -> top_p", &o, ctx5, 1, zo, (int[]){1, 0, 0, 0, 0, 1});

    /* temperature -> 0: the limit is greedy, and 0 is greedy exactly */
    sampler_opts_default(&o);
    SamplerScratch s;
    sampler_scratch_create(&s, V);
    double p[V];
    o.temperature = 0.01f;
    sampler_distribution(p, z, V, &o, NULL, 0, &s);
    T_CHECK(p[5] >= 1 - 1e-15 && p[0] < 1e-40, "temperature 0.01: p[argmax] = %g, p[0] = %g", p[5], p[0]);
    o.temperature = 0;
    sampler_distribution(p, z, V, &o, NULL, 0, &s);
    T_CHECK(p[5] == 1 && p[0] == 0, "temperature 0 is one-hot");
    T_CHECK(sampler_sample(z, V, &o, NULL, 0, 0.999, &s) == 5, "greedy draw");

    /* inverse CDF in id order: u on a fine grid reproduces the probabilities */
    sampler_opts_default(&o);
    o.top_k = 3;
    double want[V], count[V] = {0};
    sampler_distribution(want, z, V, &o, NULL, 0, &s);
    int n = 100000;
    for (int i = 0; i < n; i++) count[sampler_sample(z, V, &o, NULL, 0, (i + 0.5) / n, &s)] += 1.0 / n;
    int ok = 1;
    for (int v = 0; v < V; v++) ok &= fabs(count[v] - want[v]) <= 1.0 / n + 1e-12;
    T_CHECK(ok, "inverse CDF frequencies match the distribution");
    sampler_scratch_free(&s);

    /* temperature alone takes the float path: its draws on a fine grid of u give the
     * double distribution (float exp: within 1e-6 of each probability) */
    {
        enum { VL = 1000 };
        static float zl[VL];
        static double wl[VL], cl[VL];
        for (int v = 0; v < VL; v++) zl[v] = (float)((v * 7919) % 1000) * 0.01f - (v == 17 ? 0.0f : 3.0f);
        zl[400] = -INFINITY; /* a token the model rules out */
        sampler_scratch_create(&s, VL);
        sampler_opts_default(&o);
        o.temperature = 0.7f;
        sampler_distribution(wl, zl, VL, &o, NULL, 0, &s);
        int nl = 400000;
        for (int i = 0; i < nl; i++) cl[sampler_sample(zl, VL, &o, NULL, 0, (i + 0.5) / nl, &s)] += 1.0 / nl;
        double worst = 0;
        for (int v = 0; v < VL; v++) worst = fmax(worst, fabs(cl[v] - wl[v]));
        T_CHECK(worst <= 1.0 / nl + 1e-6 && cl[400] == 0, "temperature alone: frequencies off by %g (p[400] %g)",
                worst, cl[400]);
        T_CHECK(sampler_sample(zl, VL, &o, NULL, 0, 0.0, &s) == 0 && sampler_sample(zl, VL, &o, NULL, 0, 0.9999999999,
                &s) == VL - 1, "temperature alone: u at the ends draws the first and last tokens");
        sampler_scratch_free(&s);
    }

    /* the sampling log-prob: log of the drawn token's probability under the distribution
     * drawn from, after every processor (the temperature-only path and the general one),
     * for u across [0, 1); the draw itself unchanged; greedy gives 0 */
    {
        static const struct { float temperature; int top_k; float top_p, min_p, rep; } set[] = {
            {1.0f, 0, 1.0f, 0, 1.0f}, {0.7f, 0, 1.0f, 0, 1.0f}, {1.3f, 3, 1.0f, 0, 1.0f},
            {0.9f, 0, 0.8f, 0, 1.0f}, {1.0f, 0, 1.0f, 0.05f, 1.0f}, {1.0f, 0, 1.0f, 0, 1.3f}};
        int32_t context[3] = {5, 2, 5};
        int ok = 1, zero = 1;
        sampler_scratch_create(&s, V);
        for (size_t k = 0; k < sizeof set / sizeof set[0]; k++) {
            sampler_opts_default(&o);
            o.temperature = set[k].temperature, o.top_k = set[k].top_k, o.top_p = set[k].top_p;
            o.min_p = set[k].min_p, o.repetition_penalty = set[k].rep;
            sampler_distribution(p, z, V, &o, context, 3, &s);
            for (int i = 0; i < 50; i++) {
                double u = (i + 0.37) / 50;
                float lp = 1.0f;
                int32_t tok = sampler_sample_logp(z, V, &o, context, 3, u, &s, &lp);
                ok &= tok == sampler_sample(z, V, &o, context, 3, u, &s);
                ok &= p[tok] > 0 && fabs(lp - log(p[tok])) <= 1e-6 * fabs(log(p[tok])) + 1e-6;
                if (!ok) {
                    fprintf(stderr, "set %zu u %g: token %d logp %.9g, log p %.9g\n", k, u, tok, lp, log(p[tok]));
                    break;
                }
            }
        }
        o.temperature = 0;
        float lp = 1.0f;
        zero = sampler_sample_logp(z, V, &o, NULL, 0, 0.3, &s, &lp) == 5 && lp == 0.0f;
        T_CHECK(ok, "sampling log-probs are log p(token) of the distribution drawn from");
        T_CHECK(zero, "greedy: log-prob 0 (got %g)", lp);
        sampler_scratch_free(&s);
    }

    /* option checks */
    sampler_opts_default(&o);
    o.top_p = 0;
    T_CHECK(sampler_opts_check(&o) != NULL, "top_p 0 rejected");
    sampler_opts_default(&o);
    o.temperature = -1;
    T_CHECK(sampler_opts_check(&o) != NULL, "negative temperature rejected");
    sampler_opts_default(&o);
    T_CHECK(sampler_opts_check(&o) == NULL, "defaults valid");
    return t_summary("test_sampler");
}
