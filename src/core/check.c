/* core/check.c — error messages and checked allocation (see check.h). */
#include "core/check.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

int err_set(GrpoErr *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int err_prefix(GrpoErr *err, const char *fmt, ...) {
    if (!err) return -1;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    size_t used = (size_t)n < sizeof err->msg ? (size_t)n : sizeof err->msg - 1;
    size_t room = sizeof err->msg - used;
    if (room > 3) {
        memcpy(err->msg + used, ": ", 2);
        size_t oldlen = strnlen(old, sizeof old - 1);
        size_t copy = oldlen < room - 3 ? oldlen : room - 3;
        memcpy(err->msg + used + 2, old, copy);
        err->msg[used + 2 + copy] = 0;
    }
    return -1;
}

void die_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "grpo: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *xmalloc_at(size_t bytes, const char *file, int line) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die_at(file, line, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_at(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *xrealloc_at(void *p, size_t bytes, const char *file, int line) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) die_at(file, line, "out of memory reallocating %zu bytes", bytes);
    return q;
}

char *xstrdup_at(const char *s, const char *file, int line) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc_at(n, file, line);
    memcpy(p, s, n);
    return p;
}

/* Buffers of 8 MiB and more (weights, gradients, AdamW's state, activations) start
 * on a 2 MiB boundary and ask for transparent huge pages: their first touch then
 * faults a 2 MiB page at a time, not 4 KiB (512x fewer faults, the kernel's
 * clearing of the pages left: an 8.5 GB run's setup spent most of its system time
 * faulting them). */
enum { HUGE_BYTES = 8 << 20, HUGE_ALIGN = 2 << 20 };

void *xaligned_at(size_t bytes, const char *file, int line) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    int huge = rounded >= HUGE_BYTES;
    if (huge) rounded = (rounded + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    void *p = aligned_alloc(huge ? HUGE_ALIGN : 64, rounded ? rounded : 64);
    if (!p) die_at(file, line, "out of memory allocating %zu aligned bytes", bytes);
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, rounded, MADV_HUGEPAGE); /* advice only: where it is refused, 4 KiB pages */
#endif
    return p;
}
