/* tests/io/test_jsonl.c — io/jsonl: rows and their line numbers (blank lines,
 * CRLF, a last line without newline), every bad line with its path:line message
 * (invalid JSON with its column, each non-object kind, a NUL byte, the
 * callback's own error), a missing file, a read error (a directory) and running
 * out of memory mid-line, which must be an error and not the end of the file;
 * a file holding one JSON array of objects, good and bad. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/jsonl.h"
#include "testutil.h"

static char dir[] = "/tmp/grpo-jsonl-XXXXXX";

static const char *write_bytes(const char *name, const char *bytes, size_t n) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n);
    fclose(f);
    return path;
}
static const char *write_file(const char *name, const char *text) { return write_bytes(name, text, strlen(text)); }

typedef struct {
    int n;
    long line[16];
    long a[16];          /* the "a" field, -1 when absent */
    json_t *kept;        /* the first row, kept with json_incref */
    long fail_at;        /* line on which the callback fails; 0: never */
} Seen;

static int collect(json_t *row, long line, void *ctx, GrpoErr *err) {
    Seen *s = ctx;
    if (line == s->fail_at) return err_set(err, "'a' must be even, got %lld", json_integer_value(json_object_get(row, "a")));
    if (s->n < 16) {
        json_t *a = json_object_get(row, "a");
        s->line[s->n] = line;
        s->a[s->n] = a ? (long)json_integer_value(a) : -1;
    }
    if (!s->kept) s->kept = json_incref(row);
    s->n++;
    return 0;
}

static void test_rows(void) {
    /* line 1 blank, 2 CRLF, 3 spaces/tab/CR only, 4 leading space, 5 tab-indented CRLF, 6 no newline */
    const char *path = write_file("ok.jsonl", "\n{\"a\": 1}\r\n \t\r\n {\"a\": 2}\n\t{\"a\": 3} \r\n{\"b\": 4}");
    Seen s = {0};
    GrpoErr err = {{0}};
    long n = jsonl_read(path, collect, &s, &err);
    T_CHECK(n == 4 && s.n == 4, "rows %ld seen %d: %s", n, s.n, err.msg);
    const long want_line[4] = {2, 4, 5, 6}, want_a[4] = {1, 2, 3, -1};
    T_CHECK(!memcmp(s.line, want_line, sizeof want_line), "line numbers %ld %ld %ld %ld", s.line[0], s.line[1],
            s.line[2], s.line[3]);
    T_CHECK(!memcmp(s.a, want_a, sizeof want_a), "values %ld %ld %ld %ld", s.a[0], s.a[1], s.a[2], s.a[3]);
    /* a row kept with json_incref outlives the reader */
    T_CHECK(s.kept && json_integer_value(json_object_get(s.kept, "a")) == 1, "kept row");
    json_decref(s.kept);

    Seen e = {0};
    T_CHECK(jsonl_read(write_file("empty.jsonl", ""), collect, &e, &err) == 0 && e.n == 0, "empty file: 0 rows");
    T_CHECK(jsonl_read(write_file("blank.jsonl", "\n \r\n\t\n"), collect, &e, &err) == 0 && e.n == 0,
            "blank lines only: 0 rows");
}

static void expect_error(const char *text, size_t len, long fail_at, const char *want, int want_seen) {
    const char *path = write_bytes("bad.jsonl", text, len);
    Seen s = {0};
    s.fail_at = fail_at;
    GrpoErr err = {{0}};
    long n = jsonl_read(path, collect, &s, &err);
    char full[600];
    snprintf(full, sizeof full, "%s/%s", dir, want);
    T_CHECK(n == -1 && !strncmp(err.msg, full, strlen(full)) && s.n == want_seen,
            "'%.30s': rc %ld seen %d, '%s' (want '%s', %d rows before)", text, n, s.n, err.msg, full, want_seen);
    json_decref(s.kept);
}
#define EXPECT_ERROR(text, fail_at, want, seen) expect_error((text), strlen(text), (fail_at), (want), (seen))

