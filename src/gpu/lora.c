/* gpu/lora.c — see lora.h: an adapted module's forward and backward on cuBLASLt's
 * fp32 products (gpu/gemm.h), with dropout from gpu/kernels/lora.cu. The products
 * are model/lora_layers.c's, in its order, with its operands: the results agree with
 * the CPU's to the fp32 sums' rounding (cuBLASLt's order, not the CPU's BLAS's).
 * Decoding's form (gpu_lora_decode) is row-local, on gpu/kernels/lora_decode.cu. */
#include "gpu/lora.h"

#include <math.h>
#include <stdint.h>

#include "gpu/gemm.h"

enum { LORA_THREADS = 256 };

/* Blocks for n elements, at most 8 per multiprocessor (the kernels loop over the rest). */
static unsigned lora_blocks(const GpuDevice *d, unsigned long long n) {
    unsigned long long want = (n + LORA_THREADS - 1) / LORA_THREADS, most = 8ULL * (d->sms > 0 ? d->sms : 1);
    return (unsigned)(want < most ? want : most);
}

int gpu_lora_view(GpuLoraAdapter *a, const LoraLayers *lo, const ModelConfig *cfg, int l, LoraModule mod,
                  CUdeviceptr params, CUdeviceptr grads) {
    int e = lo->entry[l][mod];
    if (e < 0) return 0;
    LoraLinear lin;
    lora_module_geometry(cfg, mod, &lin, &a->row0, &a->out, &a->in);
    a->r = lo->spec.r;
    a->scaling = lo->scaling;
    size_t oa = lo->table.entries[e].offset, ob = lo->table.entries[e + 1].offset;
    a->A = params + 4 * oa, a->B = params + 4 * ob;
    a->dA = grads ? grads + 4 * oa : 0, a->dB = grads ? grads + 4 * ob : 0;
    return 1;
}

int gpu_lora_dropout_mask(GpuDevice *d, CUdeviceptr bits, CUdeviceptr keys, CUdeviceptr seq, CUdeviceptr pos, int N,
                          int in, const LoraLayers *lo, int l, LoraModule mod, GrpoErr *err) {
    double p = lo->spec.dropout;
    if (!(p >= 0 && p < 1) || N < 0 || in < 1)
        return err_set(err, "gpu_lora_dropout_mask: p %g, N %d, in %d: expected 0 <= p < 1, N >= 0, in >= 1", p, N, in);
    int row_bytes = (in + 7) / 8;
    uint64_t seed = lo->dropout_seed, site = (uint64_t)l * LORA_N_MODULES + (uint64_t)mod;
    unsigned thresh = (unsigned)lrint(p * 65536.0); /* draw_mask's: p in steps of 1/65536 */
    void *args[] = {&bits, &keys, &seq, &pos, &N, &row_bytes, &seed, &site, &thresh};
    return N ? gpu_launch(d, GPU_K_LORA_DROPOUT_MASK, lora_blocks(d, (unsigned long long)N * row_bytes), LORA_THREADS,
                          args, err)
             : 0;
}

/* out[N, in] (+)= x masked and scaled (apply_mask). */
static int dropout_apply(GpuDevice *d, CUdeviceptr out, CUdeviceptr x, const GpuLoraDropout *drop, int N, int in,
                         int accumulate, GrpoErr *err) {
    int row_bytes = (in + 7) / 8;
    float scale = drop->scale;
    CUdeviceptr bits = drop->bits;
    void *args[] = {&out, &x, &bits, &N, &in, &row_bytes, &scale, &accumulate};
    return gpu_launch(d, GPU_K_LORA_DROPOUT_APPLY, lora_blocks(d, (unsigned long long)N * in), LORA_THREADS, args,
                      err);
}

static int dropout_on(const GpuLoraDropout *drop) { return drop && drop->bits; }

/* x, or dropout(x) in xd: the adapter's input. */
static int adapter_input(GpuDevice *d, CUdeviceptr *xin, CUdeviceptr x, CUdeviceptr xd, const GpuLoraDropout *drop,
                         int N, int in, GrpoErr *err) {
    *xin = x;
    if (!dropout_on(drop)) return 0;
    if (!xd) return err_set(err, "GPU LoRA: dropout without its xd scratch");
    *xin = xd;
    return dropout_apply(d, xd, x, drop, N, in, 0, err);
}

