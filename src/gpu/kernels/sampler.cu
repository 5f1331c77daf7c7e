/* gpu/kernels/sampler.cu — gen/sampler.c's sampler_sample_logp on the GPU, a block
 * per row (blockDim a power of two), each row on its own: its uniform number from its
 * own Philox stream (core/rng.c: draw k of stream s of seed depends on those alone),
 * the logits processors in the CPU's order (repetition penalty, temperature, top-k,
 * top-p, min-p), the draw by inverse CDF in token-id order.
 *
 * Temperature alone (the CPU's sample_temperature) picks the CPU's token always: the
 * weights are the CPU's bits (exp_neg_cpu), the running sums are taken over
 * contiguous segments in parallel, and where the CPU's sequential sums could round
 * to another pick (the draw within the error bound of either sum of a boundary:
 * about 1e-10 of the total at V = 151936) the row repeats the CPU's arithmetic in
 * its order (8 lanes, then one running sum). Greedy decoding likewise (an argmax of
 * exact values). The other processors run in double as the CPU's, but e^x is
 * exp_f64, within a few ulp of glibc's: a pick, a top-p/min-p cut or a log-prob can
 * differ from the CPU's only where the CPU's own rounding decides it. */
#include "kmath.h"

/* core/rng.c's Philox4x32-10 (Salmon et al. 2011): word k of stream `stream` of
 * `seed`, the stream's k-th rng_u32. */
DEVICE unsigned philox_word(u64 seed, u64 stream, u64 k) {
    u64 block = k >> 2;
    unsigned c0 = (unsigned)block, c1 = (unsigned)(block >> 32), c2 = (unsigned)stream, c3 = (unsigned)(stream >> 32);
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        u64 p0 = (u64)0xD2511F53u * c0, p1 = (u64)0xCD9E8D57u * c2;
        unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n1 = (unsigned)p1;
        unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1, n3 = (unsigned)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    unsigned w = k & 3;
    return w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
}

