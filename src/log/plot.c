/* log/plot.c — metrics.jsonl in, SVG out (see plot.h).
 *
 * Is: a reader of the trainer's metrics log (its lines through io/jsonl.h), a
 * nice-number axis (Heckbert, "Nice numbers for graph labels", Graphics Gems
 * 1990) and a small SVG writer that appends text to a growing buffer.
 * Is not: a general plotting library — one layout (panels stacked vertically),
 * linear axes, no legend beyond each panel's title. */
#include "log/plot.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "io/jsonl.h"

/* ---------------------------------------------------------------- reading */

void plot_log_free(PlotLog *log) {
    for (int i = 0; i < log->n_names; i++) free(log->names[i]), free(log->values[i]), free(log->has[i]);
    free(log->path), free(log->step), free(log->line), free(log->names), free(log->values), free(log->has);
    free(log->bad_line);
    memset(log, 0, sizeof *log);
}

static int find_name(const PlotLog *log, const char *name) {
    for (int i = 0; i < log->n_names; i++)
        if (!strcmp(log->names[i], name)) return i;
    return -1;
}

/* The index of name, registering it (all-NAN values) on first sight; rows_cap is
 * the capacity of every values[i]. */
static int add_name(PlotLog *log, const char *name, int rows_cap) {
    int i = find_name(log, name);
    if (i >= 0) return i;
    i = log->n_names++;
    log->names = xrealloc(log->names, sizeof(char *) * log->n_names);
    log->values = xrealloc(log->values, sizeof(double *) * log->n_names);
    log->bad_line = xrealloc(log->bad_line, sizeof(long) * log->n_names);
    log->has = xrealloc(log->has, sizeof(unsigned char *) * log->n_names);
    log->names[i] = xstrdup(name);
    log->has[i] = xcalloc(rows_cap ? rows_cap : 1, 1);
    log->values[i] = xmalloc(sizeof(double) * (rows_cap ? rows_cap : 1));
    for (int r = 0; r < rows_cap; r++) log->values[i][r] = NAN;
    log->bad_line[i] = 0;
    return i;
}

typedef struct {
    PlotLog *log;
    int rows_cap;   /* capacity of step, line and every values[i] */
} Loading;

/* Makes room for one more data row, NAN in every metric. */
static void grow_rows(Loading *l) {
    PlotLog *log = l->log;
    if (log->n_rows < l->rows_cap) return;
    int cap = 2 * l->rows_cap + 64;
    log->step = xrealloc(log->step, sizeof(double) * cap);
    log->line = xrealloc(log->line, sizeof(long) * cap);
    for (int i = 0; i < log->n_names; i++) {
        log->values[i] = xrealloc(log->values[i], sizeof(double) * cap);
        log->has[i] = xrealloc(log->has[i], cap);
        for (int r = l->rows_cap; r < cap; r++) log->values[i][r] = NAN, log->has[i][r] = 0;
    }
    l->rows_cap = cap;
}

static int add_line(json_t *o, long line, void *ctx, GrpoErr *err) {
    Loading *l = ctx;
    PlotLog *log = l->log;
    const json_t *st = json_object_get(o, "step");
    /* an event (e.g. a non-finite step), the closing summary of a run (train_runtime,
     * train_loss, ... as transformers logs it at the end) or a line that is not a step's metrics */
    if (json_object_get(o, "event") || json_object_get(o, "train_runtime") || !st) return 0;
    if (!json_is_number(st)) return err_set(err, "'step' must be a number");
    grow_rows(l);
    int r = log->n_rows++;
    log->step[r] = json_number_value(st);
    log->line[r] = line;
    const char *key;
    json_t *v;
    int metrics = 0, eval = 0;
    json_object_foreach(o, key, v) {
        if (!strcmp(key, "step")) continue;
        int i = add_name(log, key, l->rows_cap);
        log->has[i][r] = 1;
        /* the epoch is in every line, an evaluation's too (transformers' log() adds it) */
        if (strcmp(key, "epoch")) metrics++, eval += !strncmp(key, "eval_", 5);
        if (json_is_number(v)) log->values[i][r] = json_number_value(v);
        else if (!json_is_null(v) && !log->bad_line[i]) log->bad_line[i] = line;
    }
    log->n_eval_rows += metrics > 0 && eval == metrics;
    return 0;
}

int plot_log_load(PlotLog *log, const char *path, GrpoErr *err) {
    memset(log, 0, sizeof *log);
    log->path = xstrdup(path);
    Loading l = {log, 0};
    int rc = jsonl_read(path, add_line, &l, err) < 0 ? -1 : 0;
    if (!rc && log->n_rows == 0)
        rc = err_set(err, "%s: no data lines (JSON objects with a \"step\" and no \"event\")", path);
    if (rc) plot_log_free(log);
    return rc;
}

