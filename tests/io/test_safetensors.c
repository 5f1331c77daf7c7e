/* tests/io/test_safetensors.c — io/safetensors: round trips for every dtype,
 * exhaustive bf16/f16 bit round trips, rounding against a double-precision
 * reference, sharded directories, and every malformed-input rule with its
 * error message (file name and problem).
 *
 * NaN caveat: bf16/f16 NaNs keep their exact bits through f32 because the f32
 * is only copied; arithmetic on a signalling NaN could quiet it. */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "testutil.h"

static char g_dir[64];

static char *tpath(const char *name) { return fs_join(g_dir, name); }

/* Writes a hand-made file: 8-byte header length, header text, data_bytes bytes. */
static void write_crafted(const char *path, const char *header, size_t data_bytes) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp);
    uint64_t n = strlen(header);
    fwrite(&n, 8, 1, fp);
    fwrite(header, 1, n, fp);
    for (size_t i = 0; i < data_bytes; i++) fputc((int)(i & 0xff), fp);
    fclose(fp);
}

/* st_open of a crafted model.safetensors must fail naming the file and the
 * problem (want, and want2 when given). */
static void expect_bad_at(int line, const char *header, size_t data_bytes, const char *want,
                          const char *want2) {
    char *path = tpath("model.safetensors");
    write_crafted(path, header, data_bytes);
    StFile f;
    GrpoErr err = {{0}};
    int rc = st_open(&f, path, &err);
    t_checks++;
    if (rc != -1 || !strstr(err.msg, "model.safetensors") || !strstr(err.msg, want) ||
        (want2 && !strstr(err.msg, want2)) || strchr(err.msg, '\n') || f.map != NULL) {
        t_failures++;
        fprintf(stderr, "FAIL line %d: header %s\n  rc %d, message: %s\n  wanted: %s / %s\n", line,
                header, rc, err.msg, want, want2 ? want2 : "");
        if (rc == 0) st_close(&f);
    }
    free(path);
}
#define EXPECT_BAD(h, n, w, w2) expect_bad_at(__LINE__, (h), (n), (w), (w2))

