/* log/metrics.c — metric accumulation, metrics.jsonl lines and the progress line. */
#include "log/metrics.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void metric_acc_init(MetricAcc *a) {
    memset(a, 0, sizeof *a);
}

void metric_acc_free(MetricAcc *a) {
    for (int i = 0; i < a->n; i++) free(a->m[i].name), free(a->m[i].json_name);
    free(a->m);
    memset(a, 0, sizeof *a);
}

static int find(const MetricAcc *a, const char *name) {
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->m[i].name, name)) return i;
    return -1;
}

/* s as a JSON string literal, written by jansson. A name that is not valid
 * UTF-8 (a script's file name can be anything) has its non-ASCII bytes shown
 * as '?': the line stays valid JSON. */
static char *json_quote(const char *s) {
    json_t *j = json_string(s);
    if (!j) {
        char *ascii = xstrdup(s);
        for (char *p = ascii; *p; p++)
            if ((unsigned char)*p >= 0x80) *p = '?';
        j = json_string(ascii);
        free(ascii);
    }
    char *out = json_dumps(j, JSON_ENCODE_ANY);
    json_decref(j);
    CHECK(out);
    return out;
}

void metric_add(MetricAcc *a, const char *name, double value) {
    int i = find(a, name);
    if (i < 0) {
        if (a->n == a->cap) {
            a->cap = a->cap ? 2 * a->cap : 32;
            a->m = xrealloc(a->m, sizeof *a->m * a->cap);
        }
        i = a->n++;
        a->m[i] = (Metric){xstrdup(name), json_quote(name), 0, 0};
    }
    if (isnan(value)) return;
    a->m[i].sum += value;
    a->m[i].count++;
}

void metric_set(MetricAcc *a, const char *name, double value) {
    metric_add(a, name, NAN); /* its place, when new */
    Metric *m = &a->m[find(a, name)];
    m->sum = isnan(value) ? 0 : value;
    m->count = !isnan(value);
}

double metric_mean(const MetricAcc *a, const char *name) {
    int i = find(a, name);
    return i < 0 || a->m[i].count == 0 ? NAN : a->m[i].sum / a->m[i].count;
}

void metric_reset(MetricAcc *a) {
    for (int i = 0; i < a->n; i++) a->m[i].sum = 0, a->m[i].count = 0;
}

int metric_write_line(MetricAcc *a, FILE *f, long step) {
    fprintf(f, "{\"step\": %ld", step);
    for (int i = 0; i < a->n; i++) {
        const Metric *m = &a->m[i];
        double mean = m->count ? m->sum / m->count : NAN;
        if (isfinite(mean)) fprintf(f, ", %s: %.10g", m->json_name, mean);
        else fprintf(f, ", %s: null", m->json_name);
    }
    fputs("}\n", f);
    metric_reset(a);
    return fflush(f) || ferror(f) ? -1 : 0;
}

static void fmt_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

int metric_write_nonfinite(FILE *f, long step, double loss, double grad_norm) {
    fprintf(f, "{\"step\": %ld, \"event\": \"nonfinite\", \"loss\": %s, \"grad_norm\": %s}\n", step,
            isfinite(loss) ? "\"finite\"" : "null", isfinite(grad_norm) ? "\"finite\"" : "null");
    return fflush(f) || ferror(f) ? -1 : 0;
}

void progress_print(const Progress *p, int is_tty) {
    if (!is_tty && !p->logged) return;
    char eta[32], el[32], rw[48] = "";
    fmt_eta(eta, sizeof eta, p->eta_s);
    fmt_eta(el, sizeof el, p->elapsed_s);
    if (!isnan(p->reward)) snprintf(rw, sizeof rw, "  reward %.4g", p->reward);
    double frac = p->total > 0 ? (double)p->step / p->total : 0;
    int pct = (int)(100 * frac);
    if (is_tty) {
        enum { W = 20 };
        char bar[W + 1];
        int fill = (int)(W * frac);
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = 0;
        fprintf(stderr, "\r\033[K[%s] %3d%%  %ld/%ld  %s<%s  %.0f tok/s%s  loss %.4g", bar, pct, p->step, p->total, el,
                eta, p->tokens_per_s, rw, p->loss);
    } else {
        fprintf(stderr, "step %ld/%ld (%d%%)%s  loss %.4g  %.0f tok/s  elapsed %s  ETA %s\n", p->step, p->total, pct, rw,
                p->loss, p->tokens_per_s, el, eta);
    }
    fflush(stderr);
}

void progress_done(int is_tty) {
    if (is_tty) fputc('\n', stderr);
}
