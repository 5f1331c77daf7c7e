/* tests/grpo/test_loss.c — grpo_loss_* against the float64 torch-autograd
 * reference, and the split invariance that is the project's reason to exist.
 *
 * Tolerances: the C loss is computed in double from inputs that are exactly
 * the fixture's (float32-representable) values, so loss and gradient must
 * match torch's float64 to rounding: atol 1e-13, rtol 1e-9 (observed ~1e-15).
 * Split invariance: summing micro-batches of 1, 2, G and uneven sizes with the
 * normaliser computed once equals the full batch within 1e-12 relative for
 * the loss (summation order; plus atol 1e-15 because with ratio 1 and
 * group-centred advantages the loss is 0 up to cancellation, ~1e-17) and bit
 * for bit for the gradient (each token's
 * gradient is computed by the same operations whatever the split), as is the
 * token-local gradient of one token (grpo_loss_token_grad).
 *
 * Tool turns (TRL's tool_mask): the same batch with tokens a tool appended
 * inserted into every sequence, masked out, gives the reference's loss and
 * gradient on the model's tokens (same tolerances), exactly zero gradient on
 * the tool's, the same statistics, and the same split invariance. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/loss.h"
#include "testutil.h"
#include "grpo/fixture.h"

typedef struct {
    int S, T;
    int *offsets;
    uint8_t *truncated;
    float *logp, *old, *ref, *ent;
    double *adv;
    uint8_t *tmask;     /* [T] 0: a tool's token (NULL: none) */
    int *orig;          /* [T] with tmask: the model token's index in the batch without tools (-1: a tool's) */
} Batch;

/* b with 1 + i % 3 tool tokens inserted in the middle of sequence i, their values
 * far from the model's (a high entropy, a low log-prob), masked out. */
static Batch with_tool_tokens(const Batch *b) {
    Batch t = {.S = b->S, .adv = b->adv, .truncated = b->truncated};
    t.T = b->T;
    for (int i = 0; i < b->S; i++) t.T += 1 + i % 3;
    t.offsets = malloc(sizeof(int) * (b->S + 1));
    t.logp = malloc(sizeof(float) * t.T), t.old = malloc(sizeof(float) * t.T);
    t.ref = malloc(sizeof(float) * t.T), t.ent = malloc(sizeof(float) * t.T);
    t.tmask = malloc(t.T), t.orig = malloc(sizeof(int) * t.T);
    int j = 0;
    t.offsets[0] = 0;
    for (int i = 0; i < b->S; i++) {
        int len = b->offsets[i + 1] - b->offsets[i], at = len / 2;
        for (int k = 0; k <= len; k++) {
            if (k == at)
                for (int q = 0; q < 1 + i % 3; q++, j++)
                    t.logp[j] = -7.5f - q, t.old[j] = -0.25f, t.ref[j] = -4.0f, t.ent[j] = 9.0f, t.tmask[j] = 0,
                    t.orig[j] = -1;
            if (k == len) break;
            int o = b->offsets[i] + k;
            t.logp[j] = b->logp[o], t.old[j] = b->old[o], t.ref[j] = b->ref[o], t.ent[j] = b->ent[o];
            t.tmask[j] = 1, t.orig[j] = o, j++;
        }
        t.offsets[i + 1] = j;
    }
    CHECK(j == t.T);
    return t;
}

static void config_from(GrpoLossConfig *c, const double *cfg) {
    grpo_loss_config_default(c);
    c->loss_type = (GrpoLossType)(int)cfg[0];
    c->is_level = (GrpoIsLevel)(int)cfg[1];
    c->beta = cfg[3];
    c->epsilon_low = cfg[4];
    c->epsilon_high = cfg[5];
    c->delta = cfg[6];
    c->top_entropy_quantile = cfg[7];
    c->mask_truncated_completions = (int)cfg[8];
    c->max_completion_length = (int)cfg[9];
    c->sapo_temperature_pos = cfg[10];
    c->sapo_temperature_neg = cfg[11];
    c->vespo_k_pos = cfg[12];
    c->vespo_lambda_pos = cfg[13];
    c->vespo_k_neg = cfg[14];
    c->vespo_lambda_neg = cfg[15];
    c->entropy_coef = cfg[16];
}

/* Runs the batch as micro-batches of `mb` sequences (sizes[] when mb == 0),
 * normaliser over the whole batch (bnpo: per micro-batch, GA = count). */
