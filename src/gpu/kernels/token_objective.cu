/* gpu/kernels/token_objective.cu — a token-local objective's gradient
 * (ops/token_objective.h) where the LM head's chunk left its log-probs: the formulas of
 * ops/token_objective_math.h, the host's source, in double with the kernels' exp_f64 (a
 * few ulp from glibc's exp, which the host's use; the result rounded once to float, as
 * the host's). */
#include "device.h"
#include "kmath.h"

#define TOKOBJ_FN DEVICE
#define TOKOBJ(name) dev_tokobj_##name
#define TOKOBJ_EXP(x) exp_f64(x)
#include "../../ops/token_objective_math.h"

/* lp[i], the log-prob of the chunk's i-th row (of m), replaced by its gradient; the
 * inputs laid out in the same order (w[i] 0: no gradient); isw, old, ref may be NULL. */
KERNEL void token_objective_grad(float *lp, int m, TokenObjectiveParams p, const double *w, const double *adv,
                                 const double *isw, const float *old, const float *ref) {
    for (int i = block_x() * block_dim_x() + thread_x(); i < m; i += grid_dim_x() * block_dim_x())
        lp[i] = (float)dev_tokobj_grad(&p, w[i], adv[i], lp[i], old ? &old[i] : 0, ref ? &ref[i] : 0,
                                       isw ? isw[i] : 1.0);
}
