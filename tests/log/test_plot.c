/* tests/log/test_plot.c — log/plot's reader: a metrics log long enough to grow
 * its arrays several times, with a metric that first appears late (earlier rows
 * NAN), nulls as gaps, event lines and lines without a step skipped, line
 * numbers kept, a run's eval lines told apart, and its errors with path:line (the SVG side is tested from the
 * command line in tests/cli/test_cli_plot.sh). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/plot.h"
#include "testutil.h"

static char dir[] = "/tmp/grpo-plot-XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_long_log(void) {
    enum { ROWS = 300, LATE = 250 };
    size_t cap = 64 * (ROWS + 10);
    char *text = malloc(cap);
    size_t n = 0;
    n += snprintf(text + n, cap - n, "{\"event\": \"start\", \"step\": 0}\n\n");
    for (int r = 0; r < ROWS; r++) {
        if (r == 100) n += snprintf(text + n, cap - n, "{\"note\": \"no step\"}\n");
        if (r < LATE) n += snprintf(text + n, cap - n, "{\"step\": %d, \"reward\": %d}\n", r + 1, r);
        else n += snprintf(text + n, cap - n, "{\"step\": %d, \"reward\": null, \"kl\": %d.5}\n", r + 1, r);
    }
    const char *path = write_file("metrics.jsonl", text);
    free(text);
    PlotLog log;
    GrpoErr err = {{0}};
    if (plot_log_load(&log, path, &err)) {
        T_CHECK(0, "load: %s", err.msg);
        return;
    }
    T_CHECK(log.n_rows == ROWS && log.n_names == 2, "rows %d names %d", log.n_rows, log.n_names);
    int rw = plot_log_require(&log, "reward", &err), kl = plot_log_require(&log, "kl", &err);
    T_CHECK(rw == 0 && kl == 1, "name order reward %d kl %d", rw, kl);
    int ok = 1;
    for (int r = 0; r < ROWS; r++) {
        /* lines: 1 event, 2 blank, then one per row plus the step-less line before row 100 */
        long line = 3 + r + (r >= 100);
        ok &= log.step[r] == r + 1 && log.line[r] == line;
        if (r < LATE) ok &= log.values[rw][r] == r && isnan(log.values[kl][r]);
        else ok &= isnan(log.values[rw][r]) && log.values[kl][r] == r + 0.5;
    }
    T_CHECK(ok, "steps, lines and values of every row (NAN before a metric appears and for null)");
    T_CHECK(log.bad_line[rw] == 0 && log.bad_line[kl] == 0, "no bad values");
    plot_log_free(&log);
    T_CHECK(log.n_rows == 0 && log.values == NULL, "free zeroes");
}

/* A run with evaluations: eval lines share the training lines' steps; a
 * series is the lines having its key (has), null included, and the eval lines
 * are counted apart from the training lines. */
static void test_eval_rows(void) {
    const char *path = write_file("eval.jsonl", "{\"step\": 2, \"reward\": 0.5, \"eval_note\": 1}\n"
                                                "{\"step\": 2, \"eval_reward\": 0.25}\n"
                                                "{\"step\": 4, \"reward\": null}\n"
                                                "{\"step\": 4, \"eval_reward\": null, \"eval_pass@1\": 0}\n");
    PlotLog log;
    GrpoErr err = {{0}};
    if (plot_log_load(&log, path, &err)) {
        T_CHECK(0, "load: %s", err.msg);
        return;
    }
    int rw = plot_log_require(&log, "reward", &err), ev = plot_log_require(&log, "eval_reward", &err);
    T_CHECK(log.n_rows == 4 && log.n_eval_rows == 2 && plot_log_train_rows(&log) == 2, "rows %d eval rows %d",
            log.n_rows, log.n_eval_rows);
    T_CHECK(log.has[rw][0] && !log.has[rw][1] && log.has[rw][2] && !log.has[rw][3], "reward's lines");
    T_CHECK(!log.has[ev][0] && log.has[ev][1] && !log.has[ev][2] && log.has[ev][3], "eval_reward's lines");
    T_CHECK(log.values[ev][1] == 0.25 && isnan(log.values[ev][3]) && isnan(log.values[rw][2]), "values");
    plot_log_free(&log);
}

static void test_errors(void) {
    PlotLog log;
    GrpoErr err = {{0}};
    char want[600];
    const char *path = write_file("bad.jsonl", "{\"step\": 1, \"reward\": 1}\n{\"step\": \"two\"}\n");
    snprintf(want, sizeof want, "%s:2: 'step' must be a number", path);
    T_CHECK(plot_log_load(&log, path, &err) == -1 && !strcmp(err.msg, want) && log.n_rows == 0 && !log.path,
            "%s", err.msg);
    path = write_file("bad.jsonl", "{\"step\": 1, \"reward\": 1}\n{\"step\": 2,\n");
    snprintf(want, sizeof want, "%s:2: not valid JSON", path);
    T_CHECK(plot_log_load(&log, path, &err) == -1 && !strncmp(err.msg, want, strlen(want)), "%s", err.msg);
    path = write_file("bad.jsonl", "{\"step\": 1, \"event\": \"nonfinite\"}\n");
    T_CHECK(plot_log_load(&log, path, &err) == -1 && strstr(err.msg, "bad.jsonl: no data lines"), "%s", err.msg);
    T_CHECK(plot_log_load(&log, "/nonexistent/m.jsonl", &err) == -1 &&
                strstr(err.msg, "/nonexistent/m.jsonl: cannot open"), "%s", err.msg);
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_long_log();
    test_eval_rows();
    test_errors();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return t_summary("test_plot");
}
