/// The deadlines of a keyed shard's keys, earliest first: a binary min-heap on ``KeyedStorage``.
///
/// O(log n) to add, O(1) on average for deadlines that grow with time, as they do. Entries are
/// never removed from the middle: an entry whose key has moved on is recognised as stale when it
/// comes out (see ``ShardTimer``). The storage shrinks as keys go idle and is freed once empty.
///
/// Noncopyable, because it owns its storage and the entries in it, which `deinit` deinitialises.
@usableFromInline
struct DeadlineHeap<Key>: ~Copyable {
  /// A key and its deadline: plain data, so a labelled tuple, as `Dictionary`'s elements are.
  @usableFromInline typealias Entry = (deadline: PaceInstant, key: Key)

  /// The first `count` entries are initialised, in heap order.
  @usableFromInline var storage = KeyedStorage<Entry>()
  @usableFromInline var count = 0

  @inlinable init() {}

  @inlinable
  deinit {
    storage.unsafeBase?.deinitialize(count: count)
  }

  @inlinable var isEmpty: Bool { count == 0 }
  @inlinable var capacity: Int { storage.capacity }

  /// The earliest entry; `nil` when the heap is empty.
  @inlinable
  var first: Entry? { count == 0 ? nil : storage.unsafeBase.unsafelyUnwrapped.pointee }

  @inlinable
  mutating func insert(_ entry: Entry) {
    if count == capacity { grow() }
    let entries = storage.unsafeBase.unsafelyUnwrapped
    // Sift the hole up from the end, then fill it.
    var child = count
    while child > 0 {
      let parent = (child - 1) / 2
      guard entry.deadline < entries[parent].deadline else { break }
      (entries + child).moveInitialize(from: entries + parent, count: 1)
      child = parent
    }
    (entries + child).initialize(to: entry)
    count += 1
  }

  /// Takes out the earliest entry; the heap must not be empty.
  @inlinable
  mutating func removeFirst() -> Entry {
    let entries = storage.unsafeBase.unsafelyUnwrapped
    let first = entries.move()
    count -= 1
    guard count > 0 else { return first }
    // Sift the hole at the root down, then fill it with the last entry.
    let last = (entries + count).move()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      guard left < count else { break }
      let right = left + 1
      let child = right < count && entries[right].deadline < entries[left].deadline ? right : left
      guard entries[child].deadline < last.deadline else { break }
      (entries + parent).moveInitialize(from: entries + child, count: 1)
      parent = child
    }
    (entries + parent).initialize(to: last)
    return first
  }

  /// Takes out the entries for which `isRemoved` is true: O(n log n), for flushes and cancels,
  /// not for the hot path.
  @inlinable
  mutating func removeAll(where isRemoved: (Entry) -> Bool) {
    var kept: [Entry] = []
    while count > 0 {
      let entry = removeFirst()
      if !isRemoved(entry) { kept.append(entry) }
    }
    for entry in kept { insert(entry) }
    shrinkIfSparse()
  }

  /// Drops every entry and frees the storage.
  @inlinable
  mutating func removeAll() {
    storage.unsafeBase?.deinitialize(count: count)
    count = 0
    storage = KeyedStorage()
  }

  /// Frees the storage of an empty heap, and shrinks that of a heap of more than 64 entries
  /// that fills less than a quarter of it to the power of two that it would half fill.
  @inlinable
  mutating func shrinkIfSparse() {
    if count == 0 {
      if capacity > 0 { storage = KeyedStorage() }
    } else if capacity > 64, count < capacity / 4 {
      // The least power of two of at least `2 * count`.
      storage.shrink(to: Swift.max(16, 1 << (Int.bitWidth - (count * 2 - 1).leadingZeroBitCount)), keeping: count)
    }
  }

  @inlinable @inline(never)  // specialised for the key type, but out of the hot path
  mutating func grow() {
    storage.replace(with: Swift.max(16, capacity * 2), moving: count)
  }
}
