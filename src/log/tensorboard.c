/* log/tensorboard.c — TFRecord-framed tensorflow Event protos (tensorboard.h).
 *
 * The protobuf fields written (field number, wire type):
 *   Event:   wall_time 1 (64-bit double), step 2 (varint), file_version 3
 *            (length-delimited string), summary 5 (length-delimited Summary)
 *   Summary: value 1 (repeated, length-delimited Value)
 *   Value:   tag 1 (string), simple_value 2 (32-bit float) */
#include "log/tensorboard.h"

#include "io/fsutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- CRC-32C ---------------------------------------------------------------- */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* reflected Castagnoli */
        crc_table[i] = c;
    }
}

uint32_t tb_crc32c(const void *data, size_t n) {
    if (!crc_table[1]) crc_init();
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t tb_mask_crc(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

/* ---- protobuf, the few encodings needed ---------------------------------------- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *d, size_t n) {
    if (!n) return; /* an empty string (a scalar tag's empty prefix): memcpy must not see a NULL buffer */
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_varint(Buf *b, uint64_t v) {
    uint8_t t[10];
    int n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, t, (size_t)n);
}

static void put_tag(Buf *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void put_bytes(Buf *b, int field, const void *d, size_t n) {
    put_tag(b, field, 2);
    put_varint(b, n);
    put(b, d, n);
}

static void put_le(Buf *b, uint64_t v, int bytes) {
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, (size_t)bytes);
}

static void put_double(Buf *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_tag(b, field, 1);
    put_le(b, u, 8);
}

static void put_float(Buf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_tag(b, field, 5);
    put_le(b, u, 4);
}

/* ---- records ------------------------------------------------------------------ */
static int write_record(TbWriter *w, const Buf *data, GrpoErr *err) {
    Buf r = {0};
    put_le(&r, data->n, 8);
    put_le(&r, tb_mask_crc(tb_crc32c(r.p, 8)), 4);
    put(&r, data->p, data->n);
    put_le(&r, tb_mask_crc(tb_crc32c(data->p, data->n)), 4);
    int bad = fwrite(r.p, 1, r.n, w->f) != r.n || fflush(w->f) != 0;
    free(r.p);
    return bad ? err_set(err, "%s: write failed: %s", w->path, strerror(errno ? errno : EIO)) : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int tb_open(TbWriter *w, const char *dir, GrpoErr *err) {
    memset(w, 0, sizeof *w);
    if (fs_mkdir_p(dir, err)) return -1;
    char host[256] = "localhost", name[400];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    snprintf(name, sizeof name, "events.out.tfevents.%ld.%s.%ld.0", (long)time(NULL), host, (long)getpid());
    w->path = fs_join(dir, name);
    w->f = fopen(w->path, "wb");
    if (!w->f) {
        int rc = err_set(err, "%s: cannot create: %s", w->path, strerror(errno));
        free(w->path);
        w->path = NULL;
        return rc;
    }
    Buf e = {0};
    put_double(&e, 1, now_s());
    put_bytes(&e, 3, "brain.Event:2", 13);
    int rc = write_record(w, &e, err);
    free(e.p);
    if (rc) tb_close(w);
    return rc;
}

int tb_write_scalars(TbWriter *w, long step, double wall_time, const char *prefix, const char *const *names,
                     const double *values, int n, GrpoErr *err) {
    Buf summary = {0}, value = {0}, tag = {0}, event = {0};
    for (int i = 0; i < n; i++) {
        if (!isfinite(values[i])) continue;
        tag.n = value.n = 0;
        put(&tag, prefix, strlen(prefix));
        put(&tag, names[i], strlen(names[i]));
        put_bytes(&value, 1, tag.p, tag.n);
        put_float(&value, 2, (float)values[i]);
        put_bytes(&summary, 1, value.p, value.n);
    }
    put_double(&event, 1, wall_time > 0 ? wall_time : now_s());
    put_tag(&event, 2, 0);
    put_varint(&event, (uint64_t)step);
    put_bytes(&event, 5, summary.p ? summary.p : (uint8_t *)"", summary.n);
    int rc = write_record(w, &event, err);
    free(summary.p), free(value.p), free(tag.p), free(event.p);
    return rc;
}

void tb_close(TbWriter *w) {
    if (w->f) fclose(w->f);
    free(w->path);
    memset(w, 0, sizeof *w);
}
