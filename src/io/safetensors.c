/* io/safetensors.c — safetensors files and model directories (see safetensors.h).
 *
 * Is: the header parser with the reference implementation's validation rules
 * (huggingface/safetensors, Metadata::validate), dtype conversions into
 * f32/f64/int64, an atomic writer, and Hugging Face's sharded layout.
 * Is not: a tensor library; it knows names, dtypes, shapes and bytes, nothing
 * about models. It assumes a little-endian host (as the format does). */
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/bulk_write.h"
#include "io/fsutil.h"
#include "ops/ops.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "io/safetensors.c assumes a little-endian host"
#endif

/* The reference implementation refuses headers above 100 MB. */
#define ST_MAX_HEADER_BYTES 100000000ull

static const struct {
    const char *name;
    size_t bytes;
} dtype_info[ST_DTYPE_COUNT] = {
    [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4}, [ST_I16] = {"I16", 2},  [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1},
};

const char *st_dtype_name(StDtype d) {
    return (unsigned)d < ST_DTYPE_COUNT ? dtype_info[d].name : "?";
}

size_t st_dtype_bytes(StDtype d) {
    return (unsigned)d < ST_DTYPE_COUNT ? dtype_info[d].bytes : 0;
}

int st_dtype_parse(const char *s, StDtype *out) {
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (!strcmp(s, dtype_info[d].name)) {
            *out = (StDtype)d;
            return 0;
        }
    return -1;
}

/* ---- bf16 / f16 <-> f32 ------------------------------------------------------
 * Round to nearest, ties to even, done on the bit patterns. NaNs keep their sign
 * and the top bits of their payload; a NaN whose payload lives only in the bits
 * that are dropped gets the quiet bit so that it stays a NaN. Consequence: every
 * bf16/f16 bit pattern, NaNs included, survives x -> f32 -> x unchanged, as long
 * as the f32 is only copied (arithmetic may quiet a signalling NaN). */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float st_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t st_f32_to_bf16(float f) { return f32_to_bf16(f); }

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t st_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) { /* NaN */
        uint16_t m = (uint16_t)((a >> 13) & 0x3ff);
        return sign | 0x7c00 | (m ? m : 0x200);
    }
    if (a >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to Inf (or is Inf) */
    if (a >= 0x38800000u) {                       /* normal in f16: >= 2^-14 */
        a -= (uint32_t)(127 - 15) << 23;          /* rebias the exponent */
        return sign | (uint16_t)((a + 0xfffu + ((a >> 13) & 1)) >> 13);
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: half the smallest subnormal or less */
    /* subnormal: value = m * 2^(e-150), result = round(value / 2^-24) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
}

/* ---- reading ------------------------------------------------------------- */

const char *st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

/* jansson reports a duplicate key with the byte position just past it. Recover
 * the key and, when it sits inside a tensor entry, that tensor's name, by
 * re-scanning the header up to that position. Returns the error. */
static int duplicate_key_error(const char *path, const char *hdr, size_t pos, GrpoErr *err) {
    int depth = 0, in_str = 0, esc = 0;
    char prev = 0;                         /* last significant char outside strings */
    size_t s_begin = 0, s_end = 0, t_begin = 0, t_end = 0;
    int s_depth = 0, s_is_key = 0, have = 0, have_tensor = 0;
    for (size_t i = 0; i < pos; i++) {
        char c = hdr[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') {
                in_str = 0, s_end = i, have = 1;
                if (s_is_key && s_depth == 1) t_begin = s_begin, t_end = s_end, have_tensor = 1;
            }
            continue;
        }
        if (c == '"') {
            in_str = 1, s_begin = i + 1, s_depth = depth, s_is_key = prev == '{' || prev == ',';
        } else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') prev = c;
    }
    if (!have) return err_set(err, "%s: header has a duplicate key", path);
    int klen = (int)(s_end - s_begin);
    if (s_depth == 1)
        return err_set(err, "%s: duplicate tensor name '%.*s' in header", path, klen, hdr + s_begin);
    if (have_tensor)
        return err_set(err, "%s: tensor '%.*s': duplicate key '%.*s'", path, (int)(t_end - t_begin),
                       hdr + t_begin, klen, hdr + s_begin);
    return err_set(err, "%s: header has a duplicate key '%.*s'", path, klen, hdr + s_begin);
}

/* A JSON value that is an integer >= 0, into *out. */
static int json_nonneg(json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Fills t from one header entry; checks everything that concerns this tensor
 * alone (the layout of all tensors together is checked afterwards). */
static int parse_tensor(const char *path, const char *name, json_t *v, size_t data_bytes,
                        StTensor *t, GrpoErr *err) {
    t->name = xstrdup(name);
    if (!json_is_object(v))
        return err_set(err, "%s: tensor '%s': entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return err_set(err, "%s: tensor '%s': \"dtype\" is missing or not a string", path, name);
    if (st_dtype_parse(json_string_value(jd), &t->dtype))
        return err_set(err, "%s: tensor '%s': unknown dtype '%s' (supported: F32 F16 BF16 F64 "
                       "I64 I32 I16 I8 U8 BOOL)", path, name, json_string_value(jd));
    if (!json_is_array(js))
        return err_set(err, "%s: tensor '%s': \"shape\" is missing or not an array", path, name);
    if (json_array_size(js) > ST_MAX_DIMS)
        return err_set(err, "%s: tensor '%s': shape has %zu dimensions, at most %d are supported",
                       path, name, json_array_size(js), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(js);
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (json_nonneg(json_array_get(js, i), &d))
            return err_set(err, "%s: tensor '%s': shape entry %d is not a non-negative integer",
                           path, name, i);
        if (d && (uint64_t)t->numel > (uint64_t)INT64_MAX / d)
            return err_set(err, "%s: tensor '%s': shape overflows a 64-bit element count", path, name);
        t->shape[i] = (int64_t)d;
        t->numel *= (int64_t)d;
    }
    uint64_t b, e;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || json_nonneg(json_array_get(jo, 0), &b) ||
        json_nonneg(json_array_get(jo, 1), &e))
        return err_set(err, "%s: tensor '%s': \"data_offsets\" is not an array of 2 non-negative "
                       "integers", path, name);
    if (e < b)
        return err_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                       path, name, (unsigned long long)b, (unsigned long long)e);
    size_t esize = st_dtype_bytes(t->dtype);
    char shape[256];
    if ((uint64_t)t->numel > UINT64_MAX / esize || e - b != (uint64_t)t->numel * esize)
        return err_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] do not match shape %s of %s "
                       "(%llu bytes)", path, name, (unsigned long long)b, (unsigned long long)e,
                       st_shape_str(shape, sizeof shape, t->ndim, t->shape), st_dtype_name(t->dtype),
                       (unsigned long long)t->numel * esize);
    if (e > data_bytes)
        return err_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the "
                       "data buffer (%zu bytes)", path, name, (unsigned long long)b,
                       (unsigned long long)e, data_bytes);
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return 0;
}

