/* tests/gpu/gpu_test_cli.h — running a command's entry function (cmd_score,
 * cmd_generate, cmd_train, ...) inside a GPU test, so that the command's own gpu_open
 * finds the emulated GPU the test installed: its words split from one line, stdout and
 * stderr captured into files and read back, the lines a sanitizer's runtime adds
 * ("==PID==WARNING: ASan doesn't fully support makecontext/swapcontext", the emulator's
 * coroutines under make asan) dropped from stderr. Shared by test_gpu_score,
 * test_gpu_gen and test_gpu_train; the training tests (test_gpu_train, _train_lora,
 * _train_opts, _recompute) also share what their runs start from: the model a fixture's
 * config makes with the byte tokenizer, the datasets, and the comparisons of two runs'
 * files. */
#ifndef GRPO_TESTS_GPU_TEST_CLI_H
#define GRPO_TESTS_GPU_TEST_CLI_H

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/model_io.h"
#include "testutil.h"

/* buf[cap] = the file's first cap - 1 bytes ("" when it cannot be read). */
static inline void gpu_test_slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

/* buf without a sanitizer's lines and, with timing, without the lines that carry a
 * timing figure ("tokens/s", a progress line ending " s"): what a run says that does not
 * change from run to run. An error of the sanitizer's stops the test anyway. */
static inline void gpu_test_keep_own_lines(char *buf, int timing) {
    char *w = buf;
    for (char *r = buf; *r;) {
        char *end = strchr(r, '\n');
        size_t len = end ? (size_t)(end - r) + 1 : strlen(r);
        int timed = timing && (memmem(r, len, "tokens/s", 8) || memmem(r, len, " s\n", 3));
        if (strncmp(r, "==", 2) && !timed) memmove(w, r, len), w += len;
        r += len;
    }
    *w = 0;
}

/* fn on the space-separated words of line (up to 63), its stdout into the file
 * out_path (NULL: /dev/null) and then out[cap] (when out is not NULL), its stderr into
 * err_path and then errs[cap], the sanitizer's lines dropped; the exit status. */
