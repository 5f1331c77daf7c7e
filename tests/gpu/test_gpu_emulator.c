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
#include <stdlib.h>
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

/* The schedule itself: each thread logs its global index when it starts and again
 * after a warp shuffle (the emulator runs one thread at a time, so a plain counter is
 * an exact log of the order threads ran in). */
static int schedule_log[2 * 2 * 128], schedule_n; /* check_orders: 2 entries x 2 blocks x 128 threads */
KERNEL void k_schedule(void) {
    int id = block_x() * block_dim_x() + thread_x();
    schedule_log[schedule_n++] = id;
    shfl_xor(0.0f, 1);
    schedule_log[schedule_n++] = 1000 + id;
}
static void run_schedule(void **p) { k_schedule(); }

/* Races, each a read of what another thread writes with no barrier or shuffle in
 * between: a GPU gives either value. Between warps: warp w's lane 0 writes s[w] and
 * every thread reads the next warp's s[w + 1] (s zeroed behind a barrier first). */
KERNEL void k_race_warps(float *out) {
    SHARED float s[32];
    int t = thread_x(), w = t >> 5, warps = block_dim_x() >> 5;
    if (t < 32) s[t] = 0.0f;
    sync_block();
    if ((t & 31) == 0) s[w] = (float)(w + 1);
    out[t] = s[(w + 1) % warps];
}
static void run_race_warps(void **p) { k_race_warps(P(0, float *)); }

/* between lanes of one warp: lane l writes s[l], reads its neighbour's s[l ^ 1] */
KERNEL void k_race_lanes(float *out) {
    SHARED float s[32];
    int t = thread_x();
    s[t] = 0.0f;
    sync_block();
    s[t] = (float)(t + 1);
    out[t] = s[t ^ 1];
}
static void run_race_lanes(void **p) { k_race_lanes(P(0, float *)); }

/* between blocks, through device memory: block b writes x[b], its thread 0 reads the
 * next block's x[b + 1] (x zeroed by the host) */
KERNEL void k_race_blocks(float *out, float *x) {
    int b = block_x(), n = grid_dim_x();
    if (thread_x() == 0) x[b] = (float)(b + 1), out[b] = x[(b + 1) % n];
}
static void run_race_blocks(void **p) { k_race_blocks(P(0, float *), P(1, float *)); }

static void set_order(const char *spec) {
    char why[160];
    T_CHECK(gpu_emu_set_order(spec, why, sizeof why) == 0, "order %s refused: %s", spec, why);
}

static int compare_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Each order runs a warp's lanes one after another, each up to its wait: forward
 * block by block, warp by warp, lane by lane; reverse the last block, warp and lane
 * first; shuffle a permutation of the same entries that is neither, the same for the
 * same seed, another for another seed, with warps interleaved between shuffles
 * (another warp's stretch between a warp's two). A bad spec is refused, naming it. */
