#ifndef C_PACE_SUPPORT_H
#define C_PACE_SUPPORT_H

#include <stdint.h>

/// Asks the processor to start loading the cache line at `address` for writing. A hint only:
/// it never faults, whatever the address, and changes nothing a program can observe but time.
/// Swift has no spelling of its own for it.
static inline __attribute__((always_inline)) void pace_prefetch_for_writing(const void *address) {
  __builtin_prefetch(address, 1, 3);
}

/// A relaxed atomic load of a word that other threads store with `pace_store_relaxed`: for the
/// hints a keyed table publishes to callers that have not taken its lock yet.
static inline __attribute__((always_inline)) uintptr_t pace_load_relaxed(const uintptr_t *address) {
  return __atomic_load_n(address, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void pace_store_relaxed(uintptr_t *address, uintptr_t value) {
  __atomic_store_n(address, value, __ATOMIC_RELAXED);
}

#endif
