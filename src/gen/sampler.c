/* gen/sampler.c — logits processors and the draw (see sampler.h). Semantics follow
 * transformers' RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
 * TopKLogitsWarper (ties with the k-th value are kept), TopPLogitsWarper (drop the
 * ascending-sorted prefix whose cumulative probability is <= 1 - top_p, keep at
 * least one) and MinPLogitsWarper (drop p < min_p * max p). Arithmetic in double,
 * but for the common draw with temperature alone (float exp, sum in double). */
#include "gen/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/vec.h"

void sampler_opts_default(SamplerOpts *o) {
    o->temperature = 1.0f;
    o->top_k = 0;
    o->top_p = 1.0f;
    o->min_p = 0.0f;
    o->repetition_penalty = 1.0f;
}

const char *sampler_opts_check(const SamplerOpts *o) {
    if (!(o->temperature >= 0) || !isfinite(o->temperature)) return "temperature must be >= 0 (0 = greedy)";
    if (o->top_k < 0) return "top_k must be >= 0 (0 = off)";
    if (!(o->top_p > 0 && o->top_p <= 1)) return "top_p must be in (0, 1]";
    if (!(o->min_p >= 0 && o->min_p <= 1)) return "min_p must be in [0, 1]";
    if (!(o->repetition_penalty > 0) || !isfinite(o->repetition_penalty)) return "repetition_penalty must be > 0";
    return NULL;
}

void sampler_scratch_create(SamplerScratch *s, int V) {
    s->V = V;
    s->z = xmalloc(sizeof(double) * V);
    s->p = xmalloc(sizeof(double) * V);
    s->order = xmalloc(sizeof(int32_t) * V);
    s->seen = xcalloc(V, 1);
    s->e = xmalloc(sizeof(float) * V);
}

void sampler_scratch_free(SamplerScratch *s) {
    free(s->z);
    free(s->p);
    free(s->order);
    free(s->seen);
    free(s->e);
}

/* Ascending by value; among equal values the higher id first. (Which of two tied
 * tokens top_p drops at the boundary is an implementation detail in torch too.) */
static int by_key_asc(const void *a, const void *b, void *keys) {
    const double *k = keys;
    double x = k[*(const int32_t *)a], y = k[*(const int32_t *)b];
    if (x != y) return x < y ? -1 : 1;
    return *(const int32_t *)b - *(const int32_t *)a;
}

static void softmax(double *p, const double *z, int V) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    for (int v = 0; v < V; v++) {
        p[v] = z[v] == -INFINITY ? 0 : exp(z[v] - mx);
        sum += p[v];
    }
    for (int v = 0; v < V; v++) p[v] /= sum;
}

/* k-th largest value of z (1-based), by selection on a copy. */
static double kth_largest(const double *z, int V, int k, double *tmp) {
    memcpy(tmp, z, sizeof(double) * V);
    int lo = 0, hi = V - 1, want = k - 1; /* index in descending order */
    while (lo < hi) {
        double pivot = tmp[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot) i++;
            while (tmp[j] < pivot) j--;
            if (i <= j) {
                double t = tmp[i];
                tmp[i] = tmp[j];
                tmp[j] = t;
                i++, j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return tmp[want];
}

void sampler_distribution(double *probs, const float *logits, int V, const SamplerOpts *o,
                          const int32_t *context, int n_context, SamplerScratch *s) {
    double *z = s->z;
    for (int v = 0; v < V; v++) z[v] = logits[v];
    if (o->repetition_penalty != 1.0f) {
        double pen = o->repetition_penalty;
        for (int i = 0; i < n_context; i++) {
            int32_t t = context[i];
            if (t < 0 || t >= V || s->seen[t]) continue;
            s->seen[t] = 1;
            z[t] = z[t] < 0 ? z[t] * pen : z[t] / pen;
        }
        for (int i = 0; i < n_context; i++)
            if (context[i] >= 0 && context[i] < V) s->seen[context[i]] = 0;
    }
    if (o->temperature == 0) {
        int best = 0;
        for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
        memset(probs, 0, sizeof(double) * V);
        probs[best] = 1;
        return;
    }
    if (o->temperature != 1.0f)
        for (int v = 0; v < V; v++) z[v] /= o->temperature;
    if (o->top_k > 0 && o->top_k < V) {
        double kth = kth_largest(z, V, o->top_k, s->p);
        for (int v = 0; v < V; v++)
            if (z[v] < kth) z[v] = -INFINITY;
    }
    if (o->top_p < 1.0f) {
        softmax(s->p, z, V);
        for (int v = 0; v < V; v++) s->order[v] = v;
        qsort_r(s->order, V, sizeof(int32_t), by_key_asc, z);
        double cum = 0;
        for (int i = 0; i < V - 1; i++) { /* the last (largest) is always kept */
            cum += s->p[s->order[i]];
            if (cum <= 1.0 - o->top_p) z[s->order[i]] = -INFINITY;
            else break;
        }
    }
    if (o->min_p > 0) {
        softmax(s->p, z, V);
        double top = 0;
        for (int v = 0; v < V; v++) top = s->p[v] > top ? s->p[v] : top;
        for (int v = 0; v < V; v++)
            if (s->p[v] < o->min_p * top) z[v] = -INFINITY;
    }
    softmax(probs, z, V);
}

/* Temperature alone: the draw from softmax(logits / T) needs no normalised copy.
 * e_v = exp((z_v - max z) / T) in float (ops/vec.h, the same bits on every CPU),
 * and the first token whose running sum of e passes u times their sum. */
static int temperature_only(const SamplerOpts *o, int V) {
    return o->temperature > 0 && o->repetition_penalty == 1.0f && (o->top_k == 0 || o->top_k >= V) &&
           o->top_p >= 1.0f && o->min_p == 0.0f;
}

static int32_t sample_temperature(const float *logits, int V, float temperature, double u, SamplerScratch *s,
                                  float *logp) {
    float mx = vec_max(logits, V);
    double total = vec_exp_sum(s->e, logits, mx, 1.0f / temperature, V), target = u * total, cum = 0;
    int32_t last = 0, tok = -1;
    for (int v = 0; v < V && tok < 0; v++) {
        if (s->e[v] <= 0) continue;
        cum += s->e[v];
        last = v;
        if (target < cum) tok = v;
    }
    if (tok < 0) tok = last; /* u beyond the rounding of the total */
    if (logp) *logp = (float)(log((double)s->e[tok]) - log(total));
    return tok;
}

int32_t sampler_sample(const float *logits, int V, const SamplerOpts *o, const int32_t *context,
                       int n_context, double u, SamplerScratch *s) {
    return sampler_sample_logp(logits, V, o, context, n_context, u, s, NULL);
}

int32_t sampler_sample_logp(const float *logits, int V, const SamplerOpts *o, const int32_t *context,
                            int n_context, double u, SamplerScratch *s, float *logp) {
    if (temperature_only(o, V)) return sample_temperature(logits, V, o->temperature, u, s, logp);
    sampler_distribution(s->p, logits, V, o, context, n_context, s);
    double cum = 0;
    int32_t last = 0, tok = -1;
    for (int v = 0; v < V && tok < 0; v++) {
        if (s->p[v] <= 0) continue;
        cum += s->p[v];
        last = v;
        if (u < cum) tok = v;
    }
    if (tok < 0) tok = last; /* u beyond the rounding of the total */
    if (logp) *logp = (float)log(s->p[tok]);
    return tok;
}
