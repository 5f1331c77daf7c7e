/* gpu/ops.c — launch shapes for the kernels of gpu/kernels/ (see ops.h): a block of
 * 256 threads per row for the row-wise ones, grid-stride loops over as many blocks
 * as fill the GPU a few times for the element-wise ones. */
#include "gpu/ops.h"

enum { ROW_THREADS = 256, FLAT_THREADS = 256 };

/* Blocks for n elements: enough for one element a thread, at most 8 per multiprocessor
 * (the kernels loop over the rest). */
static unsigned flat_blocks(const GpuDevice *d, unsigned long long n) {
    unsigned long long want = (n + FLAT_THREADS - 1) / FLAT_THREADS, most = 8ULL * (d->sms > 0 ? d->sms : 1);
    return (unsigned)(want < most ? want : most);
}

int gpu_rmsnorm_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr w, int N, int C,
                        int ld_out, int ld_in, float eps, GrpoErr *err) {
    void *args[] = {&out, &rstd, &in, &w, &C, &ld_out, &ld_in, &eps};
    return gpu_launch(d, GPU_K_RMSNORM_FORWARD, (unsigned)N, ROW_THREADS, args, err);
}

int gpu_rmsnorm_backward(GpuDevice *d, CUdeviceptr din, CUdeviceptr dw, CUdeviceptr dout, CUdeviceptr in,
                         CUdeviceptr rstd, CUdeviceptr w, int N, int C, int ld_din, int ld_dout, int ld_in, int write_dw,
                         GrpoErr *err) {
    if (din) {
        void *args[] = {&din, &dout, &in, &rstd, &w, &C, &ld_din, &ld_dout, &ld_in};
        if (gpu_launch(d, GPU_K_RMSNORM_BACKWARD_INPUT, (unsigned)N, ROW_THREADS, args, err)) return -1;
    }
    if (dw) {
        void *args[] = {&dw, &dout, &in, &rstd, &N, &C, &ld_dout, &ld_in, &write_dw};
        if (gpu_launch(d, GPU_K_RMSNORM_BACKWARD_WEIGHT, (unsigned)((C + FLAT_THREADS - 1) / FLAT_THREADS),
                       FLAT_THREADS, args, err))
            return -1;
    }
    return 0;
}

int gpu_swiglu_forward(GpuDevice *d, CUdeviceptr out, CUdeviceptr gu, int N, int F, GrpoErr *err) {
    void *args[] = {&out, &gu, &N, &F};
    return gpu_launch(d, GPU_K_SWIGLU_FORWARD, flat_blocks(d, (unsigned long long)N * F), FLAT_THREADS, args, err);
}

int gpu_swiglu_backward(GpuDevice *d, CUdeviceptr dgu, CUdeviceptr dout, CUdeviceptr gu, int N, int F, GrpoErr *err) {
    void *args[] = {&dgu, &dout, &gu, &N, &F};
    return gpu_launch(d, GPU_K_SWIGLU_BACKWARD, flat_blocks(d, (unsigned long long)N * F), FLAT_THREADS, args, err);
}

int gpu_adamw_step(GpuDevice *d, CUdeviceptr p, CUdeviceptr m, CUdeviceptr v, CUdeviceptr g, CUdeviceptr mask,
                   size_t n, const AdamWStep *s, GrpoErr *err) {
    unsigned long long count = n;
    float step_size = s->step_size, bc2_sqrt = s->bc2_sqrt, decay = s->decay, b1c = s->one_minus_b1, b2 = s->b2,
          b2c = s->one_minus_b2, eps = s->eps;
    int use_decay = s->use_decay;
    void *args[] = {&p, &m, &v, &g, &mask, &count, &step_size, &bc2_sqrt, &decay, &b1c, &b2, &b2c, &eps, &use_decay};
    return gpu_launch(d, GPU_K_ADAMW_STEP, flat_blocks(d, count), FLAT_THREADS, args, err);
}
