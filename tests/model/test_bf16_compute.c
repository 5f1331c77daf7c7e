/* tests/model/test_bf16_compute.c — mixed precision (model_use_bf16_compute)
 * against the float64 reference and against PyTorch's bf16 autocast on the same
 * model, inputs and loss (tools/make_bf16_reference.py:
 * tests/fixtures/<name>/autocast_bf16.safetensors).
 *
 * Bounds (docs/reference-fixtures.md):
 *   - log-probs: max |lp - lp64| over real tokens <= 1.5 x autocast's;
 *   - gradients, per tensor: relative error ||g - g64|| / ||g64|| <= 1.5 x
 *     autocast's (+ 1e-3, for tensors autocast gets nearly exact, such as norms
 *     whose gradient it sums in fp32) and cosine with float64 >= 0.999, or
 *     >= autocast's where autocast's is lower (a k_proj bias, whose gradient
 *     nearly cancels: softmax ignores what adds the same score to every key);
 *   - the products do run in bf16: the log-prob error is at least 20x fp32's;
 *   - the weights are held as two halves (4 bytes a weight, no fp32 buffer), their
 *     fp32 values exactly; what is set (model_set_params) reaches the products, and
 *     back in fp32 (model_use_fp32_compute) the model is the fp32 one bit for bit;
 *   - the products' saved inputs in bf16 (acts_create's bf16) change nothing, bit
 *     for bit, and save half their bytes; an fp32 model's forward on such
 *     activations is the fp32 one;
 *   - checkpointing changes nothing, bit for bit, and the fused LM head
 *     (model_logprobs_train) gives the two-pass gradients bit for bit;
 *   - the operands rounded into buffers as for oneDNN's bf16 matmul (gemm_bf16's
 *     ROUNDED backend) give the widened path's log-probs and gradients bit for bit,
 *     with and without checkpointing and the fused head: on any CPU, the callers'
 *     side of the native path reads each rounded operand while it is still its own;
 *   - decoding (model_decode: prefill, then one token a step) reads the bf16 values
 *     of every matrix, the LM head included: its logits stay within 5e-2 max|logit|
 *     of fp32's and follow the weights set; where the head is untied (llama), they
 *     equal bit for bit those of an fp32 model whose matrices were rounded to bf16
 *     as the upper halves are (f32_split: to nearest, ties away from zero), and its
 *     products are bf16 ones: within 2e-3 max|logit| of the mixed forward's logits
 *     and at most an eighth as far from them as fp32 products on the same weights.
 * A frozen model in bf16 (WEIGHTS_BF16: every matrix, the embedding and the LM head
 * included, held in bf16, its products in bf16 — bf16 as a frozen reference, a LoRA
 * base and generate/eval/score --bf16 compute):
 *   - on weights that are bf16 values already, its log-probs, entropies and decoding
 *     logits equal bit for bit those of the mixed-precision model of the same
 *     weights, whose products are checked above against autocast's.
 * And a frozen model held in bf16 with fp32 products (WEIGHTS_BF16_HELD, --bf16_held:
 * every matrix, the embedding and the LM head included, in bf16; computation in fp32):
 *   - its weights take 2 bytes per matrix value, 4 per other value (no fp32 copy
 *     of any matrix, not even one layer's);
 *   - log-probs and entropies, full logits and decoding's logits equal bit for bit
 *     those of an fp32 model holding the same values (its matrices rounded);
 *   - the head's kernels where the head passes the widening block (70001 x 64):
 *     log-probs, entropies, E_p[W] and dh through the frozen head (from E_p[W], and
 *     with an entropy gradient) match the fp32 head's within 1e-5 of the largest
 *     value: the blocks' sums run in another order. */
#include <stdlib.h>
#include <string.h>

#include "machine/bf16_matmul.h"
#include "io/safetensors.h"
#include "model/kvcache.h"
#include "model/model_io.h"
#include "ops/gemm.h"
#include "testutil.h"
#include "fixture_tensors.h"

typedef struct {
    int B, T, N;
    int32_t *ids, *targets;
    uint8_t *mask;
    float *dlp, inv_temp;
    double *lp64;
} Inputs;

static void read_inputs(Inputs *in, StFile *ref) {
    long n;
    const StTensor *t = st_find(ref, "input_ids");
    in->B = (int)t->shape[0], in->T = (int)t->shape[1], in->N = in->B * in->T;
    int64_t *ids = read_i64(ref, "input_ids", &n), *mask = read_i64(ref, "attention_mask", &n),
            *tgt = read_i64(ref, "target_ids", &n);
    double *lw = read_f64(ref, "loss_weight", &n), *temp = read_f64(ref, "temperature", &n);
    in->ids = malloc(sizeof(int32_t) * in->N), in->targets = malloc(sizeof(int32_t) * in->N);
    in->mask = malloc(in->N), in->dlp = malloc(sizeof(float) * in->N);
    for (int i = 0; i < in->N; i++) {
        in->ids[i] = (int32_t)ids[i];
        in->mask[i] = (uint8_t)mask[i];
        in->targets[i] = mask[i] ? (int32_t)tgt[i] : -1;
        in->dlp[i] = (float)lw[i];
    }
    in->inv_temp = (float)(1.0 / temp[0]);
    in->lp64 = read_f64(ref, "logprobs", &n);
    free(ids), free(mask), free(tgt), free(lw), free(temp);
}

