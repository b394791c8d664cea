/* tests/fakegpu/emu/cuemu_sched.cc - the emulated kernels' launches
 * (cuemu_twin.h): the grid's blocks one after the other, each block's
 * threads as fibers that run until they reach a barrier or a warp shuffle,
 * or return (x86-64: a switch of the callee-saved registers and the stack,
 * no system call, told to AddressSanitizer; elsewhere ucontext). What the hardware assumes is checked where a GPU
 * would hang or compute garbage:
 *  - a warp shuffle: all 32 lanes of the warp at the same
 *    __shfl_xor_sync (same source line, a full mask), none of them exited or
 *    waiting at a barrier, the warp whole (the block a multiple of 32);
 *  - __syncthreads(): every thread of the block at the same one, none
 *    exited.
 * A failure names the kernel, the block, the warp and the source lines,
 * and the launch returns cudaErrorLaunchFailure. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include "cuemu.h"
#include "cuemu_twin.h"

namespace cuemu {

enum { READY, AT_BAR, AT_SHFL, DONE };

#if defined(__x86_64__)
/* saves the callee-saved registers on the running stack, its stack pointer
 * in *from, and resumes the stack at `to` (saved by a switch, or made by
 * fiber_stack) */
extern "C" void cuemu_switch(void **from, void *to);
asm(".text\n"
    ".globl cuemu_switch\n"
    ".type cuemu_switch,@function\n"
    "cuemu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size cuemu_switch, .-cuemu_switch\n");
#define CUEMU_ASM 1
#endif

struct fiber {
#if CUEMU_ASM
    void *sp;
#else
    ucontext_t ctx;
#endif
    uint3 tid;
    int state;
    const char *file; /* where it waits */
    int line;
    uint32_t val, out;
    unsigned mask;
    int lane_mask;
};

static const size_t STACK_BYTES = (size_t)128 << 10;

static struct {
    const fk_launch *l;
    dim3 grid, block;
    uint3 bid;
    int n, cur;
#if CUEMU_ASM
    void *sched_sp;
#else
    ucontext_t sched;
#endif
    const void *sched_bottom; /* the scheduler's stack (AddressSanitizer) */
    size_t sched_size;
    std::vector<fiber> th;
    char *stacks;
    int stacks_n;
    void (*body)(void *, int);
    void *ctx;
    int copy;
} S;

uint3 thread_idx() { return S.th[S.cur].tid; }
uint3 block_idx() { return S.bid; }
dim3 block_dim() { return S.block; }
dim3 grid_dim() { return S.grid; }

static char *stack_of(int i) { return S.stacks + (size_t)i * STACK_BYTES; }

/* the running fiber -> the scheduler (exiting: never resumed) */
static void to_sched(bool exiting) {
#if defined(__SANITIZE_ADDRESS__)
    void *fake = NULL;
    __sanitizer_start_switch_fiber(exiting ? NULL : &fake, S.sched_bottom, S.sched_size);
#endif
#if CUEMU_ASM
    cuemu_switch(&S.th[S.cur].sp, S.sched_sp);
#else
    swapcontext(&S.th[S.cur].ctx, &S.sched);
#endif
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* the scheduler -> fiber i */
static void to_fiber(int i) {
    S.cur = i;
#if defined(__SANITIZE_ADDRESS__)
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, stack_of(i), STACK_BYTES);
#endif
#if CUEMU_ASM
    cuemu_switch(&S.sched_sp, S.th[i].sp);
#else
    swapcontext(&S.sched, &S.th[i].ctx);
#endif
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

void barrier(const char *file, int line) {
    fiber &f = S.th[S.cur];
    f.state = AT_BAR, f.file = file, f.line = line;
    to_sched(false);
}

uint32_t shfl_xor(unsigned mask, uint32_t v, int lane_mask, const char *file, int line) {
    fiber &f = S.th[S.cur];
    f.state = AT_SHFL, f.val = v, f.mask = mask, f.lane_mask = lane_mask, f.file = file, f.line = line;
    to_sched(false);
    return S.th[S.cur].out;
}

static void fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(NULL, &S.sched_bottom, &S.sched_size);
#endif
    S.body(S.ctx, S.copy);
    S.th[S.cur].state = DONE;
    to_sched(true);
#if CUEMU_ASM
    abort(); /* an exited fiber is never resumed */
#endif
}

static bool fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "cuemu: kernel %s, block (%u,%u,%u) of (%u,%u,%u), %s order: ", S.l->name, S.bid.x, S.bid.y,
            S.bid.z, S.grid.x, S.grid.y, S.grid.z, S.copy ? "decreasing" : "increasing");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return false;
}

