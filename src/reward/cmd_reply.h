/* reward/cmd_reply.h — the reply side of the `cmd:` reward protocol without the
 * process (docs/reward-protocol.md): framing — exactly one line per request, at
 * most CMD_REPLY_MAX_BYTES, nothing after it — and decoding the line into
 * rewards. reward_cmd.c reads the child's bytes into a CmdReply; the fuzz
 * target drives the same functions in memory. */
#ifndef GRPO_REWARD_CMD_REPLY_H
#define GRPO_REWARD_CMD_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "core/check.h"

/* A reply line longer than this (64 MiB: 8 million rewards of 8 bytes) is an error. */
#define CMD_REPLY_MAX_BYTES ((size_t)64 << 20)

typedef struct {
    char *buf;
    size_t len, cap;
    size_t scanned;  /* bytes of buf already searched for the newline */
    size_t line_len; /* the line's length without "\n" ("\r\n"), once complete */
    int complete;
} CmdReply;

/* Empties r for the next request; keeps its buffer. */
void cmd_reply_reset(CmdReply *r);
void cmd_reply_free(CmdReply *r);

/* Where to read the next bytes: at least 64 KiB of room (never past the limit
 * plus one read, so the limit is seen). *room gets its size. */
char *cmd_reply_space(CmdReply *r, size_t *room);

/* Accounts for n bytes just read into cmd_reply_space's room. 0: the line is
 * not complete yet; 1: it is; -1 with err: over the limit, or bytes after the
 * line (a second line for one request). what opens each message (e.g.
 * "reward command 'python3 judge.py'"). */
int cmd_reply_added(CmdReply *r, size_t n, const char *what, GrpoErr *err);

/* A complete line as JSON in *obj (the caller's reference). -1 with err when
 * it is not JSON, or when it is {"error": "TEXT"} — the process reporting its
 * own failure: err is "WHAT: TEXT", the text escaped. */
int cmd_reply_object(const CmdReply *r, const char *what, json_t **obj, GrpoErr *err);

/* Decodes a complete line, {"rewards": [number or null, ...]} with n entries,
 * into out (null -> NAN); {"error": TEXT} as cmd_reply_object. 0, or -1 with err. */
int cmd_reply_decode(const CmdReply *r, int n, double *out, const char *what, GrpoErr *err);

#endif