/* The loss Σ dlp · lp, token by token: its gradient is dlp itself. */
static void weights_grad(void *ctx, const int *rows, int m, const float *logprob, float *dlogprob) {
    const float *dlp = ctx;
    for (int i = 0; i < m; i++) dlogprob[i] = dlp[rows[i]];
}

/* Log-probs and the gradient of Σ dlp · lp, by the two-pass path (fused = 0) or
 * the fused head (fused = 1), on activations in fp32 or bf16 (acts16), summed into
 * zeros or (fresh) written over NaN. Returns the gradient buffer (table.total floats). */
static float *run_fresh(Model *m, const Inputs *in, int ckpt, int fused, int acts16, float *lp, int fresh) {
    Activations a;
    acts_create(&a, &m->cfg, in->N, ckpt, 4, acts16);
    model_forward(m, &a, in->ids, in->mask, in->B, in->T, NULL);
    float *g = calloc(m->table.total, sizeof(float));
    if (fresh)
        for (int i = 0; i < m->table.n; i++)
            for (size_t k = 0; k < m->table.entries[i].numel; k++) g[m->table.entries[i].offset + k] = NAN;
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, g);
    GradState gs;
    grad_state_create(&gs, &m->table, g);
    ModelGrads grads = {&gv, NULL, fresh ? &gs : NULL, NULL};
    if (fused) {
        LogprobGrad lg = {.fn = weights_grad, .ctx = in->dlp};
        model_logprobs_train(m, &a, in->targets, in->inv_temp, lp, NULL, &grads, &lg);
        model_backward(m, &a, &grads, NULL, NULL);
    } else {
        model_logprobs(m, &a, in->targets, in->inv_temp, lp, NULL);
        model_backward(m, &a, &grads, in->dlp, NULL);
    }
    int all = 1;
    for (int i = 0; i < m->table.n; i++) all &= gs.written[i];
    T_CHECK(!fresh || all, "model_backward left a tensor unwritten");
    grad_state_free(&gs);
    params_view_free(&gv);
    acts_free(&a);
    return g;
}

static float *run(Model *m, const Inputs *in, int ckpt, int fused, int acts16, float *lp) {
    return run_fresh(m, in, ckpt, fused, acts16, lp, 0);
}

static double lp_error(const float *lp, const double *want, const Inputs *in) {
    double e = 0;
    for (int i = 0; i < in->N; i++)
        if (in->mask[i]) e = fmax(e, fabs(lp[i] - want[i]));
    return e;
}

static double lp_error64(const double *lp, const double *want, const Inputs *in) {
    double e = 0;
    for (int i = 0; i < in->N; i++)
        if (in->mask[i]) e = fmax(e, fabs(lp[i] - want[i]));
    return e;
}

/* ||g - want|| / ||want|| and the cosine of g with want. */
static void grad_error(const double *g, const double *want, long n, double *rel, double *cosine) {
    double d = 0, w = 0, gg = 0, gw = 0;
    for (long i = 0; i < n; i++) {
        d += (g[i] - want[i]) * (g[i] - want[i]);
        w += want[i] * want[i];
        gg += g[i] * g[i];
        gw += g[i] * want[i];
    }
    *rel = w > 0 ? sqrt(d / w) : sqrt(d);
    *cosine = w > 0 && gg > 0 ? gw / sqrt(w * gg) : 1.0;
}

