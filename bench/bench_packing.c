/* bench/bench_packing.c — what padding costs the training pass, and what packing
 * (the trainers' layout: model_forward_packed) saves, on the Qwen2-0.5B shape
 * (random weights) with realistic completion lengths.
 *
 * Workload: micro-batches of 4 sequences, a 64-token prompt each and a completion
 * drawn uniformly from 16 .. 128 tokens (max_completion_length 128), the
 * completion's tokens the targets (a GRPO micro-batch). Each micro-batch runs
 * forward, log-probs with the LM head's backward alongside, and backward, padded to
 * its longest sequence and packed end to end, the two alternating; the seconds per
 * micro-batch are the median (and range) over every micro-batch and iteration, in
 * fp32, then with the products in bf16 (model_use_bf16_compute, the trainers'
 * --bf16). Printed: the real and padded tokens, the completion lengths (micro-batches
 * separated by ';', for bench/torch_model.py's PyTorch peer of the same work), the times and the ratio.
 *   build/bench/bench_packing [--layers L] [--iters N] [--batches M] [--bf16 0|1|2]
 *   (--bf16 0: fp32 only, 1: bf16 only, 2: both; default 24 layers, 2 iterations,
 *   4 micro-batches, both) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "model/batch.h"
#include "model/init.h"
#include "ops/gemm.h"

#include "qwen2_shape.h"

enum { SEQS = 4, PROMPT = 64, MIN_COMPLETION = 16, MAX_COMPLETION = 128, MAX_BATCHES = 16 };

/* The objective: the mean log-prob of the targets (token-local, as the losses). */
static void mean_grad(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    (void)js, (void)logp;
    for (int i = 0; i < m; i++) dlogp[i] = 1.0f / *(const int *)ctx;
}

/* Seconds of one training pass of pb (forward, log-probs and head backward, backward). */
static double pass_s(Model *m, Activations *a, PaddedBatch *pb, const ModelGrads *g, float *lp) {
    int K = pb->offsets[pb->S];
    grad_state_begin(g->base_state);
    double t0 = time_now_s();
    padded_batch_logprobs_train(m, a, pb, &(ModelPass){.backward = 1}, 1.0f, lp, NULL, g,
                                &(LogprobGrad){.fn = mean_grad, .ctx = &K});
    model_backward(m, a, g, NULL, NULL);
    return time_now_s() - t0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Times every micro-batch padded and packed, iters times after a warm-up of each,
 * and prints a line of the medians, ranges and ratio. */
static void run(Model *m, const char *label, int bf16, PaddedBatch pb[][2], int nb, int iters) {
    Activations a;
    acts_create(&a, &m->cfg, SEQS * (PROMPT + MAX_COMPLETION), 0, 64, bf16);
    float *g = xaligned(sizeof(float) * m->table.total), lp[SEQS * MAX_COMPLETION];
    memset(g, 0, sizeof(float) * m->table.total);
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, g);
    GradState gs;
    grad_state_create(&gs, &m->table, g);
    ModelGrads grads = {&gv, NULL, &gs, NULL};
    double t[2][MAX_BATCHES * 8], made_s[2] = {0, 0};
    long made[2] = {0, 0};
    int n = 0;
    pass_s(m, &a, &pb[0][0], &grads, lp), pass_s(m, &a, &pb[0][1], &grads, lp); /* warm-up */
    for (int it = 0; it < iters; it++)
        for (int b = 0; b < nb; b++, n++)
            for (int k = 0; k < 2; k++) {
                gemm_stats_reset();
                t[k][n] = pass_s(m, &a, &pb[b][k], &grads, lp);
                GemmStats st = gemm_stats();
                made[k] += st.primitives_made, made_s[k] += st.primitive_seconds;
            }
    double med[2];
    for (int k = 0; k < 2; k++) qsort(t[k], n, sizeof(double), cmp_double), med[k] = t[k][n / 2];
    printf("train %s, per micro-batch: padded %.3f s (%.3f..%.3f), packed %.3f s (%.3f..%.3f); padded/packed %.2fx "
           "(%d passes each)\n",
           label, med[0], t[0][0], t[0][n - 1], med[1], t[1][0], t[1][n - 1], med[0] / med[1], n);
    /* a shape oneDNN has not cached costs a new primitive: packing meets one at each new length */
    printf("  oneDNN primitives made per pass: padded %.1f (%.3f s), packed %.1f (%.3f s)\n", (double)made[0] / n,
           made_s[0] / n, (double)made[1] / n, made_s[1] / n);
    fflush(stdout);
    grad_state_free(&gs);
    params_view_free(&gv);
    free(g);
    acts_free(&a);
}

int main(int argc, char **argv) {
    int layers = 24, iters = 2, nb = 4, which = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batches")) nb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bf16")) which = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_packing [--layers L] [--iters N] [--batches M] [--bf16 0|1|2]\n");
            return 2;
        }
    }
    if (layers < 1 || iters < 1 || iters > 8 || nb < 1 || nb > MAX_BATCHES || which < 0 || which > 2) {
        fprintf(stderr, "bench_packing: --layers >= 1, --iters 1..8, --batches 1..%d, --bf16 0|1|2\n", MAX_BATCHES);
        return 2;
    }
    ModelConfig cfg = qwen2_05b(layers);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 1, 0.02f);
    /* the micro-batches: prompts and completions of pseudo-random ids and lengths */
    static int32_t ids[MAX_BATCHES][SEQS][PROMPT + MAX_COMPLETION];
    PaddedBatch pb[MAX_BATCHES][2];
    long real = 0, padded = 0;
    char lens_text[MAX_BATCHES * SEQS * 5 + 1] = "";
    for (int b = 0; b < nb; b++) {
        BatchSeq seqs[SEQS];
        for (int s = 0; s < SEQS; s++) {
            uint64_t r = rng_mix(rng_mix(0x7061636bu /* "pack" */, (uint64_t)b), (uint64_t)s);
            int len = PROMPT + MIN_COMPLETION + (int)(r % (MAX_COMPLETION - MIN_COMPLETION + 1));
            for (int t = 0; t < len; t++) ids[b][s][t] = (int32_t)(rng_mix(r, (uint64_t)t) % (uint64_t)cfg.vocab_size);
            seqs[s] = (BatchSeq){ids[b][s], len, NULL, 0, PROMPT};
            snprintf(lens_text + strlen(lens_text), sizeof lens_text - strlen(lens_text), "%s%d",
                     s ? "," : b ? ";" : "", len - PROMPT);
        }
        padded_batch_build(&pb[b][0], seqs, SEQS, 0);
        padded_batch_build(&pb[b][1], seqs, SEQS, 1);
        real += pb[b][1].N, padded += pb[b][0].N;
    }
    printf("packing: Qwen2-0.5B shape, %d layers, %d micro-batches of %d x (%d prompt + %d..%d completion) tokens: "
           "%.0f real tokens per micro-batch, %.0f padded (%.0f%% padding)\n",
           layers, nb, SEQS, PROMPT, MIN_COMPLETION, MAX_COMPLETION, (double)real / nb, (double)padded / nb,
           100.0 * (padded - real) / padded);
    printf("completion lengths: %s\n", lens_text); /* bench/torch_model.py --completions takes them */
    fflush(stdout);
    if (which != 1) run(&m, "fp32", 0, pb, nb, iters);
    if (which != 0) {
        model_use_bf16_compute(&m);
        run(&m, "bf16", 1, pb, nb, iters);
    }
    for (int b = 0; b < nb; b++) padded_batch_free(&pb[b][0]), padded_batch_free(&pb[b][1]);
    model_free(&m);
    return 0;
}
