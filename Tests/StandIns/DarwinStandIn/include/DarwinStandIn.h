// A stand-in for Apple's <os/lock.h>, so that Pace's Darwin-only lock path compiles and runs in
// tests on Linux (see Sources/Pace/Support/Lock/LockedState.swift). The declarations are
// Apple's, so Swift imports them with the same signatures: `os_unfair_lock_s` with its
// `_os_unfair_lock_opaque` field, the `os_unfair_lock` and `os_unfair_lock_t` aliases,
// non-optional pointers (assume_nonnull), a `trylock` whose result must be used, and functions
// unavailable from async code. Only the implementation (os_unfair_lock.c) is ours.
#ifndef DARWIN_STAND_IN_OS_LOCK_H
#define DARWIN_STAND_IN_OS_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

#define DARWIN_STAND_IN_UNAVAILABLE_FROM_ASYNC(message) \
  __attribute__((__swift_attr__("@_unavailableFromAsync(message: \"" message "\")")))

typedef struct os_unfair_lock_s {
  uint32_t _os_unfair_lock_opaque;
} os_unfair_lock, *os_unfair_lock_t;

#define OS_UNFAIR_LOCK_INIT ((os_unfair_lock){0})

__attribute__((__nonnull__)) DARWIN_STAND_IN_UNAVAILABLE_FROM_ASYNC(
    "Use OSAllocatedUnfairLock.performWhileLocked() for async-safe scoped locking")
void os_unfair_lock_lock(os_unfair_lock_t lock);

__attribute__((__nonnull__)) __attribute__((__warn_unused_result__)) DARWIN_STAND_IN_UNAVAILABLE_FROM_ASYNC(
    "Use OSAllocatedUnfairLock.tryPerformWhileLocked() for async-safe scoped locking")
bool os_unfair_lock_trylock(os_unfair_lock_t lock);

__attribute__((__nonnull__)) DARWIN_STAND_IN_UNAVAILABLE_FROM_ASYNC(
    "Use OSAllocatedUnfairLock.performWhileLocked() for async-safe scoped locking")
void os_unfair_lock_unlock(os_unfair_lock_t lock);

__attribute__((__nonnull__))
void os_unfair_lock_assert_owner(const os_unfair_lock *lock);

__attribute__((__nonnull__))
void os_unfair_lock_assert_not_owner(const os_unfair_lock *lock);

#pragma clang assume_nonnull end

#endif
