/* tests/gpu/test_gpu_emulator.c — the tests' emulated GPU (tests/machine/
 * gpu_emulator.c, gpu_emulator_threads.c) does what a GPU does with the constructs the
 * kernels use: block and grid indices, the block barrier, the three warp shuffles,
 * dynamic shared memory (not cleared), and refuses what a GPU would hang on or compute
 * garbage with (a barrier or shuffle some threads never reach, a shuffle reading an
 * exited lane, a warp's lanes at different shuffles, a block size it does not model),
 * so the kernels' tests that run on it can be trusted to fail where the kernel is
 * wrong. The kernels here are the test's own, in the host lowering of
 * gpu/kernels/device.h. */
#include <stdint.h>
#include <string.h>

#include "gpu/kernels/device.h"
#include "machine/gpu_emulator.h"
#include "testutil.h"

#define P(i, T) (*(T *)p[i])

/* out[b * n + t] = the block's sum of (t + 1), for block b = (x, y) */
KERNEL void k_block_sum(float *out) {
    SHARED float scratch[32];
    int b = block_y() * grid_dim_x() + block_x();
    out[b * block_dim_x() + thread_x()] = block_sum((float)(thread_x() + 1), scratch) + 1000.0f * b;
}
static void run_block_sum(void **p) { k_block_sum(P(0, float *)); }

/* out[3 t + i]: lane t's shfl_xor(v, 5), shfl_idx(v, 7), shfl_down(v, 3) of v = in[t] */
KERNEL void k_shuffles(float *out, const float *in) {
    int t = thread_x();
    float v = in[t];
    out[3 * t] = shfl_xor(v, 5);
    out[3 * t + 1] = shfl_idx(v, 7);
    out[3 * t + 2] = shfl_down(v, 3);
}
static void run_shuffles(void **p) { k_shuffles(P(0, float *), P(1, const float *)); }

/* out[t]: the bits of dynamic shared memory's word t before any write (not cleared),
 * then out[n + t] = what thread t + 1 wrote there, read after the barrier */
KERNEL void k_dynamic(uint32_t *out) {
    uint32_t *s = (uint32_t *)dynamic_shared();
    int t = thread_x(), n = block_dim_x();
    out[t] = s[t];
    sync_block();
    s[t] = (uint32_t)(t * 7);
    sync_block();
    out[n + t] = s[(t + 1) % n];
}
static void run_dynamic(void **p) { k_dynamic(P(0, uint32_t *)); }

/* threads past `live` exit first; the rest meet at the barrier (exited threads count
 * as arrived, as on a GPU) */
KERNEL void k_exit_then_sync(float *out, int live) {
    if (thread_x() >= live) return;
    sync_block();
    out[thread_x()] = 1.0f;
}
static void run_exit_then_sync(void **p) { k_exit_then_sync(P(0, float *), P(1, int)); }

/* half of each warp waits at the barrier, the other half at a shuffle with the whole
 * warp: neither can complete (a GPU hangs or computes garbage) */
KERNEL void k_split_wait(float *out) {
    if ((thread_x() & 31) < 16) sync_block();
    else out[thread_x()] = shfl_xor(1.0f, 1);
}
static void run_split_wait(void **p) { k_split_wait(P(0, float *)); }

/* odd lanes exit, even lanes shuffle: reads a lane that is gone */
KERNEL void k_shuffle_exited(float *out) {
    if (thread_x() & 1) return;
    out[thread_x()] = shfl_xor(1.0f, 1);
}
static void run_shuffle_exited(void **p) { k_shuffle_exited(P(0, float *)); }

/* in the second warp only, half the lanes at one shuffle and half at another: a GPU
 * computes garbage (a warp's lanes must meet at the same shuffle) */
KERNEL void k_mixed_shuffles(float *out) {
    int t = thread_x();
    out[t] = t < 48 ? shfl_xor(1.0f, 1) : shfl_down(1.0f, 1);
}
static void run_mixed_shuffles(void **p) { k_mixed_shuffles(P(0, float *)); }

static void check_indices_and_barrier(void) {
    enum { GX = 3, GY = 2, N = 256 };
    static float out[GX * GY * N];
    void *args[] = {&(float *){out}};
    T_CHECK(gpu_emu_run("block_sum", run_block_sum, GX, GY, N, 0, args) == 0, "block_sum launch failed");
    long wrong = 0;
    for (int b = 0; b < GX * GY; b++)
        for (int t = 0; t < N; t++) wrong += out[b * N + t] != N * (N + 1) / 2 + 1000.0f * b;
    T_CHECK(wrong == 0, "block_sum over a 3 x 2 grid: %ld of %d values wrong", wrong, GX * GY * N);
}