static void test_bad_inputs(void) {
    char *path = tpath("model.safetensors");
    FILE *fp = fopen(path, "wb");
    fwrite("12345", 1, 5, fp);
    fclose(fp);
    StFile f;
    GrpoErr err = {{0}};
    T_CHECK(st_open(&f, path, &err) == -1 && strstr(err.msg, "model.safetensors") &&
                strstr(err.msg, "shorter than the 8-byte header length"), "%s", err.msg);
    fp = fopen(path, "wb");
    uint64_t n = 1000;
    fwrite(&n, 8, 1, fp);
    fwrite("{}", 1, 2, fp);
    fclose(fp);
    T_CHECK(st_open(&f, path, &err) == -1 && strstr(err.msg, "model.safetensors") &&
                strstr(err.msg, "header length 1000 runs past the end of the file (10 bytes)"),
            "%s", err.msg);
    fp = fopen(path, "wb");
    n = 200000000;
    fwrite(&n, 8, 1, fp);
    fclose(fp);
    T_CHECK(st_open(&f, path, &err) == -1 && strstr(err.msg, "above the 100000000-byte limit"),
            "%s", err.msg);
    T_CHECK(st_open(&f, "/nonexistent/x.safetensors", &err) == -1 &&
                strstr(err.msg, "/nonexistent/x.safetensors: cannot open"), "%s", err.msg);
    free(path);

    EXPECT_BAD("{\"a\": {", 0, "header is not valid JSON", NULL);
    EXPECT_BAD("{\"a\": 1,}", 0, "header is not valid JSON", NULL);
    EXPECT_BAD("[1, 2]", 0, "header is not a JSON object", NULL);
    EXPECT_BAD("\"str\"", 0, "header is not a JSON object", NULL);
    EXPECT_BAD("{\"w\": 5}", 0, "tensor 'w': entry is not an object", NULL);
    EXPECT_BAD("{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "tensor 'w'",
               "\"dtype\" is missing");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F8_E4M3\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
               "tensor 'w'", "unknown dtype 'F8_E4M3'");
    EXPECT_BAD("{\"w\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'w'", "unknown dtype 'f32'");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'w'", "shape entry 0 is not a non-negative integer");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 1.5], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'w'", "shape entry 1 is not a non-negative integer");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [\"3\"], \"data_offsets\": [0, 12]}}", 12,
               "tensor 'w'", "shape entry 0 is not a non-negative integer");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": 3, \"data_offsets\": [0, 12]}}", 12,
               "tensor 'w'", "\"shape\" is missing or not an array");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}",
               4, "tensor 'w'", "9 dimensions");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
               "\"data_offsets\": [0, 4]}}", 4, "tensor 'w'", "overflows");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4,
               "tensor 'w'", "\"data_offsets\" is not an array of 2 non-negative integers");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 8,
               "tensor 'w'", "\"data_offsets\" is not an array of 2");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}", 4,
               "tensor 'w'", "\"data_offsets\" is not an array of 2");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
               "tensor 'w'", "\"data_offsets\" is not an array of 2");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "tensor 'w'",
               "\"data_offsets\" is not an array of 2");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8,
               "tensor 'w'", "data_offsets [8, 4] end before they begin");
    EXPECT_BAD("{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [64], "
               "\"data_offsets\": [0, 100]}}", 100,
               "model.safetensors: tensor 'model.norm.weight': data_offsets [0, 100] do not match "
               "shape [64] of F32 (256 bytes)", NULL);
    EXPECT_BAD("{\"w\": {\"dtype\": \"BF16\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", 24,
               "tensor 'w'", "do not match shape [2, 3] of BF16 (12 bytes)");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [64], \"data_offsets\": [0, 256]}}", 128,
               "tensor 'w'", "data_offsets [0, 256] run past the end of the data buffer (128 bytes)");
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 24,
               "tensors 'a' [0, 16] and 'b' [8, 24] overlap", NULL);
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 16,
               "overlap", NULL);
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [20, 36]}}", 36,
               "tensor 'b'", "leave bytes [16, 20) of the data buffer unused");
    EXPECT_BAD("{\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [4, 20]}}", 20,
               "tensor 'b'", "leave bytes [0, 4) of the data buffer unused");
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 20,
               "data buffer is 20 bytes but the tensors cover only 16", NULL);
    EXPECT_BAD("{}", 3, "data buffer is 3 bytes but the tensors cover only 0", NULL);
    EXPECT_BAD("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]},"
               " \"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}", 2,
               "duplicate tensor name 'a'", NULL);
    EXPECT_BAD("{\"model.layers.10.self_attn.q_proj.weight\": {\"dtype\": \"U8\", \"shape\": [1], "
               "\"data_offsets\": [0, 1]}, \"model.layers.10.self_attn.q_proj.weight\": "
               "{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}", 2,
               "duplicate tensor name 'model.layers.10.self_attn.q_proj.weight'", NULL);
    EXPECT_BAD("{\"a\": {\"dtype\": \"U8\", \"dtype\": \"U8\", \"shape\": [1], "
               "\"data_offsets\": [0, 1]}}", 1, "tensor 'a': duplicate key 'dtype'", NULL);
    EXPECT_BAD("{\"__metadata__\": {\"format\": \"pt\", \"step\": 5}}", 0,
               "__metadata__ 'step' is not a string", NULL);
    EXPECT_BAD("{\"__metadata__\": [\"pt\"]}", 0, "__metadata__ is not an object", NULL);
    EXPECT_BAD("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, "
               "\"__metadata__\": {\"k\": null}}", 1, "__metadata__ 'k' is not a string", NULL);

    /* Valid edge cases the reference accepts: empty header, zero-size tensors
     * anywhere in the buffer, scalars, trailing-space padding. */
    path = tpath("model.safetensors");
    write_crafted(path, "{}", 0);
    T_CHECK(st_open(&f, path, &err) == 0 && f.n_tensors == 0, "%s", err.msg);
    st_close(&f);
    write_crafted(path, "{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [4, 4]},"
                        " \"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]},"
                        " \"z2\": {\"dtype\": \"I64\", \"shape\": [0], \"data_offsets\": [0, 0]}}   ",
                  4);
    T_CHECK(st_open(&f, path, &err) == 0, "%s", err.msg);
    if (f.map) {
        T_CHECK(f.n_tensors == 3 && !strcmp(f.tensors[0].name, "z") && f.tensors[0].numel == 0 &&
                    f.tensors[1].ndim == 0 && f.tensors[1].numel == 1, "zero-size/scalar parse");
        const StTensor *s = st_find(&f, "s");
        int64_t iv;
        T_CHECK(s && st_read_i64(&f, s, &iv, &err) == -1 && strstr(err.msg, "tensor 's'") &&
                    strstr(err.msg, "F32 cannot be read as integer"), "%s", err.msg);
        float fv;
        T_CHECK(st_read_f32(&f, st_find(&f, "z2"), &fv, &err) == -1 &&
                    strstr(err.msg, "model.safetensors: tensor 'z2': dtype I64 cannot be read as "
                           "floating point"), "%s", err.msg);
        T_CHECK(st_find(&f, "nope") == NULL, "st_find of a missing name");
        st_close(&f);
    }
    free(path);
}

/* ---- good paths ---------------------------------------------------------- */