static const char *state_name(int s) {
    return s == READY ? "running" : s == AT_BAR ? "at __syncthreads()" : s == AT_SHFL ? "at a shuffle" : "exited";
}

static bool run_block(bool reverse) {
    const int n = S.n, bx = (int)S.block.x, by = (int)S.block.y;
    for (int i = 0; i < n; i++) {
        fiber &f = S.th[i];
        f.tid = make_uint3((unsigned)(i % bx), (unsigned)(i / bx % by), (unsigned)(i / (bx * by)));
        f.state = READY;
        f.file = NULL, f.line = 0;
#if CUEMU_ASM
        /* cuemu_switch's frame: six registers, then fiber_main as the
         * return address, entered with rsp = 8 mod 16 as after a call */
        void **top = (void **)(stack_of(i) + STACK_BYTES);
        top[-1] = NULL;
        top[-2] = (void *)fiber_main;
        for (int r = 3; r <= 8; r++) top[-r] = NULL;
        f.sp = top - 8;
#else
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stack_of(i);
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = &S.sched;
        makecontext(&f.ctx, fiber_main, 0);
#endif
    }
    for (;;) {
        for (int k = 0; k < n; k++) {
            const int i = reverse ? n - 1 - k : k;
            if (S.th[i].state != READY) continue;
            to_fiber(i);
        }
        /* warps whose lanes wait at a shuffle */
        bool progress = false;
        for (int lo = 0; lo < n; lo += 32) {
            const int hi = lo + 32 < n ? lo + 32 : n;
            int at = 0;
            for (int i = lo; i < hi; i++) at += S.th[i].state == AT_SHFL;
            if (!at) continue;
            const fiber &f0 = *[&] {
                for (int i = lo; i < hi; i++)
                    if (S.th[i].state == AT_SHFL) return &S.th[i];
                return &S.th[lo];
            }();
            if (hi - lo < 32)
                return fail("warp %d has %d lanes (a block of %d threads): __shfl_xor_sync at %s:%d with a full mask",
                            lo / 32, hi - lo, n, f0.file, f0.line);
            for (int i = lo; i < hi; i++) {
                const fiber &f = S.th[i];
                if (f.state != AT_SHFL) {
                    char where[256] = "";
                    if (f.state == AT_BAR) snprintf(where, sizeof where, " (%s:%d)", f.file, f.line);
                    return fail("warp %d: lane %d is at __shfl_xor_sync (%s:%d) while lane %d is %s%s (a divergent "
                                "shuffle)",
                                lo / 32, (int)(&f0 - &S.th[lo]), f0.file, f0.line, i - lo, state_name(f.state), where);
                }
                if (f.file != f0.file || f.line != f0.line || f.mask != f0.mask || f.lane_mask != f0.lane_mask)
                    return fail("warp %d: lanes at different shuffles (%s:%d mask %#x xor %d; lane %d: %s:%d mask %#x "
                                "xor %d)",
                                lo / 32, f0.file, f0.line, f0.mask, f0.lane_mask, i - lo, f.file, f.line, f.mask,
                                f.lane_mask);
                if (f.mask != 0xffffffffu || f.lane_mask < 0 || f.lane_mask > 31)
                    return fail("warp %d: __shfl_xor_sync at %s:%d with mask %#x, lane mask %d", lo / 32, f.file, f.line,
                                f.mask, f.lane_mask);
            }
            for (int i = lo; i < hi; i++) S.th[i].out = S.th[lo + ((i - lo) ^ S.th[i].lane_mask)].val;
            for (int i = lo; i < hi; i++) S.th[i].state = READY;
            progress = true;
        }
        if (progress) continue;
        int live = 0, at_bar = 0;
        const fiber *b0 = NULL;
        for (int i = 0; i < n; i++) {
            live += S.th[i].state != DONE;
            if (S.th[i].state == AT_BAR) {
                at_bar++;
                if (!b0) b0 = &S.th[i];
            }
        }
        if (!live) return true;
        if (at_bar != live) return fail("no thread can go on (%d live, %d at a barrier)", live, at_bar);
        if (live != n)
            return fail("__syncthreads() at %s:%d reached by %d threads while %d of the block's %d have exited",
                        b0->file, b0->line, live, n - live, n);
        for (int i = 0; i < n; i++)
            if (S.th[i].file != b0->file || S.th[i].line != b0->line)
                return fail("threads at different barriers: %s:%d (thread %d) and %s:%d (thread %d)", b0->file,
                            b0->line, (int)(b0 - &S.th[0]), S.th[i].file, S.th[i].line, i);
        for (int i = 0; i < n; i++) S.th[i].state = READY;
    }
}

