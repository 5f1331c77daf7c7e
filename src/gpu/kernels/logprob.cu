/* gpu/kernels/logprob.cu — the row statistics of a chunk of LM-head logits and
 * their backward, as ops/logprob.c's chunk_stats and chunk_backward compute them
 * (the GEMM producing the logits, scaled by 1/T, is the caller's). A block per row
 * (blockDim a power of two). The exponentials are the CPU's (exp_neg_cpu: its bits),
 * their sums in double as the CPU's, but over a tree instead of 8 sequential lanes:
 * the sums differ from the CPU's in the last bits of a double only. */
#include "kmath.h"

/* lse[m], logprob[m] (and entropy[m] unless NULL) of z = logits[m, V]:
 * lse = max + ln sum e^(z - max), logprob = z[target] - lse,
 * entropy = ln sum - sum e (z - max) / sum. A row whose target is outside [0, V)
 * gets 0 (the CPU's rows without a target). */
KERNEL void logprob_chunk_forward(float *logprob, float *entropy, float *lse, const float *logits,
                                  const int *targets, int V) {
    SHARED float fscratch[32];
    SHARED double dscratch[1024];
    const float *z = logits + (u64)block_x() * V;
    float mx = -__builtin_inff();
    for (int v = thread_x(); v < V; v += block_dim_x()) mx = z[v] > mx ? z[v] : mx;
    mx = block_max(mx, fscratch);
    double sum = 0, zsum = 0;
    for (int v = thread_x(); v < V; v += block_dim_x()) {
        float e = exp_neg_cpu((z[v] - mx) * 1.0f);
        sum += e;
        zsum += (double)e * (z[v] - mx);
    }
    sum = block_reduce_f64(sum, dscratch, 0);
    if (entropy) zsum = block_reduce_f64(zsum, dscratch, 0); /* entropy: the same for the whole block */
    if (thread_x() == 0) {
        int t = targets[block_x()], ok = t >= 0 && t < V;
        double ls = log_f64(sum), l = mx + ls;
        lse[block_x()] = ok ? (float)l : 0.0f;
        logprob[block_x()] = ok ? (float)(z[t] - l) : 0.0f;
        if (entropy) entropy[block_x()] = ok ? (float)(ls - zsum / sum) : 0.0f;
    }
}

/* dz written over the logits[m, V] (which hold z): dz = dlogprob (onehot - p) +
 * dentropy dH/dz, dH/dz_v = -p_v (ln p_v + H), times 1/T (inv_temp). Without
 * dentropy (NULL, or a row's 0): p = exp_neg_cpu(z - lse) in float, the CPU's bits;
 * with it, in double as the CPU (its log p + H cancels). A row whose target is
 * outside [0, V) gets dz = 0. */
KERNEL void logprob_chunk_backward(float *logits, const float *dlogprob, const float *dentropy, const float *lse,
                                   const int *targets, int V, float inv_temp) {
    SHARED double dscratch[1024];
    float *z = logits + (u64)block_x() * V;
    int t = targets[block_x()], ok = t >= 0 && t < V;
    float g = dlogprob[block_x()], l = lse[block_x()], de = dentropy ? dentropy[block_x()] : 0.0f;
    if (de != 0.0f) { /* the same for the whole block */
        double H = 0;
        for (int v = thread_x(); v < V; v += block_dim_x()) {
            double lp = (double)z[v] - l;
            H -= exp_f64(lp) * lp;
        }
        H = block_reduce_f64(H, dscratch, 0);
        for (int v = thread_x(); v < V; v += block_dim_x()) {
            double lp = (double)z[v] - l, p = exp_f64(lp);
            float d = (float)(-p * (g + de * (lp + H)) * inv_temp);
            z[v] = !ok ? 0.0f : v == t ? d + g * inv_temp : d;
        }
    } else {
        for (int v = thread_x(); v < V; v += block_dim_x()) {
            float d = -g * exp_neg_cpu((z[v] - l) * 1.0f) * inv_temp;
            z[v] = !ok ? 0.0f : v == t ? d + g * inv_temp : d;
        }
    }
}

/* A frozen head's shortcut (ops/logprob.c's pw path): the chunk's logits[m, V]
 * become p = e^(z - lse) in place (exp_neg_cpu in float: the CPU's vec_exp_sum
 * step, its bits), the operand of E_p[W] = p W that the caller multiplies. */
KERNEL void logprob_chunk_probs(float *logits, const float *lse, int V) {
    float *z = logits + (u64)block_x() * V, l = lse[block_x()];
    for (int v = thread_x(); v < V; v += block_dim_x()) z[v] = exp_neg_cpu((z[v] - l) * 1.0f);
}

/* logprob_backward_frozen: dh[rows[i], :] += dlogprob[rows[i]] / T (W[tgts[i], :] -
 * pw[rows[i], :]) for the m rows with a target, a block a row; W is bf16 (W16,
 * widened) or fp32 (W). The CPU's float operations in its order: its bits. */
KERNEL void logprob_backward_frozen(float *dh, const float *dlogprob, const float *pw, const unsigned short *W16,
                                    const float *W, const int *rows, const int *tgts, int C, float inv_temp) {
    u64 n = (u64)rows[block_x()], t = (u64)tgts[block_x()];
    float g = dlogprob[n] * inv_temp;
    for (int c = thread_x(); c < C; c += block_dim_x()) {
        float w = W16 ? f32_from_bits((unsigned)W16[t * C + c] << 16) : W[t * C + c];
        dh[n * C + c] += g * (w - pw[n * C + c]);
    }
}
