/* tests/io/test_fsutil.c — io/fsutil: mkdir -p, rm -rf, read/write/copy, and the
 * temp-directory-then-commit pattern, including its error paths. */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "testutil.h"

static char g_dir[64];

static void put(const char *dir, const char *name, const char *text) {
    char *p = fs_join(dir, name);
    GrpoErr err;
    T_CHECK(fs_write_file_atomic(p, text, strlen(text), &err) == 0, "%s", err.msg);
    free(p);
}

/* 1 when dir/name exists with exactly this content. */
static int has(const char *dir, const char *name, const char *text) {
    char *p = fs_join(dir, name), *buf = NULL;
    size_t n = 0;
    GrpoErr err;
    int ok = fs_read_file(p, &buf, &n, &err) == 0 && n == strlen(text) && !strcmp(buf, text);
    free(buf);
    free(p);
    return ok;
}

static void test_join(void) {
    char *a = fs_join("a/b", "c"), *b = fs_join("a/b/", "c"), *c = fs_join("", "c");
    T_CHECK(!strcmp(a, "a/b/c") && !strcmp(b, "a/b/c") && !strcmp(c, "c"), "%s %s %s", a, b, c);
    free(a), free(b), free(c);
}

static void test_mkdir_rm(void) {
    GrpoErr err;
    char *deep = fs_join(g_dir, "x/y//z/");
    T_CHECK(fs_mkdir_p(deep, &err) == 0 && fs_is_dir(deep), "%s", err.msg);
    T_CHECK(fs_mkdir_p(deep, &err) == 0, "mkdir -p of an existing dir: %s", err.msg);
    put(deep, "f.txt", "hello");
    char *file = fs_join(deep, "f.txt"), *under = fs_join(file, "sub");
    T_CHECK(fs_exists(file) && !fs_is_dir(file), "file exists");
    T_CHECK(fs_mkdir_p(under, &err) == -1 && strstr(err.msg, "f.txt") &&
                strstr(err.msg, "not a directory"), "%s", err.msg);
    T_CHECK(fs_mkdir_p("", &err) == -1 && strstr(err.msg, "empty"), "%s", err.msg);
    char *x = fs_join(g_dir, "x");
    T_CHECK(fs_rm_rf(x) == 0 && !fs_exists(x), "rm -rf");
    T_CHECK(fs_rm_rf(x) == 0, "rm -rf of a missing path");
    free(x), free(deep), free(file), free(under);
}

