/* io/run_lock.c — see run_lock.h. Taking the lock: open (creating) the file, flock
 * it without waiting, then check that the path still names the file locked — a
 * holder releasing it removes the file first, and a run that locked the removed
 * file would share the directory with one that made a new file — and write who
 * holds it. */
#include "io/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/text.h"
#include "io/fsutil.h"

/* The holder's line, as it wrote it (escaped: the file is not ours to trust). */
static void holder_of(int fd, char *out, size_t n) {
    char buf[200];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (got <= 0) snprintf(out, n, "a process that has not said who it is yet");
    else text_escaped(out, n, buf, 120);
}

int run_lock_take(RunLock *l, const char *dir, GrpoErr *err) {
    l->fd = -1;
    l->path = NULL;
    if (fs_mkdir_p(dir, err)) return -1;
    char *path = fs_join(dir, RUN_LOCK_FILE);
    int failed = 0;
    for (int attempt = 0; attempt < 100 && !failed; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            failed = err_set(err, "%s: cannot create the run's lock file: %s", path, strerror(errno));
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int e = errno;
            char who[160];
            holder_of(fd, who, sizeof who);
            close(fd);
            if (e == EWOULDBLOCK)
                failed = err_set(err, "%s is in use by another grpo run (%s): wait for it to end, or choose another "
                                 "--output_dir", dir, who);
            else
                failed = err_set(err, "%s: cannot lock: %s", path, strerror(e));
        }
        struct stat held, named;
        if (fstat(fd, &held) || stat(path, &named) || held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
            close(fd); /* released and removed meanwhile: take the file that is there now */
            continue;
        }
        char host[256] = "?", when[64], line[400];
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        time_t now = time(NULL);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
        int len = snprintf(line, sizeof line, "pid %ld on %s since %s\n", (long)getpid(), host, when);
        if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)len, 0) != len) {
            failed = err_set(err, "%s: cannot write: %s", path, strerror(errno));
            unlink(path);
            close(fd);
            break;
        }
        l->fd = fd;
        l->path = path;
        return 0;
    }
    if (!failed) err_set(err, "%s: the lock file keeps being replaced; is another run starting?", path);
    free(path);
    return -1;
}

void run_lock_release(RunLock *l) {
    if (l->fd >= 0) {
        unlink(l->path); /* before the lock drops: a run that opens it after sees it gone */
        close(l->fd);
    }
    free(l->path);
    l->fd = -1;
    l->path = NULL;
}
