/* io/digest.h — a 128-bit fingerprint of inputs, for telling whether two
 * processes read the same files (dist's start-up agreement, cli/ranks.c).
 *
 * Not cryptographic: it tells apart files that differ by accident (another
 * version of a dataset, another model), not files forged to collide.
 *
 * A file is read whole up to DIGEST_WHOLE_BYTES. A larger one (a model's
 * weights: hashing 2 GB at every start would take seconds) is fingerprinted by
 * its size, its first MiB (a .safetensors file: its whole JSON header, which
 * names every tensor, its dtype, shape and offsets), its last 64 KiB and 64
 * blocks of 64 KiB spread evenly over it: two such files that differ only in
 * bytes no block covers look alike. */
#ifndef GRPO_IO_DIGEST_H
#define GRPO_IO_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

#define DIGEST_WHOLE_BYTES ((int64_t)16 << 20)

typedef struct {
    uint64_t h[2];
} Digest;

void digest_init(Digest *d);
/* Adds n bytes (their order matters; digest_add(a) then (b) differs from (ab) only
 * by chance, so callers add lengths before variable-length parts). */
void digest_add(Digest *d, const void *p, size_t n);
void digest_add_u64(Digest *d, uint64_t x);
/* Adds a string with its length ("" and NULL differ). */
void digest_add_str(Digest *d, const char *s);

/* Adds the file at path (a regular file: fs_open_regular's rule), whole or
 * sampled as above. -1 with err "PATH: cannot open: ..." on failure. */
int digest_file(Digest *d, const char *path, GrpoErr *err);
/* Adds a directory's regular files (not its subdirectories nor hidden files), in name order, each
 * name and its digest_file; a symlink counts as the file it names. A file path
 * is digest_file. -1 with err when the directory cannot be read. */
int digest_path(Digest *d, const char *path, GrpoErr *err);

#endif
