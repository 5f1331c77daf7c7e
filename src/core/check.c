/* core/check.c — error messages and checked allocation (see check.h). */
#include "core/check.h"

#include "core/text.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

/* Room for a message before it is made one line and cut to GrpoErr's. */
enum { ERR_TEXT_BYTES = 4096 };

/* Every message is one line whatever its values hold (text_one_line): a
 * control character, an escape sequence or an invisible code point that came
 * in with a file's or a process's text is shown escaped, and a message longer
 * than GrpoErr's room ends in "..." rather than mid-character. */
static int err_store(GrpoErr *err, const char *text, int n) {
    text_one_line(err->msg, sizeof err->msg, text, n < 0 || (size_t)n >= ERR_TEXT_BYTES);
    return -1;
}

int err_set(GrpoErr *err, const char *fmt, ...) {
    if (!err) return -1;
    char text[ERR_TEXT_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return err_store(err, text, n);
}

int err_prefix(GrpoErr *err, const char *fmt, ...) {
    if (!err) return -1;
    char text[ERR_TEXT_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof text)
        n += snprintf(text + n, sizeof text - (size_t)n, ": %s", err->msg);
    return err_store(err, text, n);
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
