import CPaceSupport

/// Room for `capacity` elements from the keyed allocator (`pace_allocate_table`), for each of a
/// shard's storages: its ``KeyTable``'s slots, its heap of deadlines and its outbox.
///
/// Not `Array`: a shard's storage grows on the threads that call and shrinks on the timer's, and
/// what malloc gives a thread comes from that thread's arena, where a few small blocks that stay
/// (the scheduler's own) keep its freed pages resident; `KeyedMemory` measured a process whose
/// keys had all gone quiet 10 to 35 % larger than before. Blocks of 16 KiB or more are pages
/// mapped for the block alone (on Linux), which go back to the system when freed.
///
/// Which elements are initialised is the owner's business: the owner deinitialises them before
/// the storage is dropped, and `deinit` only frees the memory.
@usableFromInline
struct KeyedStorage<Element>: ~Copyable {
  /// `nil` while `capacity` is 0.
  @usableFromInline var base: UnsafeMutablePointer<Element>?
  @usableFromInline var capacity: Int

  @inlinable init() {
    base = nil
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
    base = memory.assumingMemoryBound(to: Element.self)
    self.capacity = capacity
  }

  @inlinable deinit {
    if let base { pace_free_table(base, capacity * MemoryLayout<Element>.stride) }
  }

  /// Shrinks to `newCapacity` (less than `capacity`; 0 frees the memory), keeping the first
  /// `count` elements, which must fit. In place where the allocator can
  /// (`pace_shrink_table`), for elements that may move by their bytes.
  @inlinable
  mutating func shrink(to newCapacity: Int, keeping count: Int) {
    precondition(
      count <= newCapacity && newCapacity < capacity, "KeyedStorage.shrink: \(count) of \(newCapacity) < \(capacity)")
    let stride = MemoryLayout<Element>.stride
    if newCapacity == 0 {
      self = KeyedStorage()
      return
    }
    // The standard library's test; an element holding an Objective-C weak reference may not move
    // by its bytes.
    if _isBitwiseTakable(Element.self) {
      guard let memory = pace_shrink_table(base.unsafelyUnwrapped, capacity * stride, newCapacity * stride) else {
        fatalError("KeyedStorage: out of memory for \(newCapacity) elements")
      }
      base = memory.assumingMemoryBound(to: Element.self)
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
    if let base { new.base.unsafelyUnwrapped.moveInitialize(from: base, count: count) }
    swap(&self, &new)
  }
}

/// The invocations a shard has decided on and not yet delivered, oldest first: a ring on
/// ``KeyedStorage``, which doubles when full and is given back with ``releaseStorage()``. (Not
/// the package's `FIFO`, whose storage is an `Array`: see ``KeyedStorage`` for why.)
@usableFromInline
struct KeyedOutbox<Element>: ~Copyable {
  @usableFromInline var storage = KeyedStorage<Element>()
  /// Where the oldest element is.
  @usableFromInline var head = 0
  @usableFromInline var count = 0

  @inlinable init() {}

  @inlinable deinit {
    guard let base = storage.base else { return }
    let first = Swift.min(count, storage.capacity - head)
    (base + head).deinitialize(count: first)
    base.deinitialize(count: count - first)
  }

  @inlinable var isEmpty: Bool { count == 0 }
  @inlinable var capacity: Int { storage.capacity }

  @inlinable
  mutating func append(_ element: Element) {
    if count == storage.capacity { grow() }
    var tail = head + count
    if tail >= storage.capacity { tail -= storage.capacity }
    (storage.base.unsafelyUnwrapped + tail).initialize(to: element)
    count += 1
  }

  @inlinable
  mutating func popFirst() -> Element? {
    guard count > 0 else { return nil }
    let element = (storage.base.unsafelyUnwrapped + head).move()
    head += 1
    if head == storage.capacity { head = 0 }
    count -= 1
    if count == 0 { head = 0 }
    return element
  }

  /// Frees the storage of an empty outbox.
  @inlinable
  mutating func releaseStorage() {
    precondition(count == 0, "KeyedOutbox.releaseStorage: \(count) elements left")
    storage = KeyedStorage()
    head = 0
  }

  @inlinable @inline(never)  // out of the hot path
  mutating func grow() {
    var new = KeyedStorage<Element>(capacity: Swift.max(16, storage.capacity * 2))
    if let base = storage.base {
      // The oldest elements first: from `head` to the end, then from the start.
      let first = Swift.min(count, storage.capacity - head)
      new.base.unsafelyUnwrapped.moveInitialize(from: base + head, count: first)
      (new.base.unsafelyUnwrapped + first).moveInitialize(from: base, count: count - first)
    }
    swap(&storage, &new)
    head = 0
  }
}