static int parse_metadata(const char *path, json_t *v, StFile *f, GrpoErr *err) {
    if (!json_is_object(v)) return err_set(err, "%s: __metadata__ is not an object", path);
    size_t n = json_object_size(v);
    f->meta_keys = xcalloc(n, sizeof *f->meta_keys);
    f->meta_values = xcalloc(n, sizeof *f->meta_values);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (!json_is_string(x))
            return err_set(err, "%s: __metadata__ '%s' is not a string", path, k);
        f->meta_keys[f->n_meta] = xstrdup(k);
        f->meta_values[f->n_meta] = xstrdup(json_string_value(x));
        f->n_meta++;
    }
    return 0;
}

static int cmp_offsets(const void *pa, const void *pb) {
    const StTensor *a = *(const StTensor *const *)pa, *b = *(const StTensor *const *)pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return 0;
}

/* Tensors, sorted by offset, must tile the data buffer exactly. */
static int check_layout(const StFile *f, GrpoErr *err) {
    const StTensor **order = xmalloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    for (int i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_offsets);
    size_t at = 0;
    int rc = 0;
    for (int i = 0; i < f->n_tensors && !rc; i++) {
        const StTensor *t = order[i];
        if (t->begin < at)
            rc = err_set(err, "%s: tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap", f->path,
                         order[i - 1]->name, order[i - 1]->begin, order[i - 1]->end, t->name,
                         t->begin, t->end);
        else if (t->begin > at)
            rc = err_set(err, "%s: tensor '%s': data_offsets [%zu, %zu] leave bytes [%zu, %zu) of the "
                         "data buffer unused (tensors must be contiguous)", f->path, t->name,
                         t->begin, t->end, at, t->begin);
        at = t->end;
    }
    free(order);
    if (!rc && at != f->data_bytes)
        rc = err_set(err, "%s: data buffer is %zu bytes but the tensors cover only %zu", f->path,
                     f->data_bytes, at);
    return rc;
}

