// The Darwin path is compiled and tested on Linux too: the test fixture target
// `PaceLockOnDarwinStandIn` compiles this folder (its source directory is a symlink to it) with
// `-DPACE_DARWIN_STAND_IN`, against `DarwinStandIn`, whose header declares Apple's
// `os_unfair_lock` API with Apple's signatures (see Tests/PaceLockTests). A define, not
// `canImport(DarwinStandIn)`: every module of the package is built into one directory, where
// `canImport` would find the stand-in from the real `Pace` target as well.
#if PACE_DARWIN_STAND_IN
import DarwinStandIn
#elseif canImport(Darwin)
import os
#else
import CPaceSupport
import Synchronization
#endif

/// A value guarded by the package's lock, in the spirit of swift-nio's `NIOLockedValueBox`: for
/// every type of the package, and of its other modules, that shares state between threads.
/// Never call user code inside `withLock`.
///
/// The package's locks, chosen here once:
///
/// - On Apple platforms, `os_unfair_lock`, everywhere: `Synchronization.Mutex` needs macOS 15
///   and Pace supports macOS 13.
/// - On Linux, `Synchronization.Mutex` here, for its uncontended acquisition, a fraction of
///   `pthread_mutex_t`'s: a single-key primitive's caller rarely meets its timer's thread.
/// - On Linux, a futex lock of Pace's own in the keyed primitives' `Shards` (`pace_shard_lock`):
///   there the callers and the timer thread, which holds a shard's lock for a whole firing, meet
///   all the time, and `Mutex`, a priority-inheritance futex, then hands the lock over through
///   the kernel every time (swiftlang/swift #88440), where a plain futex lets a running thread
///   take it, as `pthread_mutex_t` does at twice the uncontended cost.
///
/// The figures, side by side, are in `Benchmarks/README.md` ("The lock").
///
/// The thread sanitizer cannot see `Mutex`'s futex on Linux, and without help it reports false
/// races on the state it guards. So `withLock` tells it about the lock (`__tsan_acquire` and
/// `__tsan_release`, weak symbols that are null unless the sanitizer's runtime is linked in): an
/// app's `swift test --sanitize=thread` is clean with no flag, and without the sanitizer the cost
/// is two predicted branches. `Shards` does the same for its lock.
///
/// `@usableFromInline`, with an `@inlinable` `withLock`, so that the hot paths of the public
/// generic types specialise in the caller's module (see ``Pacer``).
@usableFromInline
package final class LockedState<State: ~Copyable>: @unchecked Sendable {
  // @unchecked Sendable: `state` is only read or written inside `withLock`, under `lock`.
  #if PACE_DARWIN_STAND_IN || canImport(Darwin)
  /// Allocated, so that the lock never moves.
  @usableFromInline let lock: UnsafeMutablePointer<os_unfair_lock>
  @usableFromInline var state: State

  package init(_ initial: consuming sending State) {
    lock = .allocate(capacity: 1)
    lock.initialize(to: os_unfair_lock())
    state = initial
  }

  deinit {
    lock.deinitialize(count: 1)
    lock.deallocate()
  }

  /// Runs `body` on the state under the lock.
  @inlinable @inline(__always)
  package func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    os_unfair_lock_lock(lock)
    defer { os_unfair_lock_unlock(lock) }
    return body(&state)
  }
  #else
  @usableFromInline let mutex: Mutex<State>

  package init(_ initial: consuming sending State) {
    mutex = Mutex(initial)
  }

  /// Runs `body` on the state under the lock.
  @inlinable @inline(__always)
  package func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    // Pace's states and results hold only `Sendable` values, so handing them across the
    // `sending` boundary of `Mutex.withLock` is safe; the compiler cannot see that generically.
    // The annotations name this instance; `self` is alive for the whole call.
    let address = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    return mutex.withLock { state in
      pace_tsan_acquire(address)
      defer { pace_tsan_release(address) }
      let result = body(&state)
      return UncheckedSendable(result)
    }.value
  }
  #endif
}

/// Carries a value across a `sending` boundary that the compiler cannot prove safe.
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
  // @unchecked Sendable: only used by `LockedState.withLock` to return a result computed under
  // the lock; the value is never shared, it is moved out once.
  @usableFromInline var value: Value
  @inlinable init(_ value: Value) { self.value = value }
}
