/* bench/bench_tokenizer.c — tokenizer load time and single-threaded encode
 * throughput. usage: bench_tokenizer MODEL_DIR CORPUS.jsonl
 * Prints one JSON line: {"load_s", "encode_mb_per_s", "bytes", "reps"}.
 * bench/run.sh runs it next to tokenizers.js on the same corpus. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tokenizer/tokenizer.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL_DIR CORPUS.jsonl\n", argv[0]);
        return 2;
    }
    GrpoErr err = {{0}};
    Tokenizer *tok;
    double best_load = 1e9;
    for (int r = 0; r < 3; r++) { /* best of 3: the first pays for the page cache */
        double t0 = now_s();
        if (tok_load(&tok, argv[1], &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
        double dt = now_s() - t0;
        if (dt < best_load) best_load = dt;
        if (r < 2) tok_free(tok);
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 1; }
    char **texts = NULL;
    size_t *lens = NULL, n = 0, cap = 0, bytes = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_t *j = json_loads(line, JSON_ALLOW_NUL, NULL);
        const json_t *t = json_object_get(j, "text");
        if (json_is_string(t)) {
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                texts = realloc(texts, cap * sizeof *texts);
                lens = realloc(lens, cap * sizeof *lens);
            }
            lens[n] = json_string_length(t);
            texts[n] = malloc(lens[n] + 1);
            memcpy(texts[n], json_string_value(t), lens[n] + 1);
            bytes += lens[n++];
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    TokIds ids = {0};
    for (size_t i = 0; i < n; i++) { ids.n = 0; tok_encode(tok, texts[i], lens[i], 0, &ids, &err); }
    int reps = 0;
    double t0 = now_s(), el = 0;
    while (el < 2.0 || reps < 2) {
        for (size_t i = 0; i < n; i++) {
            ids.n = 0;
            if (tok_encode(tok, texts[i], lens[i], 0, &ids, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
        }
        reps++;
        el = now_s() - t0;
    }
    printf("{\"load_s\": %.3f, \"encode_mb_per_s\": %.2f, \"bytes\": %zu, \"reps\": %d}\n", best_load,
           (double)bytes * reps / 1e6 / el, bytes, reps);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    tok_ids_free(&ids);
    tok_free(tok);
    return 0;
}