static double run_split(double *grad, double *dent, GrpoLossStats *st, const Batch *b, const GrpoLossConfig *c,
                        int has_old, int mb, const int *sizes) {
    memset(grad, 0, sizeof(double) * b->T);
    memset(dent, 0, sizeof(double) * b->T);
    memset(st, 0, sizeof *st);
    int n_mb = 0;
    for (int s = 0, k = 0; s < b->S; n_mb++) s += mb ? mb : sizes[k++];
    double norm_all = grpo_loss_normalizer(c, b->offsets, b->truncated, b->tmask, b->S, n_mb);
    double loss = 0;
    for (int s0 = 0, k = 0; s0 < b->S;) {
        int n = mb ? mb : sizes[k++];
        if (s0 + n > b->S) n = b->S - s0;
        double norm = c->loss_type == GRPO_LOSS_BNPO
                          ? grpo_loss_normalizer(c, b->offsets + s0, b->truncated + s0, b->tmask, n, n_mb)
                          : norm_all;
        loss += grpo_loss_accumulate(grad, dent, st, b->logp, has_old ? b->old : NULL, b->ref, b->ent,
                                     NULL, b->adv + s0, b->truncated + s0, b->tmask, b->offsets + s0, n, norm, c);
        s0 += n;
    }
    return loss;
}

