/* io/json_numbers.h — arrays of numbers to and from JSON arrays, for state kept
 * in JSON files (a GRPO checkpoint's rollout.json). NaN travels as null. */
#ifndef GRPO_IO_JSON_NUMBERS_H
#define GRPO_IO_JSON_NUMBERS_H

#include <jansson.h>
#include <stdint.h>

json_t *json_from_floats(const float *x, int n);
json_t *json_from_doubles(const double *x, int n); /* NaN as null */
/* out[n] from a; -1 unless a is an array of n integers. */
int json_to_ints(const json_t *a, int *out, int n);
/* out[n] from a; -1 unless a is an array of n numbers or nulls (NaN). */
int json_to_doubles(const json_t *a, double *out, int n);
/* A malloc'd float[n] from a, or NULL unless a is an array of n elements. */
float *json_to_floats(const json_t *a, int n);
/* The runs of 0s of mask[n] as [[start, end], ...] (end exclusive, in order): a
 * completion's tool spans (its tool mask's 0s). */
json_t *json_from_zero_runs(const uint8_t *mask, int n);
/* mask[n] set to 1 but for the runs in a (as json_from_zero_runs writes them); *runs
 * their count. -1 unless a is such a list within [0, n), in order, not touching. */
int json_to_zero_runs(const json_t *a, uint8_t *mask, int n, int *runs);

#endif
