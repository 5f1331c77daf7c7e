/* tests/train/test_grad_state.c — each gradient tensor's write-or-add state in an
 * optimizer step (model/grads.h), and the trainable model's use of it (train/model.h):
 *  - the state alone, on a small table with a fused pair: the first take of a tensor
 *    writes and later ones add, a fused span marks every tensor it covers, a new step
 *    forgets what was written without touching the buffer, settling zeroes only the
 *    tensors nothing reached (once: a later settle keeps a sum over processes);
 *  - model_backward on the Qwen3 (tied head, q/k norm) and Qwen2 (q/k/v bias)
 *    fixtures, base and LoRA adapters trained together, the buffers filled with NaN
 *    first: a step's first backward (the adapters off: base_only) writes every base
 *    tensor; the second (adapters on) adds into the base and writes the adapters,
 *    which it reaches first — the same bits as both backwards summed into zeroed
 *    buffers without a state;
 *  - the trainable model with LoRA adapters: a new step leaves the gradient buffer
 *    as it was (no memset: NaN put there survives train_model_begin_step), its
 *    micro-batch writes the same bits as the first step's, and a step that no
 *    backward reached reads as zeros. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "io/fsutil.h"
#include "model/grads.h"
#include "model/lora_layers.h"
#include "model/model_io.h"
#include "testutil.h"
#include "train/model.h"

static void fill_nan(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

/* NaN in every tensor of g laid out by t; the gaps between them, which no backward
 * writes, keep their zeros. */
static void fill_tensors_nan(float *g, const ParamTable *t) {
    for (int i = 0; i < t->n; i++) fill_nan(g + t->entries[i].offset, t->entries[i].numel);
}

/* 1 when every tensor of g is NaN. */
static int tensors_nan(const float *g, const ParamTable *t) {
    int all = 1;
    for (int i = 0; i < t->n; i++)
        for (size_t k = 0; k < t->entries[i].numel; k++) all &= isnan(g[t->entries[i].offset + k]);
    return all;
}

/* ---- the state alone ---- */

static void check_state(void) {
    ParamTable t = {0};
    int cap = 0;
    params_add(&t, &cap, "a", 3, 5, 0);
    params_add(&t, &cap, "q", 4, 0, 1); /* k follows with no gap: one span, as q|k|v */
    params_add(&t, &cap, "k", 2, 0, 0);
    params_add(&t, &cap, "b", 7, 0, 0);
    float *g = calloc(t.total, sizeof(float));
    for (size_t i = 0; i < t.total; i++) g[i] = 5.0f; /* the gaps too: settling must leave them */
    GradState s;
    grad_state_create(&s, &t, g);
    grad_state_begin(&s);
    const ParamEntry *e = t.entries;
    T_CHECK(grad_state_take(&s, g + e[0].offset, e[0].numel) == 1, "a's first take does not write");
    T_CHECK(grad_state_take(&s, g + e[0].offset, e[0].numel) == 0, "a's second take does not add");
    T_CHECK(grad_state_take(&s, g + e[1].offset, e[1].numel + e[2].numel) == 1, "q|k's first take does not write");
    T_CHECK(s.written[1] && s.written[2], "a fused take did not mark both tensors (%d %d)", s.written[1], s.written[2]);
    T_CHECK(grad_state_take(&s, g + e[1].offset, e[1].numel + e[2].numel) == 0, "q|k's second take does not add");
    T_CHECK(grad_state_take(NULL, g, 1) == 0 && grad_state_take(&s, NULL, 1) == 0, "no state or no tensor: not 0");
    T_CHECK(!s.written[3], "b is marked written though nothing took it");
    grad_state_settle(&s); /* b alone is zeroed */
    int ok = 1;
    for (size_t i = 0; i < t.total; i++) {
        int in_b = i >= e[3].offset && i < e[3].offset + e[3].numel;
        ok &= g[i] == (in_b ? 0.0f : 5.0f);
    }
    T_CHECK(ok && s.written[3], "settling did not zero exactly the tensor nothing reached");
    for (size_t k = 0; k < e[3].numel; k++) g[e[3].offset + k] = 2.0f; /* a sum over processes */
    grad_state_settle(&s);
    T_CHECK(g[e[3].offset] == 2.0f, "a second settle undid what followed the first");
    grad_state_begin(&s);
    ok = 1;
    for (int i = 0; i < t.n; i++) ok &= !s.written[i];
    T_CHECK(ok && g[e[0].offset] == 5.0f && g[e[3].offset] == 2.0f, "a new step did not forget, or touched the buffer");
    T_CHECK(grad_state_take(&s, g + e[3].offset, e[3].numel) == 1, "after a new step b's take does not write");
    grad_state_free(&s);
    free(g);
    params_free(&t);
}