static void test_round_trip_all_dtypes(void) {
    float f32[6] = {1.0f, -2.5f, 3.14159265f, 0.0f, -0.0f, 1e-30f};
    double f64[3] = {1.0 / 3.0, -1e300, 5e-324};
    int64_t i64[3] = {INT64_MIN, -1, INT64_MAX};
    int32_t i32[4] = {INT32_MIN, -7, 0, INT32_MAX};
    int16_t i16[2] = {-32768, 32767};
    int8_t i8[3] = {-128, 0, 127};
    uint8_t u8[3] = {0, 200, 255}, bl[4] = {0, 1, 1, 0};
    float half[4] = {1.0f, -0.5f, 65504.0f, 6.103515625e-05f}; /* exact in f16 and bf16? see below */
    StWriteTensor t[] = {
        {.name = "w.f32", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = f32, .raw = NULL},
        {.name = "w.f16", .dtype = ST_F16, .ndim = 1, .shape = {4}, .data = half, .raw = NULL},
        {.name = "w.bf16", .dtype = ST_BF16, .ndim = 2, .shape = {2, 2}, .data = half, .raw = NULL},
        {.name = "w.f64", .dtype = ST_F64, .ndim = 1, .shape = {3}, .data = NULL, .raw = f64},
        {.name = "i.i64", .dtype = ST_I64, .ndim = 1, .shape = {3}, .data = NULL, .raw = i64},
        {.name = "i.i32", .dtype = ST_I32, .ndim = 2, .shape = {2, 2}, .data = NULL, .raw = i32},
        {.name = "i.i16", .dtype = ST_I16, .ndim = 1, .shape = {2}, .data = NULL, .raw = i16},
        {.name = "i.i8", .dtype = ST_I8, .ndim = 1, .shape = {3}, .data = NULL, .raw = i8},
        {.name = "i.u8", .dtype = ST_U8, .ndim = 1, .shape = {3}, .data = NULL, .raw = u8},
        {.name = "i.bool", .dtype = ST_BOOL, .ndim = 1, .shape = {4}, .data = NULL, .raw = bl},
        {.name = "scalar", .dtype = ST_F32, .ndim = 0, .shape = {0}, .data = f32 + 2, .raw = NULL},
        {.name = "empty", .dtype = ST_F32, .ndim = 2, .shape = {0, 5}, .data = f32, .raw = NULL},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    char *path = tpath("all.safetensors");
    GrpoErr err = {{0}};
    T_CHECK(st_write_file(path, t, n, &err) == 0, "%s", err.msg);
    StFile f;
    if (st_open(&f, path, &err)) {
        T_CHECK(0, "reopen: %s", err.msg);
        free(path);
        return;
    }
    /* layout written the HF way: header padded with spaces to 8 bytes */
    uint64_t hlen;
    memcpy(&hlen, f.map, 8);
    T_CHECK(hlen % 8 == 0 && ((uintptr_t)f.data - (uintptr_t)f.map) % 8 == 0, "header %llu",
            (unsigned long long)hlen);
    const char *start = "{\"__metadata__\":{\"format\":\"pt\"},\"w.f32\":{";
    T_CHECK(!memcmp(f.map + 8, start, strlen(start)),
            "header starts %.60s", (const char *)f.map + 8);
    T_CHECK(f.n_meta == 1 && !strcmp(f.meta_keys[0], "format") && !strcmp(f.meta_values[0], "pt"),
            "metadata");
    T_CHECK(f.n_tensors == n, "n_tensors %d", f.n_tensors);
    for (int i = 0; i < n && i < f.n_tensors; i++) {
        const StTensor *s = &f.tensors[i];
        int same = !strcmp(s->name, t[i].name) && s->dtype == t[i].dtype && s->ndim == t[i].ndim;
        for (int d = 0; d < t[i].ndim; d++) same = same && s->shape[d] == t[i].shape[d];
        T_CHECK(same, "tensor %d (%s) order/dtype/shape", i, t[i].name);
    }
    float gf[6];
    double gd[6];
    int64_t gi[6];
    T_CHECK(st_read_f32(&f, st_find(&f, "w.f32"), gf, &err) == 0 && !memcmp(gf, f32, sizeof f32),
            "F32 bits");
    T_CHECK(st_read_f64(&f, st_find(&f, "w.f32"), gd, &err) == 0 && gd[2] == (double)f32[2], "F32->f64");
    T_CHECK(st_read_f32(&f, st_find(&f, "w.f16"), gf, &err) == 0 && !memcmp(gf, half, sizeof half),
            "F16 exact values");
    T_CHECK(st_read_f64(&f, st_find(&f, "w.f16"), gd, &err) == 0 && gd[2] == 65504.0, "F16->f64");
    T_CHECK(st_read_f32(&f, st_find(&f, "w.bf16"), gf, &err) == 0 && gf[0] == 1.0f &&
                gf[1] == -0.5f && gf[2] == 65536.0f && gf[3] == 6.103515625e-05f,
            "BF16 rounded values %g %g", gf[2], gf[3]);
    T_CHECK(st_read_f64(&f, st_find(&f, "w.f64"), gd, &err) == 0 && !memcmp(gd, f64, sizeof f64),
            "F64 bits");
    T_CHECK(st_read_f32(&f, st_find(&f, "w.f64"), gf, &err) == 0 && gf[0] == (float)f64[0] &&
                isinf(gf[1]) && gf[2] == 0.0f, "F64->f32 rounding");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.i64"), gi, &err) == 0 && !memcmp(gi, i64, sizeof i64), "I64");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.i32"), gi, &err) == 0 && gi[0] == INT32_MIN &&
                gi[1] == -7 && gi[3] == INT32_MAX, "I32");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.i16"), gi, &err) == 0 && gi[0] == -32768 && gi[1] == 32767,
            "I16");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.i8"), gi, &err) == 0 && gi[0] == -128 && gi[2] == 127, "I8");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.u8"), gi, &err) == 0 && gi[1] == 200 && gi[2] == 255, "U8");
    T_CHECK(st_read_i64(&f, st_find(&f, "i.bool"), gi, &err) == 0 && gi[0] == 0 && gi[1] == 1 &&
                gi[3] == 0, "BOOL");
    T_CHECK(st_read_f32(&f, st_find(&f, "scalar"), gf, &err) == 0 && gf[0] == f32[2], "scalar");
    T_CHECK(st_find(&f, "empty")->numel == 0 && st_find(&f, "empty")->begin ==
                st_find(&f, "empty")->end, "empty tensor");
    st_close(&f);
    free(path);
}

