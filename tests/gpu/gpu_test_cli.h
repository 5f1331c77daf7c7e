/* tests/gpu/gpu_test_cli.h — running a command's entry function (cmd_score,
 * cmd_generate, cmd_train, ...) inside a GPU test, so that the command's own gpu_open
 * finds the emulated GPU the test installed: its words split from one line, stdout and
 * stderr captured into files and read back, the lines a sanitizer's runtime adds
 * ("==PID==WARNING: ASan doesn't fully support makecontext/swapcontext", the emulator's
 * coroutines under make asan) dropped from stderr. Shared by test_gpu_score,
 * test_gpu_gen and test_gpu_train. */
#ifndef GRPO_TESTS_GPU_TEST_CLI_H
#define GRPO_TESTS_GPU_TEST_CLI_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"

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

#endif
