/* grpo/is_correction.c — the weights of TRL's truncated / masked importance-sampling
 * correction of the sampler/trainer mismatch, and its metrics (is_correction.h).
 *
 * Is: per-completion arithmetic in double on recorded log-probs, so a completion's
 * weights depend on it alone (not on the micro-batch, the chunk or the process that
 * holds it) and are recomputed bit for bit from a checkpoint's rollout. Is not: the
 * loss that applies them (loss.c), nor where the log-probs come from (gen/sampler.c,
 * grpo/rollout.c). */
#include "grpo/is_correction.h"

#include <math.h>

const char *const grpo_is_mode_names[] = {"token_truncate", "token_mask", "sequence_truncate", "sequence_mask", NULL};

static int sequence_level(const GrpoLossConfig *c) {
    return c->is_mode == GRPO_ISC_SEQUENCE_TRUNCATE || c->is_mode == GRPO_ISC_SEQUENCE_MASK;
}

/* clamp(rho, C_min, C_max) or rho masked to 0 outside [C_min, C_max] */
static double bound(const GrpoLossConfig *c, double rho) {
    const double lo = c->is_clip_min, hi = c->is_clip_max;
    if (c->is_mode == GRPO_ISC_TOKEN_TRUNCATE || c->is_mode == GRPO_ISC_SEQUENCE_TRUNCATE)
        return rho < lo ? lo : rho > hi ? hi : rho;
    return (rho < lo || rho > hi) ? 0.0 : rho;
}

void grpo_is_weights(double *rho, const float *old_logp, const float *sampling_logp, int len, int masked,
                     const GrpoLossConfig *c) {
    if (sequence_level(c)) {
        double s = 0.0;
        for (int t = 0; t < len && !masked; t++) s += (double)old_logp[t] - (double)sampling_logp[t];
        const double r = bound(c, exp(s));
        for (int t = 0; t < len; t++) rho[t] = r;
        return;
    }
    for (int t = 0; t < len; t++)
        rho[t] = bound(c, masked ? 1.0 : exp((double)old_logp[t] - (double)sampling_logp[t]));
}

void grpo_is_metrics(GrpoIsMetrics *m, const float *const *old_logp, const float *const *sampling_logp,
                     const double *const *rho, const int *len, const uint8_t *masked,
                     const uint8_t *const *tool_mask, int lo, int hi, const GrpoLossConfig *c) {
    double dsum = 0.0, dmax = -INFINITY, rsum = 0.0, rmin = INFINITY, rmax = -INFINITY;
    long long ntok = 0, nr = 0;
    const int seq = sequence_level(c);
    for (int i = lo; i < hi; i++) {
        const int keep = !(masked && masked[i]);
        const uint8_t *tm = tool_mask ? tool_mask[i] : NULL;
        for (int t = 0; t < len[i] && keep; t++) {
            if (tm && !tm[t]) continue; /* a tool's token */
            double d = fabs((double)old_logp[i][t] - (double)sampling_logp[i][t]);
            dsum += d, dmax = d > dmax ? d : dmax, ntok++;
            if (!seq) {
                double r = rho[i][t];
                rsum += r, rmin = r < rmin ? r : rmin, rmax = r > rmax ? r : rmax, nr++;
            }
        }
        if (seq && len[i] > 0) { /* TRL: every sequence's ratio, masked ones included */
            double r = rho[i][0];
            rsum += r, rmin = r < rmin ? r : rmin, rmax = r > rmax ? r : rmax, nr++;
        }
    }
    m->diff_mean = ntok ? dsum / ntok : 0.0;
    m->diff_max = ntok ? dmax : 0.0;
    m->ratio_mean = nr ? rsum / nr : 0.0;
    m->ratio_min = nr ? rmin : 0.0;
    m->ratio_max = nr ? rmax : 0.0;
}

void grpo_is_metrics_gather(GrpoIsMetrics *out, const GrpoIsMetrics *m, int n) {
    double dmean = 0.0, rmean = 0.0;
    int nr = 0;
    *out = (GrpoIsMetrics){0.0, -INFINITY, INFINITY, 0.0, -INFINITY};
    for (int k = 0; k < n; k++) {
        dmean += m[k].diff_mean;
        out->diff_max = fmax(out->diff_max, m[k].diff_max);
        out->ratio_min = fmin(out->ratio_min, m[k].ratio_min);   /* nanmin */
        out->ratio_max = fmax(out->ratio_max, m[k].ratio_max);   /* nanmax */
        if (!isnan(m[k].ratio_mean)) rmean += m[k].ratio_mean, nr++; /* nanmean */
    }
    out->diff_mean = n ? dmean / n : 0.0;
    out->ratio_mean = nr ? rmean / nr : NAN;
}
