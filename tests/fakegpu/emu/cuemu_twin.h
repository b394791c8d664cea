/* tests/fakegpu/emu/cuemu_twin.h - a kernel's emulated body as the fake's
 * twin (fakegpu.h): emu_transform.sh appends to each kernel file's host
 * copy this header and a table of CUEMU_ENTRY(kernel) lines, one per
 * kernel, named as the real kernel is, so that the fake's launch of
 * dtk_gelu_fwd_f32 runs the CPU-compiled body of dtk_gelu_fwd_f32.
 *
 * A launch (cuemu_sched.cc: cuemu::execute): every pointer argument must be
 * device memory of the current device (else cudaErrorIllegalAddress, as the
 * twins); each allocation the arguments point into is copied TWICE into
 * heap buffers of exactly its size (AddressSanitizer's redzones: a read or
 * write past an allocation's end stops the program naming the kernel's
 * source line); the kernel runs over the whole grid on each copy, once with
 * the blocks and the threads between two synchronisation points in
 * increasing order, once in decreasing order; the two copies must end with
 * the same bytes (else the result depends on the order threads run in: a
 * race, reported with the first differing byte); the first goes back into
 * the device memory. */
#ifndef DT_CUEMU_TWIN_H
#define DT_CUEMU_TWIN_H

#include <stddef.h>
#include <tuple>
#include <type_traits>
#include <utility>
extern "C" {
#include "fakegpu.h"
}

namespace cuemu {
enum { MAX_REGIONS = 32 };
/* one allocation the launch's pointers point into, and its two copies */
struct region {
    char *base;   /* the device address of its first byte */
    size_t len;
    char *shadow; /* where the fake keeps its bytes */
    char *copy[2];
};
struct regions {
    region r[MAX_REGIONS];
    int n;
};
/* registers argument i, the pointer p (NULL: nothing) */
cudaError_t add(regions &R, const fk_launch *l, int i, const void *p);
/* p (registered) in copy `copy` */
char *xlate(const regions &R, int copy, const void *p);
/* runs body(ctx, copy) as every thread of the grid, on both copies */
cudaError_t execute(const fk_launch *l, regions &R, void (*body)(void *ctx, int copy), void *ctx);
} // namespace cuemu

template <typename T> static inline cudaError_t cuemu_reg(cuemu::regions &R, const fk_launch *l, int i, const T &v) {
    if constexpr (std::is_pointer<T>::value)
        return cuemu::add(R, l, i, (const void *)v);
    else
        return cudaSuccess;
}
template <typename T> static inline T cuemu_xl(const cuemu::regions &R, int copy, T v) {
    if constexpr (std::is_pointer<T>::value)
        return v ? (T)(void *)cuemu::xlate(R, copy, (const void *)v) : v;
    else
        return v;
}

template <typename... A, size_t... I>
static cudaError_t cuemu_run(void (*f)(A...), const fk_launch *l, std::index_sequence<I...>) {
    typedef std::tuple<typename std::decay<A>::type...> args_t;
    args_t raw(*static_cast<typename std::decay<A>::type *>(l->args[I])...);
    cuemu::regions R;
    R.n = 0;
    cudaError_t e = cudaSuccess;
    ((e = e == cudaSuccess ? cuemu_reg(R, l, (int)I, std::get<I>(raw)) : e), ...);
    if (e != cudaSuccess) return e;
    struct call {
        void (*f)(A...);
        args_t *raw;
        cuemu::regions *R;
    } c = {f, &raw, &R};
    return cuemu::execute(
        l, R,
        [](void *p, int copy) {
            call *k = (call *)p;
            k->f(cuemu_xl(*k->R, copy, std::get<I>(*k->raw))...);
        },
        &c);
}

template <typename... A> static cudaError_t cuemu_twin_of(void (*f)(A...), const fk_launch *l) {
    return cuemu_run(f, l, std::index_sequence_for<A...>{});
}

#define CUEMU_ENTRY(k) {#k, [](const fk_launch *l) -> cudaError_t { return cuemu_twin_of(emu_##k, l); }},

#endif