static void check_fixture(const char *name) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    GrpoErr err;
    Model m;
    StFile ref, ac;
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (model_load(&m, dir, &err) || st_open(&ref, path, &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    snprintf(path, sizeof path, "%s/autocast_bf16.safetensors", dir);
    if (st_open(&ac, path, &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    Inputs in;
    read_inputs(&in, &ref);
    long n;
    double *ac_lp = read_f64(&ac, "logprobs", &n);
    float lp32[in.N], lp16[in.N], lp16b[in.N];
    float *g32 = run(&m, &in, 1, 0, 0, lp32);
    /* bf16 activations serve a forward of a model without bf16 products (a KL reference):
     * they save nothing there, and the log-probs are the fp32 activations' */
    {
        float lp_ref[in.N];
        Activations a;
        acts_create(&a, &m.cfg, in.N, 0, 4, 1);
        model_forward(&m, &a, in.ids, in.mask, in.B, in.T, NULL);
        model_logprobs(&m, &a, in.targets, in.inv_temp, lp_ref, NULL);
        acts_free(&a);
        T_CHECK(!memcmp(lp_ref, lp32, sizeof lp32), "%s: an fp32 forward on bf16 activations differs", name);
    }
    size_t P = m.table.total;
    float *orig = malloc(sizeof(float) * P), *back = malloc(sizeof(float) * P);
    memcpy(orig, m.params, sizeof(float) * P);
    model_use_bf16_compute(&m);
    float lp16f[in.N];
    float *g16 = run(&m, &in, 1, 0, 1, lp16), *g16b = run(&m, &in, 0, 0, 1, lp16b), *g16f = run(&m, &in, 1, 1, 1, lp16f);
    /* the products' inputs saved in bf16: the log-probs of saving them in fp32, bit for bit,
     * in half their memory; the gradients differ only where SwiGLU's backward reads gate and
     * up rounded to bf16 (and writes its gradient in bf16, which the products round it to
     * anyway): close to the fp32-saved ones, and not the same */
    float lp16s[in.N], *g16s = run(&m, &in, 0, 0, 0, lp16s);
    T_CHECK(!memcmp(lp16s, lp16, sizeof lp16), "%s: bf16 activations change the log-probs", name);
    {
        double worst = 0;
        for (int i = 0; i < m.table.n; i++) {
            const ParamEntry *e = &m.table.entries[i];
            double d = 0, s = 0;
            for (size_t k = 0; k < e->numel; k++) {
                double a = g16[e->offset + k], b = g16s[e->offset + k];
                d += (a - b) * (a - b), s += b * b;
            }
            worst = fmax(worst, s > 0 ? sqrt(d / s) : sqrt(d));
        }
        printf("  %s gradients, saved gate/up in bf16 against fp32: worst relative difference %.3e\n", name, worst);
        T_CHECK(worst > 0 && worst < 2e-2, "%s: gate/up saved in bf16 move the gradients by %.3e (relative)", name,
                worst);
    }
    free(g16s);
    {
        const ModelConfig *c = &m.cfg;
        /* less the LM head's gathered dz^T and h in bf16 (ops/ops.h: LogprobScratch) */
        size_t dw = (size_t)logprob_dw_rows(4, in.N), head = 2 * (dw * c->vocab_size + dw * c->hidden_size);
        size_t f32 = acts_plan_bytes(c, in.N, 0, 4, 0), b16 = acts_plan_bytes(c, in.N, 0, 4, 1),
               inputs = sizeof(float) * c->n_layers * (size_t)in.N * (2 * c->hidden_size + 3 * c->intermediate_size);
        T_CHECK(f32 + head - b16 >= inputs / 2 &&
                    f32 + head - b16 <= inputs / 2 + 16 * (size_t)c->n_layers + 8,
                "%s: bf16 activations save %zu bytes and the head's dz^T takes %zu, not half of h1, h2, act and "
                "gu's %zu", name, f32 - b16, head, inputs);
    }

    double e32 = lp_error(lp32, in.lp64, &in), e16 = lp_error(lp16, in.lp64, &in),
           eac = lp_error64(ac_lp, in.lp64, &in);
    printf("  %s log-prob max error vs float64: fp32 %.3e, bf16 compute %.3e, torch bf16 autocast %.3e\n", name,
           e32, e16, eac);
    T_CHECK(e16 <= 1.5 * eac, "%s: bf16 log-prob error %.3e > 1.5 x autocast's %.3e", name, e16, eac);
    T_CHECK(e16 >= 20 * e32, "%s: bf16 log-prob error %.3e is not that of bf16 products (fp32: %.3e)", name, e16,
            e32);
    /* checkpointing changes nothing bit for bit but the LM head's weight gradient, which
     * without it is one product over the gathered chunks (LogprobScratch.dw_rows), with it
     * one a chunk: the same within fp32 summation order */
    {
        const char *head = m.cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
        long same = 1;
        double d = 0, mx = 0;
        for (int i = 0; i < m.table.n; i++) {
            const ParamEntry *e = &m.table.entries[i];
            const float *a = g16 + e->offset, *b = g16b + e->offset;
            if (strcmp(e->name, head)) {
                same &= !memcmp(a, b, sizeof(float) * e->numel);
                continue;
            }
            for (size_t k = 0; k < e->numel; k++) d = fmax(d, fabs(a[k] - b[k])), mx = fmax(mx, fabs(b[k]));
        }
        T_CHECK(!memcmp(lp16, lp16b, sizeof lp16) && same, "%s: checkpointing changes the bf16 results", name);
        T_CHECK(mx > 0 && d <= 1e-5 * mx, "%s: checkpointing moves the head's bf16 gradient by %.3e (max %.3e)", name,
                d, mx);
    }
    T_CHECK(!memcmp(lp16, lp16f, sizeof lp16) && !memcmp(g16, g16f, sizeof(float) * m.table.total),
            "%s: the fused LM head differs from the two-pass one in bf16", name);
    /* a step's first backward (ModelGrads.base_state begun) writes every gradient over NaN: the bits of
     * summing into zeros, through either head */
    for (int fused = 0; fused <= 1; fused++) {
        float lpf[in.N], *gf = run_fresh(&m, &in, 1, fused, 1, lpf, 1);
        T_CHECK(!memcmp(gf, g16, sizeof(float) * m.table.total), "%s (fused head %d): a fresh backward differs",
                name, fused);
        free(gf);
    }
    /* the native path's operand handling (every fp32 operand rounded into a buffer,
     * dx rounded into the activations' dx16, the LM head's dz rounded in place), on the
     * tests' emulated bf16 matmul (tests/machine): the widened path's bits, in every
     * pass — any operand read after its memory was reused would show */
    for (int pass = 0; pass < 3; pass++) {
        int ckpt = pass != 1, fused = pass == 2;
        float lpw[in.N], lpr[in.N];
        gemm_bf16_use(GEMM_BF16_WIDEN);
        float *gw = run(&m, &in, ckpt, fused, 1, lpw);
        GemmBf16Matmul was = test_bf16_machine(1);
        gemm_bf16_use(GEMM_BF16_ONEDNN);
        float *gr = run(&m, &in, ckpt, fused, 1, lpr);
        gemm_bf16_set_matmul(was);
        gemm_bf16_use(GEMM_BF16_AUTO);
        T_CHECK(!memcmp(lpw, lpr, sizeof lpw) && !memcmp(gw, gr, sizeof(float) * m.table.total),
                "%s (checkpointing %d, fused head %d): operands rounded as for a bf16 matmul change the results", name,
                ckpt, fused);
        free(gw), free(gr);
    }

    double worst_cos = 1, worst_ratio = 0;
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        char gname[128];
        snprintf(gname, sizeof gname, "grad.%s", e->name);
        double *want = read_f64(&ref, gname, &n), *acg = read_f64(&ac, gname, &n);
        double *mine = malloc(sizeof(double) * n);
        for (long k = 0; k < n; k++) mine[k] = g16[e->offset + k];
        double rel, cosine, rel_ac, cos_ac;
        grad_error(mine, want, n, &rel, &cosine);
        grad_error(acg, want, n, &rel_ac, &cos_ac);
        T_CHECK(rel <= 1.5 * rel_ac + 1e-3, "%s %s: relative error %.3e > 1.5 x autocast's %.3e + 1e-3", name, gname,
                rel, rel_ac);
        T_CHECK(cosine >= fmin(0.999, cos_ac), "%s %s: cosine with float64 %.6f < 0.999 and < autocast's %.6f", name,
                gname, cosine, cos_ac);
        worst_cos = fmin(worst_cos, cosine);
        worst_ratio = fmax(worst_ratio, rel / (rel_ac + 1e-12));
        free(want), free(acg), free(mine);
    }
    printf("  %s gradients: worst cosine %.6f, worst relative error / autocast's %.2f\n", name, worst_cos,
           worst_ratio);

    /* the weights as two halves: 4 bytes a weight (+ the norms and biases' fp32 copy), no
     * fp32 buffer; the master values exact; the products read the upper halves */
    size_t vec = 0;
    for (int i = 0; i < m.table.n; i++)
        if (m.table.entries[i].ndim == 1) vec += m.table.entries[i].numel;
    T_CHECK(!m.params && model_weight_bytes(&m) <= 4 * P + 4 * vec + 64 * (size_t)m.table.n,
            "%s: mixed precision's weights take %zu bytes for %zu parameters", name, model_weight_bytes(&m), P);
    model_get_params(&m, 0, P, back);
    T_CHECK(!memcmp(back, orig, sizeof(float) * P), "%s: the master weights changed in their two halves", name);
    /* the norms alone (fp32 beside the halves) follow model_set_params */
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        if (strstr(e->name, "norm.weight"))
            for (size_t k = 0; k < e->numel; k++) back[e->offset + k] *= 1.25f;
    }
    model_set_params(&m, 0, P, back);
    float lp_norms[in.N];
    free(run(&m, &in, 1, 0, 1, lp_norms));
    T_CHECK(memcmp(lp_norms, lp16, sizeof lp16) != 0, "%s: model_set_params did not reach the norms", name);
    memcpy(back, orig, sizeof(float) * P);
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        if (strstr(e->name, "_proj.weight") || strstr(e->name, "norm.weight"))
            for (size_t k = 0; k < e->numel; k++) back[e->offset + k] *= 1.25f;
    }
    model_set_params(&m, 0, P, back);
    float lp_moved[in.N], lp_again[in.N], lp_fp32[in.N];
    free(run(&m, &in, 1, 0, 1, lp_moved));
    model_set_params(&m, 0, P, orig);
    free(run(&m, &in, 1, 0, 1, lp_again));
    T_CHECK(memcmp(lp_moved, lp16, sizeof lp16) != 0, "%s: model_set_params did not reach the products", name);
    T_CHECK(!memcmp(lp_again, lp16, sizeof lp16), "%s: setting the weights back did not give the same log-probs", name);
    model_use_fp32_compute(&m);
    free(run(&m, &in, 1, 0, 0, lp_fp32));
    T_CHECK(m.params && !m.mixed && !memcmp(m.params, orig, sizeof(float) * P) && !memcmp(lp_fp32, lp32, sizeof lp32),
            "%s: back in fp32, the weights or log-probs differ from the fp32 model's", name);
    free(orig), free(back);

    free(g32), free(g16), free(g16b), free(g16f), free(ac_lp);
    free(in.ids), free(in.targets), free(in.mask), free(in.dlp), free(in.lp64);
    st_close(&ac);
    st_close(&ref);
    model_free(&m);
}

