/* bench/bench_ckpt.c — what gradient checkpointing costs the training pass, its three
 * modes (CheckpointMode, model/transformer.h) measured against each other in one run:
 * none (every saved tensor kept), full (a layer's input kept, the layer recomputed)
 * and selective (the input and the gate/up product kept, the attention side
 * recomputed; the trainer's default).
 *
 * The pass is the GRPO trainer's on one micro-batch: 4 x 192 tokens packed, forward,
 * the token-local gradient taken alongside the LM head (model_logprobs_train), the
 * backward writing fresh weight gradients; Qwen2-0.5B's shape (bench/qwen2_shape.h),
 * random fp32 weights, or mixed precision with --bf16. The modes run in rounds, each
 * round every mode once in a rotated order, after one warm-up pass each: the
 * machine's neighbours move single passes by 10-30 %, and alternation spreads that
 * over the modes alike. Printed per mode: the median seconds and the range over the
 * rounds, the ratio of medians to no checkpointing (target for the GRPO step: <= 1.08
 * with checkpointing; the step's generation and scoring, which checkpointing does not
 * touch, only lower its ratio), the same in the process's CPU seconds (steadier than
 * the wall clock where other work shares the cores), the same for the layers alone (forward and backward,
 * the LM head apart), the products' GFLOP and seconds (gemm_stats: what the
 * recomputation runs again), and the activations' bytes from the plan with what a
 * token keeps a layer. With fewer layers than 24 (a quicker look: the LM head, the
 * same in every mode, is then a larger share) it also prints the ratio of a
 * 24-layer pass made of the measured head and 24 measured layers.
 *   build/bench/bench_ckpt [--layers 24] [--rounds 5] [--bf16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"
#include "model/init.h"
#include "ops/gemm.h"

#include "qwen2_shape.h"

enum { B = 4, T = 192, N = B * T, MODES = 3, MAX_ROUNDS = 64 };

static const char *const names[MODES] = {"none", "full", "selective"};

static void mean_grad(void *ctx, const int *rows, int m, const float *logprob, float *dlogprob) {
    for (int i = 0; i < m; i++) dlogprob[i] = -1.0f / N;
}

/* Seconds of a pass's parts: the layers' forward, the LM head (log-probs and its
 * backward together), the layers' backward with their recomputation. */
typedef struct {
    double fwd, head, bwd;
    double cpu, cpu_head; /* the process's CPU seconds over the pass, and over the head: on a machine shared with other work,
                   less moved by time spent descheduled than the wall clock (spin-waiting
                   threads count: run with a small GOMP_SPINCOUNT) */
} Parts;

static double cpu_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* One training pass of mode's activations; its seconds, its parts' in *p and its
 * products' in *g. */
static double pass_s(Model *m, Activations *a, float *grad, const int32_t *ids, const int *starts,
                     const int32_t *tg, Parts *p, GemmStats *g) {
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, grad);
    GradState gs; /* a step's first pass: every gradient written */
    grad_state_create(&gs, &m->table, grad);
    ModelGrads grads = {&gv, NULL, &gs, NULL};
    float lp[N];
    gemm_stats_reset();
    double c0 = cpu_now_s(), t0 = time_now_s();
    model_forward_packed(m, a, ids, starts, B, &(ModelPass){.backward = 1});
    double t1 = time_now_s(), c1 = cpu_now_s();
    model_logprobs_train(m, a, tg, 1.0f, lp, NULL, &grads, &(LogprobGrad){.fn = mean_grad, .ctx = NULL});
    double t2 = time_now_s(), c2 = cpu_now_s();
    model_backward(m, a, &grads, NULL, NULL);
    double dt = time_now_s() - t0;
    *p = (Parts){t1 - t0, t2 - t1, t0 + dt - t2, cpu_now_s() - c0, c2 - c1};
    *g = gemm_stats();
    grad_state_free(&gs);
    params_view_free(&gv);
    return dt;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(const double *x, int n) {
    double y[MAX_ROUNDS];
    memcpy(y, x, sizeof(double) * n);
    qsort(y, n, sizeof(double), cmp_double);
    return n % 2 ? y[n / 2] : 0.5 * (y[n / 2 - 1] + y[n / 2]);
}

