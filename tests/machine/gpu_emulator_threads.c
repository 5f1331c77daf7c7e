/* tests/machine/gpu_emulator_threads.c — the emulated GPU's launches (gpu_emu_run,
 * gpu_emulator.h): a grid's blocks one after another, a block's threads as coroutines
 * on the calling host thread, and the block barrier and warp shuffles they wait at.
 * The kernels and the driver are gpu_emulator.c's.
 *
 * Order: a block runs warp by warp. A warp's lanes run in turn, each until it waits
 * or exits, the running lane switching straight to the next lane that can run (no
 * trip through the scheduler, and the host's return predictor stays right: every lane
 * waits at the same call); when none is left the scheduler releases the warp's
 * shuffle if all 32 lanes wait at one, and the warp goes on, so a warp runs ahead to
 * its next barrier or its end while the other warps wait (its 32 stacks stay in the
 * host's L1 cache). Once no warp can go on, the barrier is released if every thread
 * that has not exited waits at it; else the block can never finish and the launch
 * fails with the reason.
 *
 * Which block, warp and lane goes first is gpu_emu_set_order's (GRPO_EMU_ORDER, read
 * by the emulated driver): forward (the default) takes blocks, warps and lanes
 * first to last; reverse last to first; shuffle a seeded random permutation of the
 * grid's blocks, of the lanes at every start of a warp's run, and runs a random warp
 * that can go on up to its next shuffle (not its barrier), so warps interleave
 * between barriers. Each is an order a GPU may take — the barrier and the shuffles
 * synchronise the same way in all three — so a kernel without a race gives the same
 * bits under each, and one that reads what another thread writes without a barrier
 * or a shuffle in between (a race) gives different ones under some order, where a
 * GPU would give them sometimes. Not seen: a race between two accesses with no wait
 * between them in either thread (a coroutine is only left where it waits), and
 * between blocks at once (blocks never overlap here: static SHARED memory is one copy).
 *
 * Switching: on x86-64 by gpu_emu_switch below, a dozen instructions. glibc's
 * swapcontext and getcontext (the fallback elsewhere, or with -DEMU_ASM_SWITCH=0) also
 * save and restore the signal mask, a system call (rt_sigprocmask) at every switch and
 * every thread's start, which was half the emulated tests' time; the kernels never
 * touch the signal mask, so there is nothing to keep. */
#include "machine/gpu_emulator.h"

#include "gpu/kernels/device.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(EMU_ASM_SWITCH) && defined(__x86_64__)
#define EMU_ASM_SWITCH 1
#elif !defined(EMU_ASM_SWITCH)
#define EMU_ASM_SWITCH 0
#endif
#if !EMU_ASM_SWITCH
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FIBER_START(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define FIBER_FINISH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
enum { STACK_BYTES = 1 << 18 };
#else
#define FIBER_START(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define FIBER_FINISH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
enum { STACK_BYTES = 1 << 16 };
#endif

/* ---- switching ---- */

#if EMU_ASM_SWITCH
typedef void *EmuContext; /* the stack pointer a context was left at */

/* gpu_emu_switch(from, to): pushes the callee-saved registers of the System V ABI
 * (rbp rbx r12-r15) and the SSE and x87 control words (mxcsr, fpucw: callee-saved too)
 * on the running stack, stores its stack pointer in *from, and returns on the stack `to`
 * saved the same way. Everything else a C call may clobber anyway.
 * gpu_emu_thread_entry is where a new thread's first switch returns to
 * (thread_prepare's frame): it calls the function in r12 on a 16-byte aligned stack,
 * which never returns (thread_main switches away for good at its end). */
void gpu_emu_switch(EmuContext *from, EmuContext to) __attribute__((visibility("hidden")));
void gpu_emu_thread_entry(void) __attribute__((visibility("hidden")));
__asm__(".text\n"
        ".globl gpu_emu_switch\n"
        ".hidden gpu_emu_switch\n"
        ".type gpu_emu_switch, @function\n"
        ".p2align 4\n"
        "gpu_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size gpu_emu_switch, .-gpu_emu_switch\n"
        ".globl gpu_emu_thread_entry\n"
        ".hidden gpu_emu_thread_entry\n"
        ".type gpu_emu_thread_entry, @function\n"
        ".p2align 4\n"
        "gpu_emu_thread_entry:\n"
        "    callq *%r12\n"
        "    ud2\n"
        ".size gpu_emu_thread_entry, .-gpu_emu_thread_entry\n");
#define SWITCH(from, to) gpu_emu_switch(from, *(to))
#else
typedef ucontext_t EmuContext;
#define SWITCH(from, to) swapcontext(from, to)
#endif

enum { RUNNING, AT_BARRIER, AT_SHUFFLE, EXITED };
enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };
enum { SCHEDULER = -1 }; /* the context to switch to that is no thread's */

