/* tests/gpu/test_gpu_score.c — `grpo score` on the GPU: the command's entry function
 * (cmd_score) run on the GPU where there is one and on the tests' emulated GPU
 * otherwise (installed as gpu_test.h installs it, so the command's own gpu_open
 * finds it), on tests/fixtures/qwen2 (2 layers, q/k/v biases, a tied head) and
 * tests/fixtures/qwen3 (q/k norm), its
 * output against the CPU's: `--use_cpu --bf16 false` (fp32, the reference) and
 * `--use_cpu --bf16 true` (the CPU's bf16 products, what the GPU computes).
 *
 * Tolerance, test_gpu_model.c's (why there): per value, max |gpu - fp32| <= 2 max
 * |cpu bf16 - fp32| + 1e-4 and mean likewise (+ 1e-5); mean |gpu - cpu bf16| <= 0.5
 * mean |cpu bf16 - fp32| + 1e-6. The figures seen are printed.
 * Also: the GPU run says nothing on stderr; --bf16 false with a GPU scores on the
 * CPU, says so in one line and prints the fp32 run's bytes; --batch_tokens 24 (a
 * batch a line or two) gives the same lines within the tolerance; an item with no
 * tokens and one without a completion keep their (empty) lines; a --batch_tokens
 * past the GPU's free memory is one line naming it, before any output; and without a GPU
 * (the driver not found) the plain command prints the --use_cpu run's bytes and
 * nothing on stderr.
 * With --adapter (tests/fixtures/lora_train/qwen2_rslora/adapter on qwen2): the GPU
 * runs the adapter unmerged beside the bf16 base, the CPU folds it into fp32 weights
 * (`--use_cpu --adapter`, the reference); what the GPU computes is the CPU's forward
 * of the bf16 base with the adapter attached (model_load_ex WEIGHTS_BF16 +
 * lora_layers_load, computed here, the command having no such form on the CPU), and
 * the same tolerance holds against those two. --bf16 false --adapter with a GPU: the
 * CPU's fold, in one line. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/batch.h"
#include "model/lora.h"
#include "model/lora_layers.h"
#include "model/model_io.h"
#define GPU_TEST_SEED 37
#include "gpu_test.h"
#include "gpu_test_cli.h"

enum { MAXV = 4096, MAXOUT = 1 << 16 };
static char data_path[256], out_path[256], err_path[256];
static const char *model_dir = "tests/fixtures/qwen2";

/* The data: lines of prompt and completion ids in the fixture's vocabulary (96). */
static const int lens[][2] = {{3, 5}, {1, 12}, {9, 4}, {0, 0}, {6, 0}, {2, 20}, {5, 7}};
enum { ITEMS = sizeof lens / sizeof lens[0] };
static int prompt_id(size_t i, int t) { return (int)((i * 31 + t * 17 + 5) % 96); }
static int completion_id(size_t i, int t) { return (int)((i * 13 + t * 29 + 7) % 96); }

static void write_data(void) {
    snprintf(data_path, sizeof data_path, "/tmp/test_gpu_score_%d.jsonl", (int)getpid());
    FILE *f = fopen(data_path, "w");
    T_CHECK(f != NULL, "cannot write %s", data_path);
    if (!f) return;
    for (size_t i = 0; i < ITEMS; i++) {
        fputs("{\"prompt_ids\": [", f);
        for (int t = 0; t < lens[i][0]; t++) fprintf(f, "%s%d", t ? ", " : "", prompt_id(i, t));
        fputs("], \"completion_ids\": [", f);
        for (int t = 0; t < lens[i][1]; t++) fprintf(f, "%s%d", t ? ", " : "", completion_id(i, t));
        fputs("]}\n", f);
    }
    fclose(f);
}

/* `grpo score --model MODEL_DIR --temperature 0.8 --data DATA extra...`, its stdout into out
 * and its stderr into errs; the exit status. */
