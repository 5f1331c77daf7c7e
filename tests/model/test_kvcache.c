/* tests/model/test_kvcache.c — cached decoding against the full forward pass.
 *  1. prefill + one-token-at-a-time decoding gives the logits of a full forward;
 *  2. G sequences sharing one prefilled prompt (batched decode, one row per
 *     sequence per step) give the same logits as G separate caches and as the full
 *     forward of each sequence;
 *  3. a DecodeState made on one OpenMP thread, used with eight: the same logits, and
 *     no thread writes past the per-thread scores (ASan, and a CHECK in model_decode).
 * The fixtures, and heads of 32 and 40 (random weights) for attention's vector paths.
 * Tolerance |got - want| <= 1e-5 max|want| + 1e-5 |want| (different summation order). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/init.h"
#include "model/kvcache.h"
#include "model/model_io.h"
#include "testutil.h"

#define P 5      /* prompt tokens */
#define S 6      /* generated tokens */
#define G 3      /* sequences sharing the prompt */

static void full_logits(Model *m, const int32_t *ids, int T, float *out) {
    Activations a;
    acts_create(&a, &m->cfg, T, 0, 4, 0);
    uint8_t mask[T];
    memset(mask, 1, T);
    model_forward(m, &a, ids, mask, 1, T, NULL);
    model_logits(m, &a, out);
    acts_free(&a);
}