/* Every bf16/f16 pattern through f32 and back, directly and through files. */
static void test_half_bit_round_trips(void) {
    int bad_bf16 = 0, bad_f16 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (st_f32_to_bf16(st_bf16_to_f32((uint16_t)h)) != h) bad_bf16++;
        if (st_f32_to_f16(st_f16_to_f32((uint16_t)h)) != h) bad_f16++;
    }
    T_CHECK(bad_bf16 == 0, "%d bf16 patterns changed", bad_bf16);
    T_CHECK(bad_f16 == 0, "%d f16 patterns changed", bad_f16);

    uint16_t *bits = xmalloc(65536 * 2);
    float *vals = xmalloc(65536 * 4);
    for (uint32_t h = 0; h < 65536; h++) bits[h] = (uint16_t)h;
    StDtype dts[2] = {ST_BF16, ST_F16};
    for (int k = 0; k < 2; k++) {
        char *p1 = tpath("half1.safetensors"), *p2 = tpath("half2.safetensors");
        StWriteTensor w = {.name = "h", .dtype = dts[k], .ndim = 2, .shape = {256, 256}, .raw = bits};
        GrpoErr err = {{0}};
        StFile f;
        int ok = st_write_file(p1, &w, 1, &err) == 0 && st_open(&f, p1, &err) == 0;
        T_CHECK(ok, "%s", err.msg);
        if (!ok) continue;
        T_CHECK(st_read_f32(&f, &f.tensors[0], vals, &err) == 0, "%s", err.msg);
        st_close(&f);
        StWriteTensor w2 = {.name = "h", .dtype = dts[k], .ndim = 2, .shape = {256, 256}, .data = vals};
        char *a, *b;
        size_t na, nb;
        ok = st_write_file(p2, &w2, 1, &err) == 0 && fs_read_file(p1, &a, &na, &err) == 0 &&
             fs_read_file(p2, &b, &nb, &err) == 0;
        T_CHECK(ok && na == nb && !memcmp(a, b, na), "%s file round trip not bit-identical",
                st_dtype_name(dts[k]));
        if (ok) free(a), free(b);
        free(p1);
        free(p2);
    }
    free(bits);
    free(vals);
}

/* fill: values made a chunk at a time (here: from an array, counting the calls). */
static int g_fill_calls;
static void fill_from(const void *ctx, size_t at, size_t k, float *out) {
    g_fill_calls++;
    memcpy(out, (const float *)ctx + at, sizeof(float) * k);
}

/* A tensor given by fill is written as the same values given as data would be, in
 * every float dtype, past the writer's chunk (4096) and from an offset (from). */
static void test_write_fill(void) {
    enum { N = 3 * 4096 + 77, FROM = 5 };
    float *vals = xmalloc(sizeof(float) * (N + FROM));
    for (int i = 0; i < N + FROM; i++) vals[i] = (float)sin(i * 0.37) * (1 + i % 13) * 1.0001f;
    StDtype dts[3] = {ST_F32, ST_BF16, ST_F16};
    for (int k = 0; k < 3; k++) {
        char *p1 = tpath("fill1.safetensors"), *p2 = tpath("fill2.safetensors");
        StWriteTensor w1 = {.name = "w", .dtype = dts[k], .ndim = 1, .shape = {N}, .data = vals + FROM};
        StWriteTensor w2 = {.name = "w", .dtype = dts[k], .ndim = 1, .shape = {N}, .fill = fill_from, .ctx = vals,
                            .from = FROM};
        GrpoErr err = {{0}};
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        g_fill_calls = 0;
        int ok = st_write_file(p1, &w1, 1, &err) == 0 && st_write_file(p2, &w2, 1, &err) == 0 &&
                 fs_read_file(p1, &a, &na, &err) == 0 && fs_read_file(p2, &b, &nb, &err) == 0;
        T_CHECK(ok, "%s", err.msg);
        T_CHECK(ok && na == nb && !memcmp(a, b, na), "%s: fill and data write different files", st_dtype_name(dts[k]));
        /* F16/BF16: once more per chunk, the range check before anything is written */
        int want_calls = dts[k] == ST_F32 ? 4 : 8;
        T_CHECK(g_fill_calls == want_calls, "%s: fill called %d times for 4 chunks (want %d)", st_dtype_name(dts[k]),
                g_fill_calls, want_calls);
        free(a), free(b), free(p1), free(p2);
    }
    free(vals);
}