/* ---- model_backward ---- */

enum { MB = 2, MT = 7, MN = MB * MT };

/* One backward of a fixed batch (batch k of two) into grads; base_only: the adapters off. */
static void backward(Model *m, Activations *a, int k, int base_only, const ModelGrads *grads) {
    int32_t ids[MN], tg[MN];
    uint8_t mask[MN];
    float lp[MN], dlp[MN];
    for (int n = 0; n < MN; n++) {
        ids[n] = (int32_t)((n * 31 + 7 * k + 3) % m->cfg.vocab_size);
        tg[n] = (int32_t)((n * 17 + 11 * k + 5) % m->cfg.vocab_size);
        mask[n] = 1;
        dlp[n] = -0.05f * (float)(1 + (n + k) % 4);
    }
    model_forward(m, a, ids, mask, MB, MT, &(ModelPass){.backward = 1, .base_only = base_only});
    model_logprobs(m, a, tg, 1.0f, lp, NULL);
    model_backward(m, a, grads, dlp, NULL);
}

/* Both backwards of a step into base's and the adapters' buffers: with states over
 * buffers of NaN (stated = 1), or summed into zeros (0). */
static void step_grads(Model *m, Activations *a, int stated, float *gb, float *gl) {
    size_t P = m->table.total, PL = m->lora->table.total;
    memset(gb, 0, sizeof(float) * P), memset(gl, 0, sizeof(float) * PL);
    GradState sb, sl;
    grad_state_create(&sb, &m->table, gb);
    grad_state_create(&sl, &m->lora->table, gl);
    if (stated) /* the tensors: garbage; the gaps stay 0, as the trainable model keeps them */
        fill_tensors_nan(gb, &m->table), fill_tensors_nan(gl, &m->lora->table);
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, gb);
    ModelGrads g = {&gv, gl, stated ? &sb : NULL, stated ? &sl : NULL};
    backward(m, a, 0, 1, &g); /* the adapters off: no adapter reached */
    int none = 1, all = 1;
    for (int i = 0; i < m->lora->table.n; i++) none &= !sl.written[i];
    for (int i = 0; i < m->table.n; i++) all &= sb.written[i];
    if (stated)
        T_CHECK(none && all, "after the first backward: every base tensor written %d, no adapter %d", all, none);
    backward(m, a, 1, 0, &g);
    params_view_free(&gv);
    grad_state_free(&sb), grad_state_free(&sl);
}