int main(int argc, char **argv) {
    int layers = 24, rounds = 5, bf16 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else {
            fprintf(stderr, "usage: %s [--layers L] [--rounds R (1..%d)] [--bf16]\n", argv[0], MAX_ROUNDS);
            return 2;
        }
    }
    if (layers < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_ckpt: --layers must be >= 1 and --rounds 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    ModelConfig cfg = qwen2_05b(layers);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 1, 0.02f);
    if (bf16) model_use_bf16_compute(&m);
    int32_t *ids = malloc(sizeof(int32_t) * N), *tg = malloc(sizeof(int32_t) * N);
    int starts[B + 1];
    for (int b = 0; b <= B; b++) starts[b] = b * T;
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 7919) % m.cfg.vocab_size);
    for (int n = 0; n < N; n++) tg[n] = (n + 1) % T && n % T >= 64 ? ids[n + 1] : -1; /* the completion's */
    float *grad = xaligned(sizeof(float) * m.table.total);
    Activations acts[MODES];
    for (int k = 0; k < MODES; k++) acts_create(&acts[k], &m.cfg, N, (CheckpointMode)k, 256, bf16);
    printf("bench_ckpt: Qwen2-0.5B shape, %d layers, %s, one micro-batch of %d x %d tokens packed, %d rounds "
           "(load: ",
           layers, bf16 ? "bf16 mixed precision" : "fp32", B, T, rounds);
    FILE *la = fopen("/proc/loadavg", "r");
    char load[64] = "?";
    if (la && fgets(load, sizeof load, la)) load[strcspn(load, " ")] = 0;
    if (la) fclose(la);
    printf("%s)\n", load);
    double s[MODES][MAX_ROUNDS], layer_s[MODES][MAX_ROUNDS], head_s[MODES][MAX_ROUNDS], cpu_s[MODES][MAX_ROUNDS],
        cpu_head_s[MODES][MAX_ROUNDS];
    GemmStats g[MODES];
    Parts p;
    for (int k = 0; k < MODES; k++) pass_s(&m, &acts[k], grad, ids, starts, tg, &p, &g[k]); /* warm-up */
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < MODES; j++) {
            int k = (r + j) % MODES;
            s[k][r] = pass_s(&m, &acts[k], grad, ids, starts, tg, &p, &g[k]);
            layer_s[k][r] = p.fwd + p.bwd, head_s[k][r] = p.head, cpu_s[k][r] = p.cpu, cpu_head_s[k][r] = p.cpu_head;
        }
    double med[MODES], lmed[MODES], hmed[MODES], cmed[MODES], chmed[MODES];
    for (int k = 0; k < MODES; k++) {
        med[k] = median(s[k], rounds), lmed[k] = median(layer_s[k], rounds), hmed[k] = median(head_s[k], rounds);
        cmed[k] = median(cpu_s[k], rounds), chmed[k] = median(cpu_head_s[k], rounds);
        qsort(s[k], rounds, sizeof(double), cmp_double);
    }
    for (int k = 0; k < MODES; k++) {
        char kept[200];
        acts_describe(&m.cfg, (CheckpointMode)k, bf16, kept, sizeof kept);
        printf("ckpt mode=%s layers=%d bf16=%d median_s=%.3f min_s=%.3f max_s=%.3f ratio=%.3f cpu_s=%.3f "
               "cpu_ratio=%.3f layers_s=%.3f layers_ratio=%.3f head_s=%.3f products_gflop=%.1f gflop_ratio=%.3f "
               "products_s=%.3f acts_mb=%.0f\n  (%s)\n",
               names[k], layers, bf16, med[k], s[k][0], s[k][rounds - 1], med[k] / med[0], cmed[k], cmed[k] / cmed[0],
               lmed[k], lmed[k] / lmed[0], hmed[k], g[k].gflop, g[k].gflop / g[0].gflop, g[k].seconds,
               acts[k].bytes / 1048576.0, kept);
    }
    /* The pass at 24 layers from these parts: the head's median (the same work in every
     * mode) plus 24 times a layer's, for a cut to fewer layers. */
    if (layers != 24) {
        double head = (hmed[0] + hmed[1] + hmed[2]) / 3, chead = (chmed[0] + chmed[1] + chmed[2]) / 3;
        for (int k = 1; k < MODES; k++) {
            double cl = (cmed[k] - chmed[k]) / layers, cl0 = (cmed[0] - chmed[0]) / layers;
            printf("ckpt_extrapolated mode=%s layers=24 ratio=%.3f cpu_ratio=%.3f (head %.2f s + 24 x %.3f s a layer, "
                   "against 24 x %.3f; CPU: head %.2f s + 24 x %.3f s, against 24 x %.3f)\n",
                   names[k], (head + 24 * lmed[k] / layers) / (head + 24 * lmed[0] / layers),
                   (chead + 24 * cl) / (chead + 24 * cl0), head, lmed[k] / layers, lmed[0] / layers, chead, cl, cl0);
        }
    }
    for (int k = 0; k < MODES; k++) acts_free(&acts[k]);
    free(grad), free(ids), free(tg);
    model_free(&m);
    return 0;
}