typedef struct {
    EmuContext ctx;
    void *stack;
    int state, kind, arg;
    float v, out;
    float *d; /* mma_tf32's fragments (GPU_EMU_MMA_TF32): the lane's own, on its stack */
    const float *a, *b;
} EmuThread;

static struct {
    pthread_mutex_t lock; /* one launch at a time */
    EmuThread *t;         /* [capacity] */
    int capacity, n, cur; /* threads a block, the one running */
    int index[6];         /* thread x, block dim x, block x, block y, grid x, grid y */
    void (*run)(void **params);
    void **params;
    unsigned char *dynamic;
    EmuContext scheduler;
    const void *sched_bottom; /* the scheduler's stack, for AddressSanitizer's fiber switches */
    size_t sched_size;
    char fault[256];
    int order;                           /* ORDER_*: gpu_emu_set_order's */
    uint64_t rng;                        /* shuffle's stream, from its seed */
    unsigned char lane_at[32], pos[32]; /* the running warp's lanes in the order they go; lane -> its place
                                           (forward, never set: lane_at[0] = 0 is all it reads) */
} E = {.lock = PTHREAD_MUTEX_INITIALIZER};

int gpu_emu_index(int which) { return which == 0 ? E.cur : E.index[which]; }
void *gpu_emu_dynamic_shared(void) { return E.dynamic; }

/* From the running context `from` to thread `to` or the SCHEDULER, announced to
 * AddressSanitizer as a fiber switch (`ending`: from never runs again). Every switch
 * goes through this one call of SWITCH, so that a thread resumes at the same return
 * address as the one that left. */
static __attribute__((noinline)) void switch_to(EmuContext *from, int to, int ending) {
    void *fake = NULL;
    if (to != SCHEDULER) E.cur = to;
    FIBER_START(ending ? NULL : &fake, to == SCHEDULER ? E.sched_bottom : E.t[to].stack,
                to == SCHEDULER ? E.sched_size : STACK_BYTES);
    SWITCH(from, to == SCHEDULER ? &E.scheduler : &E.t[to].ctx);
    FIBER_FINISH(fake, NULL, NULL);
}

/* next_lane in reverse and shuffle: by E.pos and E.lane_at. */
static __attribute__((noinline)) int next_lane_ordered(int i) {
    int warp = i & ~31;
    for (int k = E.pos[i & 31] + 1; k < 32; k++)
        if (E.t[warp + E.lane_at[k]].state == RUNNING) return warp + E.lane_at[k];
    return SCHEDULER;
}

/* The lane after thread i in its warp's order that can run, or the SCHEDULER.
 * Forward's loop inlined at every wait, the others called: every test runs forward,
 * and out of line it cost the emulated tests 10 % (test_gpu_generate's user time). */
static inline __attribute__((always_inline)) int next_lane(int i) {
    if (__builtin_expect(E.order != ORDER_FORWARD, 0)) return next_lane_ordered(i);
    for (int j = i + 1; j & 31; j++)
        if (E.t[j].state == RUNNING) return j;
    return SCHEDULER;
}

/* The running thread waits (its state set by the caller). */
static inline __attribute__((always_inline)) void wait_here(void) { switch_to(&E.t[E.cur].ctx, next_lane(E.cur), 0); }

void gpu_emu_sync_block(void) {
    E.t[E.cur].state = AT_BARRIER;
    wait_here();
}

float gpu_emu_shfl(float v, int kind, int arg) {
    EmuThread *t = &E.t[E.cur];
    t->state = AT_SHUFFLE, t->kind = kind, t->arg = arg, t->v = v;
    wait_here();
    return t->out;
}

void gpu_emu_mma_tf32(float *d, const float *a, const float *b) {
    EmuThread *t = &E.t[E.cur];
    t->state = AT_SHUFFLE, t->kind = GPU_EMU_MMA_TF32, t->arg = 0, t->d = d, t->a = a, t->b = b;
    wait_here();
}

