/* fuzz/fuzz_safetensors.c — io/safetensors.h's reader: the 8-byte header length,
 * the JSON header (dtypes, shapes, data_offsets, __metadata__) and its checks,
 * then every tensor read back through the converters. The input is the whole
 * file. What the header promises of an opened file (offsets in range,
 * end - begin == numel * dtype size) is asserted here. */
#include "fuzz.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    StFile f;
    GrpoErr err;
    if (st_open(&f, path, &err)) return 0;
    FUZZ_ASSERT(f.data_bytes <= f.file_bytes);
    for (int i = 0; i < f.n_tensors; i++) {
        const StTensor *t = &f.tensors[i];
        FUZZ_ASSERT(t->begin <= t->end && t->end <= f.data_bytes);
        FUZZ_ASSERT(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
        FUZZ_ASSERT(t->numel >= 0);
        FUZZ_ASSERT((uint64_t)t->numel * st_dtype_bytes(t->dtype) == t->end - t->begin);
        FUZZ_ASSERT(st_find(&f, t->name) != NULL);
        size_t n = (size_t)t->numel;
        switch (t->dtype) {
        case ST_F32: case ST_F16: case ST_BF16: case ST_F64: {
            float *a = malloc(n * sizeof *a + 1);
            double *b = malloc(n * sizeof *b + 1);
            FUZZ_ASSERT(st_read_f32(&f, t, a, &err) == 0);
            FUZZ_ASSERT(st_read_f64(&f, t, b, &err) == 0);
            free(a);
            free(b);
            break;
        }
        default: {
            int64_t *a = malloc(n * sizeof *a + 1);
            FUZZ_ASSERT(st_read_i64(&f, t, a, &err) == 0);
            free(a);
        }
        }
    }
    FUZZ_ASSERT(st_find(&f, "\x01not a tensor name") == NULL);
    st_close(&f);
    return 0;
}