int plot_log_require(const PlotLog *log, const char *name, GrpoErr *err) {
    int i = find_name(log, name);
    if (i >= 0) return i;
    int n = snprintf(err->msg, sizeof err->msg, "%s: no metric '%s'; the file has:", log->path, name);
    for (int k = 0; k < log->n_names && n >= 0 && n < (int)sizeof err->msg; k++)
        n += snprintf(err->msg + n, sizeof err->msg - n, "%s %s", k ? "," : "", log->names[k]);
    return -1;
}

int plot_log_train_rows(const PlotLog *log) { return log->n_rows - log->n_eval_rows; }

int plot_log_std_of(const PlotLog *log, int i) {
    const char *name = log->names[i];
    size_t n = strlen(name);
    char *want = xmalloc(n + 8);
    if (n >= 5 && !strcmp(name + n - 5, "/mean")) snprintf(want, n + 8, "%.*s/std", (int)(n - 5), name);
    else snprintf(want, n + 8, "%s_std", name);
    int k = find_name(log, want);
    free(want);
    return k;
}

/* ---------------------------------------------------------------- SVG text */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void __attribute__((format(printf, 2, 3))) bprintf(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        CHECK(k >= 0);
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap * 2 + (size_t)k + 1;
        b->p = xrealloc(b->p, b->cap);
    }
}

/* s with & < > " ' escaped, for text and attribute values. */
static void bescape(Buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': bprintf(b, "&amp;"); break;
        case '<': bprintf(b, "&lt;"); break;
        case '>': bprintf(b, "&gt;"); break;
        case '"': bprintf(b, "&quot;"); break;
        case '\'': bprintf(b, "&apos;"); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            if ((unsigned char)*s >= 0x20 || *s == '\t') bprintf(b, "%c", *s);
            else bprintf(b, "?");
        }
    }
}

/* ---------------------------------------------------------------- axes */

/* A "nice" number near x: 1, 2 or 5 times a power of ten (Heckbert). */
static double nice_num(double x, int round) {
    double e = floor(log10(x)), f = x / pow(10, e), nf;
    if (round) nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nf * pow(10, e);
}

typedef struct {
    double lo, hi;   /* the axis range shown */
    double tick;     /* spacing of the tick labels */
    int decimals;    /* digits after the point in the labels; -1: %g */
} Axis;

/* An axis over [lo, hi] with about n_ticks labels. expand: widen the range to
 * whole ticks (y); otherwise keep it (x, so the line spans the width).
 * min_tick: the smallest spacing allowed (1 for steps). */
static Axis axis_make(double lo, double hi, int n_ticks, int expand, double min_tick) {
    Axis a;
    if (hi - lo <= fabs(hi) * 1e-12 || hi - lo <= 1e-300) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
        if (min_tick > 0 && pad < min_tick) pad = min_tick;
        lo -= pad, hi += pad;
    }
    a.tick = nice_num(nice_num(hi - lo, 0) / (n_ticks - 1), 1);
    if (a.tick < min_tick) a.tick = min_tick;
    a.lo = expand ? floor(lo / a.tick) * a.tick : lo;
    a.hi = expand ? ceil(hi / a.tick) * a.tick : hi;
    double big = fmax(fabs(a.lo), fabs(a.hi));
    int d = (int)-floor(log10(a.tick) + 1e-9);
    a.decimals = big >= 1e6 || a.tick < 1e-4 ? -1 : d > 0 ? d : 0;
    return a;
}

static void axis_label(const Axis *a, double v, char *buf, size_t n) {
    if (fabs(v) < a->tick * 1e-9) v = 0; /* no "-0" */
    if (a->decimals < 0) snprintf(buf, n, "%.4g", v);
    else snprintf(buf, n, "%.*f", a->decimals, v);
}

/* ---------------------------------------------------------------- panels */

