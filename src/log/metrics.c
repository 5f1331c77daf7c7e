/* log/metrics.c — metric accumulation, metrics.jsonl lines and the progress line. */
#include "log/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void metric_acc_init(MetricAcc *a) {
    memset(a, 0, sizeof *a);
}

void metric_acc_free(MetricAcc *a) {
    for (int i = 0; i < a->n; i++) free(a->name[i]);
    memset(a, 0, sizeof *a);
}

static int find(const MetricAcc *a, const char *name) {
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->name[i], name)) return i;
    return -1;
}

void metric_add(MetricAcc *a, const char *name, double value) {
    int i = find(a, name);
    if (i < 0) {
        CHECK(a->n < METRIC_MAX);
        i = a->n++;
        a->name[i] = xstrdup(name);
        a->sum[i] = 0;
        a->count[i] = 0;
    }
    if (isnan(value)) return;
    a->sum[i] += value;
    a->count[i]++;
}

double metric_mean(const MetricAcc *a, const char *name) {
    int i = find(a, name);
    return i < 0 || a->count[i] == 0 ? NAN : a->sum[i] / a->count[i];
}

void metric_reset(MetricAcc *a) {
    for (int i = 0; i < a->n; i++) a->sum[i] = 0, a->count[i] = 0;
}

void metric_write_line(MetricAcc *a, FILE *f, long step) {
    fprintf(f, "{\"step\": %ld", step);
    for (int i = 0; i < a->n; i++) {
        if (a->count[i] == 0) fprintf(f, ", \"%s\": null", a->name[i]);
        else {
            double m = a->sum[i] / a->count[i];
            if (isfinite(m)) fprintf(f, ", \"%s\": %.10g", a->name[i], m);
            else fprintf(f, ", \"%s\": null", a->name[i]);
        }
    }
    fputs("}\n", f);
    fflush(f);
    metric_reset(a);
}

static void fmt_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
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