int gpu_lora_forward(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr y, int ldy, CUdeviceptr u, CUdeviceptr x,
                     CUdeviceptr xd, const GpuLoraDropout *drop, int N, GrpoErr *err) {
    if (N < 1) return N == 0 ? 0 : err_set(err, "GPU LoRA: %d rows", N);
    CUdeviceptr xin;
    if (adapter_input(d, &xin, x, xd, drop, N, a->in, err) ||
        gpu_gemm_f32(d, 0, 1, N, a->r, a->in, 1.0f, xin, a->in, a->A, a->in, 0.0f, u, a->r, err))
        return -1;
    if (!y) return 0;
    return gpu_gemm_f32(d, 0, 1, N, a->out, a->r, a->scaling, u, a->r, a->B, a->r, 1.0f, y + 4 * (size_t)a->row0, ldy,
                        err);
}

int gpu_lora_backward(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr dx, CUdeviceptr dy, int ldy, CUdeviceptr x,
                      CUdeviceptr u, CUdeviceptr du, CUdeviceptr xd, const GpuLoraDropout *drop, int N, GrpoErr *err) {
    return gpu_lora_backward_write(d, a, 0, dx, dy, ldy, x, u, du, xd, drop, N, err);
}

int gpu_lora_backward_write(GpuDevice *d, const GpuLoraAdapter *a, int write, CUdeviceptr dx, CUdeviceptr dy, int ldy,
                            CUdeviceptr x, CUdeviceptr u, CUdeviceptr du, CUdeviceptr xd, const GpuLoraDropout *drop,
                            int N, GrpoErr *err) {
    if (N < 1) return N == 0 ? 0 : err_set(err, "GPU LoRA: %d rows", N);
    CUdeviceptr dyr = dy + 4 * (size_t)a->row0, xin;
    int r = a->r, in = a->in, out = a->out;
    float beta = write ? 0.0f : 1.0f;
    /* dB[out, r] (+)= s dy^T u;  du[N, r] = s dy B;  dA[r, in] (+)= du^T dropout(x) */
    if ((a->dB && gpu_gemm_f32(d, 1, 0, out, r, N, a->scaling, dyr, ldy, u, r, beta, a->dB, r, err)) ||
        gpu_gemm_f32(d, 0, 0, N, r, out, a->scaling, dyr, ldy, a->B, r, 0.0f, du, r, err))
        return -1;
    if (a->dA && (adapter_input(d, &xin, x, xd, drop, N, in, err) ||
                  gpu_gemm_f32(d, 1, 0, r, in, N, 1.0f, du, r, xin, in, beta, a->dA, in, err)))
        return -1;
    if (!dx) return 0;
    if (!dropout_on(drop)) return gpu_gemm_f32(d, 0, 0, N, in, r, 1.0f, du, r, a->A, in, 1.0f, dx, in, err);
    /* dx += dropout'(du A): the same mask and scale as the forward */
    if (!xd) return err_set(err, "GPU LoRA: dropout without its xd scratch");
    return gpu_gemm_f32(d, 0, 0, N, in, r, 1.0f, du, r, a->A, in, 0.0f, xd, in, err) ||
                   dropout_apply(d, dx, xd, drop, N, in, 1, err)
               ? -1
               : 0;
}

int gpu_lora_decode(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr y, int ldy, CUdeviceptr u, CUdeviceptr x, int n,
                    GrpoErr *err) {
    if (n < 1) return err_set(err, "GPU LoRA decoding: %d rows (expected >= 1)", n);
    int r = a->r, in = a->in, out = a->out, row0 = a->row0;
    float scaling = a->scaling;
    CUdeviceptr A = a->A, B = a->B;
    void *down[] = {&u, &x, &A, &r, &in, &scaling};
    void *up[] = {&y, &ldy, &row0, &u, &B, &n, &r, &out};
    /* a block a row for u (its warps over the r sums); the additions a thread an element */
    return gpu_launch(d, GPU_K_LORA_DECODE_DOWN, (unsigned)n, LORA_THREADS, down, err) ||
                   gpu_launch(d, GPU_K_LORA_DECODE_UP, lora_blocks(d, (unsigned long long)n * out), LORA_THREADS, up,
                              err)
               ? -1
               : 0;
}
