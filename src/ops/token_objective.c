/* ops/token_objective.c — ops/token_objective.h's formulas on the host (their source,
 * ops/token_objective_math.h, is also the GPU kernel's). */
#include "ops/token_objective.h"

#include <math.h>
#include <stddef.h>

#define TOKOBJ_FN
#define TOKOBJ(name) tokobj_##name
#define TOKOBJ_EXP(x) exp(x)
#include "ops/token_objective_math.h"

void tokobj_grads(const TokenObjective *o, const int *js, int m, const float *logprob, float *dlogprob) {
    for (int i = 0; i < m; i++) {
        int j = js[i], s = o->seq_of ? o->seq_of[j] : 0;
        if (o->tmask && !o->tmask[j]) {
            dlogprob[i] = 0.0f;
            continue;
        }
        dlogprob[i] = (float)tokobj_grad(&o->p, o->w[s], o->adv ? o->adv[s] : 0.0, logprob[i], o->old ? &o->old[j] : NULL,
                                         o->ref ? &o->ref[j] : NULL, o->isw ? o->isw[j] : 1.0);
    }
}
