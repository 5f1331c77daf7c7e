/* tests/grpo/test_is_correction.c — the sampler/trainer correction (TRL's
 * vllm_importance_sampling_*): its weights against the formula on hand-computed
 * cases for each mode, its metrics and their gathering over processes, and the
 * loss with the correction on:
 *  - the loss against an independent float64 evaluation of TRL's per-token loss
 *    (rho x policy term, then + beta KL) for every loss type without detached
 *    factors, token and sequence level, beta 0 and 0.04 (atol 1e-14, rtol 1e-12);
 *  - its gradient against central finite differences of that loss in float64
 *    (logp on a grid of 2^-12 moved by h = 2^-10, exact in float; O(h^2) error:
 *    rtol 1e-5, atol 1e-9);
 *  - cispo and vespo, whose weights are detached, against their closed forms;
 *  - split invariance: micro-batches of 1, 2, 4 and uneven sizes give the whole
 *    batch's gradient bit for bit, the token-local gradient too. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/is_correction.h"
#include "grpo/loss.h"
#include "testutil.h"

#define S 6
static const int LEN[S] = {3, 1, 4, 2, 5, 3};
static const uint8_t TRUNC[S] = {0, 0, 1, 0, 0, 1};
enum { T = 18 };

typedef struct {
    int off[S + 1];
    float logp[T], old[T], ref[T], samp[T];
    double adv[S], rho[T];
} Batch;

/* log-probs on a grid of 2^-12 (so logp +- 2^-10 is exact in float), spread so
 * that ratios fall on both sides of the clipping range and of the IS bounds */
static void make_batch(Batch *b) {
    b->off[0] = 0;
    for (int i = 0; i < S; i++) b->off[i + 1] = b->off[i] + LEN[i];
    for (int t = 0; t < T; t++) {
        b->logp[t] = -(float)((t * 2731) % 4096 + 200) / 1024.0f;
        b->old[t] = b->logp[t] + (float)(((t * 977) % 1500) - 700) / 4096.0f;
        b->ref[t] = b->logp[t] + (float)(((t * 613) % 900) - 450) / 4096.0f;
        b->samp[t] = b->old[t] + (float)(((t * 389) % 2400) - 1100) / 2048.0f;
    }
    const double adv[S] = {0.75, -1.25, 0.5, -0.25, 1.5, -1.0};
    memcpy(b->adv, adv, sizeof adv);
}

static void weights(Batch *b, const GrpoLossConfig *c) {
    for (int i = 0; i < S; i++)
        grpo_is_weights(b->rho + b->off[i], b->old + b->off[i], b->samp + b->off[i], LEN[i],
                        c->mask_truncated_completions && TRUNC[i], c);
}

/* TRL's per-token loss in float64, written out independently of loss.c. */
static double ref_loss(const Batch *b, const float *logp, const GrpoLossConfig *c, double norm) {
    double loss = 0;
    for (int i = 0; i < S; i++) {
        int t0 = b->off[i], len = LEN[i];
        if (c->mask_truncated_completions && TRUNC[i]) continue;
        double w = (c->loss_type == GRPO_LOSS_GRPO || c->loss_type == GRPO_LOSS_SAPO) ? 1.0 / (norm * len) : 1.0 / norm;
        double mean = 0;
        for (int t = t0; t < t0 + len; t++) mean += (double)logp[t] - b->old[t];
        double r_seq = exp(mean / len), A = b->adv[i];
        for (int t = t0; t < t0 + len; t++) {
            double r = c->is_level == GRPO_IS_SEQUENCE ? r_seq : exp((double)logp[t] - b->old[t]), pol;
            if (c->loss_type == GRPO_LOSS_SAPO) {
                double tau = A > 0 ? c->sapo_temperature_pos : c->sapo_temperature_neg;
                pol = -4.0 / tau * A / (1.0 + exp(-tau * (r - 1.0)));
            } else {
                double cl = fmin(fmax(r, 1 - c->epsilon_low), 1 + c->epsilon_high);
                pol = -fmin(r * A, cl * A);
            }
            double d = (double)b->ref[t] - logp[t];
            loss += w * (b->rho[t] * pol + c->beta * (exp(d) - d - 1.0));
        }
    }
    return loss;
}

