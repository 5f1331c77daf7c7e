/* log/tensorboard.h — TensorBoard event files, as transformers' TensorBoard
 * callback writes them for TRL (`report_to: tensorboard`).
 *
 * A file events.out.tfevents.TIME.HOST.PID.0 in a run directory holds TFRecord
 * records (little-endian uint64 length, the masked CRC-32C of those 8 bytes,
 * the data, the masked CRC-32C of the data), each a serialized tensorflow
 * Event: the first carries file_version "brain.Event:2", then one Event per
 * logged step with a Summary of simple_value scalars tagged "train/NAME". The
 * encoding is written here (a few protobuf fields); tests read it back with
 * python3-protobuf. */
#ifndef GRPO_LOG_TENSORBOARD_H
#define GRPO_LOG_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/check.h"

typedef struct {
    FILE *f;
    char *path;
} TbWriter;

/* Creates dir (and parents) and its event file, writing the file_version event. */
int tb_open(TbWriter *w, const char *dir, GrpoErr *err);

/* One Event at step with a scalar per (names[i], values[i]); NaN/Inf values are
 * left out. Tags are prefix + name ("train/" + "reward"). Flushed. */
int tb_write_scalars(TbWriter *w, long step, double wall_time, const char *prefix, const char *const *names,
                     const double *values, int n, GrpoErr *err);

void tb_close(TbWriter *w);

/* CRC-32C (Castagnoli) of data, and TFRecord's masked form of a CRC. */
uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_mask_crc(uint32_t crc);

#endif
