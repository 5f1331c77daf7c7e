/* tests/train/test_checkpointing.c — gradient checkpointing changes no value
 * (CheckpointMode, model/transformer.h): recomputation runs the forward's kernels on
 * the forward's inputs, so without it, with full recomputation and with the selective
 * form (each layer's gate/up product kept) the results are the same bits.
 *  - the trainable model (train/model.h) as the loop drives it: three optimizer steps
 *    of two packed micro-batches each, AdamW between them; every micro-batch's
 *    log-probs, every step's gradient and the trained weights' hash compared bit for
 *    bit across the three modes, in fp32 (the gradient alongside the LM head, and two
 *    passes with an entropy term), mixed precision (bf16) with the KL reference, LoRA
 *    on every linear layer (dropout 0.1: the recomputed adapters must draw the
 *    forward's masks) in fp32 and on a bf16 base, on the Qwen3 (q/k norm) and Qwen2
 *    (q/k/v bias) fixtures;
 *    (The trainer's LM-head chunk, 256 rows, holds a micro-batch here: in bf16 with
 *    several chunks, no checkpointing sums the head's weight gradient in another
 *    order, test_bf16_compute; a padded batch of several chunks compares selective
 *    with full there.)
 *  - the selective backward reads the kept gate/up: a kept value perturbed between
 *    the forward and the backward moves the gradients (in fp32 and in bf16, where
 *    act16 is kept too), so the comparisons above could fail;
 *  - the plan: what a token keeps a layer under each mode (acts_kept_bytes) and the
 *    activations' bytes, selective against full, from the shapes written out here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "io/fsutil.h"
#include "model/model_io.h"
#include "optim/optim.h"
#include "testutil.h"
#include "train/model.h"

enum { B = 3, MAX_LEN = 20, STEPS = 3, MICRO = 2, MAX_T = B * MAX_LEN };

static const char *const mode_names[] = {"none", "full", "selective"};

/* The fixture with the byte tokenizer beside it (as test_steady_alloc's). */
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

typedef struct {
    const char *name;
    int bf16, lora, fused, reference;
} Setup;

/* What one run produced: every micro-batch's log-probs (and reference log-probs),
 * every step's gradient, the trained weights' hash. */
typedef struct {
    float logp[STEPS][MICRO][MAX_T], ref[STEPS][MICRO][MAX_T];
    float *grad[STEPS];
    size_t n;
    uint64_t hash;
} Result;

static void grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    for (int i = 0; i < m; i++) dlogp[i] = -0.02f * (float)((js[i] % 7) - 3) - 0.05f * logp[i];
}

/* Micro-batch k of step s: B sequences of lengths that differ by step and place. */
static int batch_of(int32_t ids[B][MAX_LEN], BatchSeq *seqs, uint64_t *seq_ids, long s, int k) {
    int ntok = 0;
    for (int i = 0; i < B; i++) {
        int len = s == 0 && k == 0 ? MAX_LEN : 3 + (int)((s * 5 + k * 7 + i * 3) % (MAX_LEN - 2));
        for (int j = 0; j < len; j++) ids[i][j] = (int32_t)((s * 29 + k * 13 + i * 17 + j * 11) % 90 + 3);
        seqs[i] = (BatchSeq){ids[i], len, NULL, 0, 1};
        seq_ids[i] = (uint64_t)(s * B * MICRO + k * B + i);
        ntok += len - 1;
    }
    return ntok;
}

