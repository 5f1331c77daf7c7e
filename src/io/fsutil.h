/* io/fsutil.h — small filesystem helpers: opening inputs, writing output
 * directories safely.
 *
 * Inputs are regular files: a FIFO, a device, a socket or a directory given
 * where a file is expected is refused at open, without blocking ("PATH: is a
 * FIFO, expected a regular file"). Output directories (model saves, checkpoints) are written into a temporary
 * sibling directory and renamed into place only when complete, so a crash or an
 * error never leaves a half-written directory under the final name. */
#ifndef GRPO_IO_FSUTIL_H
#define GRPO_IO_FSUTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "core/check.h"

/* Opens an input file for reading: a file descriptor (O_CLOEXEC, blocking), or
 * -1 with err: cannot open, or not a regular file (checked on the open file,
 * which is opened with O_NONBLOCK so that a FIFO cannot block the open). */
int fs_open_regular(const char *path, GrpoErr *err);
/* The same as a stdio stream ("rb"), or NULL with err. */
FILE *fs_fopen_regular(const char *path, GrpoErr *err);
/* Reads a JSON input file (jansson flags), or NULL with err: the open errors
 * above, or "PATH: invalid JSON at line N: what". */
json_t *fs_load_json(const char *path, size_t flags, GrpoErr *err);

int fs_exists(const char *path);
int fs_is_dir(const char *path);
/* Room kept in output_dir's path for what a run writes inside it (a checkpoint's
 * temporary directory and files, TensorBoard's runs/DATE_HOST/events... names). */
enum { FS_OUTPUT_ROOM_BYTES = 256 };
/* 0 when path can name a file or directory here with room_bytes more of path
 * inside it: at most PATH_MAX - 1 - room_bytes bytes, and no component longer
 * than NAME_MAX. Else -1, the message naming `what` and the path shortened and
 * escaped. Nothing is created or looked at. */
int fs_path_check(const char *path, const char *what, size_t room_bytes, GrpoErr *err);
/* The longest suffix fs_tmpdir_for adds to a name: ".tmp-PID-N". */
enum { FS_TMP_SUFFIX_BYTES = 40 };
/* fs_path_check for a directory written through fs_tmpdir_for: its temporary
 * twin, the name with FS_TMP_SUFFIX_BYTES more, must fit too. */
int fs_tmpdir_check(const char *final_dir, const char *what, GrpoErr *err);
/* Creates every missing component of path (mode 0755). A path fs_path_check
 * refuses is refused before anything is created; an existing component that is
 * not a directory is an error. */
int fs_mkdir_p(const char *path, GrpoErr *err);
int fs_rm_rf(const char *path);                         /* 0 or -1; missing is fine */
int fs_copy_file(const char *src, const char *dst, GrpoErr *err);
/* Reads a whole file into a NUL-terminated malloc'd buffer. */
int fs_read_file(const char *path, char **out, size_t *len, GrpoErr *err);
/* Writes len bytes to fd, retrying short writes (EINTR included). 0 or -1 with errno. */
int fs_write_all(int fd, const void *buf, size_t len);
/* Writes buf to path via path.tmp + rename. */
int fs_write_file_atomic(const char *path, const void *buf, size_t len, GrpoErr *err);

/* Creates a fresh empty temporary directory next to final_dir
 * (final_dir + ".tmp-<pid>-<n>") and returns its path (malloc'd) in *tmp. */
int fs_tmpdir_for(const char *final_dir, char **tmp, GrpoErr *err);
/* Moves tmp into place as final_dir. If final_dir exists, its files that tmp also
 * has are replaced and others are kept (a directory holding checkpoint-N/
 * subfolders keeps them); tmp is removed afterwards. */
int fs_commit_dir(const char *tmp, const char *final_dir, GrpoErr *err);

/* path as an absolute path (malloc'd): symlinks resolved along the part of it that
 * exists, "." and ".." folded in the rest — where a directory not made yet will be. */
char *fs_canonical(const char *path);
/* 1 when canonical path inner is outer or lies inside it (both from fs_canonical). */
int fs_within(const char *inner, const char *outer);

/* path join into a malloc'd string. */
char *fs_join(const char *dir, const char *name);

#endif
