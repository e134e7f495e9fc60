#ifndef C_PACE_SUPPORT_H
#define C_PACE_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
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

/// Zeroed memory for a keyed table's slots (or a shard's heap or outbox), aligned to 64 bytes;
/// `NULL` if there is none.
///
/// On Linux a block of 16 KiB or more maps pages of its own, which `pace_free_table` gives back
/// to the system at once: from glibc's malloc, storage that grows on the callers' threads and
/// shrinks on the timer's lands in the arenas of both, where the few small blocks that stay there
/// (the scheduler's own) keep freed pages resident, and a process whose keys had all gone quiet
/// stayed 10 to 35 % larger than before in some runs (measured in `Benchmarks/KeyedMemory`; with
/// 256 or 64 KiB as the threshold, some runs were still over 10 %).
///
/// Compiled once, in this target, not inline: the table's code is `@inlinable`, so it is
/// compiled into every module that uses a keyed primitive, and the choice between the two
/// allocators must be the same wherever a table is allocated and freed.
void *pace_allocate_table(size_t bytes);

#if defined(__linux__)
// The thread sanitizer's annotations (compiler-rt's tsan_interface.h), weak: null unless the
// sanitizer's runtime is linked in, as `swift test --sanitize=thread` does.
extern void __tsan_acquire(void *address) __attribute__((weak));
extern void __tsan_release(void *address) __attribute__((weak));
#endif

/// Tells the thread sanitizer, if it runs, that the lock at `address` was just taken: what the
/// previous holder did before `pace_tsan_release` happened before what follows. The sanitizer
/// cannot see `Synchronization.Mutex`'s futex on Linux; elsewhere, or without it, nothing.
static inline __attribute__((always_inline)) void pace_tsan_acquire(const void *address) {
#if defined(__linux__)
  if (__tsan_acquire) __tsan_acquire((void *)address);
#endif
}

/// Tells the thread sanitizer, if it runs, that the lock at `address` is about to be released.
static inline __attribute__((always_inline)) void pace_tsan_release(const void *address) {
#if defined(__linux__)
  if (__tsan_release) __tsan_release((void *)address);
#endif
}

/// Frees what `pace_allocate_table(bytes)` returned, given the same `bytes`.
void pace_free_table(void *table, size_t bytes);

/// Shrinks what `pace_allocate_table(bytes)` returned to `newBytes` (less than `bytes`) where it
/// lies, without moving a byte: on Linux a mapped table that stays mapped gives its tail pages
/// back. Returns whether it did; if not, the caller moves its elements into a smaller table. The
/// table is then freed with `pace_free_table(table, newBytes)`.
bool pace_shrink_table_in_place(void *table, size_t bytes, size_t newBytes);

/// The size from which `pace_allocate_table` maps pages of its own (on Linux).
size_t pace_mapped_table_bytes(void);

#if defined(__linux__)
/// The keyed shards' lock on Linux: a word that is 0 when free, 1 when held, 2 when held and a
/// thread may sleep on it (a futex, not priority-inheriting).
///
/// Taking and giving back a free lock is one atomic instruction each, inlined into the caller,
/// where `pthread_mutex_lock` and `_unlock` are two calls through the PLT that check the mutex's
/// kind first; `Synchronization.Mutex`, as cheap when free, is a priority-inheritance futex, which
/// hands a contended lock over through the kernel (see `LockedState`). This one lets a running
/// thread take a lock just given back before a woken sleeper does, as glibc's default mutex does.
static inline __attribute__((always_inline)) void pace_shard_lock_init(uint32_t *word) {
  __atomic_store_n(word, 0, __ATOMIC_RELAXED);
}

/// The contended path of `pace_shard_lock`: sleeps on the word until it is given back. No spin:
/// on two cores shared by more threads, a spinning waiter mostly delays the holder.
void pace_shard_lock_contended(uint32_t *word);

/// Wakes one thread sleeping on the word, if any.
void pace_shard_lock_wake(uint32_t *word);

static inline __attribute__((always_inline)) void pace_shard_lock(uint32_t *word) {
  uint32_t expected = 0;
  if (!__atomic_compare_exchange_n(word, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    pace_shard_lock_contended(word);
  }
}

static inline __attribute__((always_inline)) void pace_shard_unlock(uint32_t *word) {
  if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) pace_shard_lock_wake(word);
}
#endif

#endif