int main(void) {
    StFile f;
    GrpoErr err;
    if (st_open(&f, GRPO_FIXTURE, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    long n_off, T, S, n_cases_l;
    double *off = fx_f64(&f, "offsets", &n_off), *tr = fx_f64(&f, "truncated", &S);
    double *lp = fx_f64(&f, "logp", &T), *old = fx_f64(&f, "old_logp", NULL);
    double *ref = fx_f64(&f, "ref_logp", NULL), *ent = fx_f64(&f, "entropy", NULL);
    double *ncases = fx_f64(&f, "n_cases", &n_cases_l);
    Batch b = {.S = (int)S, .T = (int)T};
    b.offsets = malloc(sizeof(int) * n_off);
    b.truncated = malloc(S);
    b.logp = malloc(sizeof(float) * T), b.old = malloc(sizeof(float) * T);
    b.ref = malloc(sizeof(float) * T), b.ent = malloc(sizeof(float) * T);
    for (long i = 0; i < n_off; i++) b.offsets[i] = (int)off[i];
    for (long i = 0; i < S; i++) b.truncated[i] = (uint8_t)tr[i];
    for (long t = 0; t < T; t++) {
        b.logp[t] = (float)lp[t], b.old[t] = (float)old[t];
        b.ref[t] = (float)ref[t], b.ent[t] = (float)ent[t];
        CHECK((double)b.logp[t] == lp[t] && (double)b.old[t] == old[t]);   /* exact inputs */
    }
    b.adv = fx_f64(&f, "adv0.advantages", NULL);
    Batch bt = with_tool_tokens(&b);
    double *gt = malloc(sizeof(double) * bt.T), *gt2 = malloc(sizeof(double) * bt.T);
    double *dt = malloc(sizeof(double) * bt.T), *dt2 = malloc(sizeof(double) * bt.T);
    int tool_cases = 0;

    double *grad = malloc(sizeof(double) * T), *grad2 = malloc(sizeof(double) * T);
    double *dent = malloc(sizeof(double) * T), *dent2 = malloc(sizeof(double) * T);
    int ent_cases = 0, local_cases = 0;
    int n_cases = (int)ncases[0], bnpo_checked = 0;
    for (int k = 0; k < n_cases; k++) {
        char name[64], what[160];
        snprintf(name, sizeof name, "case%d.config", k);
        double *cfg = fx_f64(&f, name, NULL);
        snprintf(name, sizeof name, "case%d.loss", k);
        double *want_loss = fx_f64(&f, name, NULL);
        snprintf(name, sizeof name, "case%d.grad", k);
        double *want_grad = fx_f64(&f, name, NULL);
        snprintf(name, sizeof name, "case%d.dent", k);
        double *want_dent = fx_f64(&f, name, NULL);
        GrpoLossConfig c;
        config_from(&c, cfg);
        int has_old = (int)cfg[2];
        snprintf(what, sizeof what, "case %d (%s %s old=%d beta=%g delta=%g q=%g mask_trunc=%d sapo_tau=%g/%g ent=%g)",
                 k, grpo_loss_type_names[c.loss_type], c.is_level ? "sequence" : "token", has_old, c.beta,
                 c.delta, c.top_entropy_quantile, c.mask_truncated_completions, c.sapo_temperature_pos,
                 c.sapo_temperature_neg, c.entropy_coef);

        /* 1. the whole batch as one micro-batch vs torch autograd (GA = 1) */
        GrpoLossStats st, st2;
        double loss = run_split(grad, dent, &st, &b, &c, has_old, b.S, NULL);
        char w2[200];
        snprintf(w2, sizeof w2, "%s loss", what);
        close_f64(w2, &loss, want_loss, 1, 1e-13, 1e-9);
        snprintf(w2, sizeof w2, "%s dloss/dlogp", what);
        close_f64(w2, grad, want_grad, T, 1e-13, 1e-9);
        snprintf(w2, sizeof w2, "%s dloss/dentropy", what);
        close_f64(w2, dent, want_dent, T, 1e-13, 1e-9);   /* all zero without the entropy bonus */
        ent_cases += c.entropy_coef != 0.0;

        /* 2. split invariance (not bnpo, not the micro-batch-local entropy mask, not
         * the entropy bonus of the per-sequence types: TRL averages it per micro-batch) */
        static const int uneven[] = {5, 1, 6};
        const int token_norm = c.loss_type == GRPO_LOSS_DAPO || c.loss_type == GRPO_LOSS_CISPO ||
                               c.loss_type == GRPO_LOSS_VESPO;
        if (c.loss_type != GRPO_LOSS_BNPO && c.top_entropy_quantile >= 1.0 && (c.entropy_coef == 0 || token_norm)) {
            for (int v = 0; v < 4; v++) {
                int mb = v == 0 ? 1 : v == 1 ? 2 : v == 2 ? 4 : 0;
                double l2 = run_split(grad2, dent2, &st2, &b, &c, has_old, mb, uneven);
                T_CHECK(fabs(l2 - loss) <= 1e-12 * fabs(loss) + 1e-15, "%s: split %d loss %.17g vs %.17g",
                        what, mb, l2, loss);
                T_CHECK(!memcmp(grad, grad2, sizeof(double) * T), "%s: split %d gradient differs", what, mb);
                T_CHECK(!memcmp(dent, dent2, sizeof(double) * T), "%s: split %d entropy gradient differs", what, mb);
                T_CHECK(st2.tokens == st.tokens && st2.clip_count == st.clip_count &&
                            fabs(st2.kl_sum - st.kl_sum) <= 1e-12 * fabs(st.kl_sum) &&
                            st2.clip_region_sum == st.clip_region_sum,
                        "%s: split %d stats differ", what, mb);
            }
        }
        /* 3. token-local losses: each token's gradient from grpo_loss_token_grad (what
         * the fused LM-head pass asks for) is the one the whole batch gives, bit for bit */
        if (grpo_loss_token_local(&c)) {
            double norm = grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 1);
            int same = 1;
            for (int i = 0; i < b.S; i++) {
                double w = grpo_loss_seq_weight(&c, b.truncated, NULL, i, b.offsets, norm);
                for (int t = b.offsets[i]; t < b.offsets[i + 1]; t++)
                    same &= grpo_loss_token_grad(&c, w, b.adv[i], b.logp[t], has_old ? &b.old[t] : NULL,
                                                 b.ref ? &b.ref[t] : NULL, 1.0) == grad[t];
            }
            T_CHECK(same, "%s: token-local gradients differ from the batch's", what);
            local_cases++;
        }
        /* bnpo is normalised per micro-batch (TRL): a split changes the result
         * unless micro-batches have equal token counts. Shown on micro-batches of 1. */
        if (c.loss_type == GRPO_LOSS_BNPO && c.beta == 0 && has_old) {
            double l1 = run_split(grad2, dent2, &st2, &b, &c, has_old, 1, NULL);
            T_CHECK(fabs(l1 - loss) > 1e-6 * fabs(loss), "%s: bnpo expected to depend on the split", what);
            bnpo_checked++;
        }
        /* 4. tool tokens in every sequence, masked: the reference on the model's tokens,
         * zero on the tool's, the same counts, and split invariance as above */
        {
            GrpoLossStats stt, stt2;
            double lt = run_split(gt, dt, &stt, &bt, &c, has_old, bt.S, NULL);
            snprintf(w2, sizeof w2, "%s with tool tokens: loss", what);
            close_f64(w2, &lt, want_loss, 1, 1e-13, 1e-9);
            int zero = 1, close = 1;
            for (int j = 0; j < bt.T; j++) {
                int o = bt.orig[j];
                if (o < 0) zero &= gt[j] == 0.0 && dt[j] == 0.0;
                else close &= t_close(gt[j], want_grad[o], 1e-13, 1e-9) && t_close(dt[j], want_dent[o], 1e-13, 1e-9);
            }
            T_CHECK(zero, "%s: a tool token's gradient is not exactly 0", what);
            T_CHECK(close, "%s: the model tokens' gradients differ from the reference with tool tokens in", what);
            T_CHECK(stt.tokens == st.tokens && stt.clip_count == st.clip_count && stt.kept_tokens == st.kept_tokens &&
                        stt.sequences == st.sequences && t_close(stt.entropy_sum, st.entropy_sum, 1e-12, 1e-12) &&
                        t_close(stt.kl_sum, st.kl_sum, 1e-12, 1e-12),
                    "%s: statistics with tool tokens (tokens %g vs %g)", what, stt.tokens, st.tokens);
            if (c.loss_type != GRPO_LOSS_BNPO && c.top_entropy_quantile >= 1.0 && (c.entropy_coef == 0 || token_norm))
                for (int mb = 1; mb <= 2; mb++) {
                    double l2 = run_split(gt2, dt2, &stt2, &bt, &c, has_old, mb, NULL);
                    T_CHECK(fabs(l2 - lt) <= 1e-12 * fabs(lt) + 1e-15 && !memcmp(gt, gt2, sizeof(double) * bt.T) &&
                                !memcmp(dt, dt2, sizeof(double) * bt.T),
                            "%s with tool tokens: split %d differs", what, mb);
                }
            if (grpo_loss_token_local(&c)) { /* the fused pass's per-token gradients, tool tokens 0 */
                double norm = grpo_loss_normalizer(&c, bt.offsets, bt.truncated, bt.tmask, bt.S, 1);
                int same = 1;
                for (int i = 0; i < bt.S; i++) {
                    double w = grpo_loss_seq_weight(&c, bt.truncated, bt.tmask, i, bt.offsets, norm);
                    for (int t = bt.offsets[i]; t < bt.offsets[i + 1]; t++)
                        if (bt.tmask[t])
                            same &= grpo_loss_token_grad(&c, w, bt.adv[i], bt.logp[t], has_old ? &bt.old[t] : NULL,
                                                         &bt.ref[t], 1.0) == gt[t];
                }
                T_CHECK(same, "%s with tool tokens: token-local gradients differ", what);
            }
            tool_cases++;
        }
        free(cfg), free(want_loss), free(want_grad), free(want_dent);
    }
    T_CHECK(tool_cases == n_cases, "tool-token cases %d of %d", tool_cases, n_cases);
    T_CHECK(ent_cases == 4, "entropy bonus cases %d", ent_cases);
    T_CHECK(local_cases >= 20, "token-local cases %d of %d", local_cases, n_cases);
    T_CHECK(bnpo_checked == 3, "bnpo split cases %d", bnpo_checked);

    /* 3. normalisers from the step's lengths: 12 sequences, 68 tokens, 20 of them truncated */
    {
        GrpoLossConfig c;
        grpo_loss_config_default(&c);
        c.max_completion_length = 10;
        int tot = b.offsets[b.S], trunc_tok = 0;
        for (int i = 0; i < b.S; i++)
            if (b.truncated[i]) trunc_tok += b.offsets[i + 1] - b.offsets[i];
        c.loss_type = GRPO_LOSS_DAPO;
        c.mask_truncated_completions = 1;
        /* TRL >= 1.9 (huggingface/trl#6439): num_items_in_batch is the loss mask's sum, the truncated
         * completions zeroed; 1.0-1.8 counted them */
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == tot - trunc_tok,
                "dapo leaves the truncated tokens out");
        c.loss_type = GRPO_LOSS_CISPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == tot - trunc_tok, "cispo");
        c.loss_type = GRPO_LOSS_VESPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == tot - trunc_tok, "vespo");
        c.mask_truncated_completions = 0;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == tot, "vespo, nothing masked");
        c.mask_truncated_completions = 1;
        c.loss_type = GRPO_LOSS_BNPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == 3.0 * (tot - trunc_tok), "bnpo");
        c.loss_type = GRPO_LOSS_GRPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == b.S, "grpo");
        c.loss_type = GRPO_LOSS_LUSPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == b.S, "luspo");
        c.loss_type = GRPO_LOSS_DR_GRPO;
        T_CHECK(grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 3) == b.S * 10.0, "dr_grpo");
        int zero_off[2] = {0, 0};
        c.loss_type = GRPO_LOSS_DAPO;
        T_CHECK(grpo_loss_normalizer(&c, zero_off, NULL, NULL, 1, 1) == 1.0, "clamp(min=1)");
    }

    /* 3b. the entropy bonus of a per-sequence loss type is divided by
     * gradient_accumulation_steps (TRL's normalizer for them); dapo's is not */
    {
        GrpoLossConfig c;
        grpo_loss_config_default(&c);
        c.entropy_coef = 0.1;
        double *d1 = calloc(T, sizeof(double)), *d3 = calloc(T, sizeof(double)), *g = calloc(T, sizeof(double));
        for (int lt = 0; lt < 2; lt++) {
            c.loss_type = lt ? GRPO_LOSS_GRPO : GRPO_LOSS_DAPO;
            double norm = grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 1);
            memset(d1, 0, sizeof(double) * T), memset(d3, 0, sizeof(double) * T);
            c.grad_accum_steps = 1;
            grpo_loss_accumulate(g, d1, NULL, b.logp, b.old, NULL, b.ent, NULL, b.adv, b.truncated, NULL, b.offsets, b.S, norm, &c);
            c.grad_accum_steps = 3;
            grpo_loss_accumulate(g, d3, NULL, b.logp, b.old, NULL, b.ent, NULL, b.adv, b.truncated, NULL, b.offsets, b.S, norm, &c);
            int ok = d1[0] != 0;
            for (int t = 0; t < T; t++) ok &= fabs(d3[t] - (lt ? d1[t] / 3 : d1[t])) <= 1e-15 * fabs(d1[t]);
            T_CHECK(ok, "entropy bonus and gradient_accumulation_steps (%s)", lt ? "grpo: / GA" : "dapo: unchanged");
        }
        free(d1), free(d3), free(g);
    }

    /* 4. logging helper agrees with the loss's metric sums */
    {
        GrpoLossConfig c;
        grpo_loss_config_default(&c);
        c.beta = 0.04;
        c.mask_truncated_completions = 1;
        GrpoLossStats st;
        double norm = grpo_loss_normalizer(&c, b.offsets, b.truncated, NULL, b.S, 1);
        memset(grad, 0, sizeof(double) * T);
        memset(&st, 0, sizeof st);
        grpo_loss_accumulate(grad, NULL, &st, b.logp, b.old, b.ref, b.ent, NULL, b.adv, b.truncated, NULL, b.offsets, b.S, norm, &c);
        double me, mk;
        grpo_token_means(&me, &mk, b.ent, b.logp, b.ref, b.truncated, NULL, b.offsets, b.S, 1);
        T_CHECK(fabs(me - st.entropy_sum / st.tokens) <= 1e-12 * fabs(me), "mean entropy %g", me);
        T_CHECK(fabs(mk - st.kl_sum / st.tokens) <= 1e-12 * fabs(mk), "mean kl %g", mk);
        T_CHECK(st.tokens == b.offsets[b.S] - 20 && st.sequences == 12 && st.clip_count == st.tokens, "counts %g",
                st.tokens);
        grpo_token_means(&me, &mk, NULL, b.logp, NULL, b.truncated, NULL, b.offsets, b.S, 1);
        T_CHECK(isnan(me) && isnan(mk), "NULL inputs give NAN");
    }

    /* 5. names (the loss_type option's choices) and the declared defaults */
    {
        const char *want[] = {"dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"};
        for (int i = 0; i < GRPO_LOSS_COUNT; i++) T_CHECK(!strcmp(grpo_loss_type_names[i], want[i]), "%d", i);
        T_CHECK(grpo_loss_type_names[GRPO_LOSS_COUNT] == NULL, "NULL-terminated");
        GrpoLossConfig d;
        grpo_loss_config_default(&d);
        T_CHECK(d.loss_type == GRPO_LOSS_DAPO && d.epsilon_low == 0.2 && d.epsilon_high == 0.2 && d.beta == 0 &&
                    d.top_entropy_quantile == 1 && d.is_level == GRPO_IS_TOKEN && d.vespo_k_pos == 2 &&
                    d.vespo_lambda_pos == 3 && d.vespo_k_neg == 3 && d.vespo_lambda_neg == 2 &&
                    d.sapo_temperature_pos == 1 && d.sapo_temperature_neg == 1.05,
                "TRL's defaults");
    }

    free(off), free(tr), free(lp), free(old), free(ref), free(ent), free(ncases), free(b.adv);
    free(b.offsets), free(b.truncated), free(b.logp), free(b.old), free(b.ref), free(b.ent);
    free(grad), free(grad2), free(dent), free(dent2);
    free(bt.offsets), free(bt.logp), free(bt.old), free(bt.ref), free(bt.ent), free(bt.tmask), free(bt.orig);
    free(gt), free(gt2), free(dt), free(dt2);
    st_close(&f);
    return t_summary("grpo/test_loss");
}
