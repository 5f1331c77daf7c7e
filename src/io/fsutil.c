/* io/fsutil.c — filesystem helpers for safe output (see fsutil.h).
 *
 * Is: opening inputs (regular files only), existence tests, mkdir -p, rm -rf, whole-file read, atomic whole-file
 * write (tmp + fsync + rename), and the temp-directory-then-commit pattern used
 * for model saves and checkpoints.
 * Is not: portable beyond POSIX, nor crash-atomic for the merge case of
 * fs_commit_dir (each replaced entry is renamed atomically, the set is not). */
#include "io/fsutil.h"

#include "core/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a directory" : "not a regular file";
}

int fs_open_regular(const char *path, GrpoErr *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return err_set(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return err_set(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(err, "%s: is %s, expected a regular file", path, file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *fs_fopen_regular(const char *path, GrpoErr *err) {
    int fd = fs_open_regular(path, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        err_set(err, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

json_t *fs_load_json(const char *path, size_t flags, GrpoErr *err) {
    FILE *f = fs_fopen_regular(path, err);
    if (!f) return NULL;
    json_error_t je;
    json_t *j = json_loadf(f, flags, &je);
    fclose(f);
    if (!j) err_set(err, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    return j;
}

int fs_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

int fs_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

char *fs_join(const char *dir, const char *name) {
    size_t nd = strlen(dir), nn = strlen(name);
    if (nd == 0) return xstrdup(name);
    int slash = dir[nd - 1] != '/';
    char *p = xmalloc(nd + slash + nn + 1);
    memcpy(p, dir, nd);
    if (slash) p[nd] = '/';
    memcpy(p + nd + slash, name, nn + 1);
    return p;
}

int fs_path_check(const char *path, const char *what, size_t room_bytes, GrpoErr *err) {
    size_t len = strlen(path), limit = PATH_MAX - 1 > room_bytes ? PATH_MAX - 1 - room_bytes : 0;
    char shown[400];
    if (len > limit) {
        text_escaped(shown, sizeof shown, path, 60);
        return err_set(err, "%s '%s' is %zu bytes long: the system's paths hold at most %d (PATH_MAX)%s; choose a "
                       "shorter one", what, shown, len, PATH_MAX - 1,
                       room_bytes ? ", less room for the files written inside it" : "");
    }
    for (const char *c = path; *c;) {
        size_t n = strcspn(c, "/");
        if (n > NAME_MAX) {
            text_escaped(shown, sizeof shown, path, 60);
            return err_set(err, "%s '%s': a name in it is %zu bytes long, longer than the %d a file system allows "
                           "(NAME_MAX); choose a shorter one", what, shown, n, NAME_MAX);
        }
        c += n;
        c += *c == '/';
    }
    return 0;
}

int fs_tmpdir_check(const char *final_dir, const char *what, GrpoErr *err) {
    if (fs_path_check(final_dir, what, FS_TMP_SUFFIX_BYTES, err)) return -1;
    size_t len = strlen(final_dir);
    while (len > 1 && final_dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && final_dir[start - 1] != '/') start--;
    if (len - start + FS_TMP_SUFFIX_BYTES > NAME_MAX) {
        char shown[400];
        return err_set(err, "%s '%s': its last name is %zu bytes long; it is written as NAME.tmp-PID-N first, which "
                       "must fit the %d a file system allows (NAME_MAX): at most %d; choose a shorter one", what,
                       text_escaped(shown, sizeof shown, final_dir, 60), len - start, NAME_MAX,
                       NAME_MAX - FS_TMP_SUFFIX_BYTES);
    }
    return 0;
}

int fs_mkdir_p(const char *path, GrpoErr *err) {
    if (!path[0]) return err_set(err, "cannot create a directory with an empty name");
    if (fs_path_check(path, "directory", 0, err)) return -1; /* before any directory exists */
    char *p = xstrdup(path);
    size_t n = strlen(p);
    int rc = 0;
    for (size_t i = 1; i <= n && !rc; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            rc = err_set(err, "%s: cannot create directory: %s", p, strerror(errno));
        else if (!fs_is_dir(p))
            rc = err_set(err, "%s: exists and is not a directory", p);
        p[i] = saved;
        while (p[i] == '/' && p[i + 1] == '/') i++; /* "a//b" */
    }
    free(p);
    return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes path and, for a directory, everything under it (symlinks are removed,
 * not followed). A missing path is success. */
int fs_rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return unlink(path) == 0 ? 0 : -1;
    return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* Reads the whole file; *out is NUL-terminated (len excludes the NUL), so text
 * files can be used as strings. Works for files whose size stat cannot tell. */
int fs_read_file(const char *path, char **out, size_t *len, GrpoErr *err) {
    *out = NULL;
    if (len) *len = 0;
    FILE *fp = fs_fopen_regular(path, err);
    if (!fp) return -1;
    size_t cap = 4096, n = 0;
    struct stat sb;
    if (fstat(fileno(fp), &sb) == 0 && sb.st_size > 0) cap = (size_t)sb.st_size + 1;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - 1 - n, fp);
        n += got;
        if (got == 0) break;
    }
    if (ferror(fp)) {
        int e = errno;
        fclose(fp);
        free(buf);
        return err_set(err, "%s: read error: %s", path, strerror(e));
    }
    fclose(fp);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return 0;
}

int fs_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes buf to path + ".tmp", fsyncs it and renames it over path; on any
 * failure the tmp file is removed and path is untouched. */
int fs_write_file_atomic(const char *path, const void *buf, size_t len, GrpoErr *err) {
    size_t n = strlen(path);
    char *tmp = xmalloc(n + 5);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        err_set(err, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    const char *what = "write";
    int ok = fs_write_all(fd, buf, len) == 0;
    if (ok && fsync(fd) != 0) ok = 0, what = "fsync";
    int e = errno;
    if (close(fd) != 0 && ok) ok = 0, what = "close", e = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, what = "rename", e = errno;
    if (!ok) {
        unlink(tmp);
        err_set(err, "%s: %s failed: %s", path, what, strerror(e));
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* Copies src to dst (atomically, via dst.tmp). */
int fs_copy_file(const char *src, const char *dst, GrpoErr *err) {
    char *buf;
    size_t len;
    if (fs_read_file(src, &buf, &len, err)) return -1;
    int rc = fs_write_file_atomic(dst, buf, len, err);
    free(buf);
    return rc;
}

/* final_dir without trailing slashes, malloc'd. */
static char *strip_slashes(const char *p) {
    char *s = xstrdup(p);
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/') s[--n] = '\0';
    return s;
}

int fs_tmpdir_for(const char *final_dir, char **tmp, GrpoErr *err) {
    static unsigned counter = 0;
    *tmp = NULL;
    if (fs_tmpdir_check(final_dir, "directory", err)) return -1; /* before its parent is made */
    char *base = strip_slashes(final_dir);
    char *slash = strrchr(base, '/');
    if (slash && slash != base) {
        *slash = '\0';
        int rc = fs_mkdir_p(base, err);
        *slash = '/';
        if (rc) {
            free(base);
            return -1;
        }
    }
    size_t cap = strlen(base) + 64;
    char *p = xmalloc(cap);
    for (int attempt = 0; attempt < 1000; attempt++) {
        unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(p, cap, "%s.tmp-%ld-%u", base, (long)getpid(), n);
        if (mkdir(p, 0755) == 0) {
            free(base);
            *tmp = p;
            return 0;
        }
        if (errno != EEXIST) break;
    }
    err_set(err, "%s: cannot create temporary directory %s: %s", final_dir, p, strerror(errno));
    free(base);
    free(p);
    return -1;
}

int fs_commit_dir(const char *tmp, const char *final_dir, GrpoErr *err) {
    if (!fs_is_dir(tmp)) return err_set(err, "%s: not a directory, cannot commit it", tmp);
    struct stat sb;
    if (lstat(final_dir, &sb) != 0) {
        if (rename(tmp, final_dir) != 0)
            return err_set(err, "%s: cannot rename %s into place: %s", final_dir, tmp,
                           strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode))
        return err_set(err, "%s: exists and is not a directory", final_dir);
    DIR *d = opendir(tmp);
    if (!d) return err_set(err, "%s: cannot list: %s", tmp, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *from = fs_join(tmp, de->d_name), *to = fs_join(final_dir, de->d_name);
        /* rename() replaces a file atomically but not a non-empty directory. */
        if (fs_is_dir(to) && fs_rm_rf(to) != 0)
            rc = err_set(err, "%s: cannot remove the old copy: %s", to, strerror(errno));
        else if (rename(from, to) != 0)
            rc = err_set(err, "%s: cannot move %s into place: %s", to, from, strerror(errno));
        free(from);
        free(to);
    }
    closedir(d);
    if (rc) return -1;
    if (rmdir(tmp) != 0) return err_set(err, "%s: cannot remove: %s", tmp, strerror(errno));
    return 0;
}

char *fs_canonical(const char *path) {
    char *abs;
    if (path[0] == '/') {
        abs = xstrdup(path);
    } else {
        char *cwd = getcwd(NULL, 0);
        abs = fs_join(cwd ? cwd : "/", path);
        free(cwd);
    }
    /* the longest prefix that exists, resolved; the rest folded onto it */
    size_t cut = strlen(abs);
    char *real = NULL;
    while (!real) {
        char keep = abs[cut];
        abs[cut] = 0;
        real = realpath(cut ? abs : "/", NULL);
        abs[cut] = keep;
        if (real || cut == 0) break;
        while (cut > 0 && abs[cut - 1] != '/') cut--; /* drop the last component */
        while (cut > 0 && abs[cut - 1] == '/') cut--;
    }
    size_t n = strlen(abs) + (real ? strlen(real) : 1) + 2, len;
    char *out = xmalloc(n);
    snprintf(out, n, "%s", real ? real : "/");
    free(real);
    len = strlen(out);
    for (char *p = abs + cut; *p;) {
        while (*p == '/') p++;
        size_t k = strcspn(p, "/");
        if (k == 0 || (k == 1 && p[0] == '.')) {
        } else if (k == 2 && p[0] == '.' && p[1] == '.') {
            while (len > 1 && out[len - 1] != '/') len--;
            if (len > 1) len--;
            out[len] = 0;
        } else {
            len += (size_t)snprintf(out + len, n - len, "%s%.*s", len > 1 ? "/" : "", (int)k, p);
        }
        p += k;
    }
    free(abs);
    return out;
}

int fs_within(const char *inner, const char *outer) {
    size_t n = strlen(outer);
    if (n == 1 && outer[0] == '/') return inner[0] == '/';
    return !strncmp(inner, outer, n) && (inner[n] == 0 || inner[n] == '/');
}
