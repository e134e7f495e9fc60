import CPaceSupport

#if canImport(Darwin)
import os
#endif

/// How many shards a keyed primitive splits its keys into: enough that threads calling
/// different keys rarely meet on one lock, few enough that an instance with a handful of keys
/// stays small.
@usableFromInline
let keyedShardCount = 64

/// A key's shard is the top `log2(keyedShardCount)` bits of a 64-bit value made from its hash.
@usableFromInline
let keyedShardShift: UInt64 = 58

/// The shard of a key whose `hashValue` is `hash`, on a platform whose `Int` has `bitWidth` bits.
///
/// A 64-bit hash gives its own top bits (``KeyTable`` places keys by a product that mixes in
/// every bit, so the two choices stay independent). A 32-bit hash (watchOS's arm64_32) has no
/// bits up there: its top bits would be 0 and every key would share one shard's lock, so it is
/// first spread over 64 bits by a multiplier other than the table's.
///
/// `bitWidth` is a parameter so that a test on a 64-bit machine computes what arm64_32 does.
@inlinable @inline(__always)
func keyedShardIndex(hash: Int, bitWidth: Int = Int.bitWidth) -> Int {
  let bits = UInt64(truncatingIfNeeded: UInt(bitPattern: hash))
  let spread = bitWidth >= 64 ? bits : (bits & 0xFFFF_FFFF) &* 0xFF51_AFD7_ED55_8CCD
  return Int(truncatingIfNeeded: spread >> keyedShardShift)
}

/// The shards of a keyed primitive: one allocation holding, for each shard, a lock and the
/// state it guards, each on cache lines of its own so that threads on different shards never
/// share a line.
///
/// The lock is `os_unfair_lock` on Apple platforms and, on Linux, a futex word of Pace's own
/// (`pace_shard_lock`, inlined: one atomic instruction to take a free lock, one to give it back),
/// not `Synchronization.Mutex` as in ``LockedState``, whose documentation gives the reason, nor
/// `pthread_mutex_t`, whose two calls cost more than the rest of a hot key's decision.
///
/// One allocation rather than an array of lock objects, so that reaching a shard loads no
/// reference and retains nothing.
@usableFromInline
final class Shards<State: ~Copyable>: @unchecked Sendable {
  // @unchecked Sendable: each shard's state is only read or written inside `withLock`, under
  // that shard's lock.
  #if canImport(Darwin)
  @usableFromInline typealias Lock = os_unfair_lock
  #else
  @usableFromInline typealias Lock = UInt32
  #endif

  /// A shard's lock and the state it guards. On Linux the lock word is not in it but just before
  /// it, in the same line: the thread sanitizer takes a Swift access to a shard's state for an
  /// access at the shard's address, where a waiting thread writes the word atomically.
  @usableFromInline
  struct Shard: ~Copyable {
    #if canImport(Darwin)
    @usableFromInline var lock: Lock
    #endif
    @usableFromInline var state: State
  }

  @usableFromInline let base: UnsafeMutableRawPointer
  /// The distance between shards: a whole number of cache lines (128 bytes, the unit of
  /// adjacent-line prefetching), so that no two shards share one.
  @usableFromInline let stride: Int
  @usableFromInline let count: Int
  /// Where a shard starts in its block: after the lock word on Linux, at 0 elsewhere.
  @usableFromInline let shardOffset: Int

  init(count: Int, _ makeState: () -> State) {
    self.count = count
    #if canImport(Darwin)
    shardOffset = 0
    #else
    shardOffset = Swift.max(MemoryLayout<Lock>.size, MemoryLayout<Shard>.alignment)
    #endif
    stride = (shardOffset + MemoryLayout<Shard>.stride + 127) / 128 * 128
    base = .allocate(byteCount: stride * count, alignment: Swift.max(128, MemoryLayout<Shard>.alignment))
    for index in 0..<count {
      #if canImport(Darwin)
      let shard = (base + stride * index).bindMemory(to: Shard.self, capacity: 1)
      shard.initialize(to: Shard(lock: os_unfair_lock(), state: makeState()))
      #else
      (base + stride * index).bindMemory(to: Lock.self, capacity: 1).initialize(to: 0)
      let shard = (base + stride * index + shardOffset).bindMemory(to: Shard.self, capacity: 1)
      shard.initialize(to: Shard(state: makeState()))
      #endif
    }
  }

  deinit {
    for index in 0..<count {
      unsafeShard(index).deinitialize(count: 1)
    }
    base.deallocate()
  }

  /// Shard `index`, valid as long as the instance: its state may only be touched through
  /// ``withLock(_:_:)``, except what never changes after `init`.
  @inlinable @inline(__always)
  func unsafeShard(_ index: Int) -> UnsafeMutablePointer<Shard> {
    (base + (stride &* index &+ shardOffset)).assumingMemoryBound(to: Shard.self)
  }

  @inlinable
  var indices: Range<Int> { 0..<count }

  /// Runs `body` on the state of shard `index` under its lock. `body` must not call user code.
  @inlinable @inline(__always)
  func withLock<Result>(_ index: Int, _ body: (inout State) -> Result) -> Result {
    let shard = unsafeShard(index)
    #if canImport(Darwin)
    os_unfair_lock_lock(&shard.pointee.lock)
    defer { os_unfair_lock_unlock(&shard.pointee.lock) }
    #else
    // A raw pointer, not `&`: a Swift access to the word would be a plain write to the thread
    // sanitizer, beside other threads' atomic ones. The sanitizer is also told of the lock, as
    // for `LockedState`.
    let word = (base + stride &* index).assumingMemoryBound(to: Lock.self)
    pace_shard_lock(word)
    pace_tsan_acquire(word)
    defer {
      pace_tsan_release(word)
      pace_shard_unlock(word)
    }
    #endif
    return body(&shard.pointee.state)
  }
}
