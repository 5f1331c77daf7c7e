/* fuzz/reward_reply.c — the child process fuzz_reward_cmd.c starts as its
 * `cmd:` reward function: it reads one request line from stdin, then copies
 * the file named by argv[1] (the fuzz input) to stdout unchanged and exits.
 * Built without sanitizers; not a fuzz target. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char buf[65536];
    for (;;) { /* the request, up to its newline */
        ssize_t r = read(0, buf, sizeof buf);
        if (r <= 0 || memchr(buf, '\n', (size_t)r)) break;
    }
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
    if (fd < 0) return 2;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t done = 0; done < r;) {
            ssize_t w = write(1, buf + done, (size_t)(r - done));
            if (w <= 0) return 3;
            done += w;
        }
    return 0;
}