static int run(const Setup *su, const char *model_dir, const char *out, CheckpointMode mode, Result *r) {
    TrainingArgs a;
    OptGroup g = TRAINING_ARGS_GROUP(0);
    opts_defaults(&g, 1, &a);
    a.model_dir = model_dir;
    a.dataset = "ckpt";
    a.output_dir = out;
    a.per_device_train_batch_size = B;
    a.bf16 = su->bf16;
    a.quiet = 1;
    a.use_peft = su->lora;
    a.lora_dropout = su->lora ? 0.1 : 0.0;
    static const char *all[] = {"all-linear"};
    if (su->lora) a.lora_target_modules = (StrList){1, all};
    a.gradient_checkpointing = mode != CKPT_NONE;
    a.gradient_checkpointing_policy = mode == CKPT_FULL ? TRAIN_CKPT_FULL : TRAIN_CKPT_SELECTIVE;
    GrpoErr err = {0};
    TrainModel *tm = train_model_open(&a, &(TrainModelNeeds){.reference = su->reference}, NULL, &err);
    if (!tm || train_model_plan(tm, B, MAX_LEN, "max_length", &err)) {
        T_CHECK(0, "%s (%s): %s", su->name, mode_names[mode], err.msg);
        train_model_close(tm);
        return -1;
    }
    int32_t ids[B][MAX_LEN];
    BatchSeq seqs[B];
    uint64_t seq_ids[B];
    float ent[MAX_T], dlogp[MAX_T], dent[MAX_T];
    AdamWConfig opt = a.adam;
    memset(r->logp, 0, sizeof r->logp), memset(r->ref, 0, sizeof r->ref);
    for (long s = 0; s < STEPS; s++) {
        train_model_begin_step(tm, s);
        for (int k = 0; k < MICRO; k++) {
            int ntok = batch_of(ids, seqs, seq_ids, s, k);
            TrainBatch b = {seqs, B, seq_ids, 1.0f / 0.9f};
            if (su->reference) train_model_logprobs(tm, TRAIN_REFERENCE, &b, r->ref[s][k], NULL);
            if (su->fused) {
                train_model_forward(tm, &b, r->logp[s][k], NULL, &(LogprobGrad){.fn = grads, .ctx = NULL});
                train_model_backward(tm, NULL, NULL);
            } else {
                train_model_forward(tm, &b, r->logp[s][k], ent, NULL);
                for (int j = 0; j < ntok; j++) dlogp[j] = -0.01f * (float)((j % 5) + 1), dent[j] = 0.003f;
                train_model_backward(tm, dlogp, dent);
            }
        }
        float *gr = train_model_gradient(tm, &r->n);
        r->grad[s] = malloc(sizeof(float) * r->n);
        memcpy(r->grad[s], gr, sizeof(float) * r->n);
        grad_clip_norm(gr, r->n, 1.0);
        train_model_update(tm, 1e-2, &opt);
    }
    r->hash = train_model_hash(tm);
    train_model_close(tm);
    return 0;
}

/* The three modes of one set-up on one fixture: the same bits everywhere. */
static void check_setup(const Setup *su, const char *fixture, const char *model_dir, const char *out) {
    static Result res[3];
    int ok[3];
    for (int mode = 0; mode < 3; mode++) ok[mode] = run(su, model_dir, out, (CheckpointMode)mode, &res[mode]) == 0;
    for (int mode = 1; mode < 3; mode++) {
        if (!ok[0] || !ok[mode]) continue;
        const Result *x = &res[0], *y = &res[mode];
        int same_lp = !memcmp(x->logp, y->logp, sizeof x->logp) && !memcmp(x->ref, y->ref, sizeof x->ref);
        int same_g = x->n == y->n, step = -1;
        for (int s = 0; s < STEPS && same_g; s++)
            if (memcmp(x->grad[s], y->grad[s], sizeof(float) * x->n)) same_g = 0, step = s;
        T_CHECK(same_lp, "%s, %s: log-probs with checkpointing %s differ from without", fixture, su->name,
                mode_names[mode]);
        T_CHECK(same_g, "%s, %s: the gradient of step %d with checkpointing %s differs from without", fixture,
                su->name, step, mode_names[mode]);
        T_CHECK(x->hash == y->hash, "%s, %s: the weights after %d AdamW steps with checkpointing %s differ", fixture,
                su->name, STEPS, mode_names[mode]);
    }
    for (int mode = 0; mode < 3; mode++)
        for (int s = 0; s < STEPS && ok[mode]; s++) free(res[mode].grad[s]);
}

