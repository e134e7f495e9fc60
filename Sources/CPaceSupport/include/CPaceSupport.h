#ifndef C_PACE_SUPPORT_H
#define C_PACE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

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

/// Tables at least this large map pages of their own (on Linux).
#define PACE_MAPPED_TABLE_BYTES 262144 /* 256 KiB */

/// Zeroed memory for a keyed table's slots, aligned to 64 bytes; `NULL` if there is none.
///
/// On Linux a large table maps pages of its own, which `pace_free_table` gives back to the
/// system at once: from glibc's malloc, a table that grows on one thread and shrinks on another
/// leaves freed pages in the arenas of both threads, and a process whose keys have all gone
/// quiet stays larger than it was (measured in `Benchmarks/KeyedMemory`). Fresh pages are zero.
static inline void *pace_allocate_table(size_t bytes) {
#if defined(__linux__)
  if (bytes >= PACE_MAPPED_TABLE_BYTES) {
    void *pages = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return pages == MAP_FAILED ? NULL : pages;
  }
#endif
  void *memory = NULL;
  if (posix_memalign(&memory, 64, bytes) != 0) return NULL;
  memset(memory, 0, bytes);
  return memory;
}

/// Frees what `pace_allocate_table(bytes)` returned, given the same `bytes`.
static inline void pace_free_table(void *table, size_t bytes) {
#if defined(__linux__)
  if (bytes >= PACE_MAPPED_TABLE_BYTES) {
    munmap(table, bytes);
    return;
  }
#endif
  free(table);
}

#endif
