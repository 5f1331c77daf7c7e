/* io/bulk_write.h — a large output file (weights, AdamW's state) written in
 * aligned blocks straight to the disk, past the page cache.
 *
 * A checkpoint of the Qwen2-0.5B shape is 6 GB. Written through the page cache,
 * every byte is first copied into fresh cache pages, which the kernel takes and
 * fills on the writer's time, and the fsync that follows waits for the disk
 * anyway: in a VM that copy cost 1.9 s of system time per GB, the largest part of
 * a short run's system time. Here the bytes are gathered in an aligned block and
 * each full block is written with O_DIRECT (the disk reads it from our memory).
 * Where the filesystem refuses O_DIRECT (at open, or at the first write: tmpfs,
 * some network filesystems), the same bytes go through the page cache instead;
 * the file is the same either way. The last block, when not a whole number of
 * 4 KiB, goes through the page cache too (at most 4 MiB of the file). */
#ifndef GRPO_IO_BULK_WRITE_H
#define GRPO_IO_BULK_WRITE_H

#include <stddef.h>

typedef struct BulkFile BulkFile;

typedef enum { BULK_DIRECT, BULK_BUFFERED } BulkMode;

/* Creates (or truncates) path for writing, mode 0644: NULL with errno set when
 * it cannot be created. BULK_BUFFERED skips the O_DIRECT attempt. */
BulkFile *bulk_open(const char *path, BulkMode mode);
/* Appends n bytes. 0, or -1 with errno set (the file is then unusable: close it
 * with bulk_close and discard it). */
int bulk_write(BulkFile *f, const void *p, size_t n);
/* Writes what is left, fsyncs and closes; frees f in every
 * case. 0, or -1 with errno set (of the first failure, a bulk_write's included). */
int bulk_close(BulkFile *f);
/* 1 when f's bytes went to the disk directly (for tests), else 0. */
int bulk_is_direct(const BulkFile *f);

#endif