/* Logits of T steps of one sequence: ids[0..P) prefilled in one call, then one token a call. */
enum { DEC_P = 4, DEC_T = 9 };
static float *decode_logits(Model *m, const int32_t *ids) {
    int V = m->cfg.vocab_size, slots[DEC_T] = {0};
    KVCache c;
    DecodeState ds;
    kv_cache_create(&c, &m->cfg, 1, DEC_T);
    decode_state_create(&ds, &m->cfg, DEC_T, DEC_T);
    float *out = malloc(sizeof(float) * DEC_T * V);
    model_decode(m, &c, &ds, DEC_P, slots, ids, NULL, out);
    for (int t = DEC_P; t < DEC_T; t++) model_decode(m, &c, &ds, 1, slots, ids + t, NULL, out + (size_t)t * V);
    decode_state_free(&ds);
    kv_cache_free(&c);
    return out;
}

/* The training forward's logits of ids[0..T) as one sequence. */
static float *forward_logits(Model *m, const int32_t *ids, int T) {
    Activations a;
    uint8_t mask[DEC_T];
    memset(mask, 1, sizeof mask);
    acts_create(&a, &m->cfg, T, 0, 4, 0);
    model_forward(m, &a, ids, mask, 1, T, NULL);
    float *out = malloc(sizeof(float) * T * m->cfg.vocab_size);
    model_logits(m, &a, out);
    acts_free(&a);
    return out;
}