static int close_rows(const float *got, const float *want, long n) {
    double mx = 0;
    for (long i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (long i = 0; i < n; i++)
        if (!t_close(got[i], want[i], 1e-5 * mx, 1e-5)) {
            fprintf(stderr, "  element %ld: got %.9g want %.9g\n", i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static void check_model(Model *mp, const char *name) {
    Model m = *mp;
    int V = m.cfg.vocab_size, T = P + S;
    int32_t seq[G][P + S];
    unsigned r = 12345;
    for (int g = 0; g < G; g++)
        for (int t = 0; t < T; t++) seq[g][t] = g > 0 && t < P ? seq[0][t] : (int32_t)((r = r * 1103515245u + 12345u) >> 8) % V;

    float *want = malloc(sizeof(float) * G * T * V);
    for (int g = 0; g < G; g++) full_logits(&m, seq[g], T, want + (size_t)g * T * V);

    /* 1. one slot: prefill P rows in one call, then one token per call */
    KVCache c;
    DecodeState ds;
    kv_cache_create(&c, &m.cfg, G + 1, T);
    decode_state_create(&ds, &m.cfg, T, T);
    float *got = malloc(sizeof(float) * T * V);
    int slots[T];
    for (int t = 0; t < T; t++) slots[t] = 0;
    kv_cache_reset(&c, 0);
    int k = model_decode(&m, &c, &ds, P, slots, seq[0], NULL, got);
    T_CHECK(k == P, "prefill returned %d rows", k);
    for (int t = P; t < T; t++) model_decode(&m, &c, &ds, 1, slots, &seq[0][t], NULL, got + (size_t)t * V);
    T_CHECK(close_rows(got, want, (long)T * V), "%s: cached decoding differs from full forward", name);
    T_CHECK(kv_cache_seq_len(&c, 0) == T, "%s: seq len %d", name, kv_cache_seq_len(&c, 0));

    /* 2. shared prefix: slot 0 holds the prompt, slots 1..G continue it in a batch */
    kv_cache_reset(&c, 0);
    uint8_t want_last[P] = {0};
    want_last[P - 1] = 1;
    float *prompt_last = malloc(sizeof(float) * V);
    k = model_decode(&m, &c, &ds, P, slots, seq[0], want_last, prompt_last);
    T_CHECK(k == 1, "want flags: %d rows", k);
    T_CHECK(close_rows(prompt_last, want + (size_t)(P - 1) * V, V), "%s: prompt's last logits", name);
    for (int g = 0; g < G; g++) kv_cache_share_prefix(&c, g + 1, 0);
    float *step = malloc(sizeof(float) * G * V);
    int ok_shared = 1;
    for (int t = P; t < T; t++) {
        int32_t toks[G];
        int sl[G];
        for (int g = 0; g < G; g++) {
            toks[g] = seq[g][t];
            sl[g] = g + 1;
        }
        model_decode(&m, &c, &ds, G, sl, toks, NULL, step);
        for (int g = 0; g < G; g++)
            ok_shared &= close_rows(step + (size_t)g * V, want + ((size_t)g * T + t) * V, V);
    }
    T_CHECK(ok_shared, "%s: shared-prefix batched decoding differs from full forward", name);

    /* 3. threads raised after decode_state_create: the same batched decoding */
    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    DecodeState ds1;
    decode_state_create(&ds1, &m.cfg, T, T);
    omp_set_num_threads(8);
    kv_cache_reset(&c, 0);
    model_decode(&m, &c, &ds1, P, slots, seq[0], want_last, prompt_last);
    for (int g = 0; g < G; g++) kv_cache_share_prefix(&c, g + 1, 0);
    int ok_threads = 1;
    for (int t = P; t < T; t++) {
        int32_t toks[G];
        int sl[G];
        for (int g = 0; g < G; g++) toks[g] = seq[g][t], sl[g] = g + 1;
        model_decode(&m, &c, &ds1, G, sl, toks, NULL, step);
        for (int g = 0; g < G; g++)
            ok_threads &= close_rows(step + (size_t)g * V, want + ((size_t)g * T + t) * V, V);
    }
    T_CHECK(ok_threads, "%s: decoding on more threads than at creation differs", name);
    decode_state_free(&ds1);
    omp_set_num_threads(saved_threads);

    /* separate caches for the same sequences: same logits as the shared prefix */
    KVCache c2;
    kv_cache_create(&c2, &m.cfg, G, T);
    int ok_sep = 1;
    for (int g = 0; g < G; g++) {
        int sl[T];
        for (int t = 0; t < T; t++) sl[t] = g;
        model_decode(&m, &c2, &ds, T, sl, seq[g], NULL, got);
        ok_sep &= close_rows(got + (size_t)P * V, want + ((size_t)g * T + P) * V, (long)S * V);
    }
    T_CHECK(ok_sep, "%s: separate caches differ from full forward", name);

    free(want), free(got), free(step), free(prompt_last);
    kv_cache_free(&c2);
    kv_cache_free(&c);
    decode_state_free(&ds);
}

static int load_fixture(Model *m, const char *name) {
    char dir[128];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    GrpoErr err;
    int rc = model_load(m, dir, &err);
    T_CHECK(rc == 0, "%s", err.msg);
    return rc;
}

static void check(const char *name) {
    Model m;
    if (load_fixture(&m, name)) return;
    check_model(&m, name);
    model_free(&m);
}

/* The fixtures' heads are 8 and 12 wide, 1 to 4 to a KV group. Decode attention's
 * vector paths: with AVX2, heads of a multiple of 8, their sums 32 columns at a time
 * (32, and 40 for a tail); with AVX-512, heads of a multiple of 16, up to 4 of a group
 * at once, sums 64 columns then 16 at a time (64 with 7 heads a group: blocks of 4 and
 * 3; 80 with 5: 64 and 16 columns, blocks of 4 and 1; 48 with 2). On the qwen3
 * fixture's shape otherwise, random weights. */
static void check_heads(int head_dim, int n_heads, int n_kv_heads) {
    Model f;
    if (load_fixture(&f, "qwen3")) return;
    ModelConfig cfg = f.cfg;
    cfg.raw = NULL; /* f's, freed with it */
    model_free(&f);
    cfg.head_dim = head_dim;
    cfg.n_heads = n_heads;
    cfg.n_kv_heads = n_kv_heads;
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 7, 0.2f);
    char name[64];
    snprintf(name, sizeof name, "qwen3 head_dim %d, %d heads, %d KV heads", head_dim, n_heads, n_kv_heads);
    check_model(&m, name);
    model_free(&m);
}

int main(void) {
    check("qwen2");
    check("llama");
    check("qwen3");
    check_heads(32, 4, 2);
    check_heads(40, 4, 2);
    check_heads(64, 14, 2);
    check_heads(80, 10, 2);
    check_heads(48, 4, 2);
    return t_summary("test_kvcache");
}
