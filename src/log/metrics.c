/* log/metrics.c — metric accumulation, metrics.jsonl lines and the progress line. */
#include "log/metrics.h"

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

/* s as a JSON string literal (RFC 8259: '"', '\\' and control characters escaped;
 * other bytes, UTF-8 included, as they are). */
static char *json_quote(const char *s) {
    size_t n = strlen(s);
    char *out = xmalloc(6 * n + 3), *o = out;   /* worst case: every byte as \u00XX */
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\', *o++ = (char)*p;
        else if (*p == '\n') *o++ = '\\', *o++ = 'n';
        else if (*p == '\t') *o++ = '\\', *o++ = 't';
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o++ = '"';
    *o = 0;
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

void progress_print(long step, long total, double reward, double loss, double tokens_per_s,
                    double eta_s, int is_tty) {
    char eta[32], rw[48] = "";
    fmt_eta(eta, sizeof eta, eta_s);
    if (!isnan(reward)) snprintf(rw, sizeof rw, "  reward %.4g", reward);
    fprintf(stderr, "%sstep %ld/%ld%s  loss %.4g  %.0f tok/s  ETA %s%s", is_tty ? "\r\033[K" : "", step, total, rw,
            loss, tokens_per_s, eta, is_tty ? "" : "\n");
    fflush(stderr);
}

void progress_done(int is_tty) {
    if (is_tty) fputc('\n', stderr);
}
