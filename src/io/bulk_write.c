/* io/bulk_write.c — see bulk_write.h. */
#include "io/bulk_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/fsutil.h"

/* A block of 4 MiB: O_DIRECT wants the memory, the file offset and the length on
 * the device's logical block (512 B or 4 KiB); 4 KiB serves both. */
enum { ALIGN = 4096, BLOCK = 4 << 20 };

struct BulkFile {
    int fd, direct, err; /* err: the first failure's errno, 0 while none */
    unsigned char *buf;  /* [BLOCK], ALIGN-aligned */
    size_t fill;         /* bytes of buf not written yet */
};

/* From now on through the page cache (the filesystem refused a direct write, or
 * the tail is not a whole number of blocks). */
static int go_buffered(BulkFile *f) {
    int flags = fcntl(f->fd, F_GETFL);
    if (flags < 0 || fcntl(f->fd, F_SETFL, flags & ~O_DIRECT) < 0) return -1;
    f->direct = 0;
    return 0;
}

/* Writes buf's fill bytes; a direct write the filesystem refuses (EINVAL) is
 * made again buffered, from where the file stands. */
static int flush(BulkFile *f) {
    if (f->err) return -1;
    size_t n = f->fill;
    if (f->direct && n % ALIGN != 0 && go_buffered(f) != 0) return f->err = errno, -1;
    off_t at = f->direct ? lseek(f->fd, 0, SEEK_CUR) : 0;
    if (fs_write_all(f->fd, f->buf, n) != 0) {
        if (!(f->direct && errno == EINVAL && at >= 0)) return f->err = errno, -1;
        if (lseek(f->fd, at, SEEK_SET) < 0 || go_buffered(f) != 0 || fs_write_all(f->fd, f->buf, n) != 0)
            return f->err = errno, -1;
    }
    f->fill = 0;
    return 0;
}

BulkFile *bulk_open(const char *path, BulkMode mode) {
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int fd = -1, direct = mode == BULK_DIRECT;
    if (direct) {
        fd = open(path, flags | O_DIRECT, 0644);
        if (fd < 0 && errno != EINVAL) return NULL;
        direct = fd >= 0;
    }
    if (fd < 0) fd = open(path, flags, 0644);
    if (fd < 0) return NULL;
    BulkFile *f = calloc(1, sizeof *f);
    void *buf = NULL;
    if (!f || posix_memalign(&buf, ALIGN, BLOCK) != 0) {
        free(f);
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    f->fd = fd, f->direct = direct, f->buf = buf;
    return f;
}

int bulk_write(BulkFile *f, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n > 0) {
        if (f->err || (f->fill == BLOCK && flush(f) != 0)) return errno = f->err, -1;
        size_t m = BLOCK - f->fill < n ? BLOCK - f->fill : n;
        memcpy(f->buf + f->fill, s, m);
        f->fill += m, s += m, n -= m;
    }
    return 0;
}

int bulk_close(BulkFile *f) {
    int rc = f->fill ? flush(f) : f->err ? -1 : 0;
    if (rc == 0 && fsync(f->fd) != 0) rc = -1, f->err = errno;
    if (close(f->fd) != 0 && rc == 0) rc = -1, f->err = errno;
    int e = f->err;
    free(f->buf);
    free(f);
    if (rc) errno = e;
    return rc;
}

int bulk_is_direct(const BulkFile *f) { return f->direct; }
