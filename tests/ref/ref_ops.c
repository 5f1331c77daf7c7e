/* tests/ref/ref_ops.c — double-precision reference ops (see ref_ops.h).
 *
 * Each function is the textbook formula as a loop nest, with no blocking, no
 * threading and no BLAS, so that it can be checked by reading. It is not used on
 * any training path; tests/ops/test_ops_fd.c checks each backward here against
 * finite differences of the forward here, and the fp32 kernels against both. */
#include "ref/ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

/* ---- linear ---- */

void ref_matmul_forward(double *out, const double *in, const double *W, const double *bias,
                        int N, int I, int O) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int i = 0; i < I; i++) acc += in[(size_t)n * I + i] * W[(size_t)o * I + i];
            out[(size_t)n * O + o] = acc;
        }
}

void ref_matmul_backward(double *din, double *dW, double *dbias, const double *dout,
                         const double *in, const double *W, int N, int I, int O) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double g = dout[(size_t)n * O + o];
            if (dbias) dbias[o] += g;
            for (int i = 0; i < I; i++) {
                if (din) din[(size_t)n * I + i] += g * W[(size_t)o * I + i];
                if (dW) dW[(size_t)o * I + i] += g * in[(size_t)n * I + i];
            }
        }
}

/* ---- embedding ---- */

void ref_embedding_forward(double *out, const int32_t *ids, const double *table, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = table[(size_t)ids[n] * C + c];
}

void ref_embedding_backward(double *dtable, const double *dout, const int32_t *ids, int N,
                            int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dtable[(size_t)ids[n] * C + c] += dout[(size_t)n * C + c];
}

/* ---- RMSNorm: y_j = x_j r w_j, r = (mean(x^2) + eps)^(-1/2) ---- */

void ref_rmsnorm_forward(double *out, double *rstd, const double *in, const double *w, int N,
                         int C, int ld_out, int ld_in, double eps) {
    for (int n = 0; n < N; n++) {
        const double *x = in + (size_t)n * ld_in;
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        double r = 1.0 / sqrt(ss / C + eps);
        rstd[n] = r;
        for (int c = 0; c < C; c++) out[(size_t)n * ld_out + c] = x[c] * r * w[c];
    }
}

/* dL/dx_i = r w_i g_i - x_i r^3 / C · Σ_j g_j w_j x_j  (since dr/dx_i = -r^3 x_i / C) */
void ref_rmsnorm_backward(double *din, double *dw, const double *dout, const double *in,
                          const double *rstd, const double *w, int N, int C, int ld_din,
                          int ld_dout, int ld_in) {
    for (int n = 0; n < N; n++) {
        const double *x = in + (size_t)n * ld_in, *g = dout + (size_t)n * ld_dout;
        double r = rstd[n];
        double dot = 0.0;
        for (int c = 0; c < C; c++) dot += g[c] * w[c] * x[c];
        for (int c = 0; c < C; c++) {
            if (din) din[(size_t)n * ld_din + c] += r * w[c] * g[c] - x[c] * r * r * r / C * dot;
            if (dw) dw[c] += g[c] * x[c] * r;
        }
    }
}

/* ---- RoPE, rotate_half: rotate pair (i, i + D/2) by angle pos * inv_freq[i] ---- */

static void rope_rotate(double *x, const int32_t *pos, const double *inv_freq, int N, int nh,
                        int D, int ld, double sign) {
    int half = D / 2;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nh; h++) {
            double *row = x + (size_t)n * ld + (size_t)h * D;
            for (int i = 0; i < half; i++) {
                double a = (double)pos[n] * inv_freq[i];
                double c = cos(a), s = sign * sin(a);
                double x0 = row[i], x1 = row[i + half];
                row[i] = x0 * c - x1 * s;
                row[i + half] = x1 * c + x0 * s;
            }
        }
}

void ref_rope_forward(double *x, const int32_t *pos, const double *inv_freq, int N, int nh,
                      int D, int ld) {
    rope_rotate(x, pos, inv_freq, N, nh, D, ld, +1.0);
}

void ref_rope_backward(double *dx, const int32_t *pos, const double *inv_freq, int N, int nh,
                       int D, int ld) {
    rope_rotate(dx, pos, inv_freq, N, nh, D, ld, -1.0);
}

/* ---- SwiGLU: out = g σ(g) u;  d/dg [g σ(g)] = σ(g) (1 + g (1 - σ(g))) ---- */

