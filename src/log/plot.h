/* log/plot.h — a training run's metrics.jsonl drawn as a standalone SVG: one
 * panel per metric, stacked vertically, x = step, y = value, with nice tick
 * labels, a light grid and, for a metric that has a standard deviation beside it
 * (NAME_std, or .../std for a .../mean), a shaded ±std band.
 *
 * Reading follows what `grpo train` writes (log/metrics.h): one JSON object per
 * line; lines with an "event" key or without "step" are not data. A metric's
 * series is the lines that have its key: a line without it (an evaluation's line
 * among the training lines, which shares their step numbers) is not part of it and
 * never breaks its line; a null value is a gap. A data line whose metrics are all
 * eval_* is an evaluation, counted apart from the logged training steps.
 * The SVG is our own text (no library) and is written atomically (tmp + rename).
 *
 * Errors: -1 with a one-line GrpoErr naming the file, the line and what was
 * expected. Nothing here prints. */
#ifndef GRPO_LOG_PLOT_H
#define GRPO_LOG_PLOT_H

#include "core/check.h"

typedef struct {
    char *path;        /* owned: the file name, for messages */
    int n_rows;        /* data lines: objects with a numeric "step" and no "event" */
    double *step;      /* [n_rows] in file order */
    long *line;        /* [n_rows] 1-based line number of each data line */
    int n_names;
    char **names;      /* [n_names] metric names in order of first appearance */
    double **values;   /* [n_names][n_rows]; NAN where absent or null */
    unsigned char **has; /* [n_names][n_rows]: 1 where the line has the key (a number or null) */
    int n_eval_rows;   /* data lines holding only eval_* metrics (an evaluation's line) */
    long *bad_line;    /* [n_names] first line whose value is neither a number nor null; 0: none */
} PlotLog;

/* Reads every line of path. On error *log is left empty (nothing to free).
 * A file without data lines is an error. */
int plot_log_load(PlotLog *log, const char *path, GrpoErr *err);
void plot_log_free(PlotLog *log);

/* The index of metric name, or -1 with err listing the metric names the file has. */
int plot_log_require(const PlotLog *log, const char *name, GrpoErr *err);
/* The data lines that are not evaluations: the logged training steps. */
int plot_log_train_rows(const PlotLog *log);
/* The index of metric i's standard deviation (NAME_std, or PREFIX/std for
 * PREFIX/mean), or -1 when the file has none. */
int plot_log_std_of(const PlotLog *log, int i);

#define PLOT_DEFAULT_WIDTH 900
#define PLOT_DEFAULT_PANEL_HEIGHT 285
#define PLOT_MIN_HEIGHT 600

/* Renders the metrics idx[0..n) (indices into log->names) as an SVG document
 * into a malloc'd NUL-terminated string. Fails when a metric has a value that is
 * neither a number nor null (naming its line). */
int plot_svg_render(const PlotLog *log, const int *idx, int n, char **svg, GrpoErr *err);
/* plot_svg_render, then written to out_path via out_path.tmp + rename. */
int plot_svg_write(const PlotLog *log, const int *idx, int n, const char *out_path, GrpoErr *err);

#endif
