#if canImport(Darwin)
import os
#else
import Synchronization
#endif

/// A value behind the lock an app would use on each platform: `Synchronization.Mutex` on Linux
/// (so the figures in README.md are Mutex's), `os_unfair_lock` on Apple platforms, where `Mutex`
/// needs macOS 15 / iOS 18 and these benchmarks build for macOS 13 / iOS 16.
///
/// For the naive contenders (a dictionary of pacers behind one lock) and the floors.
public final class Locked<Value>: @unchecked Sendable {
  // @unchecked Sendable: the value is only read or written inside `withLock`, under the lock.
  #if canImport(Darwin)
  @usableFromInline let lock: UnsafeMutablePointer<os_unfair_lock>
  @usableFromInline var value: Value

  public init(_ initial: consuming Value) {
    lock = .allocate(capacity: 1)
    lock.initialize(to: os_unfair_lock())
    value = initial
  }

  deinit {
    lock.deinitialize(count: 1)
    lock.deallocate()
  }

  /// Runs `body` on the value under the lock.
  @inlinable
  public func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
    os_unfair_lock_lock(lock)
    defer { os_unfair_lock_unlock(lock) }
    return body(&value)
  }
  #else
  @usableFromInline let mutex: Mutex<Value>

  public init(_ initial: consuming sending Value) {
    mutex = Mutex(initial)
  }

  /// Runs `body` on the value under the lock.
  @inlinable
  public func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
    mutex.withLock { value in Handed(body(&value)) }.value
  }
  #endif
}

/// Carries a result out of `Mutex.withLock`'s `sending` boundary, as Pace's `LockedState` does.
@usableFromInline
struct Handed<Value>: @unchecked Sendable {
  // @unchecked Sendable: a result computed under `Locked`'s lock, moved out once, never shared.
  @usableFromInline var value: Value
  @inlinable init(_ value: Value) { self.value = value }
}