static int parse_header(StFile *f, const char *hdr, size_t hlen, GrpoErr *err) {
    json_error_t je;
    json_t *root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_duplicate_key)
            return duplicate_key_error(f->path, hdr, (size_t)je.position, err);
        return err_set(err, "%s: header is not valid JSON: %s (header byte %d)", f->path, je.text,
                       je.position);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(err, "%s: header is not a JSON object", f->path);
        goto done;
    }
    f->tensors = xcalloc(json_object_size(root), sizeof *f->tensors);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__"))
            rc = parse_metadata(f->path, v, f, err);
        else
            rc = parse_tensor(f->path, key, v, f->data_bytes, &f->tensors[f->n_tensors++], err);
        if (rc) goto done;
    }
    rc = check_layout(f, err);
done:
    json_decref(root);
    return rc;
}

int st_open(StFile *f, const char *path, GrpoErr *err) {
    memset(f, 0, sizeof *f);
    int fd = fs_open_regular(path, err);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return err_set(err, "%s: cannot stat: %s", path, strerror(errno));
    }
    size_t n = (size_t)sb.st_size;
    if (n < 8) {
        close(fd);
        return err_set(err, "%s: file is %zu bytes, shorter than the 8-byte header length", path, n);
    }
    void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return err_set(err, "%s: cannot mmap: %s", path, strerror(e));
    f->path = xstrdup(path);
    f->map = map;
    f->file_bytes = n;
    uint64_t hlen;
    memcpy(&hlen, map, 8);
    int rc = 0;
    if (hlen > ST_MAX_HEADER_BYTES)
        rc = err_set(err, "%s: header length %llu is above the %llu-byte limit", path,
                     (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
    else if (hlen > n - 8)
        rc = err_set(err, "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                     (unsigned long long)hlen, n);
    if (!rc) {
        f->data = f->map + 8 + hlen;
        f->data_bytes = n - 8 - (size_t)hlen;
        rc = parse_header(f, (const char *)f->map + 8, (size_t)hlen, err);
    }
    if (rc) st_close(f);
    return rc;
}

void st_close(StFile *f) {
    if (f->map) munmap(f->map, f->file_bytes);
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_values[i]);
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

/* Data may be unaligned in the map, so elements are loaded with memcpy. */
#define ST_DEFINE_LOAD(fn, T)                                                  \
    static inline T fn(const uint8_t *p, int64_t i) {                          \
        T v;                                                                   \
        memcpy(&v, p + (size_t)i * sizeof(T), sizeof(T));                     \
        return v;                                                              \
    }
ST_DEFINE_LOAD(ld_u16, uint16_t)
ST_DEFINE_LOAD(ld_i16, int16_t)
ST_DEFINE_LOAD(ld_i32, int32_t)
ST_DEFINE_LOAD(ld_f32, float)
ST_DEFINE_LOAD(ld_f64, double)

/* Drops the tensor's whole pages of the read-only map from this process's
 * resident set once it has been converted: a model is read tensor by tensor into
 * its own buffer, and without this the mapped file would stay resident beside it
 * (peak RSS = weights twice). The pages stay in the page cache; reading the
 * tensor again faults them back in. */
void st_release(const StFile *f, const StTensor *t) {
    if (!f->map) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)(f->data + t->begin) + page - 1) & ~(page - 1);
    uintptr_t b = (uintptr_t)(f->data + t->end) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* st_read_f32 and st_read_f64 are one body: the same conversions into float or
 * double, where the dtype of the output's own width (OWN) is a plain copy. */
#define ST_DEFINE_READ_FLOAT(fn, T, OWN)                                                               \
    int fn(const StFile *f, const StTensor *t, T *out, GrpoErr *err) {                                 \
        const uint8_t *p = f->data + t->begin;                                                         \
        int64_t n = t->numel;                                                                          \
        if (t->dtype == OWN) {                                                                         \
            memcpy(out, p, (size_t)n * sizeof(T));                                                     \
            st_release(f, t);                                                                       \
            return 0;                                                                                  \
        }                                                                                              \
        switch (t->dtype) {                                                                            \
        case ST_F32: for (int64_t i = 0; i < n; i++) out[i] = (T)ld_f32(p, i); break;                  \
        case ST_F16: for (int64_t i = 0; i < n; i++) out[i] = st_f16_to_f32(ld_u16(p, i)); break;      \
        case ST_BF16: for (int64_t i = 0; i < n; i++) out[i] = st_bf16_to_f32(ld_u16(p, i)); break;    \
        case ST_F64: for (int64_t i = 0; i < n; i++) out[i] = (T)ld_f64(p, i); break;                  \
        default:                                                                                       \
            return err_set(err, "%s: tensor '%s': dtype %s cannot be read as floating point", f->path, \
                           t->name, st_dtype_name(t->dtype));                                          \
        }                                                                                              \
        st_release(f, t);                                                                           \
        return 0;                                                                                      \
    }
ST_DEFINE_READ_FLOAT(st_read_f32, float, ST_F32)
ST_DEFINE_READ_FLOAT(st_read_f64, double, ST_F64)

int st_read_f32_range(const StFile *f, const StTensor *t, int64_t i0, int64_t n, float *out, GrpoErr *err) {
    CHECK(i0 >= 0 && n >= 0 && i0 + n <= t->numel);
    const uint8_t *p = f->data + t->begin;
    switch (t->dtype) {
    case ST_F32: memcpy(out, p + (size_t)i0 * 4, (size_t)n * 4); break;
    case ST_F16: for (int64_t i = 0; i < n; i++) out[i] = st_f16_to_f32(ld_u16(p, i0 + i)); break;
    case ST_BF16: for (int64_t i = 0; i < n; i++) out[i] = st_bf16_to_f32(ld_u16(p, i0 + i)); break;
    case ST_F64: for (int64_t i = 0; i < n; i++) out[i] = (float)ld_f64(p, i0 + i); break;
    default:
        return err_set(err, "%s: tensor '%s': dtype %s cannot be read as floating point", f->path, t->name,
                       st_dtype_name(t->dtype));
    }
    return 0;
}

int st_read_bf16(const StFile *f, const StTensor *t, uint16_t *out, GrpoErr *err) {
    const uint8_t *p = f->data + t->begin;
    int64_t n = t->numel;
    switch (t->dtype) {
    case ST_BF16: memcpy(out, p, (size_t)n * 2); break;
    case ST_F32: for (int64_t i = 0; i < n; i++) out[i] = st_f32_to_bf16(ld_f32(p, i)); break;
    case ST_F16: for (int64_t i = 0; i < n; i++) out[i] = st_f32_to_bf16(st_f16_to_f32(ld_u16(p, i))); break;
    case ST_F64: for (int64_t i = 0; i < n; i++) out[i] = st_f32_to_bf16((float)ld_f64(p, i)); break;
    default:
        return err_set(err, "%s: tensor '%s': dtype %s cannot be read as floating point", f->path, t->name,
                       st_dtype_name(t->dtype));
    }
    st_release(f, t);
    return 0;
}

int st_read_i64(const StFile *f, const StTensor *t, int64_t *out, GrpoErr *err) {
    const uint8_t *p = f->data + t->begin;
    int64_t n = t->numel;
    switch (t->dtype) {
    case ST_I64: memcpy(out, p, (size_t)n * 8); return 0;
    case ST_I32: for (int64_t i = 0; i < n; i++) out[i] = ld_i32(p, i); return 0;
    case ST_I16: for (int64_t i = 0; i < n; i++) out[i] = ld_i16(p, i); return 0;
    case ST_I8: for (int64_t i = 0; i < n; i++) out[i] = (int8_t)p[i]; return 0;
    case ST_U8: for (int64_t i = 0; i < n; i++) out[i] = p[i]; return 0;
    case ST_BOOL: for (int64_t i = 0; i < n; i++) out[i] = p[i] != 0; return 0;
    default:
        return err_set(err, "%s: tensor '%s': dtype %s cannot be read as integer", f->path, t->name,
                       st_dtype_name(t->dtype));
    }
}

/* ---- sets of shards ------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_index(StSet *s, const char *dir, const char *index, GrpoErr *err) {
    json_t *root = fs_load_json(index, JSON_REJECT_DUPLICATES, err);
    if (!root) return -1;
    int rc = 0;
    json_t *wm = json_object_get(root, "weight_map");
    char **shards = NULL;
    int n_shards = 0;
    const char *name;
    json_t *v;
    if (!json_is_object(wm)) {
        rc = err_set(err, "%s: \"weight_map\" is missing or not an object", index);
        goto done;
    }
    shards = xcalloc(json_object_size(wm), sizeof *shards);
    json_object_foreach(wm, name, v) {
        const char *file = json_string_value(v);
        if (!file || !file[0] || strchr(file, '/')) {
            rc = err_set(err, "%s: weight_map entry for '%s' is not a file name", index, name);
            goto done;
        }
        int seen = 0;
        for (int i = 0; i < n_shards && !seen; i++) seen = !strcmp(shards[i], file);
        if (!seen) shards[n_shards++] = xstrdup(file);
    }
    qsort(shards, (size_t)n_shards, sizeof *shards, cmp_str);
    s->files = xcalloc((size_t)(n_shards ? n_shards : 1), sizeof *s->files);
    for (int i = 0; i < n_shards; i++) {
        char *path = fs_join(dir, shards[i]);
        rc = st_open(&s->files[i], path, err);
        free(path);
        if (rc) {
            err_prefix(err, "%s: shard '%s'", index, shards[i]);
            goto done;
        }
        s->n_files++;
    }
    json_object_foreach(wm, name, v) {
        const char *file = json_string_value(v);
        int i = 0;
        while (strcmp(shards[i], file)) i++;
        if (!st_find(&s->files[i], name)) {
            rc = err_set(err, "%s: weight_map puts tensor '%s' in %s, which does not contain it",
                         index, name, file);
            goto done;
        }
    }
done:
    for (int i = 0; i < n_shards; i++) free(shards[i]);
    free(shards);
    json_decref(root);
    return rc;
}

int stset_open_dir(StSet *s, const char *dir, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    char *index = fs_join(dir, "model.safetensors.index.json");
    char *single = fs_join(dir, "model.safetensors");
    int rc;
    if (fs_exists(index)) {
        rc = open_index(s, dir, index, err);
    } else if (fs_exists(single)) {
        s->files = xcalloc(1, sizeof *s->files);
        rc = st_open(&s->files[0], single, err);
        if (!rc) s->n_files = 1;
    } else {
        rc = err_set(err, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    free(index);
    free(single);
    if (rc) stset_close(s);
    return rc;
}

void stset_close(StSet *s) {
    for (int i = 0; i < s->n_files; i++) st_close(&s->files[i]);
    free(s->files);
    memset(s, 0, sizeof *s);
}

const StTensor *stset_find(const StSet *s, const char *name, const StFile **file) {
    for (int i = 0; i < s->n_files; i++) {
        const StTensor *t = st_find(&s->files[i], name);
        if (t) {
            if (file) *file = &s->files[i];
            return t;
        }
    }
    if (file) *file = NULL;
    return NULL;
}

/* ---- writing ------------------------------------------------------------- */

static size_t wt_numel(const StWriteTensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

static size_t wt_bytes(const StWriteTensor *t) { return wt_numel(t) * st_dtype_bytes(t->dtype); }

static int cmp_wt_name(const void *a, const void *b) {
    return strcmp((*(const StWriteTensor *const *)a)->name, (*(const StWriteTensor *const *)b)->name);
}

/* A tensor stored as F16 or BF16 from fp32 whose finite values would round to
 * +-inf there (float16 holds magnitudes up to 65504, bfloat16 up to 3.3895e38)
 * is refused before anything is written: saving it would turn trained weights
 * into inf without a word. The message names the tensor, its largest magnitude
 * and the dtype's limit. Non-finite values are left to the callers' own checks. */
static int check_range(const char *path, const StWriteTensor *t, GrpoErr *err) {
    if (t->raw || (t->dtype != ST_F16 && t->dtype != ST_BF16)) return 0;
    size_t n = wt_numel(t), overflow = 0;
    double largest = 0;
    float vals[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        if (t->fill) t->fill(t->ctx, t->from + i, m, vals);
        const float *x = t->fill ? vals : t->data + i;
        for (size_t j = 0; j < m; j++) {
            if (!isfinite(x[j])) continue;
            if (fabsf(x[j]) > largest) largest = fabsf(x[j]);
            float back = t->dtype == ST_BF16 ? st_bf16_to_f32(st_f32_to_bf16(x[j])) : st_f16_to_f32(st_f32_to_f16(x[j]));
            overflow += !isfinite(back);
        }
    }
    if (!overflow) return 0;
    int f16 = t->dtype == ST_F16;
    return err_set(err, "%s: tensor '%s': %zu value(s) beyond %s's largest, %s (the largest magnitude is %.6g): "
                   "they would be saved as inf, so nothing was written (float32%s holds them)", path, t->name, overflow,
                   f16 ? "float16" : "bfloat16", f16 ? "65504" : "3.38953e+38", largest, f16 ? " or bfloat16" : "");
}

int st_check_range(const char *path, const StWriteTensor *t, int n, GrpoErr *err) {
    for (int i = 0; i < n; i++)
        if (check_range(path, &t[i], err)) return -1;
    return 0;
}

/* Checks what the caller asks to write, so that writing itself can only fail on I/O. */
static int check_write(const char *path, const StWriteTensor *t, int n, GrpoErr *err) {
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name ? t[i].name : "(null)";
        if (!t[i].name || !t[i].name[0] || !strcmp(t[i].name, "__metadata__"))
            return err_set(err, "%s: tensor %d: invalid name '%s'", path, i, name);
        if ((unsigned)t[i].dtype >= ST_DTYPE_COUNT)
            return err_set(err, "%s: tensor '%s': invalid dtype %d", path, name, (int)t[i].dtype);
        if (!t[i].raw && !((t[i].data || t[i].fill) && (t[i].dtype == ST_F32 || t[i].dtype == ST_F16 ||
                                         t[i].dtype == ST_BF16)))
            return err_set(err, "%s: tensor '%s': no data for dtype %s (fp32 data converts to F32, "
                           "F16, BF16; other dtypes need raw bytes)", path, name,
                           st_dtype_name(t[i].dtype));
        if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS)
            return err_set(err, "%s: tensor '%s': ndim %d is outside 0..%d", path, name, t[i].ndim,
                           ST_MAX_DIMS);
        uint64_t bytes = st_dtype_bytes(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) {
            uint64_t s = (uint64_t)t[i].shape[d];
            if (t[i].shape[d] < 0 || (s && bytes > (uint64_t)INT64_MAX / s))
                return err_set(err, "%s: tensor '%s': invalid shape", path, name);
            bytes *= s;
        }
    }
    if (st_check_range(path, t, n, err)) return -1;
    const StWriteTensor **sorted = xmalloc((size_t)(n ? n : 1) * sizeof *sorted);
    for (int i = 0; i < n; i++) sorted[i] = &t[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_wt_name);
    int rc = 0;
    for (int i = 1; i < n && !rc; i++)
        if (!strcmp(sorted[i - 1]->name, sorted[i]->name))
            rc = err_set(err, "%s: duplicate tensor name '%s'", path, sorted[i]->name);
    free(sorted);
    return rc;
}