cudaError_t add(regions &R, const fk_launch *l, int i, const void *p) {
    if (!p) return cudaSuccess;
    void *base = NULL, *shadow = NULL;
    size_t len = 0;
    int kind = 0, dev = -1;
    if (fk_region(p, &base, &len, &shadow, &kind, &dev) || kind != FK_DEVICE || dev != fk_current_device()) {
        fprintf(stderr, "cuemu: kernel %s: argument %d (%p) is not device memory of the current device\n", l->name, i,
                p);
        return cudaErrorIllegalAddress;
    }
    for (int k = 0; k < R.n; k++)
        if (R.r[k].base == base) return cudaSuccess;
    if (R.n == MAX_REGIONS) {
        fprintf(stderr, "cuemu: kernel %s: more than %d allocations\n", l->name, MAX_REGIONS);
        return cudaErrorInvalidValue;
    }
    region &r = R.r[R.n++];
    r.base = (char *)base, r.len = len, r.shadow = (char *)shadow, r.copy[0] = r.copy[1] = NULL;
    return cudaSuccess;
}

char *xlate(const regions &R, int copy, const void *p) {
    const char *q = (const char *)p;
    for (int k = 0; k < R.n; k++)
        if (q >= R.r[k].base && q < R.r[k].base + (R.r[k].len ? R.r[k].len : 1))
            return R.r[k].copy[copy] + (q - R.r[k].base);
    abort(); /* add() registered every pointer argument */
}

static void release(regions &R) {
    for (int k = 0; k < R.n; k++) free(R.r[k].copy[0]), free(R.r[k].copy[1]), R.r[k].copy[0] = R.r[k].copy[1] = NULL;
}

cudaError_t execute(const fk_launch *l, regions &R, void (*body)(void *, int), void *ctx) {
    const size_t n = (size_t)l->block.x * l->block.y * l->block.z;
    if (S.stacks_n < (int)n) {
        if (S.stacks) munmap(S.stacks, (size_t)S.stacks_n * STACK_BYTES);
        void *m = mmap(NULL, n * STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0);
        if (m == MAP_FAILED) {
            S.stacks = NULL, S.stacks_n = 0;
            return cudaErrorMemoryAllocation;
        }
        S.stacks = (char *)m, S.stacks_n = (int)n;
    }
    for (int k = 0; k < R.n; k++)
        for (int c = 0; c < 2; c++) {
            void *p = NULL;
            if (posix_memalign(&p, 256, R.r[k].len ? R.r[k].len : 1)) {
                release(R);
                return cudaErrorMemoryAllocation;
            }
            memcpy(p, R.r[k].shadow, R.r[k].len);
            R.r[k].copy[c] = (char *)p;
        }
    S.l = l, S.grid = l->grid, S.block = l->block, S.n = (int)n, S.body = body, S.ctx = ctx;
    S.th.assign(n, fiber());
    const size_t nb = (size_t)l->grid.x * l->grid.y * l->grid.z;
    for (int c = 0; c < 2; c++) {
        S.copy = c;
        for (size_t k = 0; k < nb; k++) {
            const size_t b = c ? nb - 1 - k : k;
            S.bid = make_uint3((unsigned)(b % l->grid.x), (unsigned)(b / l->grid.x % l->grid.y),
                               (unsigned)(b / ((size_t)l->grid.x * l->grid.y)));
            if (!run_block(c == 1)) {
                release(R);
                return cudaErrorLaunchFailure;
            }
        }
    }
    for (int k = 0; k < R.n; k++) {
        const region &r = R.r[k];
        if (memcmp(r.copy[0], r.copy[1], r.len) != 0) {
            size_t at = 0;
            while (r.copy[0][at] == r.copy[1][at]) at++;
            fprintf(stderr,
                    "cuemu: kernel %s: the result depends on the order the blocks and threads run in (a race): byte "
                    "%zu of the %zu-byte allocation at %p differs\n",
                    l->name, at, r.len, (void *)r.base);
            release(R);
            return cudaErrorLaunchFailure;
        }
    }
    for (int k = 0; k < R.n; k++) memcpy(R.r[k].shadow, R.r[k].copy[0], R.r[k].len);
    release(R);
    return cudaSuccess;
}

} // namespace cuemu
