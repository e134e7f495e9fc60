import CPaceSupport

/// Room for `capacity` elements from the keyed allocator (`pace_allocate_table`), for each of a
/// shard's storages: its ``KeyTable``'s slots, its ``DeadlineHeap`` and its outbox (a
/// ``RingBuffer``).
///
/// Not `Array`: a shard's storage grows on the threads that call and shrinks on the timer's, and
/// what malloc gives a thread comes from that thread's arena, where a few small blocks that stay
/// (the scheduler's own) keep its freed pages resident, and a process whose keys have all gone
/// quiet would stay larger than before. Blocks of 16 KiB or more are pages mapped for the block
/// alone (on Linux), which go back to the system when freed.
///
/// Which elements are initialised is the owner's business: the owner deinitialises them before
/// the storage is dropped, and `deinit` only frees the memory.
@usableFromInline
struct KeyedStorage<Element>: ~Copyable {
  /// The first element; `nil` while `capacity` is 0. Valid until the storage is replaced or
  /// dropped, which the owner controls.
  @usableFromInline var unsafeBase: UnsafeMutablePointer<Element>?
  @usableFromInline var capacity: Int

  @inlinable init() {
    unsafeBase = nil
    capacity = 0
  }

  /// Room for `capacity` elements (more than 0), none initialised, its bytes zero, starting on a
  /// cache line.
  @inlinable init(capacity: Int) {
    // No Swift type is aligned beyond a cache line.
    assert(MemoryLayout<Element>.alignment <= 64, "KeyedStorage: elements aligned beyond a cache line")
    guard let memory = pace_allocate_table(capacity * MemoryLayout<Element>.stride) else {
      fatalError("KeyedStorage: out of memory for \(capacity) elements")
    }
    unsafeBase = memory.assumingMemoryBound(to: Element.self)
    self.capacity = capacity
  }

  @inlinable deinit {
    if let unsafeBase { pace_free_table(unsafeBase, capacity * MemoryLayout<Element>.stride) }
  }

  /// Shrinks to `newCapacity` (less than `capacity`; 0 frees the memory), keeping the first
  /// `count` elements, which must fit: in place where the allocator can give the tail back
  /// without moving a byte (`pace_shrink_table_in_place`), otherwise by moving the elements into
  /// smaller storage, which is right for every element type.
  @inlinable
  mutating func shrink(to newCapacity: Int, keeping count: Int) {
    precondition(
      count <= newCapacity && newCapacity < capacity, "KeyedStorage.shrink: \(count) of \(newCapacity) < \(capacity)")
    let stride = MemoryLayout<Element>.stride
    if newCapacity == 0 {
      self = KeyedStorage()
    } else if pace_shrink_table_in_place(unsafeBase.unsafelyUnwrapped, capacity * stride, newCapacity * stride) {
      capacity = newCapacity
    } else {
      replace(with: newCapacity, moving: count)
    }
  }

  /// Moves the first `count` elements into new storage of `newCapacity` (at least `count`, more
  /// than 0).
  @inlinable
  mutating func replace(with newCapacity: Int, moving count: Int) {
    var new = KeyedStorage(capacity: newCapacity)
    if let unsafeBase { new.unsafeBase.unsafelyUnwrapped.moveInitialize(from: unsafeBase, count: count) }
    swap(&self, &new)
  }
}