/* Header text padded with spaces to a multiple of 8 bytes, as HF does, so the
 * data buffer starts 8-byte aligned. */
static char *build_header(const StWriteTensor *t, int n, size_t *len) {
    json_t *root = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        size_t b = wt_bytes(&t[i]);
        json_object_set_new(e, "dtype", json_string(st_dtype_name(t[i].dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)at, (json_int_t)(at + b)));
        json_object_set_new(root, t[i].name, e);
        at += b;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    CHECK(text != NULL);
    size_t n_text = strlen(text), padded = (n_text + 7) & ~(size_t)7;
    char *out = xmalloc(padded + 1);
    memcpy(out, text, n_text);
    memset(out + n_text, ' ', padded - n_text);
    out[padded] = '\0';
    free(text);
    *len = padded;
    return out;
}

/* Writes one tensor's bytes, converting fp32 in chunks. 0 or -1 (errno set). */
static int write_tensor_data(BulkFile *fp, const StWriteTensor *t) {
    size_t n = wt_numel(t);
    if (t->raw) return bulk_write(fp, t->raw, wt_bytes(t));
    if (t->dtype == ST_F32 && !t->fill) return bulk_write(fp, t->data, 4 * n);
    float vals[4096];
    uint16_t buf[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        if (t->fill) t->fill(t->ctx, t->from + i, m, vals);
        const float *x = t->fill ? vals : t->data + i;
        if (t->dtype == ST_F32) {
            if (bulk_write(fp, x, 4 * m)) return -1;
            continue;
        }
        for (size_t j = 0; j < m; j++) buf[j] = t->dtype == ST_BF16 ? st_f32_to_bf16(x[j]) : st_f32_to_f16(x[j]);
        if (bulk_write(fp, buf, 2 * m)) return -1;
    }
    return 0;
}