/* Independent reference: round x to a binary format with `mant_bits` stored
 * mantissa bits and minimum normal exponent emin, ties to even, in double
 * (nearbyint under the default rounding mode); overflow to Inf at the midpoint
 * between the largest finite value and 2^(emax+1). */
static double round_ref(double x, int mant_bits, int emin, int emax) {
    if (x == 0 || isinf(x)) return x;
    double ax = fabs(x), maxf = ldexp(2.0 - ldexp(1.0, -mant_bits), emax);
    if (ax >= maxf + ldexp(1.0, emax - mant_bits - 1)) return copysign(INFINITY, x);
    int e;
    frexp(ax, &e);
    e -= 1; /* ax in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mant_bits);
    return copysign(nearbyint(ax / q) * q, x);
}

static void test_rounding_against_reference(void) {
    int bad16 = 0, badbf = 0;
    long n = 0;
    uint64_t s = 0x12345678abcdefull;
    for (long i = 0; i < 1200000; i++) {
        float x;
        if (i < 65536 * 3) { /* every half value, and the midpoints above it */
            uint32_t h = (uint32_t)(i / 3);
            if (((h >> 10) & 0x1f) == 31) continue;
            double v = st_f16_to_f32((uint16_t)h), up = st_f16_to_f32((uint16_t)(h + 1));
            x = (float)(i % 3 == 0 ? v : i % 3 == 1 ? (v + up) / 2 : nextafter((v + up) / 2, v));
            if (((h + 1) & 0x7c00) == 0x7c00 && i % 3) continue;
        } else {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t u = (uint32_t)(s >> 32);
            memcpy(&x, &u, 4);
            if (isnan(x)) continue;
        }
        n++;
        uint16_t h = st_f32_to_f16(x), b = st_f32_to_bf16(x);
        double r16 = round_ref(x, 10, -14, 15), rbf = round_ref(x, 7, -126, 127);
        double g16 = st_f16_to_f32(h), gbf = st_bf16_to_f32(b);
        if (!(g16 == r16 && signbit(g16) == signbit(r16))) {
            if (bad16++ < 5) fprintf(stderr, "f16 of %a: got %a want %a\n", x, g16, r16);
        }
        if (!(gbf == rbf && signbit(gbf) == signbit(rbf))) {
            if (badbf++ < 5) fprintf(stderr, "bf16 of %a: got %a want %a\n", x, gbf, rbf);
        }
    }
    T_CHECK(bad16 == 0, "%d of %ld f32 -> f16 roundings differ from the reference", bad16, n);
    T_CHECK(badbf == 0, "%d of %ld f32 -> bf16 roundings differ from the reference", badbf, n);
    T_CHECK(st_f32_to_f16(65519.996f) == 0x7bff && st_f32_to_f16(65520.0f) == 0x7c00 &&
                st_f32_to_f16(-INFINITY) == 0xfc00 && st_f32_to_f16(0x1p-25f) == 0 &&
                st_f32_to_f16(0x1.000002p-25f) == 1 && st_f32_to_f16(-0.0f) == 0x8000,
            "f16 edges");
    T_CHECK(st_f32_to_bf16(NAN) == 0x7fc0 && isnan(st_bf16_to_f32(st_f32_to_bf16(NAN))) &&
                isnan(st_f16_to_f32(st_f32_to_f16(NAN))), "NaN stays NaN");
    float nan_low; /* payload only in the low bits that bf16/f16 drop */
    uint32_t u = 0x7f800001u;
    memcpy(&nan_low, &u, 4);
    T_CHECK(isnan(st_bf16_to_f32(st_f32_to_bf16(nan_low))) &&
                isnan(st_f16_to_f32(st_f32_to_f16(nan_low))), "low-payload NaN stays NaN");
}

static void fill(float *x, int n, float base) {
    for (int i = 0; i < n; i++) x[i] = base + (float)i * 0.25f;
}

