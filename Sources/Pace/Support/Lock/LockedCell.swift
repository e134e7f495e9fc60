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

/// A lock and the state it guards, side by side at a fixed address: the package's one lock,
/// behind ``LockedState`` (one cell) and the keyed primitives' `Shards` (a cell per shard).
///
/// The lock is `Synchronization.Mutex` on Linux and `os_unfair_lock` on Apple platforms, where
/// `Mutex` needs macOS 15 and Pace supports macOS 13. On Linux `Mutex` rather than
/// `pthread_mutex_t`, for both: it costs a fraction of `pthread_mutex_t` per uncontended
/// acquisition, and it kept the lead when threads contended on the shards of a keyed primitive
/// (side by side in `Benchmarks/README.md`, "The lock").
///
/// The thread sanitizer cannot see `Mutex`'s futex on Linux, so ``withLock(_:_:)`` tells it about
/// each acquisition and release (`__tsan_acquire` and `__tsan_release`, weak symbols that are null
/// unless the sanitizer's runtime is linked in): an app's `swift test --sanitize=thread` is clean
/// with no flag, and without the sanitizer the cost is two predicted branches.
///
/// Used only through a pointer (``withLock(_:_:)``), because `os_unfair_lock` must not move while
/// it is used. Never call user code inside `withLock`.
@usableFromInline
package struct LockedCell<State: ~Copyable>: ~Copyable {
  #if PACE_DARWIN_STAND_IN || canImport(Darwin)
  @usableFromInline var lock: os_unfair_lock
  #else
  /// Guards `state`, which lives beside it so that a cell has one layout on every platform.
  @usableFromInline let lock: Mutex<Void>
  #endif
  @usableFromInline var state: State

  @inlinable
  init(_ state: consuming State) {
    #if PACE_DARWIN_STAND_IN || canImport(Darwin)
    lock = os_unfair_lock()
    #else
    lock = Mutex(())
    #endif
    self.state = state
  }

  /// Runs `body` on the state of the cell at `cell` under its lock.
  @inlinable @inline(__always)
  static func withLock<Result>(_ cell: UnsafeMutablePointer<Self>, _ body: (inout State) -> Result) -> Result {
    #if PACE_DARWIN_STAND_IN || canImport(Darwin)
    os_unfair_lock_lock(&cell.pointee.lock)
    defer { os_unfair_lock_unlock(&cell.pointee.lock) }
    return body(&cell.pointee.state)
    #else
    // The annotations name the cell, which stays where it is for the whole call.
    let address = UnsafeRawPointer(cell)
    return cell.pointee.lock.withLock { _ in
      pace_tsan_acquire(address)
      defer { pace_tsan_release(address) }
      // Pace's states and results hold only `Sendable` values, so handing the result across the
      // `sending` boundary of `Mutex.withLock` is safe; the compiler cannot see that generically.
      return UncheckedSendable(body(&cell.pointee.state))
    }.value
    #endif
  }
}
