/* tests/log/test_metrics.c — MetricAcc and its metrics.jsonl lines, read back with
 * jansson's parser (an independent JSON reader):
 *  - 200 distinct names (more than any fixed table held) keep their order of first
 *    appearance and their means; NaN observations are skipped, a metric with none
 *    is written as null; writing a line resets the sums;
 *  - names with '"', '\', newline, tab, other control bytes and UTF-8 round-trip;
 *    a name that is not UTF-8 still gives a valid line;
 *  - metric_set keeps the last value, not a mean (the epoch at the logging step), in
 *    the name's place of first appearance; NaN leaves it without a value (null);
 *  - a completions.jsonl line with NaN and +-inf rewards and advantage is JSON, every
 *    key present with null (jansson's json_real gives NULL for them: keys vanished). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <math.h>

#include "log/completions.h"
#include "log/metrics.h"
#include "testutil.h"

/* Writes a's line for step into memory and parses it; NULL (and a failed check) when invalid. */
static json_t *write_and_parse(MetricAcc *a, long step, char **text) {
    size_t n = 0;
    FILE *f = open_memstream(text, &n);
    CHECK(f);
    metric_write_line(a, f, step);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(*text, 0, &je);
    T_CHECK(j && json_is_object(j), "line does not parse: %s (%s)", je.text, *text);
    T_CHECK(n > 0 && (*text)[n - 1] == '\n' && strchr(*text, '\n') == *text + n - 1, "one line");
    return j;
}

static void test_many_names(void) {
    enum { N = 200 };
    MetricAcc a;
    metric_acc_init(&a);
    char name[64];
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "reward/func_%03d/mean", i);
            metric_add(&a, name, i + rep);          /* mean i + 1 */
            if (i % 7 == 0) metric_add(&a, name, NAN);
        }
    metric_add(&a, "never_finite", NAN);
    T_CHECK(a.n == N + 1, "%d names", a.n);
    T_CHECK(metric_mean(&a, "reward/func_123/mean") == 124, "mean %g", metric_mean(&a, "reward/func_123/mean"));
    T_CHECK(isnan(metric_mean(&a, "absent")), "absent name: NaN");
    char *text = NULL;
    json_t *j = write_and_parse(&a, 7, &text);
    if (j) {
        T_CHECK(json_integer_value(json_object_get(j, "step")) == 7, "step");
        T_CHECK(json_object_size(j) == N + 2, "%zu keys", json_object_size(j));
        int ok = 1;
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "reward/func_%03d/mean", i);
            json_t *v = json_object_get(j, name);
            if (!json_is_number(v) || json_number_value(v) != i + 1) {
                fprintf(stderr, "  %s: %s\n", name, v ? "wrong value" : "missing");
                ok = 0;
            }
        }
        T_CHECK(ok, "every mean read back");
        T_CHECK(json_is_null(json_object_get(j, "never_finite")), "a metric without observations is null");
        /* order of first appearance */
        const char *p0 = strstr(text, "func_000"), *p1 = strstr(text, "func_001"), *p199 = strstr(text, "func_199");
        T_CHECK(p0 && p1 && p199 && p0 < p1 && p1 < p199 && p199 < strstr(text, "never_finite"), "order kept");
        json_decref(j);
    }
    free(text);
    T_CHECK(isnan(metric_mean(&a, "reward/func_000/mean")) && a.n == N + 1, "written line resets sums, keeps names");
    metric_add(&a, "reward/func_000/mean", 5);
    T_CHECK(metric_mean(&a, "reward/func_000/mean") == 5, "after reset");
    metric_acc_free(&a);
}