static void test_sharded(void) {
    float a[100], b[300], c[50], d[10], e[200];
    fill(a, 100, 1), fill(b, 300, 2), fill(c, 50, 3), fill(d, 10, 4), fill(e, 200, 5);
    /* bytes: 400, 600 (bf16), 200, 40, 800; limit 1000 -> [a b] [c d] [e] */
    StWriteTensor t[] = {
        {.name = "model.embed_tokens.weight", .dtype = ST_F32, .ndim = 2, .shape = {10, 10}, .data = a, .raw = NULL},
        {.name = "model.layers.0.mlp.up_proj.weight", .dtype = ST_BF16, .ndim = 2, .shape = {30, 10}, .data = b, .raw = NULL},
        {.name = "lm_head.weight", .dtype = ST_F32, .ndim = 1, .shape = {50}, .data = c, .raw = NULL},
        {.name = "model.norm.weight", .dtype = ST_F32, .ndim = 1, .shape = {10}, .data = d, .raw = NULL},
        {.name = "model.layers.1.mlp.up_proj.weight", .dtype = ST_F32, .ndim = 2, .shape = {20, 10}, .data = e, .raw = NULL},
    };
    const float *src[] = {a, b, c, d, e};
    char *dir = tpath("sharded");
    GrpoErr err = {{0}};
    T_CHECK(st_write_dir(dir, t, 5, 1000, &err) == 0, "%s", err.msg);
    const char *names[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 4; i++) {
        char *p = fs_join(dir, names[i]);
        T_CHECK(fs_exists(p), "%s missing", names[i]);
        free(p);
    }
    char *idx = fs_join(dir, "model.safetensors.index.json"), *text = NULL;
    T_CHECK(fs_read_file(idx, &text, NULL, &err) == 0, "%s", err.msg);
    if (text) {
        T_CHECK(strstr(text, "\"total_size\": 2040"), "total_size in %s", text);
        const char *p0 = strstr(text, "\"lm_head.weight\": \"model-00002-of-00003.safetensors\""),
                   *p1 = strstr(text, "\"model.embed_tokens.weight\": \"model-00001-of-00003"),
                   *p2 = strstr(text, "\"model.layers.0.mlp.up_proj.weight\": \"model-00001"),
                   *p3 = strstr(text, "\"model.layers.1.mlp.up_proj.weight\": \"model-00003"),
                   *p4 = strstr(text, "\"model.norm.weight\": \"model-00002");
        T_CHECK(p0 && p1 && p2 && p3 && p4 && p0 < p1 && p1 < p2 && p2 < p3 && p3 < p4,
                "weight_map sorted by name and correct:\n%s", text);
        T_CHECK(strstr(text, "\"metadata\"") < strstr(text, "\"weight_map\"") &&
                    text[strlen(text) - 1] == '\n', "index layout");
        free(text);
    }
    StSet s;
    T_CHECK(stset_open_dir(&s, dir, &err) == 0 && s.n_files == 3, "%s", err.msg);
    for (int i = 0; i < 5 && s.n_files == 3; i++) {
        const StFile *f = NULL;
        const StTensor *tt = stset_find(&s, t[i].name, &f);
        float got[300];
        T_CHECK(tt && f && st_read_f32(f, tt, got, &err) == 0, "find %s", t[i].name);
        if (!tt) continue;
        int same = 1;
        for (int k = 0; k < tt->numel; k++)
            same &= got[k] == (t[i].dtype == ST_BF16 ? st_bf16_to_f32(st_f32_to_bf16(src[i][k]))
                                                     : src[i][k]);
        T_CHECK(same, "values of %s", t[i].name);
    }
    const StFile *nf = (const StFile *)1;
    T_CHECK(stset_find(&s, "absent", &nf) == NULL && nf == NULL, "absent tensor");
    stset_close(&s);

    /* a tensor above the limit gets a shard of its own: [a] [b] [c d] [e] */
    T_CHECK(st_write_dir(dir, t, 5, 500, &err) == 0, "%s", err.msg);
    char *p5 = fs_join(dir, "model-00004-of-00004.safetensors"),
         *old = fs_join(dir, "model-00001-of-00003.safetensors");
    T_CHECK(fs_exists(p5) && !fs_exists(old), "4 shards, stale 3-shard files removed");
    T_CHECK(stset_open_dir(&s, dir, &err) == 0 && s.n_files == 4, "%s", err.msg);
    stset_close(&s);

    /* rewriting unsharded removes the index and the shards */
    T_CHECK(st_write_dir(dir, t, 5, 0, &err) == 0, "%s", err.msg);
    T_CHECK(!fs_exists(idx) && !fs_exists(p5), "index and shards removed");
    T_CHECK(stset_open_dir(&s, dir, &err) == 0 && s.n_files == 1 && s.files[0].n_tensors == 5,
            "%s", err.msg);
    stset_close(&s);
    free(p5);
    free(old);

    /* broken indexes */
    T_CHECK(st_write_dir(dir, t, 5, 1000, &err) == 0, "%s", err.msg);
    char *shard2 = fs_join(dir, "model-00002-of-00003.safetensors");
    unlink(shard2);
    T_CHECK(stset_open_dir(&s, dir, &err) == -1 && strstr(err.msg, "model.safetensors.index.json") &&
                strstr(err.msg, "model-00002-of-00003.safetensors") && strstr(err.msg, "cannot open"),
            "%s", err.msg);
    T_CHECK(s.n_files == 0 && s.files == NULL, "set cleared after failure");
    const char *bad_map = "{\"metadata\": {}, \"weight_map\": {\"model.norm.weight\": "
                          "\"model-00001-of-00003.safetensors\"}}";
    T_CHECK(fs_write_file_atomic(idx, bad_map, strlen(bad_map), &err) == 0, "%s", err.msg);
    T_CHECK(stset_open_dir(&s, dir, &err) == -1 && strstr(err.msg, "model.safetensors.index.json") &&
                strstr(err.msg, "tensor 'model.norm.weight'") && strstr(err.msg, "does not contain"),
            "%s", err.msg);
    T_CHECK(fs_write_file_atomic(idx, "{\"weight_map\": [", 16, &err) == 0, "%s", err.msg);
    T_CHECK(stset_open_dir(&s, dir, &err) == -1 && strstr(err.msg, "index.json: invalid JSON"),
            "%s", err.msg);
    T_CHECK(fs_write_file_atomic(idx, "{\"metadata\": {}}", 16, &err) == 0, "%s", err.msg);
    T_CHECK(stset_open_dir(&s, dir, &err) == -1 && strstr(err.msg, "\"weight_map\" is missing"),
            "%s", err.msg);
    char *empty = tpath("emptydir");
    fs_mkdir_p(empty, &err);
    T_CHECK(stset_open_dir(&s, empty, &err) == -1 && strstr(err.msg, "emptydir") &&
                strstr(err.msg, "no model.safetensors"), "%s", err.msg);
    free(empty);
    free(shard2);
    free(idx);
    free(dir);
}