void ref_swiglu_forward(double *out, const double *gu, int N, int F) {
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++) {
            double g = gu[(size_t)n * 2 * F + f], u = gu[(size_t)n * 2 * F + F + f];
            out[(size_t)n * F + f] = g / (1.0 + exp(-g)) * u;
        }
}

void ref_swiglu_backward(double *dgu, const double *dout, const double *gu, int N, int F) {
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++) {
            double g = gu[(size_t)n * 2 * F + f], u = gu[(size_t)n * 2 * F + F + f];
            double sig = 1.0 / (1.0 + exp(-g)), d = dout[(size_t)n * F + f];
            dgu[(size_t)n * 2 * F + f] = d * u * sig * (1.0 + g * (1.0 - sig));
            dgu[(size_t)n * 2 * F + F + f] = d * g * sig;
        }
}

/* ---- attention ---- */

/* P[T,T] for one (b, h): row t is the softmax of q_t·k_s/sqrt(D) over the keys s it
 * may attend (s <= t, mask[s]), 0 elsewhere. Returns per-row lse in lse_row[T]
 * (-INFINITY for a row with no key). */
static void attn_probs(double *P, double *lse_row, const double *q, const double *k,
                       const uint8_t *mask, int b, int h, int T, int H, int Hkv, int D, int ldq,
                       int ldk) {
    int kvh = h / (H / Hkv);
    double scale = 1.0 / sqrt((double)D);
    for (int t = 0; t < T; t++) {
        const double *qt = q + (size_t)(b * T + t) * ldq + (size_t)h * D;
        double *p = P + (size_t)t * T;
        double m = -INFINITY;
        for (int s = 0; s < T; s++) {
            p[s] = 0.0;
            if (s > t || !mask[b * T + s]) continue;
            const double *ks = k + (size_t)(b * T + s) * ldk + (size_t)kvh * D;
            double dot = 0.0;
            for (int d = 0; d < D; d++) dot += qt[d] * ks[d];
            p[s] = dot * scale;
            if (p[s] > m) m = p[s];
        }
        if (m == -INFINITY) { /* no key: the row stays 0 */
            lse_row[t] = -INFINITY;
            continue;
        }
        double sum = 0.0;
        for (int s = 0; s <= t; s++)
            if (mask[b * T + s]) sum += exp(p[s] - m);
        double lse = m + log(sum);
        for (int s = 0; s <= t; s++)
            if (mask[b * T + s]) p[s] = exp(p[s] - lse);
        lse_row[t] = lse;
    }
}

void ref_attention_forward(double *out, double *lse, const double *q, const double *k,
                           const double *v, const uint8_t *mask, int B, int T, int H, int Hkv,
                           int D, int ldo, int ldq, int ldk, int ldv) {
    CHECK(H % Hkv == 0);
    double *P = xmalloc((size_t)T * T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int kvh = h / (H / Hkv);
            attn_probs(P, lse + ((size_t)b * H + h) * T, q, k, mask, b, h, T, H, Hkv, D, ldq,
                       ldk);
            for (int t = 0; t < T; t++) {
                double *o = out + (size_t)(b * T + t) * ldo + (size_t)h * D;
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int s = 0; s < T; s++)
                        acc += P[(size_t)t * T + s] *
                               v[(size_t)(b * T + s) * ldv + (size_t)kvh * D + d];
                    o[d] = acc;
                }
            }
        }
    free(P);
}

/* With S = scores, P = softmax(S), O = P V:
 *   dV = P^T dO,  dP = dO V^T,  dS_ts = P_ts (dP_ts - Σ_s' P_ts' dP_ts'),
 *   dQ = scale dS K,  dK = scale dS^T Q. */
