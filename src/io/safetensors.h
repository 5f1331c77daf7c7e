/* io/safetensors.h — the safetensors file format, read (mmap) and written.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {str: str}}, then the data buffer. Offsets are relative to
 * the start of the data buffer. Validation follows the reference
 * implementation: offsets in range, contiguous, non-overlapping, covering the
 * whole buffer; end - begin == numel * dtype size.
 *
 * A model's weights are one `model.safetensors` or several shards listed by
 * `model.safetensors.index.json` ({"metadata": {"total_size": n},
 * "weight_map": {tensor name: shard file name}}); StSet covers both.
 *
 * Every function that can fail on input returns 0 on success and -1 with
 * err->msg naming the file, the tensor or field, and what was expected. */
#ifndef GRPO_IO_SAFETENSORS_H
#define GRPO_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

typedef enum {
    ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL,
    ST_DTYPE_COUNT
} StDtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    size_t begin, end;       /* byte offsets into the data buffer */
} StTensor;

typedef struct {
    char *path;
    uint8_t *map;            /* whole file, mmap'd read-only */
    size_t file_bytes;
    const uint8_t *data;     /* start of the data buffer */
    size_t data_bytes;
    int n_tensors;
    StTensor *tensors;       /* in header order */
    int n_meta;              /* __metadata__ entries */
    char **meta_keys, **meta_values;
} StFile;

const char *st_dtype_name(StDtype d);        /* "F32", ... */
size_t st_dtype_bytes(StDtype d);
int st_dtype_parse(const char *s, StDtype *out);  /* 0, or -1 if unknown */
/* "[d0, d1, ...]" into buf (cut at cap bytes), for messages; returns buf. */
const char *st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

int st_open(StFile *f, const char *path, GrpoErr *err);
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);

/* Copies tensor t into out (numel elements), converting from F32/F16/BF16/F64
 * (exactly, or rounding to nearest for F64 -> F32). I64/I32/... are an error here. */
int st_read_f32(const StFile *f, const StTensor *t, float *out, GrpoErr *err);
/* Same into double (F32/F16/BF16/F64). */
int st_read_f64(const StFile *f, const StTensor *t, double *out, GrpoErr *err);
/* Into bf16: a copy for BF16, rounded to nearest (ties to even) from F32/F16/F64. */
int st_read_bf16(const StFile *f, const StTensor *t, uint16_t *out, GrpoErr *err);
/* Elements [i0, i0 + n) of t as fp32 (st_read_f32's conversions), its pages kept
 * mapped: st_release(f, t) after the last range. */
int st_read_f32_range(const StFile *f, const StTensor *t, int64_t i0, int64_t n, float *out, GrpoErr *err);
/* Drops t's whole pages of the read-only map from the resident set (the readers
 * above do it after a whole tensor): they stay in the page cache. */
void st_release(const StFile *f, const StTensor *t);
/* Integer tensors (I64/I32/I16/I8/U8/BOOL) into int64; out-of-range is not possible. */
int st_read_i64(const StFile *f, const StTensor *t, int64_t *out, GrpoErr *err);

/* A set of shard files: `dir/model.safetensors`, or the shards named by
 * `dir/model.safetensors.index.json` (an index naming a missing shard, or a
 * tensor in the weight_map that is not in its shard, is an error). */
typedef struct {
    int n_files;
    StFile *files;
} StSet;

int stset_open_dir(StSet *s, const char *dir, GrpoErr *err);
void stset_close(StSet *s);
/* Finds a tensor in any shard; *file gets the shard. NULL when absent. */
const StTensor *stset_find(const StSet *s, const char *name, const StFile **file);

/* Writing. Tensors are given as fp32 (data or fill), or as raw bytes, and
 * stored as `dtype`; F32 -> BF16/F16 rounds to nearest even, so a tensor read
 * from BF16/F16 and written back is bit-identical. */
typedef struct {
    const char *name;
    StDtype dtype;           /* stored dtype: F32, F16, BF16 from data; any dtype from raw */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const float *data;       /* numel fp32 values, or NULL when raw or fill is used */
    const void *raw;         /* numel * st_dtype_bytes(dtype) bytes already in dtype */
    /* Or fp32 values made as they are written, a chunk at a time (weights that are
     * not held as one fp32 buffer): fill(ctx, from + i, k, out) puts values
     * [i, i + k) of the tensor in out[0 .. k). */
    void (*fill)(const void *ctx, size_t at, size_t k, float *out);
    const void *ctx;
    size_t from;
} StWriteTensor;

/* 0 when every tensor's fp32 values fit its stored dtype; -1 with "PATH: tensor
 * 'NAME': K value(s) beyond float16's largest, 65504 (the largest magnitude is M):
 * they would be saved as inf, so nothing was written ..." when finite values would
 * round to +-inf in F16 (beyond 65504) or BF16 (beyond 3.38953e38). The writers
 * below check this first, before any byte is written. */
int st_check_range(const char *path, const StWriteTensor *t, int n, GrpoErr *err);

/* Writes one file with tensors in the given order and {"format": "pt"} metadata.
 * Writes to path + ".tmp" then renames, so a failure never leaves a partial file. */
int st_write_file(const char *path, const StWriteTensor *t, int n, GrpoErr *err);

/* Writes `dir/model.safetensors`, or, when the data exceeds max_shard_bytes
 * (0 = never shard), `dir/model-00001-of-0000N.safetensors`... plus
 * `dir/model.safetensors.index.json`, as Hugging Face's save_pretrained does. */
int st_write_dir(const char *dir, const StWriteTensor *t, int n, size_t max_shard_bytes,
                 GrpoErr *err);

/* bf16/f16 <-> f32 conversions, exposed for kernels and tests. */
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_bf16(float f);
float st_f16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);

#endif
