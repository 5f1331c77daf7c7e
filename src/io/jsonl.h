/* io/jsonl.h — the one JSON-lines reader: datasets, `grpo score` input,
 * metrics.jsonl for plots.
 *
 * One JSON object per line (or one JSON array of objects); blank lines (only spaces, tabs, \r) are skipped and
 * CRLF line ends are accepted. Lines are handed to a callback as they are read,
 * so standard input streams (a consumer can act on line k before line k+1
 * arrives). Every message starts "path:line: " ("<stdin>" for "-"), the callback's
 * included. Nothing here prints. */
#ifndef GRPO_IO_JSONL_H
#define GRPO_IO_JSONL_H

#include <jansson.h>

#include "core/check.h"

/* Called once per non-blank line with the parsed JSON object (borrowed:
 * json_incref to keep it) and its 1-based line number. Returns 0, or -1 with err
 * set WITHOUT a file:line prefix (the reader adds "path:line: "). */
typedef int (*JsonlRowFn)(json_t *row, long line, void *ctx, GrpoErr *err);

/* Reads path ("-" = standard input) line by line. Blank lines (only spaces,
 * tabs, \r) are skipped. A line that is not valid JSON gives
 * "path:line: not valid JSON: <jansson text> (column N)"; a valid JSON value
 * that is not an object gives "path:line: expected a JSON object, got <kind>"
 * (kind: a string, a number, an array, true, false, null). A read error or
 * out-of-memory while reading is an error ("path:line: read error: ..."), never
 * treated as the end of the file. Reading stops at the first error (the
 * callback's included). Returns the number of rows (>= 0) or -1.
 *
 * A file whose first character other than white space is '[' is read as one
 * JSON array of objects instead (a .json file as datasets' to_json(lines=False)
 * writes it): each element is a row, numbered by the line it starts on;
 * messages name that line and the record's index in the array.
 *
 * A UTF-8 byte order mark at the start of the file is skipped (Hugging Face
 * datasets' JSON loader reads such a file as if it were not there); one anywhere
 * else is not JSON, and the message shows it escaped (\ufeff). */
long jsonl_read(const char *path, JsonlRowFn fn, void *ctx, GrpoErr *err);

/* What a JSON value is, for messages: "an object", "an array", "a string",
 * "a number", "true", "false", "null". */
const char *json_kind(const json_t *v);

#endif