/* ---- the selective backward reads what it kept ---- */

/* Gradients of a padded batch (right padding in its second row) after a forward under
 * mode; perturb: a kept gate/up value of layer l changed between forward and backward. */
static float *model_grads(Model *m, CheckpointMode mode, int perturb_layer) {
    enum { PB = 2, PT = 9 };
    int32_t ids[PB * PT], targets[PB * PT];
    uint8_t mask[PB * PT];
    float lp[PB * PT], dlp[PB * PT];
    for (int n = 0; n < PB * PT; n++) {
        ids[n] = (int32_t)((n * 37 + 5) % m->cfg.vocab_size);
        mask[n] = n < PT || n % PT < 6;
        targets[n] = mask[n] && (n + 1) % PT ? (int32_t)((n * 53 + 11) % m->cfg.vocab_size) : -1;
        dlp[n] = targets[n] >= 0 ? -0.1f * (float)(1 + n % 3) : 0;
    }
    Activations a;
    acts_create(&a, &m->cfg, PB * PT, mode, 4, m->mixed != NULL);
    model_forward(m, &a, ids, mask, PB, PT, &(ModelPass){.backward = 1});
    model_logprobs(m, &a, targets, 1.0f, lp, NULL);
    if (perturb_layer >= 0) {
        LayerActs *L = &a.layers[perturb_layer];
        size_t F = m->cfg.intermediate_size, k = 3 * 2 * F + 1; /* token 3, gate 1 */
        if (L->gu)
            L->gu[k] += 0.25f;
        else
            L->gu16[k] ^= 0x0100, L->act16[3 * F + 1] ^= 0x0100; /* gate and act: bf16 values moved */
    }
    float *g = calloc(m->table.total, sizeof(float));
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, g);
    model_backward(m, &a, &(ModelGrads){&gv, NULL, NULL, NULL}, dlp, NULL);
    params_view_free(&gv);
    acts_free(&a);
    return g;
}

static void check_kept_is_read(const char *fixture, int bf16) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", fixture);
    Model m;
    GrpoErr err;
    if (model_load(&m, dir, &err)) {
        T_CHECK(0, "%s: %s", dir, err.msg);
        return;
    }
    if (bf16) model_use_bf16_compute(&m);
    size_t bytes = sizeof(float) * m.table.total;
    /* against full recomputation: in bf16 without checkpointing the LM head's weight
     * gradient is one product over the gathered chunks (4 rows here), its sums in
     * another order (test_bf16_compute) */
    float *full = model_grads(&m, CKPT_FULL, -1), *sel = model_grads(&m, CKPT_SELECTIVE, -1);
    T_CHECK(!memcmp(full, sel, bytes), "%s%s: padded batch, selective checkpointing's gradients differ from full's",
            fixture, bf16 ? " bf16" : "");
    if (!bf16) {
        float *none = model_grads(&m, CKPT_NONE, -1);
        T_CHECK(!memcmp(none, sel, bytes), "%s: padded batch, selective checkpointing's gradients differ from no "
                "checkpointing's", fixture);
        free(none);
    }
    for (int l = 0; l < m.cfg.n_layers; l++) {
        float *bad = model_grads(&m, CKPT_SELECTIVE, l);
        T_CHECK(memcmp(full, bad, bytes), "%s%s: layer %d's kept gate/up perturbed moves no gradient: the selective "
                "backward does not read it", fixture, bf16 ? " bf16" : "", l);
        free(bad);
    }
    free(full), free(sel);
    model_free(&m);
}

/* ---- the plan ---- */

