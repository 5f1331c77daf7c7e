/* tests/io/test_bulk_write.c — io/bulk_write: the file holds exactly the bytes
 * written, however they were cut, around the 4 KiB alignment and the 4 MiB block,
 * direct and through the page cache; failures come back with errno. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "io/bulk_write.h"
#include "io/fsutil.h"
#include "testutil.h"

enum { BLOCK = 4 << 20 };

static char g_dir[64];

/* 1 when path holds exactly want[n]. */
static int holds(const char *path, const unsigned char *want, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    GrpoErr err;
    int ok = fs_read_file(path, &buf, &len, &err) == 0 && len == n && (n == 0 || !memcmp(buf, want, n));
    free(buf);
    return ok;
}

/* Writes data[n] in pieces of `piece` bytes (0: pieces of varying sizes) in mode. */
static int write_cut(const char *path, BulkMode mode, const unsigned char *data, size_t n, size_t piece,
                     int *direct) {
    BulkFile *f = bulk_open(path, mode);
    if (!f) return -1;
    *direct = bulk_is_direct(f);
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t at = 0; at < n;) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        size_t m = piece ? piece : 1 + (size_t)(s >> 33) % 70000;
        if (m > n - at) m = n - at;
        if (bulk_write(f, data + at, m)) {
            bulk_close(f);
            return -1;
        }
        at += m;
    }
    return bulk_close(f);
}

static void test_contents(const char *dir, const unsigned char *data) {
    const size_t sizes[] = {0, 1, 8, 4095, 4096, 4097, 65536 + 3, BLOCK - 1, BLOCK, BLOCK + 1, 3 * (size_t)BLOCK + 12345};
    const size_t pieces[] = {0, 1, 4096, 3 * (size_t)BLOCK};
    char *path = fs_join(dir, "f.bin");
    int directs = 0, tries = 0;
    for (int mode = 0; mode < 2; mode++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (size_t j = 0; j < sizeof pieces / sizeof *pieces; j++) {
                if (pieces[j] == 1 && sizes[i] > 65536 + 3) continue; /* a byte at a time: small files */
                int direct = 0;
                int rc = write_cut(path, mode ? BULK_BUFFERED : BULK_DIRECT, data, sizes[i], pieces[j], &direct);
                T_CHECK(rc == 0, "%s: %zu bytes in pieces of %zu, mode %d: %s", dir, sizes[i], pieces[j], mode,
                        strerror(errno));
                T_CHECK(holds(path, data, sizes[i]), "%s: %zu bytes in pieces of %zu, mode %d: content differs", dir,
                        sizes[i], pieces[j], mode);
                T_CHECK(!(mode && direct), "BULK_BUFFERED went direct");
                directs += direct, tries += !mode;
            }
    printf("  %s: %d of %d direct writes took O_DIRECT\n", dir, directs, tries);
    free(path);
}

/* A file that outgrows RLIMIT_FSIZE fails with EFBIG, from bulk_write or at the
 * latest from bulk_close, in both modes. */
static void test_failure(const unsigned char *data) {
    char *path = fs_join(g_dir, "big.bin");
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1 << 20;
    signal(SIGXFSZ, SIG_IGN);
    for (int mode = 0; mode < 2; mode++) {
        setrlimit(RLIMIT_FSIZE, &lim);
        int direct = 0;
        errno = 0;
        int rc = write_cut(path, mode ? BULK_BUFFERED : BULK_DIRECT, data, 2 * (size_t)BLOCK + 5, 0, &direct);
        int e = errno;
        setrlimit(RLIMIT_FSIZE, &old);
        T_CHECK(rc == -1 && e == EFBIG, "mode %d: rc %d, %s", mode, rc, strerror(e));
    }
    char *missing = fs_join(g_dir, "no/such/dir/f.bin");
    errno = 0;
    T_CHECK(bulk_open(missing, BULK_DIRECT) == NULL && errno == ENOENT, "open under a missing directory: %s",
            strerror(errno));
    free(path), free(missing);
}

int main(int argc, char **argv) {
    size_t n = 3 * (size_t)BLOCK + 12345;
    unsigned char *data = malloc(n);
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) s = s * 6364136223846793005u + 1442695040888963407u, data[i] = (unsigned char)(s >> 56);
    snprintf(g_dir, sizeof g_dir, "/tmp/grpo-test-bulk-XXXXXX");
    CHECK(mkdtemp(g_dir));
    /* /tmp, and beside this binary (the build's disk, where O_DIRECT is most likely taken) */
    char here[4096];
    const char *slash = argc > 0 ? strrchr(argv[0], '/') : NULL;
    int dn = slash ? (int)(slash - argv[0]) : 1;
    snprintf(here, sizeof here, "%.*s/grpo-test-bulk-XXXXXX", dn, slash ? argv[0] : ".");
    CHECK(mkdtemp(here));
    test_contents(g_dir, data);
    test_contents(here, data);
    test_failure(data);
    fs_rm_rf(g_dir), fs_rm_rf(here);
    T_CHECK(!fs_exists(g_dir) && !fs_exists(here), "cleanup");
    free(data);
    return t_summary("test_bulk_write");
}
