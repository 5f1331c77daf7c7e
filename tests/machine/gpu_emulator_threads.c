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
 * fails with the reason. This is one of the orders a GPU may take (races between
 * warps are not modelled: any order is as right as another for a kernel without one).
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
enum { SCHEDULER = -1 }; /* the context to switch to that is no thread's */

typedef struct {
    EmuContext ctx;
    void *stack;
    int state, kind, arg;
    float v, out;
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

/* The lane after thread i in its warp that can run, or the SCHEDULER: the order of
 * the scheduler's rounds, lane by lane. */
static int next_lane(int i) {
    for (int j = i + 1; j & 31; j++)
        if (E.t[j].state == RUNNING) return j;
    return SCHEDULER;
}

/* The running thread waits (its state set by the caller). */
static void wait_here(void) { switch_to(&E.t[E.cur].ctx, next_lane(E.cur), 0); }

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
    for (int l = 0; l < 32; l++) {
        int a = lane[l].arg, src = lane[l].kind == GPU_EMU_SHFL_XOR ? l ^ (a & 31)
                                 : lane[l].kind == GPU_EMU_SHFL_IDX ? a & 31
                                                                     : l + a;
        lane[l].out = src < 32 ? lane[src].v : lane[l].v;
    }
    for (int l = 0; l < 32; l++) lane[l].state = RUNNING;
    return 1;
}

/* Runs warp w until none of its lanes can go on without the rest of the block, each
 * shuffle released as soon as its 32 lanes wait at it: 0, or -1 with E.fault. */
static int run_warp(int w) {
    for (;;) {
        int first = E.t[32 * w].state == RUNNING ? 32 * w : next_lane(32 * w);
        if (first != SCHEDULER) switch_to(&E.scheduler, first, 0); /* back when no lane can run */
        int r = release_warp(w);
        if (r <= 0) return r;
    }
}

/* One block to its end: 0, or -1 with E.fault. */
static int run_block(void) {
    for (int i = 0; i < E.n; i++) thread_prepare(&E.t[i]);
    for (;;) {
        for (int w = 0; w < E.n / 32; w++)
            if (run_warp(w)) return -1;
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
    for (unsigned y = 0; y < grid_y && !r; y++)
        for (unsigned x = 0; x < grid_x && !r; x++) {
            E.index[2] = (int)x, E.index[3] = (int)y;
            if (E.dynamic) memset(E.dynamic, 0xff, shared_bytes);
            if ((r = run_block())) fprintf(stderr, "gpu emulator: kernel %s, block (%u, %u): %s\n", name, x, y, E.fault);
        }
    free(E.dynamic);
    E.dynamic = NULL, E.run = NULL;
    pthread_mutex_unlock(&E.lock);
    return r;
}