static int run_score(const char *extra, char *out, char *errs) {
    char line[1024];
    snprintf(line, sizeof line, "score --model %s --temperature 0.8 --data %s %s", model_dir, data_path, extra);
    return gpu_test_run_entry(cmd_score, line, out_path, err_path, out, errs, MAXOUT);
}

/* The numbers of score's output in order (null: NaN); *lines its line count, each
 * line's count into per_line. Returns the count. */
static int parse(const char *out, double *v, int *per_line, int *lines) {
    int n = 0;
    *lines = 0;
    for (const char *p = out; *p;) {
        const char *open = strchr(p, '['), *end = strchr(p, '\n');
        if (!open || !end) break;
        int k = 0;
        for (const char *q = open + 1; *q != ']' && n < MAXV;) {
            char *next;
            if (!strncmp(q, "null", 4)) v[n++] = NAN, q += 4, k++;
            else if (*q == ',' || *q == ' ') q++;
            else {
                v[n++] = strtod(q, &next), k++;
                if (next == q) break;
                q = next;
            }
        }
        per_line[(*lines)++] = k;
        p = end + 1;
    }
    return n;
}

static void distance(const double *x, const double *ref, int n, double *max, double *mean) {
    *max = *mean = 0;
    for (int j = 0; j < n; j++) {
        double e = isnan(x[j]) ? INFINITY : fabs(x[j] - ref[j]);
        *max = fmax(*max, e), *mean += e / n;
    }
}

typedef struct {
    double v[MAXV];
    int per_line[64], lines, n;
} Scores;

static void scores_of(Scores *s, const char *out) { s->n = parse(out, s->v, s->per_line, &s->lines); }

/* g against the CPU's fp32 (f) and bf16 (h) scores, the tolerance above. */
static void check_close(const char *what, const Scores *g, const Scores *f, const Scores *h) {
    T_CHECK(g->lines == f->lines && g->n == f->n && !memcmp(g->per_line, f->per_line, sizeof(int) * f->lines),
            "%s: %d lines of %d values, the CPU's %d of %d", what, g->lines, g->n, f->lines, f->n);
    if (g->n != f->n) return;
    double gmax, gmean, cmax, cmean, dmax, dmean;
    distance(g->v, f->v, f->n, &gmax, &gmean);
    distance(h->v, f->v, f->n, &cmax, &cmean);
    distance(g->v, h->v, f->n, &dmax, &dmean);
    printf("  %s, %d log-probs: |gpu - cpu fp32| max %.3g mean %.3g; |cpu bf16 - cpu fp32| max %.3g mean %.3g; "
           "|gpu - cpu bf16| max %.3g mean %.3g\n", what, f->n, gmax, gmean, cmax, cmean, dmax, dmean);
    T_CHECK(gmax <= 2 * cmax + 1e-4 && gmean <= 2 * cmean + 1e-5,
            "%s: further from fp32 (max %.3g, mean %.3g) than twice the CPU bf16's (%.3g, %.3g)", what, gmax, gmean,
            cmax, cmean);
    T_CHECK(dmean <= 0.5 * cmean + 1e-6, "%s: %.3g from the CPU bf16's on average, more than half of bf16's own "
            "distance from fp32 (%.3g)", what, dmean, cmean);
}

static char out32[MAXOUT], out16[MAXOUT], outg[MAXOUT], errs[MAXOUT];
static Scores s32, s16, sg;
static void cpu_runs(void);

/* tests/fixtures/qwen3 (q/k norm) on the GPU too, against its own CPU runs. */
static void check_qwen3(void) {
    model_dir = "tests/fixtures/qwen3";
    cpu_runs();
    T_CHECK(run_score("", outg, errs) == 0 && !errs[0], "gpu, qwen3: %s", errs);
    scores_of(&sg, outg);
    check_close("gpu, qwen3 (q/k norm)", &sg, &s32, &s16);
    model_dir = "tests/fixtures/qwen2";
    cpu_runs();
}

static const char *adapter_dir = "tests/fixtures/lora_train/qwen2_rslora/adapter";

/* The CPU's forward of the data through the bf16 base with the adapter attached,
 * unmerged (what the GPU computes), into h->v in the output's order. */