/* The TF32 operand as the tensor cores read it: the low 13 bits ignored. */
static float tf32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

/* mma_tf32 across the warp from lane: A, B and C gathered from the lanes' fragments
 * (device.h's layout), D = C + A B with the products in order of k added to C one at
 * a time in float (a TF32 product is exact in float; the tensor cores' own order of
 * sums is theirs), scattered back. */
static void warp_mma_tf32(EmuThread *lane) {
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        A[g][t] = tf32_bits(lane[l].a[0]), A[g + 8][t] = tf32_bits(lane[l].a[1]);
        A[g][t + 4] = tf32_bits(lane[l].a[2]), A[g + 8][t + 4] = tf32_bits(lane[l].a[3]);
        B[t][g] = tf32_bits(lane[l].b[0]), B[t + 4][g] = tf32_bits(lane[l].b[1]);
        C[g][2 * t] = lane[l].d[0], C[g][2 * t + 1] = lane[l].d[1];
        C[g + 8][2 * t] = lane[l].d[2], C[g + 8][2 * t + 1] = lane[l].d[3];
    }
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 8; c++)
            for (int k = 0; k < 8; k++) C[r][c] += A[r][k] * B[k][c];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        lane[l].d[0] = C[g][2 * t], lane[l].d[1] = C[g][2 * t + 1];
        lane[l].d[2] = C[g + 8][2 * t], lane[l].d[3] = C[g + 8][2 * t + 1];
    }
}

/* A thread's life. The first thread of a launch is entered from the scheduler, whose
 * stack it records for the switches back. */
static void thread_main(void) {
    const void **bottom = E.sched_bottom ? NULL : &E.sched_bottom;
    FIBER_FINISH(NULL, bottom, bottom ? &E.sched_size : NULL);
    E.run(E.params);
    E.t[E.cur].state = EXITED;
    switch_to(&E.t[E.cur].ctx, next_lane(E.cur), 1); /* for good: the next block prepares it anew */
}

#if EMU_ASM_SWITCH
/* A new thread's stack holds the frame gpu_emu_switch restores: the control words as
 * the scheduler has them, r15..r12 (r12 = thread_main), rbx, rbp = 0 (the end of a
 * frame-pointer walk), then the return into gpu_emu_thread_entry, which so finds its
 * stack 16-byte aligned below 16 zero bytes (no caller). No system call. */