static void check_plan(const char *fixture) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", fixture);
    Model m;
    GrpoErr err;
    if (model_load(&m, dir, &err)) {
        T_CHECK(0, "%s: %s", dir, err.msg);
        return;
    }
    const ModelConfig *c = &m.cfg;
    size_t C = c->hidden_size, F = c->intermediate_size, L = c->n_layers, N = 37;
    T_CHECK(acts_kept_bytes(c, CKPT_FULL, 0) == 4 * C && acts_kept_bytes(c, CKPT_FULL, 1) == 4 * C,
            "%s: full checkpointing keeps %zu bytes a token a layer, not the input's %zu", fixture,
            acts_kept_bytes(c, CKPT_FULL, 0), 4 * C);
    T_CHECK(acts_kept_bytes(c, CKPT_SELECTIVE, 0) == 4 * (C + 2 * F), "%s: selective keeps %zu bytes (fp32), not %zu",
            fixture, acts_kept_bytes(c, CKPT_SELECTIVE, 0), 4 * (C + 2 * F));
    T_CHECK(acts_kept_bytes(c, CKPT_SELECTIVE, 1) == 4 * C + 2 * 3 * F, "%s: selective keeps %zu bytes (bf16), not %zu",
            fixture, acts_kept_bytes(c, CKPT_SELECTIVE, 1), 4 * C + 2 * 3 * F);
    T_CHECK(acts_kept_bytes(c, CKPT_NONE, 0) > acts_kept_bytes(c, CKPT_SELECTIVE, 0), "%s: none keeps less", fixture);
    /* selective over full: each layer but the one full keeps has its own gate/up */
    size_t f32 = acts_plan_bytes(c, (int)N, CKPT_SELECTIVE, 8, 0) - acts_plan_bytes(c, (int)N, CKPT_FULL, 8, 0);
    size_t b16 = acts_plan_bytes(c, (int)N, CKPT_SELECTIVE, 8, 1) - acts_plan_bytes(c, (int)N, CKPT_FULL, 8, 1);
    T_CHECK(f32 == 4 * (L - 1) * N * 2 * F, "%s: selective plans %zu bytes over full, not %zu", fixture, f32,
            4 * (L - 1) * N * 2 * F);
    size_t want16 = 4 * (L - 1) * ((N * F + 1) / 2 + (N * 2 * F + 1) / 2); /* whole floats of bf16 values */
    T_CHECK(b16 == want16, "%s: selective plans %zu bytes over full in bf16, not %zu", fixture, b16, want16);
    T_CHECK(acts_plan_bytes(c, (int)N, CKPT_NONE, 8, 0) > acts_plan_bytes(c, (int)N, CKPT_SELECTIVE, 8, 0),
            "%s: no checkpointing plans no more than selective", fixture);
    char text[256];
    acts_describe(c, CKPT_SELECTIVE, 0, text, sizeof text);
    T_CHECK(strstr(text, "selective") && strstr(text, "gate/up"), "%s: the plan says '%s'", fixture, text);
    model_free(&m);
}

int main(void) {
    char tmp[] = "/tmp/grpo_ckpt_XXXXXX";
    T_CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    static const Setup setups[] = {
        {"fp32, gradient alongside the LM head", 0, 0, 1, 0},
        {"fp32, two passes with entropy, KL reference", 0, 0, 0, 1},
        {"bf16, gradient alongside the LM head, KL reference", 1, 0, 1, 1},
        {"bf16, two passes with entropy", 1, 0, 0, 0},
        {"LoRA all-linear fp32, dropout 0.1", 0, 1, 1, 0},
        {"LoRA all-linear on a bf16 base, two passes, reference = adapters off", 1, 1, 0, 1},
    };
    const char *fixtures[] = {"qwen3", "qwen2"};
    for (int f = 0; f < 2; f++) {
        char model_dir[600], out[600];
        snprintf(model_dir, sizeof model_dir, "%s/%s", tmp, fixtures[f]);
        snprintf(out, sizeof out, "%s/out", tmp);
        make_model_dir(fixtures[f], model_dir);
        for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) check_setup(&setups[i], fixtures[f], model_dir, out);
        check_kept_is_read(fixtures[f], 0);
        check_kept_is_read(fixtures[f], 1);
        check_plan(fixtures[f]);
    }
    fs_rm_rf(tmp);
    return t_summary("test_checkpointing");
}
