/* io/json_numbers.c — number arrays and JSON arrays (json_numbers.h). */
#include "io/json_numbers.h"

#include <math.h>

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
