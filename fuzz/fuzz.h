/* fuzz/fuzz.h — what the libFuzzer harnesses share (docs/fuzzing.md).
 *
 * The parsers under test read files by path, so a harness hands them its input
 * as a file: an anonymous in-memory file (memfd) reopened through
 * /proc/PID/fd/N (a child process can open it too), rewritten for every
 * input — no disk writes, no temporary files left behind. Harnesses include this header only; it is not part of
 * libgrpo. */
#ifndef GRPO_FUZZ_FUZZ_H
#define GRPO_FUZZ_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The repository root, for fixed inputs (assets/byte-tokenizer); the Makefile
 * passes it. */
#ifndef FUZZ_ROOT
#define FUZZ_ROOT "."
#endif

/* Writes data[0..size) as the in-memory input file and returns a path that opens
 * it (the same path on every call). */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-input", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), fd);
    }
    if (ftruncate(fd, 0)) abort();
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    return path;
}

/* A NUL-terminated malloc'd copy of the input (parsers that take C strings). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* An invariant a header promises; a violation is a bug, reported as a crash. */
#define FUZZ_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: promised invariant violated: %s\n", __FILE__, __LINE__, \
                    #cond);                                                                \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
