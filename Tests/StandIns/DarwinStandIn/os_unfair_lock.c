// os_unfair_lock on any POSIX system, for tests only.
//
// Like Apple's, the lock is its 32-bit word: 0 when unlocked, otherwise the owning thread's
// identity, so it keeps Apple's contract checks: locking it again on the owning thread, or
// unlocking it on another thread, aborts the process. Acquire and release are C11 atomics,
// which the thread sanitizer understands. A waiter yields instead of sleeping in the kernel
// (a `pthread_mutex_t` cannot fit in the 4 bytes the API gives); that is slower under
// contention than Apple's, and correct, which is all a test needs.
#include "DarwinStandIn.h"

// On Apple platforms the declarations above are the system's, and so is the implementation.
#ifndef __APPLE__

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t next_thread_identity = 0;
static _Thread_local uint32_t thread_identity = 0;

static uint32_t current_thread(void) {
  if (thread_identity == 0) {
    thread_identity = __atomic_add_fetch(&next_thread_identity, 1, __ATOMIC_RELAXED);
  }
  return thread_identity;
}

static void crash(const char *message) {
  fprintf(stderr, "BUG IN CLIENT OF LIBPLATFORM: %s\n", message);
  abort();
}

bool os_unfair_lock_trylock(os_unfair_lock_t lock) {
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(
      &lock->_os_unfair_lock_opaque, &expected, current_thread(), false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void os_unfair_lock_lock(os_unfair_lock_t lock) {
  uint32_t self = current_thread();
  for (;;) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(
            &lock->_os_unfair_lock_opaque, &expected, self, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      return;
    }
    if (expected == self) crash("Trying to recursively lock an os_unfair_lock");
    sched_yield();
  }
}

void os_unfair_lock_unlock(os_unfair_lock_t lock) {
  if (__atomic_load_n(&lock->_os_unfair_lock_opaque, __ATOMIC_RELAXED) != current_thread()) {
    crash("Unlock of an os_unfair_lock not owned by current thread");
  }
  __atomic_store_n(&lock->_os_unfair_lock_opaque, 0, __ATOMIC_RELEASE);
}

void os_unfair_lock_assert_owner(const os_unfair_lock *lock) {
  if (__atomic_load_n(&lock->_os_unfair_lock_opaque, __ATOMIC_RELAXED) != current_thread()) {
    crash("Assertion failed: Lock unexpectedly not owned by current thread");
  }
}

void os_unfair_lock_assert_not_owner(const os_unfair_lock *lock) {
  if (__atomic_load_n(&lock->_os_unfair_lock_opaque, __ATOMIC_RELAXED) == current_thread()) {
    crash("Assertion failed: Lock unexpectedly owned by current thread");
  }
}

#endif
