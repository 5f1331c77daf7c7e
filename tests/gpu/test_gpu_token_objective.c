/* tests/gpu/test_gpu_token_objective.c — a token-local objective's gradient on the GPU
 * (gpu/ops.h: gpu_token_objective_grad, the kernel of gpu/kernels/token_objective.cu)
 * against the host's (ops/token_objective.h: tokobj_grads, which GRPO's and SFT's
 * micro-batches give the CPU's head), on the GPU where gpu_open finds one, on the
 * tests' emulated GPU otherwise.
 *
 * Every kind (clip with and without delta, cispo, sapo, nll) with and without the
 * generating policy's log-probs (a ratio r = e^(logp - old), else r = 1), the
 * reference's (the KL term, beta 0.04 and 0), the sampler correction's weights and a
 * tool mask; ratios spread across the clip range's ends, advantages of both signs and 0,
 * weights 0 for masked sequences. Both sides compute in double and round once to float;
 * their e^x differ (glibc's exp, the kernels' exp_f64: a few ulp of double), so:
 * - without any e^x (no old, no ref, not sapo): every value bit for bit;
 * - with one: each within 1 float ulp of the host's (2^-23 |host|), and at least
 *   99 % bit for bit (a double a few ulp apart rounds to another float only near a
 *   rounding boundary).
 * A kernel reading the wrong row's inputs, or the wrong kind's branch, is off by far
 * more (checked: the advantage read from the neighbouring row fails 25 checks). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "ops/token_objective.h"
#define GPU_TEST_SEED 36
#include "gpu_test.h"

enum { S = 24, LEN = 40, T = S * LEN };

typedef struct {
    const char *name;
    TokenObjectiveParams p;
    int old, ref, isw, tmask, has_exp;
} Case;

/* uniform in [lo, hi) */
static double urand(double lo, double hi) { return lo + (hi - lo) * 0.5 * (frand() + 1.0); }

static void check_case(const Case *c) {
    static int seq_of[T], js[T];
    static double w[S], adv[S], isw[T];
    static float lp[T], old[T], ref[T], host[T], got[T];
    static unsigned char tmask[T];
    for (int s = 0; s < S; s++) {
        w[s] = s % 7 == 3 ? 0.0 : urand(1e-4, 1e-2); /* a masked sequence's weight is 0 */
        adv[s] = s % 5 == 0 ? 0.0 : urand(-2.0, 2.0);
    }
    for (int t = 0; t < T; t++) {
        seq_of[t] = t / LEN;
        lp[t] = (float)urand(-9.0, -1e-3);
        old[t] = lp[t] - (float)urand(-0.5, 0.5); /* r from e^-0.5 to e^0.5: both ends of [0.8, 1.28] */
        ref[t] = lp[t] - (float)urand(-1.0, 1.0);
        isw[t] = urand(0.3, 2.0);
        tmask[t] = t % 11 != 4;
    }
    /* the tokens in another order than the sequences': a chunk names its rows */
    for (int t = 0; t < T; t++) js[t] = (t * 37) % T;
    TokenObjective o = {c->p, seq_of, w, adv, c->old ? old : NULL, c->ref ? ref : NULL, c->isw ? isw : NULL,
                        c->tmask ? tmask : NULL};
    float lps[T];
    for (int i = 0; i < T; i++) lps[i] = lp[js[i]];
    tokobj_grads(&o, js, T, lps, host);
    /* the device's inputs in the rows' order, as gpu/logprob.c lays them out */
    static double dw[T], dadv[T], disw[T];
    static float dold[T], dref[T];
    for (int i = 0; i < T; i++) {
        int j = js[i], s = seq_of[j];
        dw[i] = c->tmask && !tmask[j] ? 0.0 : w[s], dadv[i] = adv[s], disw[i] = isw[j];
        dold[i] = old[j], dref[i] = ref[j];
    }
    CUdeviceptr d_lp = upload(lps, sizeof lps), d_w = upload(dw, sizeof dw), d_adv = upload(dadv, sizeof dadv),
                d_isw = upload(disw, sizeof disw), d_old = upload(dold, sizeof dold), d_ref = upload(dref, sizeof dref);
    T_CHECK(!gpu_token_objective_grad(&dev, d_lp, T, &c->p, d_w, d_adv, c->isw ? d_isw : 0, c->old ? d_old : 0,
                                      c->ref ? d_ref : 0, &err),
            "%s: %s", c->name, err.msg);
    download(got, d_lp, sizeof got);
    int same = 0, bad = 0, nonzero = 0;
    double worst = 0;
    for (int i = 0; i < T; i++) {
        same += memcmp(&got[i], &host[i], 4) == 0;
        nonzero += host[i] != 0.0f;
        double e = fabs((double)got[i] - host[i]);
        if (!(e <= ldexp(fabs(host[i]), -23))) bad++;
        if (host[i] != 0.0f) worst = fmax(worst, e / fabs(host[i]));
    }
    printf("  %-28s %d of %d bit for bit (%d nonzero), worst relative %.2g\n", c->name, same, T, nonzero, worst);
    T_CHECK(nonzero > T / 4, "%s: only %d of %d gradients nonzero: the case tests little", c->name, nonzero, T);
    if (!c->has_exp) T_CHECK(same == T, "%s: %d of %d values differ without any e^x", c->name, T - same, T);
    T_CHECK(bad == 0, "%s: %d of %d values more than 1 float ulp from the host's", c->name, bad, T);
    T_CHECK(same >= T * 99 / 100, "%s: %d of %d bit for bit (want >= 99 %%)", c->name, same, T);
    CUdeviceptr all[] = {d_lp, d_w, d_adv, d_isw, d_old, d_ref};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    const TokenObjectiveParams clip = {TOKOBJ_CLIP, 0.2, 0.28, 0, 0.04, 1, 1.05},
                               delta = {TOKOBJ_CLIP, 0.2, 0.2, 1.1, 0, 1, 1.05},
                               cispo = {TOKOBJ_CISPO, 0.2, 1.1, 0, 0.04, 1, 1.05},
                               sapo = {TOKOBJ_SAPO, 0.2, 0.2, 0, 0, 1, 1.05}, nll = {TOKOBJ_NLL, 0, 0, 0, 0, 0, 0};
    const Case cases[] = {
        {"clip, r = 1", clip, 0, 0, 0, 0, 0},
        {"clip, r = 1, tool mask", clip, 0, 0, 1, 1, 0},
        {"clip, ratio", clip, 1, 0, 0, 0, 1},
        {"clip, ratio, KL, correction", clip, 1, 1, 1, 1, 1},
        {"clip, r = 1, KL", clip, 0, 1, 0, 0, 1},
        {"clip, delta, ratio", delta, 1, 0, 0, 0, 1},
        {"clip, beta 0, ref given", delta, 1, 1, 0, 0, 1},
        {"cispo, ratio, KL", cispo, 1, 1, 0, 1, 1},
        {"cispo, r = 1", cispo, 0, 0, 1, 0, 0},
        {"sapo, ratio", sapo, 1, 0, 1, 0, 1},
        {"sapo, r = 1", sapo, 0, 0, 0, 0, 1},
        {"nll", nll, 0, 0, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    /* nothing to do: no launch, no error */
    TokenObjectiveParams p = clip;
    T_CHECK(!gpu_token_objective_grad(&dev, 0, 0, &p, 0, 0, 0, 0, 0, &err), "m = 0: %s", err.msg);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_token_objective", check_all);
}