static void thread_prepare(EmuThread *t) {
    unsigned mxcsr;
    unsigned short fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    uintptr_t top = ((uintptr_t)t->stack + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *frame = (uint64_t *)(top - 16 - 8 * 8);
    memset(frame, 0, 8 * 8 + 16);
    memcpy(frame, &mxcsr, 4), memcpy((char *)frame + 4, &fpucw, 2);
    frame[4] = (uint64_t)(uintptr_t)thread_main;
    frame[7] = (uint64_t)(uintptr_t)gpu_emu_thread_entry;
    t->ctx = frame;
    t->state = RUNNING;
}
#else
/* getcontext returns twice: in a function of its own, so no caller's local lives
 * across it (-Wclobbered). thread_main never returns: uc_link is only a backstop. */
static __attribute__((noinline)) void thread_prepare(EmuThread *t) {
    getcontext(&t->ctx);
    t->ctx.uc_stack.ss_sp = t->stack;
    t->ctx.uc_stack.ss_size = STACK_BYTES;
    t->ctx.uc_link = &E.scheduler;
    makecontext(&t->ctx, thread_main, 0);
    t->state = RUNNING;
}
#endif

/* ---- the order (gpu_emu_set_order) ---- */

/* shuffle's stream: splitmix64 (Steele, Lea and Flood 2014) over E.rng */
static uint64_t order_random(void) {
    uint64_t z = (E.rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* at[0..n) a random permutation of 0..n-1 (Fisher-Yates; the modulo's bias is no
 * matter for a schedule) */
static void order_permute(size_t *at, size_t n) {
    for (size_t i = 0; i < n; i++) at[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(order_random() % i), t = at[i - 1];
        at[i - 1] = at[j], at[j] = t;
    }
}

/* E.lane_at and E.pos for the order: forward and reverse fixed, shuffle drawn anew. */
static void order_lanes(void) {
    size_t at[32];
    if (E.order == ORDER_SHUFFLE) order_permute(at, 32);
    for (int k = 0; k < 32; k++) {
        int lane = E.order == ORDER_SHUFFLE ? (int)at[k] : E.order == ORDER_REVERSE ? 31 - k : k;
        E.lane_at[k] = (unsigned char)lane, E.pos[lane] = (unsigned char)k;
    }
}

int gpu_emu_set_order(const char *spec, char *why, size_t n) {
    int order = -1;
    uint64_t seed = 1;
    char *end = NULL;
    if (!spec || !*spec || !strcmp(spec, "forward")) order = ORDER_FORWARD;
    else if (!strcmp(spec, "reverse")) order = ORDER_REVERSE;
    else if (!strcmp(spec, "shuffle")) order = ORDER_SHUFFLE;
    else if (!strncmp(spec, "shuffle:", 8) && spec[8] >= '0' && spec[8] <= '9') {
        seed = strtoull(spec + 8, &end, 10);
        if (!*end) order = ORDER_SHUFFLE;
    }
    if (order < 0) {
        snprintf(why, n, "GRPO_EMU_ORDER=\"%s\": expected forward, reverse, shuffle or shuffle:SEED (SEED a decimal "
                         "number)", spec);
        return -1;
    }
    pthread_mutex_lock(&E.lock);
    E.order = order, E.rng = seed;
    order_lanes();
    pthread_mutex_unlock(&E.lock);
    return 0;
}

/* ---- the scheduler ---- */

/* Releases the warp from lane w*32 if all its lanes wait at a shuffle: 1 released,
 * 0 not all there yet, -1 a fault (E.fault says why). */
static int release_warp(int w) {
    EmuThread *lane = E.t + 32 * w;
    int waiting = 0;
    for (int l = 0; l < 32; l++) waiting += lane[l].state == AT_SHUFFLE;
    if (waiting == 0) return 0;
    for (int l = 0; l < 32; l++) {
        if (lane[l].state == EXITED) {
            snprintf(E.fault, sizeof E.fault, "a warp shuffle in warp %d while its lane %d has exited", w, l);
            return -1;
        }
        if (lane[l].state != AT_SHUFFLE) return 0;
        if (lane[l].kind != lane[0].kind) {
            snprintf(E.fault, sizeof E.fault, "lanes 0 and %d of warp %d wait at different shuffles", l, w);
            return -1;
        }
    }
    if (lane[0].kind == GPU_EMU_MMA_TF32) warp_mma_tf32(lane);
    else
        for (int l = 0; l < 32; l++) {
            int a = lane[l].arg, src = lane[l].kind == GPU_EMU_SHFL_XOR ? l ^ (a & 31)
                                     : lane[l].kind == GPU_EMU_SHFL_IDX ? a & 31
                                                                         : l + a;
            lane[l].out = src < 32 ? lane[src].v : lane[l].v;
        }
    for (int l = 0; l < 32; l++) lane[l].state = RUNNING;
    return 1;
}

/* Runs warp w's lanes that can run, in the order's turn (shuffle: drawn anew), each
 * until it waits or exits, then releases its shuffle if all 32 lanes wait at one:
 * 1 released (the warp can go on), 0 not, -1 a fault (E.fault says why). */
static int step_warp(int w) {
    if (E.order == ORDER_SHUFFLE) order_lanes();
    int first = 32 * w + E.lane_at[0];
    if (E.t[first].state != RUNNING) first = next_lane(first);
    if (first != SCHEDULER) switch_to(&E.scheduler, first, 0); /* back when no lane can run */
    return release_warp(w);
}

/* Runs warp w until none of its lanes can go on without the rest of the block, each
 * shuffle released as soon as its 32 lanes wait at it: 0, or -1 with E.fault. */
static int run_warp(int w) {
    int r;
    while ((r = step_warp(w)) > 0) continue;
    return r;
}

/* Runs the block's warps until none can go on without a barrier: forward and reverse
 * each warp to its next barrier in turn, shuffle a random warp that can go on up to
 * its next shuffle, again and again. 0, or -1 with E.fault. */
static int run_round(void) {
    int warps = E.n / 32, live[32], n_live = warps;
    if (E.order != ORDER_SHUFFLE) {
        for (int k = 0; k < warps; k++)
            if (run_warp(E.order == ORDER_FORWARD ? k : warps - 1 - k)) return -1;
        return 0;
    }
    for (int k = 0; k < warps; k++) live[k] = k;
    while (n_live > 0) {
        int k = (int)(order_random() % (uint64_t)n_live), r = step_warp(live[k]);
        if (r < 0) return -1;
        if (r == 0) live[k] = live[--n_live]; /* it waits for the block: not again this round */
    }
    return 0;
}

/* One block to its end: 0, or -1 with E.fault. */
static int run_block(void) {
    for (int i = 0; i < E.n; i++) thread_prepare(&E.t[i]);
    for (;;) {
        if (run_round()) return -1;
        int exited = 0, at_barrier = 0;
        for (int i = 0; i < E.n; i++) exited += E.t[i].state == EXITED, at_barrier += E.t[i].state == AT_BARRIER;
        if (exited == E.n) return 0;
        if (at_barrier + exited == E.n) { /* threads that have exited count as arrived */
            for (int i = 0; i < E.n; i++)
                if (E.t[i].state == AT_BARRIER) E.t[i].state = RUNNING;
            continue;
        }
        int first_shuffle = -1;
        for (int i = 0; i < E.n && first_shuffle < 0; i++)
            if (E.t[i].state == AT_SHUFFLE) first_shuffle = i;
        snprintf(E.fault, sizeof E.fault,
                 "deadlock: %d of %d threads wait at the block barrier while thread %d waits at a warp shuffle",
                 at_barrier, E.n, first_shuffle);
        return -1;
    }
}

static int grow_threads(int n) {
    if (n <= E.capacity) return 0;
    EmuThread *t = realloc(E.t, sizeof *t * n);
    if (!t) return -1;
    E.t = t;
    for (; E.capacity < n; E.capacity++) {
        memset(&E.t[E.capacity], 0, sizeof *E.t);
        if (!(E.t[E.capacity].stack = malloc(STACK_BYTES))) return -1;
    }
    return 0;
}

void gpu_emu_free_threads(void) {
    pthread_mutex_lock(&E.lock);
    for (int i = 0; i < E.capacity; i++) free(E.t[i].stack);
    free(E.t);
    E.t = NULL, E.capacity = 0;
    pthread_mutex_unlock(&E.lock);
}

int gpu_emu_run(const char *name, void (*run)(void **params), unsigned grid_x, unsigned grid_y, unsigned block,
                unsigned shared_bytes, void **params) {
    pthread_mutex_lock(&E.lock);
    int r = 0;
    E.run = run, E.params = params, E.n = (int)block, E.fault[0] = 0;
    E.sched_bottom = NULL; /* the first thread records it (thread_main) */
    E.dynamic = shared_bytes ? malloc(shared_bytes) : NULL;
    if (grow_threads(E.n) || (shared_bytes && !E.dynamic)) {
        fprintf(stderr, "gpu emulator: kernel %s: out of host memory\n", name);
        r = -1;
    }
    E.index[1] = (int)block, E.index[4] = (int)grid_x, E.index[5] = (int)grid_y;
    size_t blocks = (size_t)grid_x * grid_y, *block_at = NULL; /* block b is (b % grid_x, b / grid_x) */
    if (!r && E.order == ORDER_SHUFFLE) {
        if (!(block_at = malloc(sizeof *block_at * blocks))) {
            fprintf(stderr, "gpu emulator: kernel %s: out of host memory\n", name);
            r = -1;
        } else
            order_permute(block_at, blocks);
    }
    for (size_t k = 0; k < blocks && !r; k++) {
        size_t b = E.order == ORDER_FORWARD ? k : E.order == ORDER_REVERSE ? blocks - 1 - k : block_at[k];
        unsigned x = (unsigned)(b % grid_x), y = (unsigned)(b / grid_x);
        E.index[2] = (int)x, E.index[3] = (int)y;
        if (E.dynamic) memset(E.dynamic, 0xff, shared_bytes);
        if ((r = run_block())) fprintf(stderr, "gpu emulator: kernel %s, block (%u, %u): %s\n", name, x, y, E.fault);
    }
    free(block_at);
    free(E.dynamic);
    E.dynamic = NULL, E.run = NULL;
    pthread_mutex_unlock(&E.lock);
    return r;
}