/* Finite fp32 values that would round to inf in F16 (past 65504; 65519 still rounds
 * to 65504) or BF16 (past 3.38953e38) are refused before anything is written, by
 * data and by fill, naming the tensor, its largest magnitude and the limit (issue 38:
 * a float16 save of weights past 65504 wrote inf with exit 0). NaN and inf given are
 * not this check's to refuse. */
static void test_write_range(void) {
    char *path = tpath("r.safetensors");
    GrpoErr err = {{0}};
    unlink(path);
    float f16_ok[4] = {65504, -65519, 1e-8f, NAN}, f16_bad[4] = {1, -70000, 65520, 2};
    float bf_ok[3] = {3.3895e38f, -1e38f, INFINITY}, bf_bad[3] = {0, 3.4e38f, FLT_MAX};
    StWriteTensor t = {.name = "ok", .dtype = ST_F16, .ndim = 1, .shape = {4}, .data = f16_ok};
    T_CHECK(st_write_file(path, &t, 1, &err) == 0, "f16 in range: %s", err.msg);
    unlink(path);
    StWriteTensor two[2] = {{.name = "fine", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = f16_bad},
                            {.name = "w.big", .dtype = ST_F16, .ndim = 1, .shape = {4}, .data = f16_bad}};
    T_CHECK(st_write_file(path, two, 2, &err) == -1 &&
                strstr(err.msg, "r.safetensors: tensor 'w.big': 2 value(s) beyond float16's largest, 65504 (the "
                                "largest magnitude is 70000): they would be saved as inf, so nothing was written") &&
                !fs_exists(path),
            "f16 overflow: %s", err.msg);
    StWriteTensor viafill = {.name = "w.fill", .dtype = ST_F16, .ndim = 1, .shape = {3}, .fill = fill_from,
                             .ctx = f16_bad, .from = 1};
    T_CHECK(st_write_file(path, &viafill, 1, &err) == -1 && strstr(err.msg, "tensor 'w.fill': 2 value(s)") &&
                !fs_exists(path),
            "f16 overflow by fill: %s", err.msg);
    StWriteTensor b = {.name = "b", .dtype = ST_BF16, .ndim = 1, .shape = {3}, .data = bf_ok};
    T_CHECK(st_write_file(path, &b, 1, &err) == 0, "bf16 in range: %s", err.msg);
    unlink(path);
    b.data = bf_bad;
    T_CHECK(st_write_file(path, &b, 1, &err) == -1 && strstr(err.msg, "2 value(s) beyond bfloat16's largest") &&
                !fs_exists(path),
            "bf16 overflow: %s", err.msg);
    b.dtype = ST_F32;
    T_CHECK(st_write_file(path, &b, 1, &err) == 0, "f32 holds them: %s", err.msg);
    unlink(path);
    char *dir = tpath("rdir");
    StWriteTensor d = {.name = "x", .dtype = ST_F16, .ndim = 1, .shape = {4}, .data = f16_bad};
    T_CHECK(st_write_dir(dir, &d, 1, 0, &err) == -1 && strstr(err.msg, "beyond float16") && !fs_exists(dir),
            "a directory is not even made: %s", err.msg);
    free(dir);
    free(path);
}

