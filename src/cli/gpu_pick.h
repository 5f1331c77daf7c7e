/* cli/gpu_pick.h — where `grpo generate` and `grpo eval` run their model: on an
 * NVIDIA GPU when gpu_open finds one (transformers' convention), on the CPU with
 * --use_cpu (TRL's and transformers' use_cpu), and on the CPU with one line where a
 * GPU is there but cannot take the run (fp32 products asked for). An adapter runs on
 * the GPU beside the bf16 base (gen_session_open_gpu), on the CPU folded into fp32
 * weights. A machine without a GPU hears nothing of it. */
#ifndef GRPO_CLI_GPU_PICK_H
#define GRPO_CLI_GPU_PICK_H

#include "gen/options.h"
#include "gpu/device.h"

/* 1 with d open and *form WEIGHTS_BF16 (a GPU found, not use_cpu, bf16 asked for or
 * left to auto; a model the GPU cannot run fails later, at its upload); 0: the CPU, *form as the bf16
 * options chose it (a line on stderr, "grpo CMD: ...", where a GPU was found); -1
 * with err where a GPU is there but cannot be set up. */
int cli_gpu_pick(const char *cmd, int use_cpu, const Bf16Options *bf16, GpuDevice *d, int *form, GrpoErr *err);

#endif
