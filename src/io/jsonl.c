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

/* One element of a JSON array: text[*pos..] up to the ',' or ']' that ends it
 * at the array's own depth (strings and nesting skipped); *line counts the
 * newlines passed. Returns the element's length, or -1 when the text ends first. */
static long array_element(const char *text, size_t n, size_t *pos, long *line) {
    size_t start = *pos, i = *pos;
    int depth = 0, in_str = 0;
    for (; i < n; i++) {
        char c = text[i];
        if (c == '\n') ++*line;
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (depth == 0) break;
            depth--;
        } else if (c == ',' && depth == 0) {
            break;
        }
    }
    *pos = i;
    return i < n ? (long)(i - start) : -1;
}

static size_t skip_space(const char *text, size_t n, size_t pos, long *line) {
    for (; pos < n && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\r' || text[pos] == '\n'); pos++)
        if (text[pos] == '\n') ++*line;
    return pos;
}

/* A file holding one JSON array of objects (what datasets' to_json(lines=False)
 * and many hand-made .json files hold): each element is handed to fn with the
 * line it starts on. text[0] is the '['; it is on line `line`. */
static long array_rows(const char *name, const char *text, size_t n, long line, JsonlRowFn fn, void *ctx,
                       GrpoErr *err) {
    size_t pos = skip_space(text, n, 1, &line);
    long rows = 0;
    if (pos < n && text[pos] == ']') pos++;
    else
        for (;;) {
            long start_line = line;
            size_t start = pos;
            long len = array_element(text, n, &pos, &line);
            if (len < 0) return err_set(err, "%s:%ld: the JSON array is not closed (expected ']')", name, line), -1;
            json_error_t je;
            json_t *row = json_loadb(text + start, (size_t)len, JSON_DECODE_ANY, &je);
            if (!row) {
                if (json_error_code(&je) == json_error_out_of_memory)
                    return err_set(err, "%s:%ld: out of memory parsing the record", name, start_line), -1;
                return err_set(err, "%s:%ld: not valid JSON: %s (array record %ld)", name,
                               start_line + (je.line > 1 ? je.line - 1 : 0), je.text, rows + 1), -1;
            }
            int rc = json_is_object(row) ? (fn(row, start_line, ctx, err) ? -1 : 0)
                                         : err_set(err, "expected a JSON object, got %s (array record %ld)",
                                                   json_kind(row), rows + 1);
            json_decref(row);
            if (rc) return err_prefix(err, "%s:%ld", name, start_line), -1;
            rows++;
            char c = text[pos++];
            pos = skip_space(text, n, pos, &line);
            if (c == ']') break;
        }
    pos = skip_space(text, n, pos, &line);
    if (pos < n) return err_set(err, "%s:%ld: text after the JSON array", name, line), -1;
    return rows;
}

/* The array that starts at head[0] ('[', on line `line`, head being the rest
 * of that line) and continues to the end of f. Returns 0 with *rows, or -1. */
static int array_file(const char *name, FILE *f, const char *head, size_t head_len, long line, JsonlRowFn fn,
                      void *ctx, GrpoErr *err, long *rows) {
    size_t cap = head_len + (1 << 16), n = head_len;
    char *buf = xmalloc(cap);
    memcpy(buf, head, head_len);
    for (;;) {
        if (n == cap) buf = xrealloc(buf, cap *= 2);
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    long r = ferror(f) ? err_set(err, "%s: read error: %s", name, strerror(errno ? errno : EIO))
                       : array_rows(name, buf, n, line, fn, ctx, err);
    free(buf);
    if (r < 0) return -1;
    *rows = r;
    return 0;
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
        if (line == 1 && len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) {
            /* a UTF-8 byte order mark (Notepad's "UTF-8 with BOM") is not the
             * file's text: skipped, as Hugging Face datasets' JSON loader does */
            memmove(buf, buf + 3, (size_t)len - 2);
            len -= 3;
        }
        if (rows == 0 && rc == 0) {
            /* a JSON array rather than JSON lines: the first character that is
             * not white space is '[' */
            size_t k = 0;
            while (k < (size_t)len && strchr(" \t\r\n", buf[k])) k++;
            if (k < (size_t)len && buf[k] == '[') {
                rc = array_file(name, f, buf + k, (size_t)len - k, line, fn, ctx, err, &rows);
                break;
            }
        }
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