/* The matrices decoding reads from the bf16 copy: the layers' projections and an untied head. */
static int decoded_in_bf16(const char *name) {
    return strstr(name, "_proj.weight") || !strcmp(name, "lm_head.weight");
}

static void check_decode(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    GrpoErr err;
    Model m, r;
    if (model_load(&m, dir, &err) || model_load(&r, dir, &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    /* off the bf16 grid (a fixture's weights may be bf16 values already), the same in both */
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        if (decoded_in_bf16(e->name))
            for (size_t k = 0; k < e->numel; k++)
                m.params[e->offset + k] = r.params[e->offset + k] *= 1.0f + 0x1p-10f * (float)(k % 7);
    }
    long n = (long)DEC_T * m.cfg.vocab_size;
    int32_t ids[DEC_T];
    for (int t = 0; t < DEC_T; t++) ids[t] = (int32_t)((t * 7919 + 13) % m.cfg.vocab_size);
    float *l32 = decode_logits(&m, ids);
    model_use_bf16_compute(&m);
    float *l16 = decode_logits(&m, ids);
    double mx = 0, diff = 0;
    for (long i = 0; i < n; i++) mx = fmax(mx, fabs(l32[i])), diff = fmax(diff, fabs(l16[i] - l32[i]));
    printf("  %s decode logits, bf16 copy against fp32: max difference %.3e (max |logit| %.3f)\n", name, diff, mx);
    T_CHECK(diff > 0 && diff <= 5e-2 * mx, "%s: decoding from the bf16 copy moved logits by %.3e (max %.3f)", name,
            diff, mx);

    /* what decoding reads is the bf16 values alone, not the low halves: the model whose
     * matrices read in bf16 are those values (the upper half of its weights, rounded to
     * nearest, ties away from zero: f32_split), its low halves zero, decodes to the same
     * bits under mixed precision (decoding's products are bf16 ones, their inputs rounded
     * too: not fp32 on the rounded weights) */
    for (int i = 0; i < r.table.n; i++) {
        const ParamEntry *e = &r.table.entries[i];
        if (decoded_in_bf16(e->name))
            for (size_t k = 0; k < e->numel; k++) {
                uint16_t hi, lo;
                f32_split(r.params[e->offset + k], &hi, &lo);
                r.params[e->offset + k] = bf16_to_f32(hi);
            }
    }
    if (!m.cfg.tie_word_embeddings) {
        /* decoding's products are bf16 ones, as the training forward's: its logits
         * under mixed precision are the forward's but for the order of sums, far closer
         * to them than fp32 products on the same bf16 weights (unrounded inputs) are */
        float *lw = decode_logits(&r, ids), *lf = forward_logits(&m, ids, DEC_T);
        double dm = 0, dw = 0, fm = 0;
        for (long i = 0; i < n; i++)
            fm = fmax(fm, fabs(lf[i])), dm = fmax(dm, fabs(l16[i] - lf[i])), dw = fmax(dw, fabs(lw[i] - lf[i]));
        printf("  %s decode logits against the forward's, both mixed: max difference %.3e; fp32 products on the "
               "bf16 weights: %.3e (max |logit| %.3f)\n", name, dm, dw, fm);
        T_CHECK(dm <= 2e-3 * fm && dm * 8 <= dw, "%s: decoding under mixed precision is %.3e from the forward's logits, "
                "fp32 products on its bf16 weights %.3e", name, dm, dw);
        free(lw), free(lf);

        model_use_bf16_compute(&r);
        float *lr = decode_logits(&r, ids);
        T_CHECK(!memcmp(lr, l16, sizeof(float) * n), "%s: decoding from the copy differs from the rounded weights",
                name);
        free(lr);
    }

    /* what decoding reads follows the weights set */
    size_t P = m.table.total;
    float *w = malloc(sizeof(float) * P);
    model_get_params(&m, 0, P, w);
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        if (decoded_in_bf16(e->name))
            for (size_t k = 0; k < e->numel; k++) w[e->offset + k] *= 1.25f;
    }
    model_set_params(&m, 0, P, w);
    float *moved = decode_logits(&m, ids);
    T_CHECK(memcmp(moved, l16, sizeof(float) * n) != 0, "%s: model_set_params did not reach decoding", name);
    free(w), free(moved);
    free(l32), free(l16);
    model_free(&m);
    model_free(&r);
}

