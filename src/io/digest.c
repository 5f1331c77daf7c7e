/* io/digest.c — fingerprints of input files and directories (digest.h).
 *
 * Is: a two-lane 64-bit multiply-rotate hash over bytes, and what is read of a
 * file or a model directory. Is not: a cryptographic hash, nor a reader of
 * anything below a directory's top level (HF model and checkpoint directories
 * are flat). */
#include "io/digest.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"

#define K0 0x9E3779B97F4A7C15ull
#define K1 0xC2B2AE3D27D4EB4Full
#define K2 0x165667B19E3779F9ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* splitmix64's finaliser: every input bit reaches every output bit */
static uint64_t mix(uint64_t x) {
    x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27, x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void digest_init(Digest *d) { d->h[0] = K0, d->h[1] = K1; }

static void add_word(Digest *d, uint64_t w) {
    d->h[0] = rotl(d->h[0] ^ (w * K1), 31) * K0;
    d->h[1] = rotl(d->h[1] ^ (w * K2), 29) * K1 + d->h[0];
}

void digest_add(Digest *d, const void *p, size_t n) {
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        add_word(d, w);
    }
    uint64_t tail = 0;
    if (n > i) memcpy(&tail, b + i, n - i);
    add_word(d, tail ^ ((uint64_t)(n - i) << 56));
    d->h[0] = mix(d->h[0] ^ d->h[1]), d->h[1] = mix(d->h[1] + K2);
}

void digest_add_u64(Digest *d, uint64_t x) { digest_add(d, &x, sizeof x); }

void digest_add_str(Digest *d, const char *s) {
    digest_add_u64(d, s ? strlen(s) + 1 : 0);
    if (s) digest_add(d, s, strlen(s));
}

/* Adds bytes [off, off + n) of fd (fewer at the end of the file). */
static int add_range(Digest *d, int fd, int64_t off, size_t n, unsigned char *buf, size_t cap, const char *path,
                     GrpoErr *err) {
    while (n > 0) {
        size_t want = n < cap ? n : cap;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return err_set(err, "%s: cannot read: %s", path, strerror(errno));
        }
        if (got == 0) break;
        digest_add(d, buf, (size_t)got);
        off += got, n -= (size_t)got;
    }
    return 0;
}

int digest_file(Digest *d, const char *path, GrpoErr *err) {
    int fd = fs_open_regular(path, err);
    if (fd < 0) return -1;
    struct stat sb;
    fstat(fd, &sb);
    int64_t size = sb.st_size;
    enum { CAP = 1 << 20, BLOCK = 64 << 10, N_BLOCKS = 64 };
    unsigned char *buf = xmalloc(CAP);
    digest_add_u64(d, (uint64_t)size);
    int rc = 0;
    if (size <= DIGEST_WHOLE_BYTES) {
        rc = add_range(d, fd, 0, (size_t)size, buf, CAP, path, err);
    } else {
        int64_t head = CAP;
        size_t n = strlen(path);
        uint64_t header = 0;
        /* a .safetensors file: 8 bytes of header length, then the JSON header */
        if (n > 12 && !strcmp(path + n - 12, ".safetensors") && pread(fd, &header, 8, 0) == 8 &&
            header + 8 > (uint64_t)head && header + 8 <= (uint64_t)size)
            head = (int64_t)header + 8;
        rc = add_range(d, fd, 0, (size_t)head, buf, CAP, path, err);
        for (int k = 0; k < N_BLOCKS && !rc; k++)
            rc = add_range(d, fd, size / N_BLOCKS * k, BLOCK, buf, CAP, path, err);
        if (!rc) rc = add_range(d, fd, size - BLOCK, BLOCK, buf, CAP, path, err);
    }
    free(buf);
    close(fd);
    return rc;
}

static int name_order(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int digest_path(Digest *d, const char *path, GrpoErr *err) {
    if (!fs_is_dir(path)) return digest_file(d, path, err);
    DIR *dir = opendir(path);
    if (!dir) return err_set(err, "%s: cannot read the directory: %s", path, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue;
        char *p = fs_join(path, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (n == cap) names = xrealloc(names, sizeof(char *) * (cap = cap ? 2 * cap : 16));
            names[n++] = xstrdup(e->d_name);
        }
        free(p);
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof(char *), name_order);
    digest_add_u64(d, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        char *p = fs_join(path, names[i]);
        digest_add_str(d, names[i]);
        if (!rc) rc = digest_file(d, p, err);
        free(p);
        free(names[i]);
    }
    free(names);
    return rc;
}