static void test_escaping(void) {
    static const char *names[] = {
        "say \"hi\"", "back\\slash", "two\nlines", "tab\there", "bell\x07 and \x1f",
        "caf\xc3\xa9 \xe2\x88\x91", "\\\"", "\"", "plain/name",
    };
    int n = (int)(sizeof names / sizeof names[0]);
    MetricAcc a;
    metric_acc_init(&a);
    for (int i = 0; i < n; i++) metric_add(&a, names[i], 0.5 * i);
    char *text = NULL;
    json_t *j = write_and_parse(&a, 1, &text);
    if (j) {
        T_CHECK(json_object_size(j) == (size_t)n + 1, "%zu keys", json_object_size(j));
        for (int i = 0; i < n; i++) {
            json_t *v = json_object_get(j, names[i]);
            T_CHECK(json_is_number(v) && json_number_value(v) == 0.5 * i, "name %d round-trips", i);
        }
        json_decref(j);
    }
    free(text);
    metric_acc_free(&a);
    /* a name that is not UTF-8 still gives a valid line: its non-ASCII bytes as '?' */
    metric_acc_init(&a);
    metric_add(&a, "rewards/bad\xff\xfename/mean", 1);
    j = write_and_parse(&a, 2, &text);
    T_CHECK(j && json_is_number(json_object_get(j, "rewards/bad??name/mean")), "invalid UTF-8 name: %s", text ? text : "");
    json_decref(j);
    free(text);
    metric_acc_free(&a);
}

static void test_set(void) {
    MetricAcc a;
    metric_acc_init(&a);
    char *text = NULL;
    for (int step = 1; step <= 3; step++) {
        metric_add(&a, "loss", step);
        metric_set(&a, "epoch", step / 4.0);
        metric_add(&a, "step_time", 1);
    }
    json_t *j = write_and_parse(&a, 3, &text);
    T_CHECK(json_real_value(json_object_get(j, "epoch")) == 0.75, "epoch is the last value set, not the mean: %s", text);
    T_CHECK(json_number_value(json_object_get(j, "loss")) == 2, "loss is still a mean: %s", text);
    T_CHECK(strstr(text, "\"loss\"") < strstr(text, "\"epoch\"") && strstr(text, "\"epoch\"") < strstr(text, "\"step_time\""),
            "epoch in its place of first appearance: %s", text);
    json_decref(j);
    free(text);
    text = NULL;
    metric_set(&a, "epoch", 1.0);
    metric_set(&a, "epoch", NAN);
    j = write_and_parse(&a, 4, &text);
    T_CHECK(json_is_null(json_object_get(j, "epoch")), "NaN set: no value (null): %s", text);
    json_decref(j);
    free(text);
    metric_acc_free(&a);
}

static void test_completion_line(void) {
    const char *names[3] = {"a", "b", "c"};
    const double rewards[3] = {INFINITY, NAN, 1.5};
    const int32_t ids[2] = {7, 8};
    CompletionRecord r = {3, "p", "c", ids, 2, names, rewards, 1, 3, -INFINITY, NAN, NULL};
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    CHECK(f);
    completion_record_write(f, &r);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    json_t *rw = json_object_get(j, "rewards");
    T_CHECK(j && json_is_null(json_object_get(j, "reward")) && json_is_null(json_object_get(j, "advantage")) &&
                json_is_null(json_object_get(rw, "a")) && json_is_null(json_object_get(rw, "b")) &&
                json_real_value(json_object_get(rw, "c")) == 1.5,
            "non-finite values as null, every key kept: %s", text);
    T_CHECK(!json_object_get(j, "tool_spans"), "no tool_spans without tool calling: %s", text);
    json_decref(j);
    free(text);
}

/* With tool calling: the tool turns' token ranges, [start, end), one per run of 0s. */
static void test_tool_spans(void) {
    const int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const uint8_t mask[9] = {1, 1, 0, 0, 1, 0, 1, 0, 0};
    CompletionRecord r = {1, "p", "c", ids, 9, NULL, NULL, 1, 0, 1.0, 0.5, mask};
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    CHECK(f);
    completion_record_write(f, &r);
    fclose(f);
    json_t *j = json_loads(text, 0, NULL);
    char *spans = json_dumps(json_object_get(j, "tool_spans"), JSON_COMPACT);
    T_CHECK(spans && !strcmp(spans, "[[2,4],[5,6],[7,9]]"), "tool_spans: %s", text);
    free(spans);
    json_decref(j);
    free(text);
}

int main(void) {
    test_completion_line();
    test_tool_spans();
    test_many_names();
    test_set();
    test_escaping();
    return t_summary("test_metrics");
}
