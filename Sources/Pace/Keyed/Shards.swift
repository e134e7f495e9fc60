/// How many shards a keyed primitive splits its keys into: enough that threads calling
/// different keys rarely meet on one lock, few enough that an instance with a handful of keys
/// stays small.
@usableFromInline
let keyedShardCount = 64

/// A key's shard is the top `log2(keyedShardCount)` bits of its hash.
@usableFromInline
let keyedShardShift: UInt64 = 58

/// The shards of a keyed primitive: one allocation holding, for each shard, a ``LockedCell`` (the
/// package's one lock and the state it guards), each on cache lines of its own so that threads
/// on different shards never share a line.
///
/// One allocation rather than an array of ``LockedState``s, so that reaching a shard loads no
/// reference and retains nothing.
@usableFromInline
final class Shards<State: ~Copyable>: @unchecked Sendable {
  // @unchecked Sendable: each shard's state is only read or written inside `withLock`, under
  // that shard's lock.
  @usableFromInline typealias Shard = LockedCell<State>

  @usableFromInline let base: UnsafeMutableRawPointer
  /// The distance between shards: a whole number of cache lines (128 bytes, the unit of
  /// adjacent-line prefetching), so that no two shards share one.
  @usableFromInline let stride: Int
  @usableFromInline let count: Int

  init(count: Int, _ makeState: () -> State) {
    self.count = count
    stride = (MemoryLayout<Shard>.stride + 127) / 128 * 128
    base = .allocate(byteCount: stride * count, alignment: Swift.max(128, MemoryLayout<Shard>.alignment))
    for index in 0..<count {
      (base + stride * index).bindMemory(to: Shard.self, capacity: 1).initialize(to: Shard(makeState()))
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
    (base + stride &* index).assumingMemoryBound(to: Shard.self)
  }

  @inlinable
  var indices: Range<Int> { 0..<count }

  /// Runs `body` on the state of shard `index` under its lock. `body` must not call user code.
  @inlinable @inline(__always)
  func withLock<Result>(_ index: Int, _ body: (inout State) -> Result) -> Result {
    LockedCell.withLock(unsafeShard(index), body)
  }
}