static void cpu_bf16_adapter(Scores *h) {
    Model m;
    LoraLayers lo;
    T_CHECK(!model_load_ex(&m, model_dir, WEIGHTS_BF16, &err), "%s", err.msg);
    T_CHECK(!lora_layers_load(&lo, adapter_dir, &m, 0, &err), "%s", err.msg);
    m.lora = &lo;
    int32_t ids[ITEMS][64];
    BatchSeq seqs[ITEMS];
    int S = 0, N = 0;
    for (size_t i = 0; i < ITEMS; i++) {
        if (!lens[i][0] && !lens[i][1]) continue;
        for (int t = 0; t < lens[i][0]; t++) ids[i][t] = prompt_id(i, t);
        for (int t = 0; t < lens[i][1]; t++) ids[i][lens[i][0] + t] = completion_id(i, t);
        seqs[S++] = (BatchSeq){ids[i], lens[i][0] + lens[i][1], NULL, 0, lens[i][0]};
        N += lens[i][0] + lens[i][1];
    }
    PaddedBatch pb = {0};
    padded_batch_build(&pb, seqs, S, 1);
    Activations a;
    acts_create(&a, &m.cfg, N, 0, 4, 0);
    acts_reserve_lora(&a, &m.cfg, &lo);
    float lp[MAXV];
    padded_batch_logprobs(&m, &a, &pb, NULL, (float)(1.0 / 0.8), lp, NULL);
    h->n = pb.offsets[S];
    for (int j = 0; j < h->n; j++) h->v[j] = lp[j];
    acts_free(&a);
    padded_batch_free(&pb);
    m.lora = NULL;
    lora_layers_free(&lo);
    model_free(&m);
}

/* --adapter on the GPU (unmerged, bf16 base) against the CPU's fold (fp32) and the
 * CPU's unmerged bf16 forward; --bf16 false --adapter: the CPU's, in one line. */
static void check_adapter(void) {
    static char outa[MAXOUT];
    static Scores sa32, sa16, sag;
    char extra[256];
    snprintf(extra, sizeof extra, "--use_cpu true --adapter %s", adapter_dir);
    T_CHECK(run_score(extra, outa, errs) == 0 && !errs[0], "cpu fp32, --adapter: %s", errs);
    scores_of(&sa32, outa);
    cpu_bf16_adapter(&sa16);
    T_CHECK(sa16.n == sa32.n, "the CPU's unmerged forward gave %d log-probs, the command %d", sa16.n, sa32.n);
    snprintf(extra, sizeof extra, "--adapter %s", adapter_dir);
    T_CHECK(run_score(extra, outg, errs) == 0 && !errs[0], "gpu, --adapter: %s", errs);
    scores_of(&sag, outg);
    double moved, moved_mean;
    distance(sa32.v, s32.v, s32.n, &moved, &moved_mean);
    printf("  the adapter moves the fp32 log-probs by up to %.3g (mean %.3g)\n", moved, moved_mean);
    check_close("gpu, --adapter (unmerged, bf16 base)", &sag, &sa32, &sa16);
    snprintf(extra, sizeof extra, "--bf16 false --adapter %s", adapter_dir);
    T_CHECK(run_score(extra, outg, errs) == 0, "gpu, --bf16 false --adapter: %s", errs);
    T_CHECK(!strcmp(outg, outa), "--bf16 false --adapter with a GPU: not the CPU fp32 run's output");
    T_CHECK(strstr(errs, "--bf16 false") && strstr(errs, "on the CPU") && strchr(errs, '\n') == errs + strlen(errs) - 1,
            "--bf16 false --adapter with a GPU: expected one line saying the CPU scores, got: %s", errs);
}

/* A forward larger than the GPU's free memory: refused before scoring, in one line
 * naming the GPU, --batch_tokens and what to do (x and hf alone, 8 C bytes a token,
 * outgrow `free` bytes). */
