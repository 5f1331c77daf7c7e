/* io/json_numbers.h — arrays of numbers to and from JSON arrays, for state kept
 * in JSON files (a GRPO checkpoint's rollout.json). NaN travels as null. */
#ifndef GRPO_IO_JSON_NUMBERS_H
#define GRPO_IO_JSON_NUMBERS_H

#include <jansson.h>

json_t *json_from_floats(const float *x, int n);
json_t *json_from_doubles(const double *x, int n); /* NaN as null */
/* out[n] from a; -1 unless a is an array of n integers. */
int json_to_ints(const json_t *a, int *out, int n);
/* out[n] from a; -1 unless a is an array of n numbers or nulls (NaN). */
int json_to_doubles(const json_t *a, double *out, int n);
/* A malloc'd float[n] from a, or NULL unless a is an array of n elements. */
float *json_to_floats(const json_t *a, int n);

#endif