static void check_orders(void) {
    enum { GRID = 2, N = 128, LOG = 2 * GRID * N };
    static const char *specs[] = {"forward", "reverse", "shuffle:1", "shuffle:1", "shuffle:2"};
    static int logs[5][LOG];
    for (int o = 0; o < 5; o++) {
        set_order(specs[o]);
        schedule_n = 0;
        T_CHECK(gpu_emu_run("schedule", run_schedule, GRID, 1, N, 0, NULL) == 0, "schedule under %s", specs[o]);
        T_CHECK(schedule_n == LOG, "%s: %d entries logged, expected %d", specs[o], schedule_n, LOG);
        memcpy(logs[o], schedule_log, sizeof schedule_log);
    }
    set_order("forward");
    long fwd = 0, rev = 0, same_fwd = 0, same_rev = 0, interleaved = 0;
    for (int k = 0; k < LOG; k++) { /* forward: a block's warps, each its 32 lanes then the 32 after the shuffle */
        int b = k / (2 * N), w = k % (2 * N) / 64, half = k % 64 / 32, l = k % 32;
        fwd += logs[0][k] != 1000 * half + b * N + w * 32 + l;
        rev += logs[1][k] != 1000 * half + (GRID - 1 - b) * N + (N / 32 - 1 - w) * 32 + 31 - l;
        same_fwd += logs[2][k] == logs[0][k], same_rev += logs[2][k] == logs[1][k];
        int next = k + 32; /* a warp's first stretch, and the next stretch in the block another warp's */
        if (k % 32 == 0 && next % (2 * N) && logs[2][k] < 1000 && logs[2][next] % 1000 / 32 != logs[2][k] / 32)
            interleaved++;
    }
    T_CHECK(fwd == 0, "forward: %ld of %d entries out of order", fwd, LOG);
    T_CHECK(rev == 0, "reverse: %ld of %d entries not in the reverse order", rev, LOG);
    T_CHECK(same_fwd < LOG / 8 && same_rev < LOG / 8, "shuffle:1 agrees with forward at %ld and reverse at %ld of %d",
            same_fwd, same_rev, LOG);
    T_CHECK(interleaved > 0, "shuffle:1: no warp ran between another warp's two stretches");
    T_CHECK(!memcmp(logs[2], logs[3], sizeof logs[2]), "shuffle:1 twice: two orders");
    T_CHECK(memcmp(logs[2], logs[4], sizeof logs[2]), "shuffle:1 and shuffle:2: the same order");
    qsort(logs[2], LOG, sizeof(int), compare_int), qsort(logs[0], LOG, sizeof(int), compare_int);
    T_CHECK(!memcmp(logs[0], logs[2], sizeof logs[0]), "shuffle:1 does not run each thread's stretches once");
    printf("  orders: %ld of %d entries out of forward's order, %ld out of reverse's; shuffle:1 has %ld and %ld where "
           "they have them, another warp between a warp's stretches %ld times\n", fwd, LOG, rev, same_fwd, same_rev,
           interleaved);
    char why[160] = "";
    T_CHECK(gpu_emu_set_order("shuffle:x", why, sizeof why) == -1 && strstr(why, "GRPO_EMU_ORDER=\"shuffle:x\"") &&
                strstr(why, "expected forward, reverse, shuffle or shuffle:SEED"),
            "a bad order: \"%s\"", why);
}

/* Every order, the three races: forward and reverse give different values, and so
 * does some shuffle; a race-free kernel (block_sum) and the faults are the same under
 * all (check_indices_and_barrier, check_faults, run by main under each order). */
static void check_races(void) {
    enum { N = 128, GRID = 5 };
    static const char *specs[] = {"forward", "reverse", "shuffle:1", "shuffle:2", "shuffle:3"};
    static float warps[5][N], lanes[5][32], blocks[5][GRID];
    for (int o = 0; o < 5; o++) {
        set_order(specs[o]);
        float x[GRID] = {0};
        void *aw[] = {&(float *){warps[o]}}, *al[] = {&(float *){lanes[o]}}, *ab[] = {&(float *){blocks[o]}, &(float *){x}};
        T_CHECK(gpu_emu_run("race_warps", run_race_warps, 1, 1, N, 0, aw) == 0, "race_warps under %s", specs[o]);
        T_CHECK(gpu_emu_run("race_lanes", run_race_lanes, 1, 1, 32, 0, al) == 0, "race_lanes under %s", specs[o]);
        T_CHECK(gpu_emu_run("race_blocks", run_race_blocks, GRID, 1, 32, 0, ab) == 0, "race_blocks under %s", specs[o]);
    }
    set_order("forward");
    const char *what[3] = {"between warps", "between lanes", "between blocks"};
    const void *got[3][5];
    size_t bytes[3] = {sizeof warps[0], sizeof lanes[0], sizeof blocks[0]};
    for (int o = 0; o < 5; o++) got[0][o] = warps[o], got[1][o] = lanes[o], got[2][o] = blocks[o];
    for (int r = 0; r < 3; r++) {
        int shuffles_differ = 0;
        for (int o = 2; o < 5; o++) shuffles_differ += memcmp(got[r][o], got[r][0], bytes[r]) != 0;
        T_CHECK(memcmp(got[r][1], got[r][0], bytes[r]), "a race %s: forward and reverse agree", what[r]);
        T_CHECK(shuffles_differ > 0, "a race %s: shuffle:1..3 all agree with forward", what[r]);
        printf("  a race %s: reverse %s forward, %d of 3 shuffles differ\n", what[r],
               memcmp(got[r][1], got[r][0], bytes[r]) ? "differs from" : "agrees with", shuffles_differ);
    }
}

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
    check_orders();
    check_races();
    static const char *orders[] = {"forward", "reverse", "shuffle:1"};
    for (int o = 0; o < 3; o++) {
        set_order(orders[o]);
        check_indices_and_barrier();
        check_shuffles();
        check_dynamic_shared();
        check_faults();
    }
    printf("  indices, barrier, shuffles, dynamic shared memory and faults as expected under forward, reverse and "
           "shuffle:1\n");
    set_order("forward");
    check_driver();
    return t_summary("test_gpu_emulator");
}