/* rng_uniform_f64 from words k and k + 1: 53 bits, in [0, 1). */
DEVICE double uniform_f64(u64 seed, u64 stream, u64 k) {
    u64 hi = philox_word(seed, stream, k), lo = philox_word(seed, stream, k + 1);
    return (double)(((hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

/* A row's draw. tok: the first v with w[v] > 0 whose running sum of w passes
 * target (u times the total, or u where w is normalised), else the last v with
 * w[v] > 0; total: the sum of w. */
typedef struct {
    int tok, certain;
    double total;
} Draw;

/* The draw over segments: thread i sums its contiguous segment of w in order,
 * thread 0 lays the sums end to end, each thread finds its first crossing and the
 * lowest wins. The running sum so formed, P_v, and the CPU's sequential one, C_v,
 * are each within V 2^-53 of the exact sum at every v (recursive summation's
 * bound), as are the two targets: the pick is certainly the CPU's when target is
 * farther than their sum of bounds from P on both sides of the pick. seg: blockDim
 * doubles of shared memory. */
DEVICE Draw draw_segments(const double *w, int V, double u, int normalised, double *seg, float *fscratch) {
    SHARED double shared_total, shared_before, shared_at;
    int t = thread_x(), n = block_dim_x(), len = (V + n - 1) / n;
    int lo = t * len < V ? t * len : V, hi = lo + len < V ? lo + len : V;
    double s = 0;
    for (int v = lo; v < hi; v++) s += w[v];
    sync_block();
    seg[t] = s;
    sync_block();
    if (t == 0) {
        double b = 0;
        for (int i = 0; i < n; i++) {
            double x = seg[i];
            seg[i] = b;
            b += x;
        }
        shared_total = b;
    }
    sync_block();
    Draw d = {-1, 0, shared_total};
    double base = seg[t], target = normalised ? u : u * d.total, cum = 0, before = 0, at = 0;
    int found = -1, last = -1;
    for (int v = lo; v < hi; v++) {
        if (w[v] <= 0) continue;
        last = v;
        if (found >= 0) continue;
        double prev = base + cum;
        cum += w[v];
        if (target < base + cum) found = v, before = prev, at = base + cum;
    }
    /* the lowest crossing, and the last positive weight (token ids < 2^24: exact in float) */
    float first = block_max(found >= 0 ? (float)(V - found) : 0.0f, fscratch);
    float final_pos = block_max((float)(last + 1), fscratch);
    if (first > 0 && found == V - (int)first) shared_before = before, shared_at = at;
    sync_block();
    double margin = (6.0 * V + 64.0) * (1.0 / 9007199254740992.0) * d.total;
    d.tok = first > 0 ? V - (int)first : final_pos > 0 ? (int)final_pos - 1 : 0; /* none positive: 0, as the CPU */
    d.certain = first > 0 && target - shared_before > margin && shared_at - target > margin;
    return d;
}

/* The CPU's arithmetic in its order, on thread 0 (8 lanes first where w is not
 * normalised: ops/vec.h's vec_exp_sum sums e[i] into lane i mod 8, then the lanes
 * pairwise): the row's draw when draw_segments was not certain. */
DEVICE Draw draw_sequential(const double *w, int V, double u, int normalised, double *seg) {
    SHARED int shared_tok;
    SHARED double shared_total;
    int t = thread_x();
    sync_block();
    if (t < 8) {
        double lane = 0;
        for (int i = t; i < V; i += 8) lane += w[i];
        seg[t] = lane;
    }
    sync_block();
    if (t == 0) {
        double total = ((seg[0] + seg[1]) + (seg[2] + seg[3])) + ((seg[4] + seg[5]) + (seg[6] + seg[7]));
        double target = normalised ? u : u * total, cum = 0;
        int last = 0, tok = -1;
        for (int v = 0; v < V && tok < 0; v++) {
            if (w[v] <= 0) continue;
            cum += w[v];
            last = v;
            if (target < cum) tok = v;
        }
        shared_tok = tok < 0 ? last : tok;
        shared_total = total;
    }
    sync_block();
    Draw d = {shared_tok, 1, shared_total};
    return d;
}

/* The draw: over segments, repeated in the CPU's order where that could differ
 * (always with force_sequential: the tests' check of that path). */
DEVICE Draw draw_token(const double *w, int V, double u, int normalised, int force_sequential, double *seg,
                       float *fscratch) {
    Draw d = draw_segments(w, V, u, normalised, seg, fscratch);
    if (force_sequential || !d.certain) d = draw_sequential(w, V, u, normalised, seg); /* d.certain: the block's */
    return d;
}

/* The largest w and the lowest v holding it (the CPU's greedy argmax: `z[v] > z[best]`). */
DEVICE int argmax_f64(const double *w, int V, double *seg, float *fscratch) {
    double best = -inf_f64();
    for (int v = thread_x(); v < V; v += block_dim_x()) best = w[v] > best ? w[v] : best;
    best = block_reduce_f64(best, seg, 1);
    int first = V;
    for (int v = thread_x(); v < V; v += block_dim_x())
        if (w[v] == best && v < first) first = v;
    return V - (int)block_max((float)(V - first), fscratch);
}

/* The order of doubles as unsigned integers (negatives reversed). */
DEVICE u64 order_key(double x) {
    u64 b = f64_bits(x);
    return b >> 63 ? ~b : b | 0x8000000000000000ULL;
}
DEVICE double from_order_key(u64 k) { return f64_from_bits(k >> 63 ? k & 0x7fffffffffffffffULL : ~k); }

/* top_k: w[v] below the k-th largest value become -inf (ties with it kept). The
 * k-th largest is the largest key K with at least k keys >= K, found 4 bits a pass
 * (the count at each of the 15 next candidates, the largest that still has k). */
DEVICE void top_k_filter(double *w, int V, int k, double *buf) {
    u64 K = 0;
    for (int shift = 60; shift >= 0; shift -= 4) {
        double count[16] = {0};
        for (int v = thread_x(); v < V; v += block_dim_x()) {
            u64 key = order_key(w[v]);
            for (int j = 1; j < 16; j++) count[j] += key >= (K | (u64)j << shift);
        }
        block_sum16_f64(count, buf);
        int best = 0;
        for (int j = 1; j < 16; j++) best = count[j] >= k ? j : best;
        K |= (u64)best << shift;
    }
    double kth = from_order_key(K);
    for (int v = thread_x(); v < V; v += block_dim_x())
        if (w[v] < kth) w[v] = -inf_f64();
    sync_block();
}

/* The max of w and the sum of e^(w - max) (-inf: 0): the CPU's softmax's. */
DEVICE void softmax_stats(const double *w, int V, double *mx, double *sum, double *seg) {
    double m = -inf_f64(), s = 0;
    for (int v = thread_x(); v < V; v += block_dim_x()) m = w[v] > m ? w[v] : m;
    m = block_reduce_f64(m, seg, 1);
    for (int v = thread_x(); v < V; v += block_dim_x()) s += w[v] == -inf_f64() ? 0.0 : exp_f64(w[v] - m);
    *mx = m;
    *sum = block_reduce_f64(s, seg, 0);
}

/* Whether token v comes at or before the cut (key, id_key) in the CPU's top-p
 * order: ascending value, among equal values the higher id first. */
DEVICE int at_or_before(double x, int v, int V, u64 key, u64 id_key) {
    u64 k = order_key(x);
    return k < key || (k == key && (u64)(V - 1 - v) <= id_key);
}

/* top_p: the ascending prefix whose probabilities sum to at most 1 - top_p becomes
 * -inf, the largest (lowest id among equals) kept. The cut, a position (key, id_key)
 * in that order, is found 4 bits a pass, the value's 64 bits then the id's: the
 * last whose prefix sum stays <= 1 - top_p. */
DEVICE void top_p_filter(double *w, int V, float top_p, double *buf, float *fscratch) {
    double mx, sum, limit = 1.0 - top_p;
    softmax_stats(w, V, &mx, &sum, buf);
    int keep = argmax_f64(w, V, buf, fscratch), id_bits = 4;
    while ((1 << id_bits) < V) id_bits += 4;
    u64 key = 0, id_key = 0;
    for (int pass = 0; pass < 16 + id_bits / 4; pass++) {
        int on_key = pass < 16, shift = on_key ? 60 - 4 * pass : id_bits - 4 - 4 * (pass - 16);
        double s[16] = {0};
        for (int v = thread_x(); v < V; v += block_dim_x()) {
            if (w[v] == -inf_f64()) continue;
            double p = exp_f64(w[v] - mx) / sum;
            for (int j = 1; j < 16; j++) {
                u64 ck = on_key ? key | (u64)j << shift : key, ci = on_key ? 0 : id_key | (u64)j << shift;
                if (at_or_before(w[v], v, V, ck, ci)) s[j] += p;
            }
        }
        block_sum16_f64(s, buf);
        int best = 0;
        for (int j = 1; j < 16; j++) best = s[j] <= limit ? j : best;
        if (on_key) key |= (u64)best << shift;
        else id_key |= (u64)best << shift;
    }
    for (int v = thread_x(); v < V; v += block_dim_x())
        if (v != keep && at_or_before(w[v], v, V, key, id_key)) w[v] = -inf_f64();
    sync_block();
}

/* min_p: p < min_p max p becomes -inf (max p = e^0 / sum). */
DEVICE void min_p_filter(double *w, int V, float min_p, double *seg) {
    double mx, sum;
    softmax_stats(w, V, &mx, &sum, seg);
    double floor_p = min_p * (1.0 / sum);
    for (int v = thread_x(); v < V; v += block_dim_x())
        if (w[v] != -inf_f64() && exp_f64(w[v] - mx) / sum < floor_p) w[v] = -inf_f64();
    sync_block();
}

/* w = the row's logits in double, each context token's once divided (> 0) or
 * multiplied (< 0) by the penalty — from its logit, so a repeated token's writes
 * agree — as transformers' RepetitionPenaltyLogitsProcessor. */
DEVICE void penalised_logits(double *w, const float *z, int V, const int *ctx, int n_ctx, float penalty) {
    for (int v = thread_x(); v < V; v += block_dim_x()) w[v] = z[v];
    sync_block();
    if (penalty != 1.0f)
        for (int i = thread_x(); i < n_ctx; i += block_dim_x()) {
            int t = ctx[i];
            if (t < 0 || t >= V) continue;
            double x = z[t], pen = penalty;
            w[t] = x < 0 ? x * pen : x / pen;
        }
    sync_block();
}

/* sampler_distribution's processors after the penalty (temperature > 0), then the
 * softmax into w. */
DEVICE void processed_probs(double *w, int V, float temperature, int top_k, float top_p, float min_p, double *seg,
                            float *fscratch) {
    if (temperature != 1.0f)
        for (int v = thread_x(); v < V; v += block_dim_x()) w[v] /= temperature;
    sync_block();
    if (top_k > 0 && top_k < V) top_k_filter(w, V, top_k, seg);
    if (top_p < 1.0f) top_p_filter(w, V, top_p, seg, fscratch);
    if (min_p > 0) min_p_filter(w, V, min_p, seg);
    double mx, sum;
    softmax_stats(w, V, &mx, &sum, seg);
    for (int v = thread_x(); v < V; v += block_dim_x()) /* 0 / 0: NaN, as the CPU's, where every token is -inf */
        w[v] = (w[v] == -inf_f64() ? 0.0 : exp_f64(w[v] - mx)) / sum;
    sync_block();
}

/* tok[m] (and logp[m] unless NULL: the pick's log-probability under the processed
 * distribution, 0 for greedy) from logits[m, V]; scratch[m, V] doubles; row r's
 * uniform is words draw[r], draw[r] + 1 of stream stream[r] of seed[r], its context
 * ctx[ctx_first[r] .. + ctx_len[r]). force_sequential: the CPU's order always. */
KERNEL void sampler_sample(int *tok, float *logp, const float *logits, double *scratch, const u64 *seed,
                           const u64 *stream, const u64 *draw, const int *ctx_first, const int *ctx_len,
                           const int *ctx, int V, float temperature, int top_k, float top_p, float min_p,
                           float repetition_penalty, int force_sequential) {
    SHARED float fscratch[32];
    SHARED double seg[16 * 256]; /* blockDim <= 256: the 16-way sums' buffer, the others' scratch */
    int r = block_x();
    const float *z = logits + (u64)r * V;
    double *w = scratch + (u64)r * V, u = uniform_f64(seed[r], stream[r], draw[r]);
    int alone = temperature > 0 && repetition_penalty == 1.0f && (top_k == 0 || top_k >= V) && top_p >= 1.0f &&
                min_p == 0.0f;
    Draw d = {0, 1, 0};
    float lp = 0.0f;
    if (alone) { /* the CPU's sample_temperature */
        float mx = -__builtin_inff(), scale = 1.0f / temperature;
        for (int v = thread_x(); v < V; v += block_dim_x()) mx = z[v] > mx ? z[v] : mx;
        mx = block_max(mx, fscratch);
        for (int v = thread_x(); v < V; v += block_dim_x()) w[v] = exp_neg_cpu((z[v] - mx) * scale);
        sync_block();
        d = draw_token(w, V, u, 0, force_sequential, seg, fscratch);
        lp = (float)(log_f64(w[d.tok]) - log_f64(d.total));
    } else {
        penalised_logits(w, z, V, ctx + ctx_first[r], ctx_len[r], repetition_penalty);
        if (temperature == 0) {
            d.tok = argmax_f64(w, V, seg, fscratch);
        } else {
            processed_probs(w, V, temperature, top_k, top_p, min_p, seg, fscratch);
            d = draw_token(w, V, u, 1, force_sequential, seg, fscratch);
            lp = (float)log_f64(w[d.tok]);
        }
    }
    if (thread_x() == 0) {
        tok[r] = d.tok;
        if (logp) logp[r] = lp;
    }
}
