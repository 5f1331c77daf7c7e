/* gpu/ops.h — the GPU's forms of the CPU's kernels (ops/ops.h, optim/optim.h), on
 * device pointers, launched on d's stream in order: the same arguments and the same
 * results, within the tolerances tests/gpu/test_gpu_ops.c states (AdamW: the CPU's
 * bits). Each returns 0, or -1 with err (a launch the driver refused). */
#ifndef GRPO_GPU_OPS_H
#define GRPO_GPU_OPS_H

#include "gpu/device.h"
#include "optim/optim.h"

/* rmsnorm_forward: out[N, C] (ld_out), rstd[N], in[N, C] (ld_in), w[C]. */
int gpu_rmsnorm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr w, int N, int C,
                        int ld_out, int ld_in, float eps, GrpoErr *err);
/* rmsnorm_backward: din += (din 0: none), dw (+)= (dw 0: none; write_dw: written). */
int gpu_rmsnorm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dw, CUdeviceptr dout, CUdeviceptr in,
                         CUdeviceptr rstd, CUdeviceptr w, int N, int C, int ld_din, int ld_dout, int ld_in, int write_dw,
                         GrpoErr *err);
/* swiglu_forward / swiglu_backward: gu[N, 2F] = [gate | up], out[N, F], dgu written. */
int gpu_swiglu_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr gu, int N, int F, GrpoErr *err);
int gpu_swiglu_backward(GpuDevice *d, CUdeviceptr dgu, CUdeviceptr dout, CUdeviceptr gu, int N, int F, GrpoErr *err);
/* One AdamW step over n values: p, m, v updated, g read, mask[n] (or 0: every
 * element decays); s from adamw_step_scalars. */
int gpu_adamw_step(GpuDevice *d, CUdeviceptr p, CUdeviceptr m, CUdeviceptr v, CUdeviceptr g, CUdeviceptr mask,
                   size_t n, const AdamWStep *s, GrpoErr *err);

#endif