/* Held in bf16 by a half model: the weight matrices, the embedding and the LM head. */
static int held_in_bf16(const char *name) {
    return strstr(name, "_proj.weight") || !strcmp(name, "lm_head.weight") ||
           !strcmp(name, "model.embed_tokens.weight");
}

/* Fixture name's model in fp32 (m) and in form (h), and its reference inputs. */
static int open_pair(const char *name, WeightForm form, Model *m, Model *h, StFile *ref) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    GrpoErr err;
    if (model_load(m, dir, &err) || model_load_ex(h, dir, form, &err) || st_open(ref, path, &err)) {
        T_CHECK(0, "%s", err.msg);
        return -1;
    }
    return 0;
}

static void check_half(const char *name) {
    Model m, h;
    StFile ref;
    if (open_pair(name, WEIGHTS_BF16_HELD, &m, &h, &ref)) return;
    size_t matrix = 0, other = 0;
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        *(held_in_bf16(e->name) ? &matrix : &other) += e->numel;
        if (held_in_bf16(e->name)) bf16_round_n(m.params + e->offset, m.params + e->offset, e->numel);
    }
    size_t bytes = model_weight_bytes(&h);
    T_CHECK(bytes <= 2 * matrix + 4 * other + 64 * (size_t)m.table.n, "%s: held in bf16, the weights take %zu bytes",
            name, bytes); /* + each fp32 tensor's alignment */
    T_CHECK(!h.w.embed && !h.w.lm_head, "%s: the embedding or the head still has an fp32 copy", name);

    Inputs in;
    read_inputs(&in, &ref);
    float *lp[2], *ent[2], *logits[2];
    Model *pair[2] = {&m, &h};
    long nl = (long)in.N * m.cfg.vocab_size;
    for (int k = 0; k < 2; k++) {
        Activations a;
        acts_create(&a, &m.cfg, in.N, 0, 4, 0);
        model_forward(pair[k], &a, in.ids, in.mask, in.B, in.T, NULL);
        lp[k] = malloc(sizeof(float) * in.N), ent[k] = malloc(sizeof(float) * in.N);
        logits[k] = malloc(sizeof(float) * nl);
        model_logprobs(pair[k], &a, in.targets, in.inv_temp, lp[k], ent[k]);
        model_logits(pair[k], &a, logits[k]);
        acts_free(&a);
    }
    T_CHECK(!memcmp(lp[0], lp[1], sizeof(float) * in.N) && !memcmp(ent[0], ent[1], sizeof(float) * in.N),
            "%s: log-probs held in bf16 differ from the rounded fp32 model's", name);
    T_CHECK(!memcmp(logits[0], logits[1], sizeof(float) * nl), "%s: logits held in bf16 differ", name);
    int32_t ids[DEC_T];
    for (int t = 0; t < DEC_T; t++) ids[t] = (int32_t)((t * 7919 + 13) % m.cfg.vocab_size);
    float *d32 = decode_logits(&m, ids), *d16 = decode_logits(&h, ids);
    T_CHECK(!memcmp(d32, d16, sizeof(float) * DEC_T * m.cfg.vocab_size), "%s: decoding held in bf16 differs", name);
    for (int k = 0; k < 2; k++) free(lp[k]), free(ent[k]), free(logits[k]);
    free(d32), free(d16);
    free(in.ids), free(in.targets), free(in.mask), free(in.dlp), free(in.lp64);
    st_close(&ref);
    model_free(&m);
    model_free(&h);
}