static const char *const PALETTE[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

#define MARGIN_LEFT 84
#define MARGIN_RIGHT 28
#define HEADER_H 30
#define PLOT_MARKERS_MAX 60 /* points up to which each one gets a marker */
#define FONT "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\""

typedef struct {
    double left, right, top, bottom; /* the plot box in pixels */
    Axis x, y;
} Frame;

static double px(const Frame *f, double x) {
    return f->left + (x - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left);
}
static double py(const Frame *f, double y) {
    return f->bottom - (y - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top);
}

/* Grid, tick labels and axis labels of one panel. */
static void draw_axes(Buf *b, const Frame *f, const char *ylabel) {
    char lab[64];
    bprintf(b, "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n");
    for (double v = ceil(f->x.lo / f->x.tick - 1e-9) * f->x.tick; v <= f->x.hi + f->x.tick * 1e-9; v += f->x.tick)
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px(f, v), f->top, px(f, v), f->bottom);
    for (double v = f->y.lo; v <= f->y.hi + f->y.tick * 1e-9; v += f->y.tick)
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", f->left, py(f, v), f->right, py(f, v));
    bprintf(b, "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#9a9a9a\"/>\n",
            f->left, f->top, f->right - f->left, f->bottom - f->top);
    bprintf(b, "<g class=\"xticks\" " FONT " font-size=\"11\" fill=\"#444\" text-anchor=\"middle\">\n");
    for (double v = ceil(f->x.lo / f->x.tick - 1e-9) * f->x.tick; v <= f->x.hi + f->x.tick * 1e-9; v += f->x.tick) {
        axis_label(&f->x, v, lab, sizeof lab);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", px(f, v), f->bottom + 15, lab);
    }
    bprintf(b, "</g>\n<g class=\"yticks\" " FONT " font-size=\"11\" fill=\"#444\" text-anchor=\"end\">\n");
    for (double v = f->y.lo; v <= f->y.hi + f->y.tick * 1e-9; v += f->y.tick) {
        axis_label(&f->y, v, lab, sizeof lab);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", f->left - 6, py(f, v) + 4, lab);
    }
    bprintf(b, "</g>\n<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" " FONT
               " font-size=\"12\" fill=\"#222\" text-anchor=\"middle\">step</text>\n",
            (f->left + f->right) / 2, f->bottom + 33);
    double cy = (f->top + f->bottom) / 2;
    bprintf(b, "<text class=\"ylabel\" x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" " FONT
               " font-size=\"12\" fill=\"#222\" text-anchor=\"middle\">", cy, cy);
    bescape(b, ylabel);
    bprintf(b, "</text>\n");
}

/* One panel: metric m (with band metric sd, or -1) in the box starting at y0.
 * Its series is the rows that have its key (PlotLog.has), in file order: a row
 * without it is not a gap, a null value is. */
static void draw_panel(Buf *b, const PlotLog *log, int m, int sd, int k, double y0, double width,
                       double height) {
    const char *color = PALETTE[k % (int)(sizeof PALETTE / sizeof PALETTE[0])];
    int n = 0, n_pts = 0, last = -1;
    double *x = xmalloc(sizeof(double) * (log->n_rows + 1)), *y = xmalloc(sizeof(double) * (log->n_rows + 1));
    double *s = sd >= 0 ? xmalloc(sizeof(double) * (log->n_rows + 1)) : NULL;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int r = 0; r < log->n_rows; r++) {
        xlo = fmin(xlo, log->step[r]), xhi = fmax(xhi, log->step[r]);
        if (!log->has[m][r]) continue;
        x[n] = log->step[r], y[n] = log->values[m][r];
        if (s) s[n] = log->values[sd][r];
        n++;
    }
    for (int r = 0; r < n; r++) {
        if (!isfinite(y[r])) continue;
        n_pts++, last = r;
        double sv = s && isfinite(s[r]) ? fabs(s[r]) : 0;
        ylo = fmin(ylo, y[r] - sv), yhi = fmax(yhi, y[r] + sv);
    }
    if (!n_pts) ylo = 0, yhi = 1;
    Frame f = {.left = MARGIN_LEFT, .right = width - MARGIN_RIGHT, .top = y0 + 30, .bottom = y0 + height - 48};
    f.x = axis_make(xlo, xhi, 8, 0, 1);
    f.y = axis_make(ylo, yhi, 5, 1, 0);

    bprintf(b, "<g class=\"panel\" data-metric=\"");
    bescape(b, log->names[m]);
    bprintf(b, "\">\n<text class=\"title\" x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"14\" font-weight=\"bold\" fill=\"#111\">",
            f.left, y0 + 20);
    bescape(b, log->names[m]);
    if (s) {
        bprintf(b, "<tspan dx=\"8\" font-weight=\"normal\" font-size=\"12\" fill=\"#666\">(band: \xc2\xb1 ");
        bescape(b, log->names[sd]);
        bprintf(b, ")</tspan>");
    }
    bprintf(b, "</text>\n<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"12\" fill=\"#555\" text-anchor=\"end\">", f.right,
            y0 + 20);
    if (last >= 0) bprintf(b, "last %.4g at step %.10g, %d point%s", y[last], x[last], n_pts, n_pts == 1 ? "" : "s");
    else bprintf(b, "no values");
    bprintf(b, "</text>\n");
    draw_axes(b, &f, log->names[m]);

    /* the ±std band: one closed polygon per run of points having both values */
    for (int r = 0; s && r < n;) {
        if (!isfinite(y[r]) || !isfinite(s[r])) {
            r++;
            continue;
        }
        int e = r;
        while (e + 1 < n && isfinite(y[e + 1]) && isfinite(s[e + 1])) e++;
        if (e > r) {
            bprintf(b, "<path class=\"band\" fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" d=\"", color);
            for (int i = r; i <= e; i++) bprintf(b, "%s%.1f,%.1f", i == r ? "M" : " L", px(&f, x[i]), py(&f, y[i] + fabs(s[i])));
            for (int i = e; i >= r; i--) bprintf(b, " L%.1f,%.1f", px(&f, x[i]), py(&f, y[i] - fabs(s[i])));
            bprintf(b, " Z\"/>\n");
        } else { /* a lone point: an error bar */
            bprintf(b, "<path class=\"band\" stroke=\"%s\" stroke-opacity=\"0.5\" stroke-width=\"3\" d=\"M%.1f,%.1f L%.1f,%.1f\"/>\n",
                    color, px(&f, x[r]), py(&f, y[r] + fabs(s[r])), px(&f, x[r]), py(&f, y[r] - fabs(s[r])));
        }
        r = e + 1;
    }
    /* the line: a null starts a new subpath */
    if (n_pts) {
        bprintf(b, "<path class=\"line\" data-metric=\"");
        bescape(b, log->names[m]);
        bprintf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\" d=\"", color);
        for (int r = 0, prev = 0, first = 1; r < n; r++) {
            if (!isfinite(y[r])) {
                prev = 0;
                continue;
            }
            bprintf(b, "%s%s%.1f,%.1f", first ? "" : " ", prev ? "L" : "M", px(&f, x[r]), py(&f, y[r]));
            prev = 1, first = 0;
        }
        bprintf(b, "\"/>\n");
        /* markers on every point of a sparse series; otherwise only where a
         * point has gaps on both sides and so draws no line */
        for (int r = 0; r < n; r++) {
            if (!isfinite(y[r])) continue;
            int alone = !(r > 0 && isfinite(y[r - 1])) && !(r + 1 < n && isfinite(y[r + 1]));
            if (!alone && n_pts > PLOT_MARKERS_MAX) continue;
            bprintf(b, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px(&f, x[r]), py(&f, y[r]),
                    color);
        }
    } else {
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"13\" fill=\"#888\" text-anchor=\"middle\">"
                   "no values (null on every line)</text>\n",
                (f.left + f.right) / 2, (f.top + f.bottom) / 2);
    }
    bprintf(b, "</g>\n");
    free(x), free(y), free(s);
}