static inline int gpu_test_run_entry(int (*fn)(int, char **), const char *line_in, const char *out_path,
                                     const char *err_path, char *out, char *errs, size_t cap) {
    char line[2048], *argv[64];
    snprintf(line, sizeof line, "%s", line_in);
    int argc = 0;
    for (char *t = strtok(line, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    fflush(stdout), fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1), dup2(fe, 2);
    close(fo), close(fe);
    int rc = fn(argc, argv);
    args_free();
    fflush(stdout), fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    close(so), close(se);
    if (out && out_path) gpu_test_slurp(out_path, out, cap);
    gpu_test_slurp(err_path, errs, cap);
    gpu_test_keep_own_lines(errs, 0);
    return rc;
}

/* The bytes of two files equal (both readable, not empty; the first 1 MiB compared). */
static inline int gpu_test_same_file(const char *a, const char *b) {
    static char x[1 << 20], y[1 << 20];
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    size_t n = f ? fread(x, 1, sizeof x, f) : 0, m = g ? fread(y, 1, sizeof y, g) : 0;
    int same = f && g && n == m && n > 0 && !memcmp(x, y, n);
    if (f) fclose(f);
    if (g) fclose(g);
    return same;
}

/* File b's bytes are the end of file a's (a resumed run's log against the whole run's). */
static inline int gpu_test_file_ends(const char *a, const char *b) {
    static char x[1 << 16], y[1 << 16];
    gpu_test_slurp(a, x, sizeof x), gpu_test_slurp(b, y, sizeof y);
    size_t n = strlen(x), m = strlen(y);
    return m > 0 && m < n && !memcmp(x + n - m, y, m);
}

/* ---- the training tests' runs, in a scratch directory dir ---- */

/* The size of the stderr buffers gpu_test_run fills. */
enum { GPU_TEST_ERRS = 1 << 16 };

/* fn (a command's entry) on the words of the printf-made line, its stdout dropped, its
 * stderr into dir/stderr and then errs[GPU_TEST_ERRS]; the exit status. */
static inline int gpu_test_run(const char *dir, char *errs, int (*fn)(int, char **), const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int gpu_test_run(const char *dir, char *errs, int (*fn)(int, char **), const char *fmt, ...) {
    char line[2048], path[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(path, sizeof path, "%s/stderr", dir);
    return gpu_test_run_entry(fn, line, NULL, path, NULL, errs, GPU_TEST_ERRS);
}

/* tests/fixtures/NAME's config (vocab_size 96, eos 2) given the byte tokenizer's
 * vocabulary and eos (300, 258) in dir/NAME.json, and grpo init's model of it (seed 1)
 * in dir/out; stderr into errs[GPU_TEST_ERRS]. */
static inline void gpu_test_make_model(const char *dir, char *errs, const char *name, const char *out) {
    char path[512], cfg[8192], *p;
    snprintf(path, sizeof path, "tests/fixtures/%s/config.json", name);
    gpu_test_slurp(path, cfg, sizeof cfg);
    T_CHECK((p = strstr(cfg, "\"vocab_size\": 96")) != NULL, "%s: no vocab_size 96", path);
    if (p) memmove(p + 17, p + 16, strlen(p + 16) + 1), memcpy(p + 14, "300", 3);
    T_CHECK((p = strstr(cfg, "\"eos_token_id\": 2,")) != NULL, "%s: no eos_token_id 2", path);
    if (p) memmove(p + 19, p + 17, strlen(p + 17) + 1), memcpy(p + 16, "258", 3);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    fputs(cfg, f);
    fclose(f);
    T_CHECK(!gpu_test_run(dir, errs, cmd_init,
                          "init --config %s --tokenizer assets/byte-tokenizer --seed 1 --output_dir %s/%s", path, dir,
                          out),
            "init %s: %s", name, errs);
}

/* The runs' datasets: dir/d.jsonl, two GRPO prompts with answers; dir/s.jsonl, SFT's
 * texts and prompt-completion pairs. */
static inline void gpu_test_write_data(const char *dir) {
    char path[300];
    snprintf(path, sizeof path, "%s/d.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"prompt\": \"ab\", \"answer\": \"1\"}\n{\"prompt\": \"cd\", \"answer\": \"2\"}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/s.jsonl", dir);
    f = fopen(path, "w");
    fputs("{\"text\": \"hello world\"}\n{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n{\"text\": \"abc abd\"}\n"
          "{\"prompt\": \"x\", \"completion\": \"yz yz\"}\n", f);
    fclose(f);
}

/* The bytes of dir/a/file and dir/b/file equal (gpu_test_same_file). */
static inline int gpu_test_same_in(const char *dir, const char *a, const char *b, const char *file) {
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/%s/%s", dir, a, file), snprintf(pb, sizeof pb, "%s/%s/%s", dir, b, file);
    return gpu_test_same_file(pa, pb);
}

/* The rollouts of two GRPO runs, dir/a_dir and dir/b_dir: completions.jsonl's bytes (each
 * completion's ids, its rewards and advantage, step by step) the same. */
static inline void gpu_test_check_rollouts(const char *dir, const char *what, const char *a_dir, const char *b_dir) {
    int same = gpu_test_same_in(dir, a_dir, b_dir, "completions.jsonl");
    T_CHECK(same, "%s: completions.jsonl differs (%s against %s)", what, b_dir, a_dir);
    if (same) printf("  %s: completions.jsonl the same bytes (ids, rewards, advantages)\n", what);
}

/* The keys of each line of dir/run/metrics.jsonl, in order, values dropped, into out[cap]
 * ("k1,k2,...,"; cut short 200 bytes before cap). */
static inline void gpu_test_metric_keys(const char *dir, const char *run, char *out, size_t cap) {
    static char text[1 << 16];
    char path[600];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, run);
    gpu_test_slurp(path, text, sizeof text);
    char *w = out;
    for (const char *p = text; *p && (size_t)(w - out) + 200 < cap; p++) {
        if (*p != '"') continue;
        const char *end = strchr(p + 1, '"');
        if (!end) break;
        if (end[1] == ':') w += sprintf(w, "%.*s,", (int)(end - p - 1), p + 1);
        p = end;
    }
    *w = 0;
}

/* Every value of "key" in dir/run/metrics.jsonl, in order, into v (at most max): their
 * count. */
static inline int gpu_test_metric_values(const char *dir, const char *run, const char *key, double *v, int max) {
    static char text[1 << 16];
    char path[600], quoted[64];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, run);
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    gpu_test_slurp(path, text, sizeof text);
    int n = 0;
    for (const char *q = text; n < max && (q = strstr(q, quoted)); q++) v[n++] = strtod(q + strlen(quoted), NULL);
    return n;
}

/* ---- two runs' weights, a tensor of numel values at a time ---- */

/* What training moved from a0, the GPU's run y against the CPU's x: each element within
 * 5e-2 max|x - a0| + 2e-2 |x - a0|, and 2e-2 of the CPU's move in norm (two checks, named
 * by what and the tensor's name; a tensor the CPU left where it was must stay put on the
 * GPU too, and with must_move it is a failure); *worst and *worst_norm raised to this
 * tensor's largest error per element (of max|x - a0|) and in norm. 1 when the CPU moved it. */
static inline int gpu_test_check_move(const char *what, const char *name, const float *a0, const float *x,
                                      const float *y, size_t numel, int must_move, double *worst, double *worst_norm) {
    double top = 0, e2 = 0, c2 = 0;
    long bad = 0;
    for (size_t k = 0; k < numel; k++) top = fmax(top, fabs((double)x[k] - a0[k]));
    for (size_t k = 0; k < numel; k++) {
        double dc = (double)x[k] - a0[k], dg = (double)y[k] - a0[k], d = fabs(dg - dc);
        bad += !(d <= 5e-2 * top + 2e-2 * fabs(dc));
        e2 += d * d, c2 += dc * dc;
        if (top > 0) *worst = fmax(*worst, d / top);
    }
    double rel = c2 > 0 ? sqrt(e2 / c2) : sqrt(e2);
    *worst_norm = fmax(*worst_norm, rel);
    T_CHECK(top > 0 || !must_move, "%s: %s did not move on the CPU", what, name);
    T_CHECK(!bad && rel <= 2e-2, "%s: %s: %ld elements out of the bound, error norm %.3g of the move's", what, name,
            bad, rel);
    return top > 0;
}

/* max |x - y| / max |y| (max |x - y| where y is all 0): two splits of one batch apart. */
static inline double gpu_test_split_gap(const float *x, const float *y, size_t numel) {
    double top = 0, d = 0;
    for (size_t k = 0; k < numel; k++) top = fmax(top, fabs(y[k])), d = fmax(d, fabs((double)x[k] - y[k]));
    return top > 0 ? d / top : d;
}

/* A run's saved weights, dir/sub (fp32): ok 0 when they could not be read (a failed check). */
typedef struct {
    Model m;
    int ok;
} GpuTestWeights;

static inline void gpu_test_weights_load(GpuTestWeights *w, const char *dir, const char *sub) {
    char path[600];
    GrpoErr e;
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    w->ok = !model_load_ex(&w->m, path, WEIGHTS_FP32, &e);
    T_CHECK(w->ok, "%s: %s", path, e.msg);
}

static inline void gpu_test_weights_free(GpuTestWeights *w) {
    if (w->ok) model_free(&w->m);
    w->ok = 0;
}

/* What training moved from dir/init, the GPU's run dir/gpu against the CPU's dir/cpu, each
 * tensor in gpu_test_check_move's bound (must_move: every tensor moved on the CPU); a line
 * with the worst errors. The number of tensors the CPU moved, of *n. */
static inline int gpu_test_check_moved(const char *dir, const char *what, const char *init, const char *cpu,
                                       const char *gpu, int must_move, int *n) {
    GpuTestWeights i0, c, g;
    gpu_test_weights_load(&i0, dir, init), gpu_test_weights_load(&c, dir, cpu), gpu_test_weights_load(&g, dir, gpu);
    double worst = 0, worst_norm = 0;
    int moved = 0;
    *n = 0;
    if (i0.ok && c.ok && g.ok) {
        const ParamTable *t = &c.m.table;
        *n = t->n;
        for (int e = 0; e < t->n; e++) {
            const ParamEntry *pe = &t->entries[e];
            moved += gpu_test_check_move(what, pe->name, i0.m.params + pe->offset, c.m.params + pe->offset,
                                         g.m.params + pe->offset, pe->numel, must_move, &worst, &worst_norm);
        }
        printf("  %s: %d of %d tensors moved; the GPU's moves within %.3g max|cpu's| per element, %.3g in norm "
               "(worst tensors)\n", what, moved, t->n, worst, worst_norm);
    }
    gpu_test_weights_free(&i0), gpu_test_weights_free(&c), gpu_test_weights_free(&g);
    return moved;
}

/* ---- multi-turn runs' files (test_gpu_train_tools, test_gpu_train_env) ---- */

/* dir/name := text. */
static inline void gpu_test_write(const char *dir, const char *name, const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL, "cannot write %s", path);
    if (f) fputs(text, f), fclose(f);
}