int st_write_file(const char *path, const StWriteTensor *t, int n, GrpoErr *err) {
    if (check_write(path, t, n, err)) return -1;
    size_t hlen;
    char *header = build_header(t, n, &hlen);
    size_t plen = strlen(path);
    char *tmp = xmalloc(plen + 5);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    int rc = 0;
    BulkFile *fp = bulk_open(tmp, BULK_DIRECT);
    if (!fp) {
        rc = err_set(err, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    uint64_t hlen64 = hlen;
    int ok = bulk_write(fp, &hlen64, 8) == 0 && bulk_write(fp, header, hlen) == 0;
    for (int i = 0; i < n && ok; i++) ok = write_tensor_data(fp, &t[i]) == 0;
    int e = errno;
    if (bulk_close(fp) != 0 && ok) ok = 0, e = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, e = errno;
    if (!ok) {
        unlink(tmp);
        rc = err_set(err, "%s: write failed: %s", path, strerror(e));
    }
done:
    free(tmp);
    free(header);
    return rc;
}

/* Removes `model-XXXXX-of-YYYYY.safetensors` files in dir that are not among
 * the n_shards just written (a previous save with another shard count). */
static void remove_stale_shards(const char *dir, int n_shards) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned idx, of;
        int used = 0;
        if (sscanf(de->d_name, "model-%5u-of-%5u.safetensors%n", &idx, &of, &used) != 2 ||
            de->d_name[used] != '\0' || used == 0)
            continue;
        if ((int)of != n_shards || idx < 1 || (int)idx > n_shards) {
            char *p = fs_join(dir, de->d_name);
            unlink(p);
            free(p);
        }
    }
    closedir(d);
}

