/* tests/machine/gpu_emulator.h — an NVIDIA GPU for the tests on any machine: the
 * kernels of src/gpu/kernels/ compiled for the host (their lowering in
 * gpu/kernels/device.h) and run by an emulated driver behind gpu/cuda.h's CudaApi,
 * installed through the GPU's seam (gpu/device.h: gpu_set_driver). So gpu/device.c,
 * gpu/ops.c's launch shapes and argument lists, and every kernel's indexing,
 * barriers and shuffles run in `make test` (and under AddressSanitizer, which sees a
 * kernel's out-of-bounds access in "device" memory) where no GPU is.
 *
 * What it models: a grid of blocks run one after another; a block's threads (one
 * dimension, a multiple of 32, at most 1024) as coroutines on one host thread
 * (gpu_emulator_threads.c), a warp at a time, each running until it exits or waits — at the block barrier (sync_block: released
 * when every thread of the block that has not exited waits there) or at a warp
 * shuffle (released when all 32 lanes of its warp wait at one). A kernel whose
 * threads can never all arrive (a barrier or shuffle under a branch some threads
 * skip, a shuffle with an exited lane) fails its launch with the reason, where a GPU
 * would hang or compute garbage. Device memory is host memory, filled with 0xff
 * bytes (NaN as floats) when allocated, as a GPU's is not cleared; the launch's
 * dynamic shared memory likewise. Races partly: GRPO_EMU_ORDER runs blocks, warps
 * and lanes forward (the default), in reverse or shuffled (gpu_emu_set_order), each
 * an order a GPU may take, so a kernel whose result changes with the order has a race
 * (tests/gpu/test_emu_order.sh compares the orders, GRPO_EMU_DIGEST digesting what
 * the host is given back). Not modelled: blocks or warps truly at once (a race
 * between two accesses with no wait between them shows on a GPU only), timings, the
 * GPU's arithmetic (exp_fast is exp2f here, not ex2.approx: tolerances cover both). */
#ifndef GRPO_TESTS_MACHINE_GPU_EMULATOR_H
#define GRPO_TESTS_MACHINE_GPU_EMULATOR_H

#include "gpu/device.h"

/* The emulated driver's functions in api (the form of gpu/cuda.h: cuda_api_open). */
int gpu_emulator_open(CudaApi *api, char *why, size_t n);

/* Runs run(params) — a kernel of the host lowering, unpacking its params as
 * cuLaunchKernel's — on a grid_x x grid_y grid of blocks of `block` threads (a
 * multiple of 32, at most 1024) with shared_bytes of dynamic shared memory: 0, or -1
 * with the fault on stderr (a deadlock, a shuffle with an exited lane). What the
 * emulated driver's launches run; the emulator's own test calls it directly. */
int gpu_emu_run(const char *name, void (*run)(void **params), unsigned grid_x, unsigned grid_y, unsigned block,
                unsigned shared_bytes, void **params);

/* The order a launch's blocks, a block's warps and a warp's lanes run in
 * (gpu_emulator_threads.c's header): spec "forward" (also NULL or ""), "reverse",
 * "shuffle" or "shuffle:SEED" (seed 1 when not given; the stream restarts from it at
 * every call). The emulated driver's open sets it from GRPO_EMU_ORDER. 0, or -1 with
 * why[n] naming the variable, the value and what was expected. */
int gpu_emu_set_order(const char *spec, char *why, size_t n);

/* The emulated machine has GRPO_EMU_GPUS GPUs (1 when unset, at most 8), numbered
 * from 0, all on the one host; a bit per GPU a context was taken on in this process
 * (device d: 1 << d), so a test sees which GPU a process chose. */
unsigned gpu_emu_devices_used(void);

/* How many copies the emulated driver made to the host (down 1) or to the device
 * (down 0) since the process began: a test sees round trips a pass makes. */
unsigned long long gpu_emu_copies(int down);

/* Frees the launches' thread stacks (gpu_emulator_threads.c keeps them from one
 * launch to the next); the emulated driver's last context release calls it. */
void gpu_emu_free_threads(void);

/* Makes gpu_open find the emulated GPU instead of libcuda, and the products
 * (gpu/gemm.h) the emulated cuBLASLt (machine/gpu_emulator_blas.h) instead of
 * libcublasLt (on = 1); or the real ones again (on = 0). */
void test_gpu_machine(int on);

#endif
