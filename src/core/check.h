/* core/check.h — errors and checked allocation.
 *
 * Two kinds of failure:
 *  - bad input (a file, a field, an option): library code fills a GrpoErr with
 *    one line naming the file, the field and what was expected, and returns -1.
 *    Only cli/ prints it and exits (status 1).
 *  - programmer errors and out-of-memory: CHECK / xmalloc abort with file:line.
 */
#ifndef GRPO_CORE_CHECK_H
#define GRPO_CORE_CHECK_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char msg[1024];
} GrpoErr;

/* Formats into err->msg (when err is non-NULL) and returns -1, so that
 * `return err_set(err, "...")` reads naturally. */
int err_set(GrpoErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes err->msg with "prefix: ". Returns -1. */
int err_prefix(GrpoErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
#define DIE(...) die_at(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) die_at(__FILE__, __LINE__, "check failed: %s", #cond);    \
    } while (0)

void *xmalloc_at(size_t bytes, const char *file, int line);
void *xcalloc_at(size_t n, size_t size, const char *file, int line);
void *xrealloc_at(void *p, size_t bytes, const char *file, int line);
char *xstrdup_at(const char *s, const char *file, int line);
/* 64-byte aligned, for kernels. Free with free(). */
void *xaligned_at(size_t bytes, const char *file, int line);
#define xmalloc(b) xmalloc_at((b), __FILE__, __LINE__)
#define xcalloc(n, s) xcalloc_at((n), (s), __FILE__, __LINE__)
#define xrealloc(p, b) xrealloc_at((p), (b), __FILE__, __LINE__)
#define xstrdup(s) xstrdup_at((s), __FILE__, __LINE__)
#define xaligned(b) xaligned_at((b), __FILE__, __LINE__)

#endif