int plot_svg_render(const PlotLog *log, const int *idx, int n, char **svg, GrpoErr *err) {
    for (int k = 0; k < n; k++) {
        int m = idx[k];
        if (log->bad_line[m])
            return err_set(err, "%s:%ld: '%s' must be a number or null", log->path, log->bad_line[m], log->names[m]);
    }
    /* panels share at least PLOT_MIN_HEIGHT: one panel alone is not a strip */
    double width = PLOT_DEFAULT_WIDTH, panel_h = PLOT_DEFAULT_PANEL_HEIGHT;
    if (n > 0 && panel_h * n < PLOT_MIN_HEIGHT - HEADER_H) panel_h = (double)(PLOT_MIN_HEIGHT - HEADER_H) / n;
    double height = HEADER_H + n * panel_h;
    Buf b = {xmalloc(4096), 0, 4096};
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            width, height, width, height);
    const char *base = strrchr(log->path, '/');
    base = base ? base + 1 : log->path;
    bprintf(&b, "<title>grpo plot: ");
    bescape(&b, base);
    bprintf(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    bprintf(&b, "<text x=\"%d\" y=\"20\" " FONT " font-size=\"12\" fill=\"#666\">", MARGIN_LEFT);
    bescape(&b, base);
    int n_train = plot_log_train_rows(log);
    bprintf(&b, " \xe2\x80\x94 %d logged step%s", n_train, n_train == 1 ? "" : "s");
    if (log->n_eval_rows) bprintf(&b, ", %d evaluation%s", log->n_eval_rows, log->n_eval_rows == 1 ? "" : "s");
    bprintf(&b, "</text>\n");
    for (int k = 0; k < n; k++)
        draw_panel(&b, log, idx[k], plot_log_std_of(log, idx[k]), k, HEADER_H + k * panel_h, width, panel_h);
    bprintf(&b, "</svg>\n");
    *svg = b.p;
    return 0;
}

int plot_svg_write(const PlotLog *log, const int *idx, int n, const char *out_path, GrpoErr *err) {
    char *svg = NULL;
    if (plot_svg_render(log, idx, n, &svg, err)) return -1;
    int rc = fs_write_file_atomic(out_path, svg, strlen(svg), err);
    free(svg);
    return rc;
}
