/* io/json_numbers.c — number arrays and JSON arrays (json_numbers.h). */
#include "io/json_numbers.h"

#include <math.h>
#include <string.h>

#include "core/check.h"

json_t *json_from_floats(const float *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(x[i]));
    return a;
}

json_t *json_from_doubles(const double *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, isnan(x[i]) ? json_null() : json_real(x[i]));
    return a;
}

int json_to_ints(const json_t *a, int *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        if (!json_is_integer(json_array_get(a, i))) return -1;
        out[i] = (int)json_integer_value(json_array_get(a, i));
    }
    return 0;
}

int json_to_doubles(const json_t *a, double *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (json_is_null(v)) out[i] = NAN;
        else if (json_is_number(v)) out[i] = json_number_value(v);
        else return -1;
    }
    return 0;
}

float *json_to_floats(const json_t *a, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return NULL;
    float *x = xmalloc(sizeof(float) * (n ? n : 1));
    for (int i = 0; i < n; i++) x[i] = (float)json_number_value(json_array_get(a, i));
    return x;
}

json_t *json_from_zero_runs(const uint8_t *mask, int n) {
    json_t *runs = json_array();
    for (int k = 0; k < n; k++) {
        if (mask[k]) continue;
        int e = k;
        while (e < n && !mask[e]) e++;
        json_array_append_new(runs, json_pack("[i, i]", k, e));
        k = e;
    }
    return runs;
}

int json_to_zero_runs(const json_t *a, uint8_t *mask, int n, int *runs) {
    if (!json_is_array(a)) return -1;
    memset(mask, 1, (size_t)n);
    *runs = 0;
    size_t i;
    const json_t *r;
    int last = 0;
    json_array_foreach(a, i, r) {
        const json_t *s = json_array_get(r, 0), *e = json_array_get(r, 1);
        if (json_array_size(r) != 2 || !json_is_integer(s) || !json_is_integer(e)) return -1;
        json_int_t start = json_integer_value(s), end = json_integer_value(e);
        if (start < last + (i > 0) || end <= start || end > n) return -1;
        memset(mask + start, 0, (size_t)(end - start));
        last = (int)end;
        (*runs)++;
    }
    return 0;
}