/* WEIGHTS_BF16 against mixed precision on the same bf16 values: the same products. */
static void check_half_products(const char *name) {
    Model m, h;
    StFile ref;
    if (open_pair(name, WEIGHTS_BF16, &m, &h, &ref)) return;
    for (int i = 0; i < m.table.n; i++) { /* the matrices' values bf16 in both */
        const ParamEntry *e = &m.table.entries[i], *he = &h.table.entries[i];
        if (!held_in_bf16(e->name)) continue;
        bf16_round_n(m.params + e->offset, m.params + e->offset, e->numel);
        for (size_t k = 0; k < e->numel; k++) h.half->params16[he->offset + k] = f32_to_bf16(m.params[e->offset + k]);
    }
    model_use_bf16_compute(&m);
    Inputs in;
    read_inputs(&in, &ref);
    float *lp[2], *ent[2];
    Model *pair[2] = {&m, &h};
    for (int k = 0; k < 2; k++) {
        Activations a;
        acts_create(&a, &m.cfg, in.N, 0, 4, 0);
        model_forward(pair[k], &a, in.ids, in.mask, in.B, in.T, NULL);
        lp[k] = malloc(sizeof(float) * in.N), ent[k] = malloc(sizeof(float) * in.N);
        model_logprobs(pair[k], &a, in.targets, in.inv_temp, lp[k], ent[k]);
        acts_free(&a);
    }
    T_CHECK(!memcmp(lp[0], lp[1], sizeof(float) * in.N) && !memcmp(ent[0], ent[1], sizeof(float) * in.N),
            "%s: log-probs of the bf16 model differ from mixed precision's on the same values", name);
    int32_t ids[DEC_T];
    for (int t = 0; t < DEC_T; t++) ids[t] = (int32_t)((t * 7919 + 13) % m.cfg.vocab_size);
    float *dm = decode_logits(&m, ids), *dh = decode_logits(&h, ids);
    T_CHECK(!memcmp(dm, dh, sizeof(float) * DEC_T * m.cfg.vocab_size),
            "%s: decoding the bf16 model differs from mixed precision's", name);
    for (int k = 0; k < 2; k++) free(lp[k]), free(ent[k]);
    free(dm), free(dh);
    free(in.ids), free(in.targets), free(in.mask), free(in.dlp), free(in.lp64);
    st_close(&ref);
    model_free(&m);
    model_free(&h);
}

static double max_diff(const float *a, const float *b, long n, double *mx) {
    double d = 0;
    *mx = 0;
    for (long i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), *mx = fmax(*mx, fabs(b[i]));
    return d;
}

/* A frozen head of 70001 x 64 in bf16 against the same values in fp32, through
 * the log-prob kernels: every one of its products passes the widening block. */