static void check_shuffles(void) {
    enum { N = 64 };
    float in[N], out[3 * N];
    for (int t = 0; t < N; t++) in[t] = (float)(t * t + 1);
    void *args[] = {&(float *){out}, &(const float *){in}};
    T_CHECK(gpu_emu_run("shuffles", run_shuffles, 1, 1, N, 0, args) == 0, "shuffles launch failed");
    long wrong = 0;
    for (int t = 0; t < N; t++) {
        int w = t & ~31, l = t & 31;
        wrong += out[3 * t] != in[w + (l ^ 5)];
        wrong += out[3 * t + 1] != in[w + 7];
        wrong += out[3 * t + 2] != in[l + 3 < 32 ? t + 3 : t];
    }
    T_CHECK(wrong == 0, "shuffles across two warps: %ld of %d values wrong", wrong, 3 * N);
}

static void check_dynamic_shared(void) {
    enum { N = 96 };
    uint32_t out[2 * N];
    void *args[] = {&(uint32_t *){out}};
    T_CHECK(gpu_emu_run("dynamic", run_dynamic, 2, 1, N, N * 4, args) == 0, "dynamic launch failed");
    long unset = 0, wrong = 0;
    for (int t = 0; t < N; t++) unset += out[t] != 0xffffffffu, wrong += out[N + t] != (uint32_t)((t + 1) % N * 7);
    T_CHECK(unset == 0, "dynamic shared memory: %ld words not 0xffffffff before the first write (it is cleared)", unset);
    T_CHECK(wrong == 0, "dynamic shared memory: %ld words not what the neighbour wrote", wrong);
}

static void check_faults(void) {
    float out[128];
    memset(out, 0, sizeof out);
    void *a1[] = {&(float *){out}, &(int){40}};
    T_CHECK(gpu_emu_run("exit_then_sync", run_exit_then_sync, 1, 1, 128, 0, a1) == 0,
            "threads that exited before a barrier held it up");
    T_CHECK(out[39] == 1.0f && out[40] == 0.0f, "exit_then_sync: the live threads did not pass the barrier");
    void *a2[] = {&(float *){out}};
    fprintf(stderr, "(three faults expected next)\n");
    T_CHECK(gpu_emu_run("split_wait", run_split_wait, 1, 1, 64, 0, a2) == -1,
            "half a warp at the barrier, half at a shuffle: not reported");
    T_CHECK(gpu_emu_run("shuffle_exited", run_shuffle_exited, 1, 1, 32, 0, a2) == -1,
            "a shuffle reading exited lanes was not reported");
    T_CHECK(gpu_emu_run("mixed_shuffles", run_mixed_shuffles, 1, 1, 64, 0, a2) == -1,
            "lanes of one warp at different shuffles: not reported");
}

/* Through the driver: device memory not cleared, counted; a block size the emulator
 * does not model refused with the driver's error, not run. */
static void check_driver(void) {
    GpuDevice d;
    GrpoErr err = {0};
    char why[128] = "";
    test_gpu_machine(1);
    T_CHECK(gpu_open(&d, why, sizeof why, &err) == 1, "the emulated GPU did not open: %s%s", why, err.msg);
    size_t free0, total, free1;
    d.api.MemGetInfo(&free0, &total);
    CUdeviceptr x;
    T_CHECK(gpu_alloc(&d, &x, 4096, &err) == 0, "%s", err.msg);
    d.api.MemGetInfo(&free1, &total);
    T_CHECK(free0 - free1 == 4096, "MemGetInfo: %zu bytes taken by a 4096-byte allocation", free0 - free1);
    uint32_t word;
    gpu_get(&d, &word, x + 100, 4, &err);
    T_CHECK(word == 0xffffffffu, "new device memory reads 0x%08x, not the emulator's 0xffffffff", word);
    int n = 1, f = 1;
    void *args[] = {&x, &x, &n, &f};
    T_CHECK(gpu_launch(&d, GPU_K_SWIGLU_FORWARD, 1, 33, args, &err) == -1 && strstr(err.msg, "swiglu_forward"),
            "a block of 33 threads was launched (err: %s)", err.msg);
    gpu_free(&d, x);
    gpu_close(&d);
    test_gpu_machine(0);
}

int main(void) {
    check_indices_and_barrier();
    check_shuffles();
    check_dynamic_shared();
    check_faults();
    check_driver();
    return t_summary("test_gpu_emulator");
}
