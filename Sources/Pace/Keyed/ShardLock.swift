#if canImport(Darwin)
import os
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The lock of one shard of a keyed primitive: a value guarded by `os_unfair_lock` on Apple
/// platforms and a plain `pthread_mutex_t` elsewhere.
///
/// Not `Synchronization.Mutex` on Linux, unlike ``LockedState``: `Mutex` is a
/// priority-inheritance futex, whose contended path goes through the kernel and hands the lock
/// over strictly (swiftlang/swift #88440). Measured with the `KeyedMemory` benchmark (a hot set
/// of 1,000 keys over 64 shards, 2 cores), `Mutex` fell from 11 M updates/s at 2 threads to
/// 2 M/s at 4 and 8 threads, while `pthread_mutex_t` rose to 12 and 18 M/s. The thread
/// sanitizer sees `pthread_mutex_t`, so this lock needs no sanitizer variant.
@usableFromInline
final class ShardLock<State>: @unchecked Sendable {
  // @unchecked Sendable: `state` is only read or written inside `withLock`, under `lock`.
  #if canImport(Darwin)
  @usableFromInline let lock: UnsafeMutablePointer<os_unfair_lock>
  #else
  @usableFromInline let lock: UnsafeMutablePointer<pthread_mutex_t>
  #endif
  @usableFromInline var state: State

  init(_ initial: sending State) {
    #if canImport(Darwin)
    lock = .allocate(capacity: 1)
    lock.initialize(to: os_unfair_lock())
    #else
    lock = .allocate(capacity: 1)
    lock.initialize(to: pthread_mutex_t())
    pthread_mutex_init(lock, nil)
    #endif
    state = initial
  }

  deinit {
    #if !canImport(Darwin)
    pthread_mutex_destroy(lock)
    #endif
    lock.deinitialize(count: 1)
    lock.deallocate()
  }

  @inlinable @inline(__always)
  func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    #if canImport(Darwin)
    os_unfair_lock_lock(lock)
    defer { os_unfair_lock_unlock(lock) }
    #else
    pthread_mutex_lock(lock)
    defer { pthread_mutex_unlock(lock) }
    #endif
    return body(&state)
  }
}