static void test_bad_lines(void) {
    EXPECT_ERROR("{\"a\": 1}\n\n{\"a\": 2,}\n{\"a\": 3}\n", 0, "bad.jsonl:3: not valid JSON: ", 1);
    /* jansson's column, counted from the start of the line (leading blanks included) */
    EXPECT_ERROR("  {\"a\": 1,}\n", 0, "bad.jsonl:1: not valid JSON: string or '}' expected near '}' (column 11)", 0);
    EXPECT_ERROR("{\"a\": 1} {\"a\": 2}\n", 0, "bad.jsonl:1: not valid JSON: end of file expected", 0);
    EXPECT_ERROR("{\"a\": 1}\n[1, 2]\n", 0, "bad.jsonl:2: expected a JSON object, got an array", 1);
    EXPECT_ERROR("{\"a\": 1}\n\"text\"\n", 0, "bad.jsonl:2: expected a JSON object, got a string", 1);
    EXPECT_ERROR("3.5\n", 0, "bad.jsonl:1: expected a JSON object, got a number", 0);
    EXPECT_ERROR("true\n", 0, "bad.jsonl:1: expected a JSON object, got true", 0);
    EXPECT_ERROR("false\n", 0, "bad.jsonl:1: expected a JSON object, got false", 0);
    EXPECT_ERROR("null\r\n", 0, "bad.jsonl:1: expected a JSON object, got null", 0);
    /* a NUL byte is not silently the end of the line */
    expect_error("{\"a\": 1}\0 junk\n", 15, 0, "bad.jsonl:1: not valid JSON: ", 0);
    /* the callback's message gets path:line, and reading stops there */
    EXPECT_ERROR("{\"a\": 2}\n\n{\"a\": 5}\n{\"a\": 6}\n", 3, "bad.jsonl:3: 'a' must be even, got 5", 1);
    /* a BOM past the file's start is text: shown escaped, the message one line */
    EXPECT_ERROR("{\"a\": 1}\n\xef\xbb\xbf{\"a\": 2}\n", 0, "bad.jsonl:2: not valid JSON: invalid token near '\\ufeff'", 1);
    EXPECT_ERROR("{\"a\": 1}\n{\"a\": 2}\x1b[2J\n", 0, "bad.jsonl:2: not valid JSON: end of file expected near '\\x1b'", 1);
}

/* A UTF-8 BOM at the start of a file is skipped, as datasets' JSON loader does:
 * JSON lines and a JSON array alike, line numbers unchanged. */
static void test_bom(void) {
    Seen s = {0};
    GrpoErr err = {{0}};
    long n = jsonl_read(write_file("bom.jsonl", "\xef\xbb\xbf{\"a\": 1}\n{\"a\": 2}\n"), collect, &s, &err);
    T_CHECK(n == 2 && s.a[0] == 1 && s.line[0] == 1 && s.line[1] == 2, "BOM + JSON lines: rows %ld: %s", n, err.msg);
    json_decref(s.kept);
    Seen a = {0};
    n = jsonl_read(write_file("bom.json", "\xef\xbb\xbf[{\"a\": 3},\n {\"a\": 4}]\n"), collect, &a, &err);
    T_CHECK(n == 2 && a.a[0] == 3 && a.line[1] == 2, "BOM + JSON array: rows %ld: %s", n, err.msg);
    json_decref(a.kept);
    EXPECT_ERROR("\xef\xbb\xbf\xef\xbb\xbf{\"a\": 1}\n", 0, "bad.jsonl:1: not valid JSON: invalid token near '\\ufeff'", 0);
}

/* A file holding one JSON array of objects: rows numbered by the line each
 * element starts on; brackets, commas and escaped quotes inside strings and
 * nested values do not end an element. */
