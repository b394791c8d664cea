/* src/core/device_known.c - device buffers classified before (device.h,
 * "Known device buffers"): a direct-mapped table of addresses and their
 * devices, so that a call on buffers seen before asks the runtime nothing
 * (cudaPointerGetAttributes costs about as much as enqueueing a small NCCL
 * allreduce).
 *
 * Each slot is one 64-bit word, the address shifted left by 16 bits and the
 * device + 2 in the low byte (0: empty), read and written atomically: a
 * lookup never takes a lock and never sees half an entry, whatever other
 * threads do. Addresses of 2^48 and above are not remembered. Two addresses
 * of one slot evict each other (the next lookup misses and classifies). */
#include <stdatomic.h>
#include <stdint.h>
#include "core/device.h"

#define SLOTS_LOG2 9
#define SLOTS (1u << SLOTS_LOG2)
#define ADDR_LIMIT ((uint64_t)1 << 48)

static _Atomic uint64_t g_slot[SLOTS];
static atomic_int g_on = 1;
static _Atomic uint64_t g_gen = 1; /* moves on after each forgetting (never 0) */

static unsigned slot_of(uint64_t a) {
    return (unsigned)(((a >> 3) * 0x9e3779b97f4a7c15ull) >> (64 - SLOTS_LOG2));
}

void dt_dev_known_enable(int on) {
    atomic_store_explicit(&g_on, on != 0, memory_order_relaxed);
    dt_dev_known_forget_all();
}

int dt_dev_known_on(void) { return atomic_load_explicit(&g_on, memory_order_relaxed); }

int dt_dev_known(const void *p, int *dev) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a >= ADDR_LIMIT) return 0;
    uint64_t e = atomic_load_explicit(&g_slot[slot_of(a)], memory_order_relaxed);
    if ((e >> 16) != a || (e & 0xff) == 0) return 0;
    *dev = (int)(e & 0xff) - 2;
    return 1;
}

void dt_dev_known_add(const void *p, int dev) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!dt_dev_known_on() || a >= ADDR_LIMIT || dev < -1 || dev > 253) return;
    atomic_store_explicit(&g_slot[slot_of(a)], a << 16 | (uint64_t)(dev + 2), memory_order_relaxed);
}

/* the slots first, then the generation: whoever reads the new generation
 * finds the slots empty */
void dt_dev_known_forget_all(void) {
    for (unsigned i = 0; i < SLOTS; i++) atomic_store_explicit(&g_slot[i], 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_release);
}

uint64_t dt_dev_known_gen(void) { return atomic_load_explicit(&g_gen, memory_order_acquire); }