static void test_write_errors(void) {
    float x[4] = {1, 2, 3, 4};
    GrpoErr err = {{0}};
    char *path = tpath("w.safetensors");
    StWriteTensor dup[] = {{.name = "a", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = x, .raw = NULL}, {.name = "a", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = x, .raw = NULL}};
    T_CHECK(st_write_file(path, dup, 2, &err) == -1 && strstr(err.msg, "w.safetensors") &&
                strstr(err.msg, "duplicate tensor name 'a'") && !fs_exists(path), "%s", err.msg);
    StWriteTensor nodata = {.name = "i", .dtype = ST_I32, .ndim = 1, .shape = {4}, .data = x, .raw = NULL};
    T_CHECK(st_write_file(path, &nodata, 1, &err) == -1 && strstr(err.msg, "tensor 'i'") &&
                strstr(err.msg, "no data for dtype I32") && !fs_exists(path), "%s", err.msg);
    StWriteTensor meta = {.name = "__metadata__", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = x, .raw = NULL};
    T_CHECK(st_write_file(path, &meta, 1, &err) == -1 && strstr(err.msg, "invalid name"), "%s",
            err.msg);
    StWriteTensor neg = {.name = "n", .dtype = ST_F32, .ndim = 1, .shape = {-4}, .data = x, .raw = NULL};
    T_CHECK(st_write_file(path, &neg, 1, &err) == -1 && strstr(err.msg, "invalid shape"), "%s",
            err.msg);
    T_CHECK(st_write_file("/nonexistent-dir/m.safetensors", dup, 1, &err) == -1 &&
                strstr(err.msg, "/nonexistent-dir/m.safetensors.tmp: cannot create"), "%s", err.msg);

    /* An I/O failure part-way (file size limit) leaves the old file intact and no tmp. */
    StWriteTensor small = {.name = "a", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = x, .raw = NULL};
    T_CHECK(st_write_file(path, &small, 1, &err) == 0, "%s", err.msg);
    char *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    fs_read_file(path, &before, &nb, &err);
    enum { BIG = 1 << 18 };
    float *big = xcalloc(BIG, sizeof *big);
    StWriteTensor large = {.name = "big", .dtype = ST_F32, .ndim = 1, .shape = {BIG}, .data = big, .raw = NULL};
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 65536;
    signal(SIGXFSZ, SIG_IGN);
    T_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    int rc = st_write_file(path, &large, 1, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    T_CHECK(rc == -1 && strstr(err.msg, "w.safetensors: write failed"), "rc %d: %s", rc, err.msg);
    char *tmp = tpath("w.safetensors.tmp");
    T_CHECK(!fs_exists(tmp), "tmp file left behind");
    fs_read_file(path, &after, &na, &err);
    T_CHECK(before && after && na == nb && !memcmp(before, after, na), "old file changed");
    /* and st_write_dir under the same limit: no index written, old save intact */
    char *dir = tpath("limited");
    T_CHECK(st_write_dir(dir, &small, 1, 0, &err) == 0, "%s", err.msg);
    setrlimit(RLIMIT_FSIZE, &lim);
    rc = st_write_dir(dir, &large, 1, 0, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    StSet s = {0};
    T_CHECK(rc == -1 && stset_open_dir(&s, dir, &err) == 0 && stset_find(&s, "a", NULL) &&
                !stset_find(&s, "big", NULL), "old directory save intact: %s", err.msg);
    stset_close(&s);
    free(dir);
    free(tmp);
    free(before);
    free(after);
    free(big);
    free(path);
}

/* Files written by another writer (tools/make_model_reference.py, committed
 * under tests/fixtures/): every tensor reads, and rewriting them with the raw
 * bytes gives back the same tensors byte for byte. */
static void test_fixtures(void) {
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    const char *names[] = {"llama/model.safetensors", "llama/reference.safetensors",
                           "qwen2/model.safetensors", "qwen3/model.safetensors"};
    for (int k = 0; k < 4; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/fixtures/%s", names[k]);
        char *path = fs_join(root, rel), *out = tpath("rewrite.safetensors");
        GrpoErr err = {{0}};
        StFile f, g;
        if (st_open(&f, path, &err)) {
            T_CHECK(0, "fixture: %s", err.msg);
            free(path), free(out);
            continue;
        }
        StWriteTensor *w = xcalloc((size_t)f.n_tensors, sizeof *w);
        int readable = 1;
        for (int i = 0; i < f.n_tensors; i++) {
            const StTensor *t = &f.tensors[i];
            w[i] = (StWriteTensor){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .raw = f.data + t->begin};
            memcpy(w[i].shape, t->shape, sizeof t->shape);
            double *d = xmalloc((size_t)(t->numel + 1) * sizeof *d);
            int64_t *iv = xmalloc((size_t)(t->numel + 1) * sizeof *iv);
            int is_float = t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 ||
                           t->dtype == ST_F64;
            readable &= (is_float ? st_read_f64(&f, t, d, &err) : st_read_i64(&f, t, iv, &err)) == 0;
            free(d), free(iv);
        }
        T_CHECK(readable && f.n_tensors > 0, "%s: %d tensors readable: %s", names[k], f.n_tensors,
                err.msg);
        int same = st_write_file(out, w, f.n_tensors, &err) == 0 && st_open(&g, out, &err) == 0;
        T_CHECK(same, "rewrite %s: %s", names[k], err.msg);
        if (same) {
            for (int i = 0; i < f.n_tensors; i++) {
                const StTensor *a = &f.tensors[i], *b = st_find(&g, a->name);
                same &= b && b->dtype == a->dtype && b->numel == a->numel &&
                        !memcmp(g.data + b->begin, f.data + a->begin, a->end - a->begin);
            }
            T_CHECK(same, "%s: rewritten tensors differ", names[k]);
            st_close(&g);
        }
        free(w);
        st_close(&f);
        free(path), free(out);
    }
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/grpo-test-st-XXXXXX");
    CHECK(mkdtemp(g_dir));
    test_bad_inputs();
    test_round_trip_all_dtypes();
    test_half_bit_round_trips();
    test_write_fill();
    test_rounding_against_reference();
    test_sharded();
    test_write_errors();
    test_write_range();
    test_fixtures();
    fs_rm_rf(g_dir);
    return t_summary("test_safetensors");
}