static double run(double *grad, const Batch *b, const GrpoLossConfig *c, const double *rho, const int *sizes, int n_mb) {
    memset(grad, 0, sizeof(double) * T);
    double norm = grpo_loss_normalizer(c, b->off, TRUNC, NULL, S, n_mb), loss = 0;
    for (int s0 = 0, k = 0; s0 < S; s0 += sizes[k++]) {
        double nm = c->loss_type == GRPO_LOSS_BNPO ? grpo_loss_normalizer(c, b->off + s0, TRUNC + s0, NULL, sizes[k], n_mb)
                                                   : norm;
        loss += grpo_loss_accumulate(grad, NULL, NULL, b->logp, b->old, c->beta ? b->ref : NULL, NULL, rho,
                                     b->adv + s0, TRUNC + s0, NULL, b->off + s0, sizes[k], nm, c);
    }
    return loss;
}

static void check_weights(void) {
    GrpoLossConfig c;
    grpo_loss_config_default(&c);
    T_CHECK(c.is_correction == 0 && c.is_mode == GRPO_ISC_SEQUENCE_MASK && c.is_clip_max == 3.0 && c.is_clip_min == 0.0,
            "defaults: off, sequence_mask, clip_max 3, clip_min 0 (TRL's None)");
    const char *names[] = {"token_truncate", "token_mask", "sequence_truncate", "sequence_mask"};
    for (int k = 0; k < 4; k++) T_CHECK(!strcmp(grpo_is_mode_names[k], names[k]), "mode name %d", k);
    T_CHECK(grpo_is_mode_names[4] == NULL, "NULL-terminated");
    /* old - samp = 0.5, -1, 0, 1.75: ratios e^0.5, e^-1, 1, e^1.75 (5.75); sum 1.25: e^1.25 (3.49) */
    const float old[4] = {-1.0f, -2.0f, -0.5f, -0.25f}, samp[4] = {-1.5f, -1.0f, -0.5f, -2.0f};
    const double e05 = exp(0.5), em1 = exp(-1.0), e175 = exp(1.75), e125 = exp(1.25);
    struct {
        GrpoIsMode mode;
        double lo, hi;
        int masked;
        double want[4];
    } cases[] = {
        {GRPO_ISC_TOKEN_TRUNCATE, 0, 3, 0, {e05, em1, 1, 3}},
        {GRPO_ISC_TOKEN_TRUNCATE, 0.5, 3, 0, {e05, 0.5, 1, 3}},
        {GRPO_ISC_TOKEN_TRUNCATE, 0, 10, 0, {e05, em1, 1, e175}},
        {GRPO_ISC_TOKEN_MASK, 0, 3, 0, {e05, em1, 1, 0}},
        {GRPO_ISC_TOKEN_MASK, 0.5, 3, 0, {e05, 0, 1, 0}},
        {GRPO_ISC_TOKEN_MASK, 1.5, 3, 0, {e05, 0, 0, 0}},
        {GRPO_ISC_SEQUENCE_TRUNCATE, 0, 3, 0, {3, 3, 3, 3}},
        {GRPO_ISC_SEQUENCE_TRUNCATE, 0, 4, 0, {e125, e125, e125, e125}},
        {GRPO_ISC_SEQUENCE_TRUNCATE, 4, 5, 0, {4, 4, 4, 4}},
        {GRPO_ISC_SEQUENCE_MASK, 0, 3, 0, {0, 0, 0, 0}},
        {GRPO_ISC_SEQUENCE_MASK, 0, 4, 0, {e125, e125, e125, e125}},
        {GRPO_ISC_SEQUENCE_MASK, 3.6, 4, 0, {0, 0, 0, 0}},
        /* a completion masked out of the loss: TRL's zeroed mask makes every difference 0 */
        {GRPO_ISC_TOKEN_TRUNCATE, 0, 3, 1, {1, 1, 1, 1}},
        {GRPO_ISC_TOKEN_MASK, 1.5, 3, 1, {0, 0, 0, 0}},
        {GRPO_ISC_SEQUENCE_TRUNCATE, 0, 3, 1, {1, 1, 1, 1}},
        {GRPO_ISC_SEQUENCE_MASK, 0, 3, 1, {1, 1, 1, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        c.is_mode = cases[k].mode, c.is_clip_min = cases[k].lo, c.is_clip_max = cases[k].hi;
        double rho[4];
        grpo_is_weights(rho, old, samp, 4, cases[k].masked, &c);
        int ok = 1;
        for (int t = 0; t < 4; t++) ok &= fabs(rho[t] - cases[k].want[t]) <= 1e-15 * cases[k].want[t];
        T_CHECK(ok, "case %zu (%s [%g, %g] masked %d): %.17g %.17g %.17g %.17g", k, grpo_is_mode_names[c.is_mode],
                cases[k].lo, cases[k].hi, cases[k].masked, rho[0], rho[1], rho[2], rho[3]);
    }
}

static void check_metrics(void) {
    GrpoLossConfig c;
    grpo_loss_config_default(&c);
    c.mask_truncated_completions = 1;
    /* completion 0: the four tokens above; 1: two tokens, masked (truncated); 2: one token, diff -0.25 */
    const float o0[4] = {-1.0f, -2.0f, -0.5f, -0.25f}, s0[4] = {-1.5f, -1.0f, -0.5f, -2.0f};
    const float o1[2] = {-1.0f, -1.0f}, s1[2] = {-3.0f, -3.0f}, o2[1] = {-1.0f}, s2[1] = {-0.75f};
    const float *old[3] = {o0, o1, o2}, *samp[3] = {s0, s1, s2};
    const int len[3] = {4, 2, 1};
    const uint8_t masked[3] = {0, 1, 0};
    double r0[4], r1[2], r2[1];
    const double *rho[3] = {r0, r1, r2};
    GrpoIsMetrics m, each[2], all;

    c.is_mode = GRPO_ISC_TOKEN_TRUNCATE;
    grpo_is_weights(r0, o0, s0, 4, 0, &c), grpo_is_weights(r1, o1, s1, 2, 1, &c), grpo_is_weights(r2, o2, s2, 1, 0, &c);
    grpo_is_metrics(&m, old, samp, rho, len, masked, NULL, 0, 3, &c);
    /* kept tokens: |diff| 0.5 1 0 1.75 0.25; ratios e^.5 e^-1 1 3 e^-.25 */
    double rmean = (exp(0.5) + exp(-1.0) + 1 + 3 + exp(-0.25)) / 5;
    T_CHECK(fabs(m.diff_mean - 3.5 / 5) < 1e-15 && m.diff_max == 1.75, "token: difference %g %g", m.diff_mean,
            m.diff_max);
    T_CHECK(m.ratio_min == exp(-1.0) && fabs(m.ratio_mean - rmean) < 1e-15 && m.ratio_max == 3,
            "token: ratio %g %g %g", m.ratio_min, m.ratio_mean, m.ratio_max);

    c.is_mode = GRPO_ISC_SEQUENCE_TRUNCATE;
    grpo_is_weights(r0, o0, s0, 4, 0, &c), grpo_is_weights(r1, o1, s1, 2, 1, &c), grpo_is_weights(r2, o2, s2, 1, 0, &c);
    grpo_is_metrics(&m, old, samp, rho, len, masked, NULL, 0, 3, &c);
    /* one ratio per completion, the masked one (1) counted: 3, 1, e^-0.25 */
    T_CHECK(fabs(m.diff_mean - 3.5 / 5) < 1e-15 && m.ratio_min == exp(-0.25) && m.ratio_max == 3 &&
                fabs(m.ratio_mean - (4 + exp(-0.25)) / 3) < 1e-15,
            "sequence: %g %g %g %g", m.diff_mean, m.ratio_min, m.ratio_mean, m.ratio_max);

    /* two processes: [0, 1) and [1, 3); TRL gathers each one's mean, max, min */
    grpo_is_metrics(&each[0], old, samp, rho, len, masked, NULL, 0, 1, &c);
    grpo_is_metrics(&each[1], old, samp, rho, len, masked, NULL, 1, 3, &c);
    T_CHECK(fabs(each[1].diff_mean - 0.25) < 1e-15 && fabs(each[1].ratio_mean - (1 + exp(-0.25)) / 2) < 1e-15,
            "process 1: %g %g", each[1].diff_mean, each[1].ratio_mean);
    grpo_is_metrics_gather(&all, each, 2);
    T_CHECK(fabs(all.diff_mean - (3.25 / 4 + 0.25) / 2) < 1e-15 && all.diff_max == 1.75 &&
                all.ratio_min == exp(-0.25) && all.ratio_max == 3 &&
                fabs(all.ratio_mean - (3 + (1 + exp(-0.25)) / 2) / 2) < 1e-15,
            "gathered: %g %g %g %g %g", all.diff_mean, all.diff_max, all.ratio_min, all.ratio_mean, all.ratio_max);
    /* nothing to count: 0, as TRL */
    grpo_is_metrics(&m, old, samp, rho, len, masked, NULL, 1, 1, &c);
    T_CHECK(m.diff_mean == 0 && m.diff_max == 0 && m.ratio_min == 0 && m.ratio_mean == 0 && m.ratio_max == 0, "empty");

    /* tool turns: completion 0 with three tool tokens appended after its second token (sampling
     * log-prob 0, the generator's; rho 1) gives the metrics of the completion without them */
    const float ot[7] = {-1.0f, -2.0f, -9.0f, -9.0f, -9.0f, -0.5f, -0.25f}, st[7] = {-1.5f, -1.0f, 0, 0, 0, -0.5f, -2.0f};
    const uint8_t tm0[7] = {1, 1, 0, 0, 0, 1, 1};
    const float *oldt[3] = {ot, o1, o2}, *sampt[3] = {st, s1, s2};
    const int lent[3] = {7, 2, 1};
    const uint8_t *tmask[3] = {tm0, NULL, NULL};
    double rt[7];
    const double *rhot[3] = {rt, r1, r2};
    c.is_mode = GRPO_ISC_TOKEN_TRUNCATE;
    grpo_is_weights(r0, o0, s0, 4, 0, &c), grpo_is_weights(r1, o1, s1, 2, 1, &c), grpo_is_weights(r2, o2, s2, 1, 0, &c);
    for (int t = 0, k = 0; t < 7; t++) rt[t] = tm0[t] ? r0[k++] : 1.0;
    GrpoIsMetrics mt;
    grpo_is_metrics(&m, old, samp, rho, len, masked, NULL, 0, 3, &c);
    grpo_is_metrics(&mt, oldt, sampt, rhot, lent, masked, tmask, 0, 3, &c);
    T_CHECK(mt.diff_mean == m.diff_mean && mt.diff_max == m.diff_max && mt.ratio_min == m.ratio_min &&
                mt.ratio_mean == m.ratio_mean && mt.ratio_max == m.ratio_max,
            "tool tokens left out: difference %g (want %g), max %g, ratio mean %g (want %g)", mt.diff_mean, m.diff_mean,
            mt.diff_max, mt.ratio_mean, m.ratio_mean);
}

static void check_loss(void) {
    static const GrpoLossType types[] = {GRPO_LOSS_DAPO, GRPO_LOSS_GRPO, GRPO_LOSS_DR_GRPO, GRPO_LOSS_BNPO,
                                         GRPO_LOSS_SAPO, GRPO_LOSS_LUSPO, GRPO_LOSS_CISPO, GRPO_LOSS_VESPO};
    static const int whole[1] = {S}, ones[S] = {1, 1, 1, 1, 1, 1}, twos[3] = {2, 2, 2}, fours[2] = {4, 2},
                     uneven[3] = {3, 1, 2};
    Batch b;
    make_batch(&b);
    double g[T], g2[T], g0[T];
    int n_cases = 0, n_differs = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int level = 0; level < 2; level++)
            for (int beta = 0; beta < 2; beta++)
                for (int mode = 0; mode < 4; mode++)
                    for (int mt = 0; mt < 2; mt++) {
                        GrpoLossConfig c;
                        grpo_loss_config_default(&c);
                        c.loss_type = types[ti], c.is_level = level ? GRPO_IS_SEQUENCE : GRPO_IS_TOKEN;
                        c.beta = beta ? 0.04 : 0.0, c.max_completion_length = 5;
                        c.is_correction = 1, c.is_mode = (GrpoIsMode)mode, c.is_clip_min = 0.25, c.is_clip_max = 2.5;
                        c.mask_truncated_completions = mt;
                        const int cispo = c.loss_type == GRPO_LOSS_CISPO, vespo = c.loss_type == GRPO_LOSS_VESPO;
                        if (vespo && (level || mode >= 2)) continue; /* TRL: token modes only, token level */
                        if (c.loss_type == GRPO_LOSS_LUSPO && !level) continue;
                        if (cispo && level) continue;
                        char what[160];
                        snprintf(what, sizeof what, "%s %s beta %g %s mask_trunc %d", grpo_loss_type_names[c.loss_type],
                                 level ? "sequence" : "token", c.beta, grpo_is_mode_names[mode], mt);
                        weights(&b, &c);
                        n_cases++;
                        double loss = run(g, &b, &c, b.rho, whole, 1);
                        double loss0 = run(g0, &b, &c, NULL, whole, 1);
                        n_differs += loss != loss0;
                        const double norm = grpo_loss_normalizer(&c, b.off, TRUNC, NULL, S, 1);
                        if (!cispo && !vespo) {
                            double want = ref_loss(&b, b.logp, &c, norm);
                            T_CHECK(fabs(loss - want) <= 1e-14 + 1e-12 * fabs(want), "%s: loss %.17g, formula %.17g",
                                    what, loss, want);
                            /* d loss / d logp by central differences of the formula */
                            int ok = 1;
                            for (int t = 0; t < T && ok; t++) {
                                const float h = 1.0f / 1024;
                                float lp[T];
                                memcpy(lp, b.logp, sizeof lp);
                                lp[t] = b.logp[t] + h;
                                double up = ref_loss(&b, lp, &c, norm);
                                lp[t] = b.logp[t] - h;
                                double fd = (up - ref_loss(&b, lp, &c, norm)) / (2.0 * h);
                                ok = fabs(g[t] - fd) <= 1e-9 + 1e-5 * fabs(fd);
                                if (!ok) fprintf(stderr, "%s: token %d gradient %.12g, finite differences %.12g\n", what,
                                                 t, g[t], fd);
                            }
                            T_CHECK(ok, "%s: gradient against finite differences", what);
                        } else {
                            /* detached weights: cispo -w rho min(r, eps_high) A; vespo -w phi A, log rho in phi */
                            int ok = 1;
                            for (int i = 0; i < S; i++) {
                                double w = grpo_loss_seq_weight(&c, TRUNC, NULL, i, b.off, norm), s = 0;
                                for (int t = b.off[i]; t < b.off[i + 1]; t++)
                                    s += (double)b.logp[t] - b.old[t] + fmax(log(b.rho[t]), log(1e-8));
                                double A = b.adv[i], k = A >= 0 ? c.vespo_k_pos : c.vespo_k_neg;
                                double lam = A >= 0 ? c.vespo_lambda_pos : c.vespo_lambda_neg;
                                double lw = fmin(fmax(s, log(1e-8)), 20.0), phi = exp(lam + k * lw - lam * exp(lw));
                                for (int t = b.off[i]; t < b.off[i + 1]; t++) {
                                    double r = exp((double)b.logp[t] - b.old[t]), d = (double)b.ref[t] - b.logp[t];
                                    double want = cispo ? -w * b.rho[t] * fmin(r, c.epsilon_high) * A : -w * phi * A;
                                    want += w * c.beta * (1.0 - exp(d));
                                    ok &= fabs(g[t] - want) <= 1e-15 + 1e-12 * fabs(want);
                                }
                            }
                            T_CHECK(ok, "%s: gradient against the closed form", what);
                        }
                        /* split invariance (bnpo is normalised per micro-batch: not split-invariant, as TRL) */
                        if (c.loss_type != GRPO_LOSS_BNPO) {
                            const int *splits[4] = {ones, twos, fours, uneven};
                            const int n_split[4] = {S, 3, 2, 3};
                            for (int k = 0; k < 4; k++) {
                                run(g2, &b, &c, b.rho, splits[k], n_split[k]);
                                T_CHECK(!memcmp(g, g2, sizeof g), "%s: split %d changes the gradient", what, k);
                            }
                        }
                        /* the token-local gradient the fused LM-head pass asks for */
                        if (grpo_loss_token_local(&c)) {
                            int same = 1;
                            for (int i = 0; i < S; i++) {
                                double w = grpo_loss_seq_weight(&c, TRUNC, NULL, i, b.off, norm);
                                for (int t = b.off[i]; t < b.off[i + 1]; t++)
                                    same &= grpo_loss_token_grad(&c, w, b.adv[i], b.logp[t], &b.old[t],
                                                                 c.beta ? &b.ref[t] : NULL, b.rho[t]) == g[t];
                            }
                            T_CHECK(same, "%s: token-local gradients differ from the batch's", what);
                        }
                    }
    T_CHECK(n_cases == 200, "cases %d", n_cases);
    T_CHECK(n_differs == n_cases, "the correction changed the loss in %d of %d cases", n_differs, n_cases);
}

int main(void) {
    check_weights();
    check_metrics();
    check_loss();
    return t_summary("test_is_correction");
}