static void check_half_head(void) {
    enum { N = 6, C = 64, V = 70001, CHUNK = 4 };
    uint16_t *w16 = malloc(sizeof(uint16_t) * V * C);
    float *w = malloc(sizeof(float) * V * C), *hs = malloc(sizeof(float) * N * C);
    unsigned r = 99;
    for (long i = 0; i < (long)V * C; i++) {
        r = r * 1103515245u + 12345u;
        w16[i] = f32_to_bf16(((float)(r >> 8) / 16777216.0f - 0.5f) * 0.5f);
        w[i] = bf16_to_f32(w16[i]);
    }
    for (int i = 0; i < N * C; i++) r = r * 1103515245u + 12345u, hs[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    int32_t targets[N] = {5, -1, 69999, 123, 0, 40000};
    float dlp[N] = {0.5f, 0, -1.0f, 2.0f, 0.25f, -0.75f}, dent[N] = {0.1f, 0, 0.2f, -0.3f, 0, 0.05f};
    WeightMatrix head[2] = {{.w = w}, {.w16 = w16}};
    float *out[2][6];
    for (int k = 0; k < 2; k++) {
        LogprobScratch s;
        float *base = xaligned(sizeof(float) * logprob_scratch_floats(CHUNK, C, V, 0));
        logprob_scratch_init(&s, base, CHUNK, C, V, 0);
        float *lp = out[k][0] = calloc(N, sizeof(float)), *ent = out[k][1] = calloc(N, sizeof(float));
        float *lse = out[k][2] = calloc(N, sizeof(float)), *pw = out[k][3] = calloc(N * C, sizeof(float));
        float *dh = out[k][4] = calloc(N * C, sizeof(float)), *dhe = out[k][5] = calloc(N * C, sizeof(float));
        logprob_forward(lp, ent, lse, pw, hs, head[k], targets, N, C, V, 1.25f, &s);
        logprob_backward_frozen(dh, dlp, pw, head[k], targets, N, C, 1.25f);
        logprob_backward(dhe, NULL, dlp, dent, hs, head[k], targets, lse, N, C, V, 1.25f, &s, 0);
        free(base);
    }
    const char *what[6] = {"log-probs", "entropies", "lse", "E_p[W]", "dh from E_p[W]", "dh with dentropy"};
    long len[6] = {N, N, N, N * C, N * C, N * C};
    for (int j = 0; j < 6; j++) {
        double mx, d = max_diff(out[1][j], out[0][j], len[j], &mx);
        T_CHECK(mx > 0 && d <= 1e-5 * mx, "frozen head in bf16: %s differ by %.3e (max %.3e)", what[j], d, mx);
        free(out[0][j]), free(out[1][j]);
    }
    free(w16), free(w), free(hs);
}

/* A mixed-precision head's dW gathered over chunks (LogprobScratch's dw_rows): the
 * per-chunk products' dW within fp32 summation order, dh and log-probs bit for bit,
 * for capacities that hold one chunk, less than two, several, and every row — with
 * a row without target, chunks of 3 over 11 rows (a short last one), V odd. */
static void check_head_gather(void) {
    enum { N = 11, C = 40, V = 1001, CHUNK = 3 };
    uint16_t *w16 = malloc(sizeof(uint16_t) * V * C);
    float *hs = malloc(sizeof(float) * N * C);
    uint32_t r = 7;
    for (long i = 0; i < (long)V * C; i++) {
        r = r * 1103515245u + 12345u;
        w16[i] = f32_to_bf16(((float)(r >> 8) / 16777216.0f - 0.5f) * 0.5f);
    }
    for (int i = 0; i < N * C; i++) r = r * 1103515245u + 12345u, hs[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    int32_t targets[N] = {5, -1, 1000, 123, 0, 400, 7, 7, 999, 64, 3};
    float dlp[N];
    for (int n = 0; n < N; n++) dlp[n] = targets[n] < 0 ? 0 : 0.25f * (n - 5);
    WeightMatrix W = {.w16 = w16, .bf16_products = 1};
    int caps[] = {0, 3, 5, 7, 10, 16};
    float *dh0 = NULL, *dW0 = NULL, lp0[N];
    for (int k = 0; k < (int)(sizeof caps / sizeof caps[0]); k++) {
        LogprobScratch s;
        float *base = xaligned(sizeof(float) * logprob_scratch_floats(CHUNK, C, V, caps[k]));
        logprob_scratch_init(&s, base, CHUNK, C, V, caps[k]);
        float lp[N], lse[N], *dh = calloc(N * C, sizeof(float)), *dW = calloc((size_t)V * C, sizeof(float));
        for (long i = 0; i < (long)V * C; i++) dW[i] = 0.5f; /* summed into */
        logprob_forward(lp, NULL, lse, NULL, hs, W, targets, N, C, V, 1.25f, &s);
        logprob_backward(dh, dW, dlp, NULL, hs, W, targets, lse, N, C, V, 1.25f, &s, 0);
        T_CHECK(s.dw_n == 0, "head gather (capacity %d): %d rows left ungathered", caps[k], s.dw_n);
        if (!k) {
            dh0 = dh, dW0 = dW;
            memcpy(lp0, lp, sizeof lp);
            free(base);
            continue;
        }
        double mx, d = max_diff(dW, dW0, (long)V * C, &mx), moved = 0;
        for (long i = 0; i < (long)V * C; i++) moved = fmax(moved, fabs(dW0[i] - 0.5f));
        T_CHECK(moved > 1e-3 && d <= 1e-6 * mx, "head gather (capacity %d): dW differs by %.3e (max %.3e)", caps[k], d,
                mx);
        T_CHECK(!memcmp(dh, dh0, sizeof(float) * N * C) && !memcmp(lp, lp0, sizeof lp),
                "head gather (capacity %d): dh or the log-probs changed", caps[k]);
        free(dh), free(dW), free(base);
    }
    free(dh0), free(dW0), free(w16), free(hs);
}

int main(void) {
    printf("gemm_bf16 backend: %s\n", gemm_bf16_backend_name());
    check_head_gather();
    check_fixture("qwen2");
    check_fixture("llama");
    check_fixture("qwen3");
    check_decode("qwen2");
    check_decode("llama");
    check_decode("qwen3");
    check_half("qwen2");
    check_half("llama");
    check_half("qwen3");
    check_half_products("qwen2");
    check_half_products("llama");
    check_half_products("qwen3");
    check_half_head();
    return t_summary("test_bf16_compute");
}