void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                            const double *q, const double *k, const double *v,
                            const double *out, const double *lse, const uint8_t *mask, int B,
                            int T, int H, int Hkv, int D, int lddq, int lddk, int lddv,
                            int lddo, int ldq, int ldk, int ldv, int ldo) {
    CHECK(H % Hkv == 0);
    double scale = 1.0 / sqrt((double)D);
    double *P = xmalloc((size_t)T * T * sizeof(double));
    double *dS = xmalloc((size_t)T * T * sizeof(double));
    double *lse_row = xmalloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int kvh = h / (H / Hkv);
            attn_probs(P, lse_row, q, k, mask, b, h, T, H, Hkv, D, ldq, ldk);
            for (int t = 0; t < T; t++) {
                const double *go = dout + (size_t)(b * T + t) * lddo + (size_t)h * D;
                double rowdot = 0.0;
                for (int s = 0; s < T; s++) {
                    const double *vs = v + (size_t)(b * T + s) * ldv + (size_t)kvh * D;
                    double dp = 0.0;
                    for (int d = 0; d < D; d++) dp += go[d] * vs[d];
                    dS[(size_t)t * T + s] = dp;
                    rowdot += P[(size_t)t * T + s] * dp;
                }
                for (int s = 0; s < T; s++)
                    dS[(size_t)t * T + s] = P[(size_t)t * T + s] * (dS[(size_t)t * T + s] - rowdot);
            }
            for (int t = 0; t < T; t++) {
                const double *qt = q + (size_t)(b * T + t) * ldq + (size_t)h * D;
                const double *go = dout + (size_t)(b * T + t) * lddo + (size_t)h * D;
                double *gq = dq + (size_t)(b * T + t) * lddq + (size_t)h * D;
                for (int d = 0; d < D; d++) gq[d] = 0.0; /* dq is written */
                for (int s = 0; s < T; s++) {
                    double p = P[(size_t)t * T + s], ds = dS[(size_t)t * T + s];
                    const double *ks = k + (size_t)(b * T + s) * ldk + (size_t)kvh * D;
                    double *gk = dk + (size_t)(b * T + s) * lddk + (size_t)kvh * D;
                    double *gv = dv + (size_t)(b * T + s) * lddv + (size_t)kvh * D;
                    for (int d = 0; d < D; d++) {
                        gq[d] += scale * ds * ks[d];
                        gk[d] += scale * ds * qt[d];
                        gv[d] += p * go[d];
                    }
                }
            }
        }
    free(P);
    free(dS);
    free(lse_row);
}

/* ---- log-probabilities through the LM head ---- */

/* z[V] = (h_n · W^T) * inv_temp; returns logsumexp(z). */
static double logits_row(double *z, const double *hn, const double *W, int C, int V,
                         double inv_temp) {
    double m = -INFINITY;
    for (int v = 0; v < V; v++) {
        double acc = 0.0;
        for (int c = 0; c < C; c++) acc += hn[c] * W[(size_t)v * C + c];
        z[v] = acc * inv_temp;
        if (z[v] > m) m = z[v];
    }
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp(z[v] - m);
    return m + log(sum);
}

void ref_logprob_forward(double *logprob, double *entropy, double *lse, const double *h,
                         const double *W, const int32_t *targets, int N, int C, int V,
                         double inv_temp) {
    double *z = xmalloc((size_t)V * sizeof(double));
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) {
            logprob[n] = 0.0;
            if (entropy) entropy[n] = 0.0;
            lse[n] = 0.0;
            continue;
        }
        double l = logits_row(z, h + (size_t)n * C, W, C, V, inv_temp);
        lse[n] = l;
        logprob[n] = z[targets[n]] - l;
        if (entropy) {
            double e = 0.0;
            for (int v = 0; v < V; v++) {
                double lp = z[v] - l;
                e -= exp(lp) * lp;
            }
            entropy[n] = e;
        }
    }
    free(z);
}

/* d logprob / d z_v = 1[v = target] - p_v;  d entropy / d z_v = -p_v (log p_v + H);
 * z = inv_temp · h W^T. dentropy may be NULL. */
void ref_logprob_backward(double *dh, double *dW, const double *dlogprob, const double *dentropy, const double *h,
                          const double *W, const int32_t *targets, const double *lse, int N,
                          int C, int V, double inv_temp) {
    double *z = xmalloc((size_t)V * sizeof(double));
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        const double *hn = h + (size_t)n * C;
        double l = logits_row(z, hn, W, C, V, inv_temp), H = 0;
        for (int v = 0; v < V; v++) H -= exp(z[v] - l) * (z[v] - l);
        for (int v = 0; v < V; v++) {
            double p = exp(z[v] - l), de = dentropy ? dentropy[n] : 0.0;
            double dz = (dlogprob[n] * ((v == targets[n]) - p) - de * p * (z[v] - l + H)) * inv_temp;
            for (int c = 0; c < C; c++) {
                if (dh) dh[(size_t)n * C + c] += dz * W[(size_t)v * C + c];
                if (dW) dW[(size_t)v * C + c] += dz * hn[c];
            }
        }
    }
    free(z);
}