static void check_backward(const char *fixture) {
    char dir[128];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", fixture);
    Model m;
    GrpoErr err;
    if (model_load(&m, dir, &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    LoraLayers lo;
    unsigned every = (1u << LORA_N_MODULES) - 1;
    lora_layers_create(&lo, &m.cfg, &(LoraSpec){4, 8.0, 0.0, 0, every}, 1);
    for (size_t i = 0; i < lo.table.total; i++) lo.params[i] = 0.02f * sinf(0.37f * (float)i); /* B != 0 */
    m.lora = &lo;
    Activations a;
    acts_create(&a, &m.cfg, MN, CKPT_NONE, 4, 0);
    acts_reserve_lora(&a, &m.cfg, &lo);
    size_t P = m.table.total, PL = lo.table.total;
    float *gb[2] = {xaligned(sizeof(float) * P), xaligned(sizeof(float) * P)};
    float *gl[2] = {xaligned(sizeof(float) * PL), xaligned(sizeof(float) * PL)};
    step_grads(&m, &a, 0, gb[0], gl[0]);
    step_grads(&m, &a, 1, gb[1], gl[1]);
    double amax = 0;
    for (size_t i = 0; i < PL; i++) amax = fmax(amax, fabs(gl[0][i]));
    T_CHECK(amax > 0, "%s: the adapters' gradient is zero: the test could not tell writing from adding", fixture);
    T_CHECK(!memcmp(gb[0], gb[1], sizeof(float) * P), "%s: base's gradients are not written then added", fixture);
    T_CHECK(!memcmp(gl[0], gl[1], sizeof(float) * PL),
            "%s: the adapters, first reached by the second backward, were not written there", fixture);
    free(gb[0]), free(gb[1]), free(gl[0]), free(gl[1]);
    acts_free(&a);
    m.lora = NULL;
    lora_layers_free(&lo);
    model_free(&m);
}

/* ---- the trainable model ---- */

enum { TB = 2, TLEN = 9 };

/* The fixture with the byte tokenizer beside it (as test_checkpointing's). */
static void make_model_dir(const char *fixture, const char *dir) {
    char from[2][256];
    snprintf(from[0], sizeof from[0], "tests/fixtures/%s/config.json", fixture);
    snprintf(from[1], sizeof from[1], "tests/fixtures/%s/model.safetensors", fixture);
    const char *files[][2] = {{from[0], "config.json"},
                              {from[1], "model.safetensors"},
                              {"assets/byte-tokenizer/tokenizer.json", "tokenizer.json"},
                              {"assets/byte-tokenizer/tokenizer_config.json", "tokenizer_config.json"}};
    GrpoErr err;
    T_CHECK(fs_mkdir_p(dir, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 4; i++) {
        char *buf, *to = fs_join(dir, files[i][1]);
        size_t n;
        T_CHECK(fs_read_file(files[i][0], &buf, &n, &err) == 0 && fs_write_file_atomic(to, buf, n, &err) == 0,
                "%s: %s", files[i][0], err.msg);
        free(buf), free(to);
    }
}

/* One micro-batch's forward and backward. */
static void micro_batch(TrainModel *tm) {
    int32_t ids[TB][TLEN];
    BatchSeq seqs[TB];
    uint64_t seq_ids[TB] = {11, 12};
    float lp[TB * TLEN], dlp[TB * TLEN];
    for (int b = 0; b < TB; b++) {
        for (int t = 0; t < TLEN; t++) ids[b][t] = (int32_t)(3 + (b * 13 + t * 7) % 80);
        seqs[b] = (BatchSeq){ids[b], TLEN, NULL, 0, 3};
    }
    TrainBatch bt = {seqs, TB, seq_ids, 1.0f};
    train_model_forward(tm, &bt, lp, NULL, NULL);
    for (int j = 0; j < TB * TLEN; j++) dlp[j] = -0.01f * (float)(1 + j % 3);
    train_model_backward(tm, dlp, NULL);
}

static void check_train_model(const char *model_dir, const char *out) {
    TrainingArgs a;
    OptGroup g = TRAINING_ARGS_GROUP(0);
    opts_defaults(&g, 1, &a);
    a.model_dir = model_dir, a.dataset = "grad_state", a.output_dir = out;
    a.per_device_train_batch_size = TB, a.bf16 = 0, a.quiet = 1;
    a.use_peft = 1, a.lora_dropout = 0; /* no dropout: two steps' passes are the same */
    GrpoErr err = {0};
    TrainModel *tm = train_model_open(&a, &(TrainModelNeeds){0}, NULL, &err);
    if (!tm || train_model_plan(tm, TB, TLEN, "max_length", &err)) {
        T_CHECK(0, "trainable model: %s", err.msg);
        train_model_close(tm);
        return;
    }
    const ParamTable *lt = &train_model_policy(tm)->lora->table; /* the gradient's layout */
    size_t n;
    train_model_begin_step(tm, 0);
    micro_batch(tm);
    float *gr = train_model_gradient(tm, &n), *first = malloc(sizeof(float) * n);
    memcpy(first, gr, sizeof(float) * n);
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero |= first[i] != 0;
    T_CHECK(nonzero, "the adapters' gradient is zero: the test could not tell writing from adding");
    fill_tensors_nan(gr, lt);
    train_model_begin_step(tm, 1);
    T_CHECK(tensors_nan(gr, lt), "train_model_begin_step wrote into the adapters' gradients");
    micro_batch(tm);
    gr = train_model_gradient(tm, &n);
    T_CHECK(!memcmp(gr, first, sizeof(float) * n), "step 1's micro-batch did not write over the buffer");
    fill_tensors_nan(gr, lt);
    train_model_begin_step(tm, 2); /* no backward */
    gr = train_model_gradient(tm, &n);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= gr[i] == 0.0f;
    T_CHECK(zero, "a step no backward reached does not read as zeros");
    free(first);
    train_model_close(tm);
}

int main(void) {
    check_state();
    check_backward("qwen3");
    check_backward("qwen2");
    char dir[] = "/tmp/test_grad_state_XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char *model_dir = fs_join(dir, "model"), *out = fs_join(dir, "out");
    make_model_dir("qwen3", model_dir);
    check_train_model(model_dir, out);
    fs_rm_rf(dir);
    free(model_dir), free(out);
    return t_summary("test_grad_state");
}
