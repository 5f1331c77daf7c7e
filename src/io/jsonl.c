/* io/jsonl.c — JSON lines, read one line at a time (see jsonl.h).
 *
 * Is: getline + jansson with uniform "path:line: " messages, and the one place
 * that tells the end of a file from a failed read (getline returns -1 for both;
 * only feof() says which). Is not: a writer, nor a schema checker — what a row
 * must hold is the callback's business. */
#include "io/jsonl.h"

#include "io/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Parses one line (no newline) and calls fn; 1 for a blank line, 0, or -1 with
 * err set without prefix. */
static int one_line(const char *s, size_t len, long line, JsonlRowFn fn, void *ctx, GrpoErr *err) {
    size_t k = 0;
    while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
    if (k == len) return 1;
    json_error_t je;
    /* the whole line, so jansson's column counts from its start */
    json_t *row = json_loadb(s, len, JSON_DECODE_ANY, &je);
    if (!row) {
        if (json_error_code(&je) == json_error_out_of_memory) return err_set(err, "out of memory parsing the line");
        return err_set(err, "not valid JSON: %s (column %d)", je.text, je.column);
    }
    int rc = json_is_object(row) ? (fn(row, line, ctx, err) ? -1 : 0)
                                 : err_set(err, "expected a JSON object, got %s", json_kind(row));
    json_decref(row);
    return rc;
}

long jsonl_read(const char *path, JsonlRowFn fn, void *ctx, GrpoErr *err) {
    int is_stdin = !strcmp(path, "-");
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fs_fopen_regular(path, err);
    if (!f) return -1;
    char *buf = NULL;
    size_t cap = 0;
    long line = 0, rows = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        ssize_t len = getline(&buf, &cap, f);
        if (len < 0) {
            /* -1 is also what getline returns when it cannot grow buf (ENOMEM)
             * or the read fails: only feof() means the file is done. */
            if (ferror(f) || !feof(f)) {
                int e = errno ? errno : EIO;
                rc = err_set(err, "%s:%ld: read error: %s", name, line + 1, strerror(e));
            }
            break;
        }
        line++;
        if (len > 0 && buf[len - 1] == '\n') len--;
        int r = one_line(buf, (size_t)len, line, fn, ctx, err);
        if (r < 0) {
            rc = err_prefix(err, "%s:%ld", name, line);
            break;
        }
        rows += r == 0;
    }
    free(buf);
    if (is_stdin) clearerr(f);
    else fclose(f);
    return rc ? -1 : rows;
}