static void test_read_write(void) {
    GrpoErr err;
    char *buf = NULL;
    size_t n = 7;
    T_CHECK(fs_read_file("/nonexistent/file.json", &buf, &n, &err) == -1 && buf == NULL &&
                strstr(err.msg, "/nonexistent/file.json: cannot open"), "%s", err.msg);
    T_CHECK(fs_read_file(g_dir, &buf, &n, &err) == -1 && strstr(err.msg, "is a directory"), "%s",
            err.msg);
    put(g_dir, "empty", "");
    T_CHECK(has(g_dir, "empty", ""), "empty file");
    /* binary content with NULs and a size that is not a multiple of the buffer */
    enum { N = 10007 };
    char *data = xmalloc(N);
    for (int i = 0; i < N; i++) data[i] = (char)(i * 31);
    char *p = fs_join(g_dir, "bin"), *q = fs_join(g_dir, "bin.copy");
    T_CHECK(fs_write_file_atomic(p, data, N, &err) == 0, "%s", err.msg);
    T_CHECK(fs_copy_file(p, q, &err) == 0, "%s", err.msg);
    T_CHECK(fs_read_file(q, &buf, &n, &err) == 0 && n == N && !memcmp(buf, data, N) && buf[N] == 0,
            "binary round trip");
    free(buf);
    T_CHECK(fs_read_file("/proc/self/status", &buf, &n, &err) == 0 && n > 0 && strlen(buf) == n,
            "file of unknown size: %s", err.msg);
    free(buf);
    T_CHECK(fs_copy_file("/nonexistent/a", q, &err) == -1 && strstr(err.msg, "/nonexistent/a"),
            "%s", err.msg);
    T_CHECK(fs_write_file_atomic("/nonexistent/dir/f", "x", 1, &err) == -1 &&
                strstr(err.msg, "/nonexistent/dir/f.tmp: cannot create"), "%s", err.msg);

    /* an injected I/O failure (file size limit) leaves the old content and no tmp */
    put(g_dir, "keep", "old content");
    char *keep = fs_join(g_dir, "keep"), *tmp = fs_join(g_dir, "keep.tmp");
    char *big = xcalloc(1, 1 << 20);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    int rc = fs_write_file_atomic(keep, big, 1 << 20, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    T_CHECK(rc == -1 && strstr(err.msg, "keep") && strstr(err.msg, "write failed"), "%s", err.msg);
    T_CHECK(has(g_dir, "keep", "old content") && !fs_exists(tmp), "old content kept, no tmp left");
    free(big), free(keep), free(tmp), free(data), free(p), free(q);
}

static void test_tmpdir_commit(void) {
    GrpoErr err;
    char *final = fs_join(g_dir, "out/model"), *tmp = NULL, *tmp2 = NULL;
    /* fresh: the tmp dir becomes the final dir */
    T_CHECK(fs_tmpdir_for(final, &tmp, &err) == 0 && fs_is_dir(tmp), "%s", err.msg);
    T_CHECK(tmp && strstr(tmp, "out/model.tmp-"), "tmp name %s", tmp ? tmp : "(null)");
    T_CHECK(fs_tmpdir_for(final, &tmp2, &err) == 0 && strcmp(tmp, tmp2), "two tmp dirs differ");
    fs_rm_rf(tmp2);
    free(tmp2);
    put(tmp, "a.txt", "A1");
    char *sub = fs_join(tmp, "checkpoint-1");
    fs_mkdir_p(sub, &err);
    put(sub, "state", "S1");
    free(sub);
    T_CHECK(fs_commit_dir(tmp, final, &err) == 0, "%s", err.msg);
    T_CHECK(!fs_exists(tmp) && has(final, "a.txt", "A1") && has(final, "checkpoint-1/state", "S1"),
            "committed");
    free(tmp);
    /* merge: files in tmp replace, others are kept */
    T_CHECK(fs_tmpdir_for(final, &tmp, &err) == 0, "%s", err.msg);
    put(tmp, "a.txt", "A2");
    put(tmp, "b.txt", "B2");
    sub = fs_join(tmp, "checkpoint-2");
    fs_mkdir_p(sub, &err);
    put(sub, "state", "S2");
    free(sub);
    T_CHECK(fs_commit_dir(tmp, final, &err) == 0, "%s", err.msg);
    T_CHECK(!fs_exists(tmp) && has(final, "a.txt", "A2") && has(final, "b.txt", "B2") &&
                has(final, "checkpoint-1/state", "S1") && has(final, "checkpoint-2/state", "S2"),
            "merged");
    free(tmp);
    /* a replaced subdirectory loses its old files */
    T_CHECK(fs_tmpdir_for(final, &tmp, &err) == 0, "%s", err.msg);
    sub = fs_join(tmp, "checkpoint-1");
    fs_mkdir_p(sub, &err);
    put(sub, "new", "N");
    free(sub);
    T_CHECK(fs_commit_dir(tmp, final, &err) == 0 && has(final, "checkpoint-1/new", "N") &&
                !has(final, "checkpoint-1/state", "S1"), "subdirectory replaced: %s", err.msg);
    free(tmp);
    /* errors */
    put(g_dir, "plainfile", "x");
    char *plain = fs_join(g_dir, "plainfile");
    T_CHECK(fs_tmpdir_for(final, &tmp, &err) == 0, "%s", err.msg);
    T_CHECK(fs_commit_dir(tmp, plain, &err) == -1 && strstr(err.msg, "plainfile") &&
                strstr(err.msg, "not a directory"), "%s", err.msg);
    fs_rm_rf(tmp);
    free(tmp);
    T_CHECK(fs_commit_dir("/nonexistent/tmp", final, &err) == -1 &&
                strstr(err.msg, "/nonexistent/tmp"), "%s", err.msg);
    char *under_file = fs_join(plain, "model");
    T_CHECK(fs_tmpdir_for(under_file, &tmp, &err) == -1 && tmp == NULL &&
                strstr(err.msg, "plainfile"), "%s", err.msg);
    free(under_file), free(plain), free(final);
}

/* Inputs are regular files: a FIFO (without blocking), a directory, a device
 * are refused, naming what they are. */
static void test_open_regular(void) {
    GrpoErr err;
    char *fifo = fs_join(g_dir, "fifo"), *file = fs_join(g_dir, "plain.json");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(fs_write_file_atomic(file, "{\"a\": 1}", 8, &err) == 0);
    struct { const char *path, *want; } bad[] = {
        {fifo, "is a FIFO, expected a regular file"},
        {g_dir, "is a directory, expected a regular file"},
        {"/dev/null", "is a character device, expected a regular file"},
        {"/nonexistent/x", "cannot open: No such file or directory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int fd = fs_open_regular(bad[i].path, &err);
        T_CHECK(fd == -1 && strstr(err.msg, bad[i].want) && strstr(err.msg, bad[i].path), "%s: %d '%s'", bad[i].path,
                fd, err.msg);
        char *text = NULL;
        T_CHECK(fs_read_file(bad[i].path, &text, NULL, &err) == -1 && strstr(err.msg, bad[i].want), "read %s: '%s'",
                bad[i].path, err.msg);
        T_CHECK(fs_load_json(bad[i].path, 0, &err) == NULL && strstr(err.msg, bad[i].want), "json %s: '%s'",
                bad[i].path, err.msg);
    }
    int fd = fs_open_regular(file, &err);
    char buf[16] = {0};
    T_CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 8 && !strcmp(buf, "{\"a\": 1}"), "regular file: %d '%s'", fd, buf);
    if (fd >= 0) close(fd);
    json_t *j = fs_load_json(file, 0, &err);
    T_CHECK(j && json_integer_value(json_object_get(j, "a")) == 1, "fs_load_json: %s", j ? "" : err.msg);
    json_decref(j);
    CHECK(fs_write_file_atomic(file, "{\"a\": ", 6, &err) == 0);
    T_CHECK(fs_load_json(file, 0, &err) == NULL && strstr(err.msg, "plain.json: invalid JSON at line 1"), "'%s'", err.msg);
    free(fifo), free(file);
}

/* A path the system cannot hold is refused before any directory is made: 21
 * nested names of 240 bytes (5,060 bytes), a name of 300 bytes; the message is
 * one line with the path shortened and escaped. */
static void test_path_limits(void) {
    GrpoErr err = {{0}};
    char *long_path = xmalloc(PATH_MAX + 2048);
    int k = snprintf(long_path, 64, "%s/", g_dir);
    for (int i = 0; i < 21; i++) {
        memset(long_path + k, 'd', 240);
        k += 240;
        long_path[k++] = i < 20 ? '/' : 0;
    }
    T_CHECK(fs_mkdir_p(long_path, &err) == -1 && strstr(err.msg, "bytes long") && strstr(err.msg, "PATH_MAX") &&
                strstr(err.msg, "...") && strlen(err.msg) < 300, "a 5,060-byte path: %s", err.msg);
    long_path[strlen(g_dir) + 1 + 240] = 0;
    T_CHECK(!fs_exists(long_path), "nothing created for a path too long");
    T_CHECK(fs_path_check("out", "output_dir", FS_OUTPUT_ROOM_BYTES, &err) == 0, "a short path: %s", err.msg);
    memset(long_path, 'a', PATH_MAX - 1 - FS_OUTPUT_ROOM_BYTES);
    for (int i = 200; i < PATH_MAX - 1 - FS_OUTPUT_ROOM_BYTES; i += 200) long_path[i] = '/';
    long_path[PATH_MAX - 1 - FS_OUTPUT_ROOM_BYTES] = 0;
    T_CHECK(fs_path_check(long_path, "output_dir", FS_OUTPUT_ROOM_BYTES, &err) == 0, "the longest path: %s", err.msg);
    strcat(long_path, "a");
    T_CHECK(fs_path_check(long_path, "output_dir", FS_OUTPUT_ROOM_BYTES, &err) == -1 &&
                !strncmp(err.msg, "output_dir 'aaa", 15), "one byte more: %s", err.msg);
    snprintf(long_path, 64, "%s/x/", g_dir);
    k = (int)strlen(long_path);
    memset(long_path + k, 'n', NAME_MAX + 1);
    strcpy(long_path + k + NAME_MAX + 1, "/\n\x1b");
    T_CHECK(fs_mkdir_p(long_path, &err) == -1 && strstr(err.msg, "NAME_MAX") && !strchr(err.msg, '\n'),
            "a name of NAME_MAX + 1 bytes: %s", err.msg);
    long_path[k] = 0;
    T_CHECK(!fs_exists(long_path), "nothing created for a name too long");
    long_path[k + NAME_MAX] = 0;
    memset(long_path + k, 'n', NAME_MAX);
    T_CHECK(fs_path_check(long_path, "dir", 0, &err) == 0, "a name of NAME_MAX bytes: %s", err.msg);
    /* a directory written through a temporary twin (NAME.tmp-PID-N): the twin's name must fit too, and
     * its parent is not made when it does not */
    snprintf(long_path, 64, "%s/p/", g_dir);
    k = (int)strlen(long_path);
    memset(long_path + k, 't', NAME_MAX - FS_TMP_SUFFIX_BYTES + 1);
    long_path[k + NAME_MAX - FS_TMP_SUFFIX_BYTES + 1] = 0;
    char *twin = NULL;
    T_CHECK(fs_tmpdir_for(long_path, &twin, &err) == -1 && strstr(err.msg, "NAME.tmp-PID-N") && !twin,
            "a name with no room for its twin: %s", err.msg);
    long_path[k] = 0;
    T_CHECK(!fs_exists(long_path), "no parent made for a name with no room for its twin");
    memset(long_path + k, 't', NAME_MAX - FS_TMP_SUFFIX_BYTES);
    long_path[k + NAME_MAX - FS_TMP_SUFFIX_BYTES] = 0;
    T_CHECK(fs_tmpdir_for(long_path, &twin, &err) == 0 && twin && strlen(strrchr(twin, '/') + 1) <= NAME_MAX,
            "the longest name with its twin: %s", err.msg);
    if (twin) fs_rm_rf(twin);
    free(twin);
    free(long_path);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/grpo-test-fs-XXXXXX");
    CHECK(mkdtemp(g_dir));
    test_join();
    test_open_regular();
    test_mkdir_rm();
    test_read_write();
    test_tmpdir_commit();
    test_path_limits();
    fs_rm_rf(g_dir);
    T_CHECK(!fs_exists(g_dir), "cleanup");
    return t_summary("test_fsutil");
}
