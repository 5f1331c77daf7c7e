/* tests/model/test_model_reference.c — the transformer against the float64 PyTorch
 * reference (tools/make_model_reference.py, fixtures in tests/fixtures/<name>/):
 * logits, log-probs, entropies, the loss and the gradient of every parameter, for a
 * Qwen2-style, a Llama-style (GQA, llama3 rope, BF16 weights, untied) and a
 * Qwen3-style (q/k norm, head_dim != hidden/heads) model, with left and right padding.
 *
 * Tolerance (docs/reference-fixtures.md): |got - want| <= atol + rtol |want| with
 * rtol = 1e-5 and atol = 1e-5 * max|want| over the tensor, fp32 against float64.
 * Gradient checkpointing must give bit-identical gradients (same kernels, same order);
 * another LM-head chunking changes summation order only (1e-6 relative). */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/model_io.h"
#include "testutil.h"
#include "fixture_tensors.h"

#define RTOL 1e-5

static void check_fixture(const char *name) {
    char dir[256], ref_path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    snprintf(ref_path, sizeof ref_path, "%s/reference.safetensors", dir);
    GrpoErr err;
    Model m;
    if (model_load(&m, dir, &err)) {
        T_CHECK(0, "model_load %s: %s", dir, err.msg);
        return;
    }
    StFile ref;
    if (st_open(&ref, ref_path, &err)) {
        T_CHECK(0, "%s", err.msg);
        model_free(&m);
        return;
    }
    const StTensor *ids_t = st_find(&ref, "input_ids");
    int B = (int)ids_t->shape[0], T = (int)ids_t->shape[1], N = B * T, V = m.cfg.vocab_size;
    long n;
    int64_t *ids64 = read_i64(&ref, "input_ids", &n), *mask64 = read_i64(&ref, "attention_mask", &n),
            *tgt64 = read_i64(&ref, "target_ids", &n);
    double *lw = read_f64(&ref, "loss_weight", &n), *temp = read_f64(&ref, "temperature", &n);
    double *want_logits = read_f64(&ref, "logits", &n), *want_lp = read_f64(&ref, "logprobs", &n),
           *want_ent = read_f64(&ref, "entropy", &n), *want_loss = read_f64(&ref, "loss", &n);
    int32_t ids[N], targets[N];
    uint8_t mask[N];
    float dlp[N];
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)ids64[i];
        mask[i] = (uint8_t)mask64[i];
        targets[i] = mask[i] ? (int32_t)tgt64[i] : -1;
        dlp[i] = (float)lw[i];
    }
    float *grads_chunk[2] = {NULL, NULL};
    for (int ckpt = 0; ckpt <= 1; ckpt++) {
        for (int chunk = 1, ci = 0; chunk <= N; chunk += N - 1, ci++) {
            Activations a;
            acts_create(&a, &m.cfg, N, ckpt, chunk, 0);
            model_forward(&m, &a, ids, mask, B, T, NULL);
            float *logits = malloc(sizeof(float) * N * V), lp[N], ent[N];
            model_logits(&m, &a, logits);
            /* pad positions are not compared: zero both sides */
            for (int i = 0; i < N; i++)
                if (!mask[i]) memset(logits + (size_t)i * V, 0, sizeof(float) * V);
            T_CLOSE_ARRAY("logits", logits, want_logits, (long)N * V,
                          RTOL * max_abs(want_logits, (long)N * V), RTOL);
            model_logprobs(&m, &a, targets, (float)(1.0 / temp[0]), lp, ent);
            T_CLOSE_ARRAY("logprobs", lp, want_lp, N, RTOL * max_abs(want_lp, N), RTOL);
            T_CLOSE_ARRAY("entropy", ent, want_ent, N, RTOL * max_abs(want_ent, N), RTOL);
            double loss = 0;
            for (int i = 0; i < N; i++) loss += lw[i] * lp[i];
            T_CHECK(t_close(loss, want_loss[0], RTOL * fabs(want_loss[0]), RTOL),
                    "%s loss %.9g want %.9g", name, loss, want_loss[0]);
            float *gbuf = calloc(m.table.total, sizeof(float));
            ModelView gv;
            params_view(&gv, &m.table, &m.cfg, gbuf);
            model_backward(&m, &a, &(ModelGrads){&gv, NULL, NULL, NULL}, dlp, NULL);
            for (int i = 0; i < m.table.n; i++) {
                ParamEntry *e = &m.table.entries[i];
                char gname[128];
                snprintf(gname, sizeof gname, "grad.%s", e->name);
                double *want = read_f64(&ref, gname, &n);
                T_CHECK(n == (long)e->numel, "%s size", gname);
                char what[200];
                snprintf(what, sizeof what, "%s %s ckpt=%d chunk=%d", name, gname, ckpt, chunk);
                T_CLOSE_ARRAY(what, gbuf + e->offset, want, n, RTOL * max_abs(want, n), RTOL);
                free(want);
            }
            if (!grads_chunk[ci]) grads_chunk[ci] = gbuf;
            else {
                T_CHECK(memcmp(grads_chunk[ci], gbuf, sizeof(float) * m.table.total) == 0,
                        "%s: gradients with checkpointing differ bitwise (chunk %d)", name, chunk);
                free(gbuf);
            }
            /* backward accumulates: a second call doubles every gradient */
            if (ckpt == 1 && chunk == N) {
                float *g2 = malloc(sizeof(float) * m.table.total);
                memcpy(g2, grads_chunk[ci], sizeof(float) * m.table.total);
                ModelView gv2;
                params_view(&gv2, &m.table, &m.cfg, g2);
                model_backward(&m, &a, &(ModelGrads){&gv2, NULL, NULL, NULL}, dlp, NULL);
                int ok = 1;
                double gmax = 0;
                for (size_t k = 0; k < m.table.total; k++) gmax = fmax(gmax, fabs(g2[k]));
                for (size_t k = 0; k < m.table.total; k++)
                    ok &= t_close(g2[k], 2.0 * grads_chunk[ci][k], 1e-6 * gmax, 1e-6);
                T_CHECK(ok, "%s: a second backward does not add to the gradients", name);
                /* a step's first backward (its state begun): every tensor written over NaN, the
                 * bits of summing into zeros; the gaps between tensors untouched; every tensor
                 * marked written */
                for (size_t k = 0; k < m.table.total; k++) g2[k] = 0;
                for (int i = 0; i < m.table.n; i++)
                    for (size_t k = 0; k < m.table.entries[i].numel; k++) g2[m.table.entries[i].offset + k] = NAN;
                GradState gs;
                grad_state_create(&gs, &m.table, g2);
                model_backward(&m, &a, &(ModelGrads){&gv2, NULL, &gs, NULL}, dlp, NULL);
                int all = 1;
                for (int i = 0; i < m.table.n; i++) all &= gs.written[i];
                T_CHECK(!memcmp(g2, grads_chunk[ci], sizeof(float) * m.table.total) && all,
                        "%s: a step's first backward does not write every gradient (all marked %d)", name, all);
                model_backward(&m, &a, &(ModelGrads){&gv2, NULL, &gs, NULL}, dlp, NULL); /* written: sums */
                grad_state_free(&gs);
                ok = 1;
                for (size_t k = 0; k < m.table.total; k++)
                    ok &= t_close(g2[k], 2.0 * grads_chunk[ci][k], 1e-6 * gmax, 1e-6);
                T_CHECK(ok, "%s: the backward after a step's first does not add to the gradients", name);
                params_view_free(&gv2);
                free(g2);
            }
            params_view_free(&gv);
            free(logits);
            acts_free(&a);
        }
    }
    int ok = 1;
    double gmax = 0;
    for (size_t k = 0; k < m.table.total; k++) gmax = fmax(gmax, fabs(grads_chunk[0][k]));
    for (size_t k = 0; k < m.table.total; k++)
        ok &= t_close(grads_chunk[0][k], grads_chunk[1][k], 1e-6 * gmax, 1e-6);
    T_CHECK(ok, "%s: LM-head chunk size changes the gradients beyond rounding", name);
    free(grads_chunk[0]);
    free(grads_chunk[1]);
    free(ids64), free(mask64), free(tgt64), free(lw), free(temp), free(want_logits);
    free(want_lp), free(want_ent), free(want_loss);
    st_close(&ref);
    model_free(&m);
}

int main(void) {
    check_fixture("qwen2");
    check_fixture("llama");
    check_fixture("qwen3");
    return t_summary("test_model_reference");
}