static void test_arrays(void) {
    const char *path = write_file("rows.json", "\n\n  [{\"a\": 1},\n {\"a\": 2, \"s\": \"x], \\\"]\", \"n\": [1, {\"k\": \"}\"}]},\n\n"
                                               "{\"b\":\n [3]}\n ]\n\n");
    Seen s = {0};
    GrpoErr err = {{0}};
    long n = jsonl_read(path, collect, &s, &err);
    T_CHECK(n == 3 && s.n == 3, "array: rows %ld seen %d: %s", n, s.n, err.msg);
    const long want_line[3] = {3, 4, 6}, want_a[3] = {1, 2, -1};
    T_CHECK(!memcmp(s.line, want_line, sizeof want_line), "array line numbers %ld %ld %ld", s.line[0], s.line[1],
            s.line[2]);
    T_CHECK(!memcmp(s.a, want_a, sizeof want_a), "array values %ld %ld %ld", s.a[0], s.a[1], s.a[2]);
    json_decref(s.kept);
    Seen e = {0};
    T_CHECK(jsonl_read(write_file("empty.json", " [ \n ] \n"), collect, &e, &err) == 0 && e.n == 0, "empty array");
    EXPECT_ERROR("[{\"a\": 1},\n 3]", 0, "bad.jsonl:2: expected a JSON object, got a number (array record 2)", 1);
    EXPECT_ERROR("[{\"a\": 1},\n {\"a\": 1 2}]", 0, "bad.jsonl:2: not valid JSON: ", 1);
    EXPECT_ERROR("[{\"a\": 1},\n\n {\"a\":\n 1,}]", 0, "bad.jsonl:4: not valid JSON: ", 1);
    EXPECT_ERROR("[{\"a\": 1},]", 0, "bad.jsonl:1: not valid JSON: ", 1);
    EXPECT_ERROR("[{\"a\": 1},\n{\"a\": \"]\"}\n", 0, "bad.jsonl:3: the JSON array is not closed (expected ']')", 1);
    EXPECT_ERROR("[{\"a\": 1}]\n{\"a\": 2}\n", 0, "bad.jsonl:2: text after the JSON array", 1);
    EXPECT_ERROR("[{\"a\": 2},\n\n  {\"a\": 5}]", 3, "bad.jsonl:3: 'a' must be even, got 5", 1);
}

static void test_files(void) {
    Seen s = {0};
    GrpoErr err = {{0}};
    T_CHECK(jsonl_read("/nonexistent/rows.jsonl", collect, &s, &err) == -1 &&
                !strcmp(err.msg, "/nonexistent/rows.jsonl: cannot open: No such file or directory"),
            "missing file: %s", err.msg);
    /* a directory is not a file: refused by name, not read as an empty file */
    char want[600];
    snprintf(want, sizeof want, "%s: is a directory, expected a regular file", dir);
    T_CHECK(jsonl_read(dir, collect, &s, &err) == -1 && !strcmp(err.msg, want) && s.n == 0, "directory: %s", err.msg);

    /* "-" reads standard input and names it <stdin> */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(write_file("in.jsonl", "{\"a\": 1}\n\n{\"a\": 2\n"), "r", stdin)) _exit(3);
        Seen t = {0};
        GrpoErr e = {{0}};
        long n = jsonl_read("-", collect, &t, &e);
        _exit(n == -1 && t.n == 1 && !strncmp(e.msg, "<stdin>:3: not valid JSON", 25) ? 0 : 1);
    }
    int status = -1;
    T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "stdin: child status %d", status);
}

/* A line that never ends (a 4 GiB sparse file of zero bytes) under an
 * address-space limit: getline fails for lack of memory, which must be reported,
 * not taken for the end of the file (rows read so far would otherwise pass for
 * the whole dataset). */
static void test_out_of_memory(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("out-of-memory check skipped under AddressSanitizer (it reserves the address space)\n");
#else
    const char *zeros = write_file("zeros.jsonl", "");
    CHECK(truncate(zeros, (off_t)4 << 30) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(3);
        fclose(f);
        struct rlimit rl = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (256u << 20), RLIM_INFINITY};
        rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_AS, &rl)) _exit(4);
        Seen s = {0};
        GrpoErr err = {{0}};
        char want[700];
        snprintf(want, sizeof want, "%s:1: read error: Cannot allocate memory", zeros);
        long n = jsonl_read(zeros, collect, &s, &err);
        _exit(n == -1 && !strcmp(err.msg, want) ? 0 : 1);
    }
    int status = -1;
    T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "out of memory mid-line: child status %d", status);
#endif
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_rows();
    test_bad_lines();
    test_bom();
    test_arrays();
    test_files();
    test_out_of_memory();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return t_summary("test_jsonl");
}
