/* ops/token_objective_math.h — the formulas of ops/token_objective.h in the C both the
 * host and the GPU's kernels compile, double precision throughout, no contraction
 * into FMAs (both builds: -ffp-contract=off), so the two differ only where their e^x
 * does (the kernels' exp_f64 is within a few ulp of glibc's exp). The includer
 * defines, before including it once:
 *   TOKOBJ_FN      the functions' storage (host: nothing; kernels: DEVICE)
 *   TOKOBJ(name)   their names (host: tokobj_##name; kernels: another prefix)
 *   TOKOBJ_EXP(x)  e^x in double */
#include "token_objective.h"

/* -min(r' A, clamp(r, 1 - eps_low, 1 + eps_high) A), r' = min(r, delta); sapo's gate */
TOKOBJ_FN void TOKOBJ(surrogate)(const TokenObjectiveParams *p, double r, double A, double *l, double *dl_dr) {
    if (p->kind == TOKOBJ_SAPO) {
        double tau = A > 0 ? p->tau_pos : p->tau_neg;
        double sg = 1.0 / (1.0 + TOKOBJ_EXP(-tau * (r - 1.0)));
        *l = -sg * 4.0 / tau * A;
        *dl_dr = -(4.0 / tau * A) * (sg * (1.0 - sg)) * tau;
        return;
    }
    const double lo = 1.0 - p->eps_low, hi = 1.0 + p->eps_high;
    double r1 = r, g1 = A;
    if (p->delta > 0 && r > p->delta) r1 = p->delta, g1 = 0.0;
    double r2 = r < lo ? lo : r > hi ? hi : r;
    double g2 = (r >= lo && r <= hi) ? A : 0.0;
    double v1 = r1 * A, v2 = r2 * A;
    if (v1 < v2) *l = -v1, *dl_dr = -g1;
    else if (v2 < v1) *l = -v2, *dl_dr = -g2;
    else *l = -v1, *dl_dr = -(g1 + g2) * 0.5; /* torch.minimum splits ties */
}

TOKOBJ_FN double TOKOBJ(term)(const TokenObjectiveParams *p, double w, double e, double A, double r, float logp,
                              double *loss) {
    double g = 0.0;
    if (p->kind == TOKOBJ_CISPO) {
        double cap = r < p->eps_high ? r : p->eps_high; /* detached */
        *loss += w * e * (-cap * A * (double)logp);
        g += w * e * (-cap * A);
    } else {
        double l, dl_dr;
        TOKOBJ(surrogate)(p, r, A, &l, &dl_dr);
        *loss += w * e * l;
        g += w * e * dl_dr * r; /* dr/dlogp = r */
    }
    return g;
}

TOKOBJ_FN double TOKOBJ(kl)(const TokenObjectiveParams *p, double w, float logp, float ref_logp, double g,
                            double *loss, double *kl) {
    double d = (double)ref_logp - (double)logp;
    *kl = TOKOBJ_EXP(d) - d - 1.0;
    if (p->beta != 0.0) {
        *loss += w * p->beta * *kl;
        g += w * p->beta * (1.0 - TOKOBJ_EXP(d));
    }
    return g;
}

TOKOBJ_FN double TOKOBJ(grad)(const TokenObjectiveParams *p, double w, double A, float logp, const float *old,
                              const float *ref, double isw) {
    if (w == 0.0) return 0.0;
    if (p->kind == TOKOBJ_NLL) return -w;
    double loss = 0.0, kl;
    double r = old ? TOKOBJ_EXP((double)logp - (double)*old) : 1.0;
    double g = TOKOBJ(term)(p, w, isw, A, r, logp, &loss);
    return ref ? TOKOBJ(kl)(p, w, logp, *ref, g, &loss, &kl) : g;
}