/* dir/file: an executable command (one word, as tool_command and environment_command take
 * it) that runs `python3 dir/script dir/run.log`: run's own log of the requests. */
static inline void gpu_test_write_command(const char *dir, const char *file, const char *script, const char *run) {
    char text[1000], path[600];
    snprintf(text, sizeof text, "#!/bin/sh\nexec python3 '%s/%s' '%s/%s.log'\n", dir, script, dir, run);
    gpu_test_write(dir, file, text);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    chmod(path, 0700);
}

/* The turns ([start, end) pairs of tool_spans) in dir/run/completions.jsonl; *most (when
 * not NULL): the most in one completion. */
static inline int gpu_test_turn_spans(const char *dir, const char *run, int *most) {
    static char text[1 << 20];
    char path[600];
    snprintf(path, sizeof path, "%s/%s/completions.jsonl", dir, run);
    gpu_test_slurp(path, text, sizeof text);
    int n = 0, top = 0;
    for (const char *p = text; (p = strstr(p, "\"tool_spans\":["));) {
        p += strlen("\"tool_spans\":[");
        int here = 0;
        for (int depth = 1; *p && depth > 0; p++) {
            if (*p == '[') depth++, here++;
            if (*p == ']') depth--;
        }
        n += here;
        if (here > top) top = here;
    }
    if (most) *most = top;
    return n;
}

/* ---- the scratch directory ---- */

/* tmp[n] = /tmp/NAME_PID, made. */
static inline void gpu_test_tmp_make(char *tmp, size_t n, const char *name) {
    snprintf(tmp, n, "/tmp/%s_%d", name, (int)getpid());
    mkdir(tmp, 0700);
}

/* tmp and all it holds removed (a line said when it cannot be). */
static inline void gpu_test_tmp_remove(const char *tmp) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) printf("could not remove %s\n", tmp);
}

#endif