static void check_too_large(size_t free) {
    char extra[64];
    snprintf(extra, sizeof extra, "--batch_tokens %zu", free / (8 * 32) + 1); /* the fixture's hidden size: 32 */
    T_CHECK(run_score(extra, outg, errs) != 0 && !outg[0], "gpu, %s: not refused (stdout: %.80s)", extra, outg);
    T_CHECK(strstr(errs, "the memory plan does not fit on") && strstr(errs, "lower --batch_tokens") &&
                strstr(errs, "--use_cpu true") && strchr(errs, '\n') == errs + strlen(errs) - 1,
            "gpu, %s: expected one line naming --batch_tokens, got: %s", extra, errs);
    printf("  %s: %s", extra, errs);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    size_t free = 0, total = 0;
    T_CHECK(dev.api.MemGetInfo(&free, &total) == CUDA_SUCCESS, "the GPU's free memory");
    gpu_close(&dev); /* the command opens its own */
    T_CHECK(run_score("", outg, errs) == 0, "gpu: %s", errs);
    T_CHECK(!errs[0], "the GPU run wrote to stderr: %s", errs);
    scores_of(&sg, outg);
    check_close("gpu", &sg, &s32, &s16);
    T_CHECK(run_score("--batch_tokens 24", outg, errs) == 0 && !errs[0], "gpu, --batch_tokens 24: %s", errs);
    scores_of(&sg, outg);
    check_close("gpu, --batch_tokens 24", &sg, &s32, &s16);
    /* fp32 products asked for: the CPU's, said in one line */
    T_CHECK(run_score("--bf16 false", outg, errs) == 0, "gpu, --bf16 false: %s", errs);
    T_CHECK(!strcmp(outg, out32), "--bf16 false with a GPU: not the CPU fp32 run's output");
    T_CHECK(strstr(errs, "--bf16 false") && strstr(errs, "on the CPU") && strchr(errs, '\n') == errs + strlen(errs) - 1,
            "--bf16 false with a GPU: expected one line saying the CPU scores, got: %s", errs);
    printf("  --bf16 false: %s", errs);
    check_too_large(free);
    check_adapter();
    check_qwen3();
}

/* The CPU's runs, fp32 and bf16 products: the reference and what the GPU computes. */
static void cpu_runs(void) {
    T_CHECK(run_score("--use_cpu true --bf16 false", out32, errs) == 0 && !errs[0], "cpu fp32: %s", errs);
    T_CHECK(run_score("--use_cpu true --bf16 true", out16, errs) == 0 && !errs[0], "cpu bf16: %s", errs);
    scores_of(&s32, out32), scores_of(&s16, out16);
    T_CHECK(s32.lines == 7 && s32.per_line[3] == 0 && s32.per_line[4] == 0 && s32.n == 5 + 12 + 4 + 20 + 7,
            "the CPU's output is not 7 lines of 5, 12, 4, 0, 0, 20, 7 scores:\n%s", out32);
}

/* No GPU (the driver not found): the command as it was, in silence. */
static void check_no_gpu(void) {
    char why[256] = "";
    GpuDevice d;
    if (gpu_open(&d, why, sizeof why, &err) != 0) {
        printf("  (a GPU is here: the no-GPU run is checked where there is none)\n");
        return;
    }
    T_CHECK(run_score("--bf16 false", outg, errs) == 0 && !errs[0], "no GPU: %s", errs);
    T_CHECK(!strcmp(outg, out32), "no GPU: the output differs from --use_cpu's");
    T_CHECK(run_score("", outg, errs) == 0 && !errs[0], "no GPU, bf16 auto: %s", errs);
    printf("  no GPU (%s): the CPU's output, nothing on stderr\n", why);
}

int main(void) {
    snprintf(out_path, sizeof out_path, "/tmp/test_gpu_score_%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/test_gpu_score_%d.err", (int)getpid());
    write_data();
    cpu_runs();
    check_no_gpu();
    int rc = gpu_test_main("test_gpu_score", check_all);
    unlink(data_path), unlink(out_path), unlink(err_path);
    return rc;
}