int st_write_dir(const char *dir, const StWriteTensor *t, int n, size_t max_shard_bytes,
                 GrpoErr *err) {
    if (check_write(dir, t, n, err) || fs_mkdir_p(dir, err)) return -1;
    /* Hugging Face's rule: tensors in order, a new shard when the next tensor
     * would push a non-empty shard past the limit. A shard is a range of t. */
    int *first = xmalloc((size_t)(n + 1) * sizeof *first), n_shards = 1;
    first[0] = 0;
    size_t cur = 0, total = 0;
    for (int i = 0; i < n; i++) {
        size_t b = wt_bytes(&t[i]);
        if (max_shard_bytes && cur > 0 && cur + b > max_shard_bytes) first[n_shards++] = i, cur = 0;
        cur += b;
        total += b;
    }
    first[n_shards] = n;
    char *index = fs_join(dir, "model.safetensors.index.json");
    char *single = fs_join(dir, "model.safetensors");
    int rc = 0;
    if (n_shards == 1) {
        rc = st_write_file(single, t, n, err);
        if (!rc) unlink(index), remove_stale_shards(dir, 0);
        goto done;
    }
    json_t *wm = json_object();
    for (int s = 0; s < n_shards && !rc; s++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        char *path = fs_join(dir, name);
        rc = st_write_file(path, t + first[s], first[s + 1] - first[s], err);
        free(path);
        for (int i = first[s]; i < first[s + 1]; i++)
            json_object_set_new(wm, t[i].name, json_string(name));
    }
    if (!rc) {
        json_t *root = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)total,
                                 "weight_map", wm);
        wm = NULL;
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(root);
        CHECK(text != NULL);
        size_t len = strlen(text);
        text = xrealloc(text, len + 2);
        text[len++] = '\n';
        rc = fs_write_file_atomic(index, text, len, err);
        free(text);
        if (!rc) unlink(single), remove_stale_shards(dir, n_shards);
    }
    json_decref(wm);
done:
    free(first);
    free(index);
    free(single);
    return rc;
}
