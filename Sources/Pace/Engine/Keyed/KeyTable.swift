import CPaceSupport

/// The keys of one shard of a keyed primitive and their states: an open-addressing hash table
/// that stores each key beside its state, so that a call on one key among a million touches one
/// slot, whose address the caller can compute, and prefetch, before it takes the shard's lock.
///
/// `Dictionary` keeps keys and values in two arrays (and its occupancy in a third), so a call on
/// one of a million keys missed the cache two or three times under the shard's lock, one miss
/// waiting for the other; it also hashes with a seed of its own, so the hash the shard was chosen
/// by could not be reused. Here a call hashes its key once (``KeyedPacer`` and
/// ``KeyedRateLimiter`` pass the hash in), prefetches the key's home slot with ``prefetch(_:hash:)``
/// while it reads the clock and takes the lock, and then usually finds its key, or the free slot
/// for it, there.
///
/// Linear probing with the mixed hash stored in each slot (so most mismatches never compare
/// keys, and a rebuild never hashes again), at most 3/4 full, the home slot taken from the top
/// bits of a multiplicative hash; removal shifts the following slots back instead of leaving
/// tombstones. The slots start on a cache line and ``prefetch(_:hash:)`` loads both lines of a
/// slot that straddles two. A table of more than 64 slots that holds keys in fewer than an
/// eighth of them is rebuilt smaller, and an empty one holds no memory at all, so evicted keys
/// give their memory back. The slots are a ``KeyedStorage``: on Linux, 16 KiB or more of them
/// are pages mapped for the table alone, so that memory goes back to the system, not to a malloc
/// arena.
///
/// Noncopyable, because it owns its slots, whose keys and values `deinit` deinitialises; it
/// lives inside its shard's state and is only used under the shard's lock, except
/// ``unsafePrefetchHint``, which is immutable and whose words are read and written atomically.
/// Slot indices stay valid until the next insertion, removal or ``shrinkIfSparse()``.
@usableFromInline
struct KeyTable<Key: Hashable, Value>: ~Copyable {
  @usableFromInline
  struct Slot {
    /// The mixed hash with its lowest bit set; 0 in an empty slot.
    @usableFromInline var tag: UInt64
    @usableFromInline var key: Key
    @usableFromInline var value: Value

    @inlinable init(tag: UInt64, key: Key, value: Value) {
      self.tag = tag
      self.key = key
      self.value = value
    }
  }

  /// `capacity` slots, a power of two, or none; only the tags of empty slots are initialised.
  @usableFromInline var storage = KeyedStorage<Slot>()
  /// `capacity - 1`, for the probe loops.
  @usableFromInline var mask = 0
  /// `64 - log2(capacity)`: a slot's home is the mixed hash shifted right by this.
  @usableFromInline var shift: UInt64 = 64
  /// Mixed into every hash, so that two tables place the same keys differently. Fixed for the
  /// table's life, so that a rebuild moves tags without hashing keys again: homes are the top
  /// bits of the tag, so a rebuild, which goes through the old slots in home order, inserts in
  /// home order in the new table too, and never clusters.
  @usableFromInline let seed: UInt64
  @usableFromInline var count = 0
  /// Three words, `slots`, `shift` and `seed`, published with relaxed atomic stores whenever
  /// they change, for ``prefetch(_:hash:)`` to read without the lock. A stale hint only
  /// prefetches the wrong line.
  @usableFromInline let unsafePrefetchHint: UnsafeMutablePointer<UInt>

  @usableFromInline init() {
    unsafePrefetchHint = .allocate(capacity: 3)
    unsafePrefetchHint.initialize(repeating: 0, count: 3)
    // Different for each table (the allocation's address); Swift's per-process hash seed
    // already keeps the placement unpredictable from outside.
    seed = LinearProbing.seed(fromAddress: UInt(bitPattern: unsafePrefetchHint))
  }

  @inlinable
  deinit {
    // The storage frees the memory after this.
    deinitializeSlots()
    unsafePrefetchHint.deallocate()
  }

  /// The first slot; `nil` while the table has none. Valid until the next insertion, removal or
  /// rebuild.
  @inlinable var unsafeSlots: UnsafeMutablePointer<Slot>? { storage.unsafeBase }

  /// The number of slots.
  @inlinable var capacity: Int { storage.capacity }

  // MARK: Layout

  /// The distance between slots: packed, because padding a slot to a whole cache line gains
  /// nothing once ``prefetch(_:hash:)`` loads both lines of a straddling slot.
  @inlinable
  static var slotStride: Int { MemoryLayout<Slot>.stride }

  /// Slots of this many bytes or more are pages mapped for the table alone, on Linux.
  static var mappedBytes: Int { pace_mapped_table_bytes() }

  @inlinable @inline(__always)
  static func unsafeSlot(_ slots: UnsafeMutablePointer<Slot>, _ index: Int) -> UnsafeMutablePointer<Slot> {
    (UnsafeMutableRawPointer(slots) + index &* slotStride).assumingMemoryBound(to: Slot.self)
  }

  // MARK: Hashing

  @inlinable @inline(__always)
  static func mix(_ hash: Int, seed: UInt64) -> UInt64 {
    LinearProbing.mix(UInt64(UInt(bitPattern: hash)), seed: seed) | 1
  }

  @inlinable @inline(__always)
  func home(of tag: UInt64) -> Int { Int(truncatingIfNeeded: tag >> shift) }

  /// Starts loading the home slot of a key whose `hashValue` is `hash` into the cache, without
  /// the lock, from the table's `unsafePrefetchHint`.
  @inlinable @inline(__always)
  static func prefetch(_ hint: UnsafeMutablePointer<UInt>, hash: Int) {
    let base = pace_load_relaxed(hint)
    guard base != 0 else { return }
    let shift = UInt64(pace_load_relaxed(hint + 1))
    let seed = UInt64(pace_load_relaxed(hint + 2))
    let home = Int(truncatingIfNeeded: mix(hash, seed: seed) >> shift)
    let slot = base &+ UInt(home &* slotStride)
    pace_prefetch_for_writing(UnsafeRawPointer(bitPattern: slot))
    // A slot that is not a whole cache line may end on the next one.
    pace_prefetch_for_writing(UnsafeRawPointer(bitPattern: slot &+ UInt(MemoryLayout<Slot>.size &- 1)))
    // Linear probing finds a key one slot past its home about as often as at home; that slot
    // often ends on a line of its own. (Past the end of the table, the hint prefetches nothing
    // useful, and a prefetch never faults.)
    pace_prefetch_for_writing(UnsafeRawPointer(bitPattern: slot &+ UInt(slotStride &+ MemoryLayout<Slot>.size &- 1)))
  }

  // MARK: Lookup and insertion

  /// The slot holding `key`, whose `hashValue` is `hash`; `nil` if the table has none.
  @inlinable
  func index(of key: Key, hash: Int) -> Int? {
    guard let slots = unsafeSlots else { return nil }
    let tag = Self.mix(hash, seed: seed)
    var index = home(of: tag)
    while true {
      let found = Self.unsafeSlot(slots, index).pointee.tag
      if found == 0 { return nil }
      if found == tag, Self.unsafeSlot(slots, index).pointee.key == key { return index }
      index = (index &+ 1) & mask
    }
  }

  /// The slot holding `key`, inserting it with `makeValue()` if the table has none.
  @inlinable
  mutating func indexInserting(_ key: Key, hash: Int, _ makeValue: @autoclosure () -> Value) -> Int {
    let tag = Self.mix(hash, seed: seed)
    var index = 0
    if let slots = unsafeSlots {
      index = home(of: tag)
      while true {
        let found = Self.unsafeSlot(slots, index).pointee.tag
        if found == 0 { break }
        if found == tag, Self.unsafeSlot(slots, index).pointee.key == key { return index }
        index = (index &+ 1) & mask
      }
    }
    // A new key: grow first if the table is 3/4 full, then take the first empty slot of its run.
    if count >= capacity / 4 * 3 {
      grow()
      index = home(of: tag)
      while Self.unsafeSlot(unsafeSlots.unsafelyUnwrapped, index).pointee.tag != 0 { index = (index &+ 1) & mask }
    }
    Self.unsafeSlot(unsafeSlots.unsafelyUnwrapped, index).initialize(to: Slot(tag: tag, key: key, value: makeValue()))
    count += 1
    return index
  }

  /// The value in `slot`, valid until the next insertion, removal or rebuild.
  @inlinable @inline(__always)
  func unsafeValuePointer(at slot: Int) -> UnsafeMutablePointer<Value> {
    let slot = UnsafeMutableRawPointer(Self.unsafeSlot(unsafeSlots.unsafelyUnwrapped, slot))
    return (slot + Self.valueOffset).assumingMemoryBound(to: Value.self)
  }

  /// Where `value` lies in a ``Slot``; a constant once specialised.
  @inlinable
  static var valueOffset: Int { MemoryLayout<Slot>.offset(of: \Slot.value).unsafelyUnwrapped }

  /// Calls `body` with the value in `slot`, in place.
  @inlinable @inline(__always)
  func withValue<Result>(at slot: Int, _ body: (inout Value) -> Result) -> Result {
    body(&unsafeValuePointer(at: slot).pointee)
  }

  @inlinable @inline(__always)
  func key(at slot: Int) -> Key { Self.unsafeSlot(unsafeSlots.unsafelyUnwrapped, slot).pointee.key }

  // MARK: Removal

  /// Removes the key in `slot`, moving back the slots after it that belong nearer their home
  /// (so no tombstones are needed). Other slot indices change; call ``shrinkIfSparse()`` once
  /// done removing.
  @inlinable
  mutating func remove(at slot: Int) {
    let slots = self.unsafeSlots.unsafelyUnwrapped
    Self.unsafeSlot(slots, slot).deinitialize(count: 1)
    count -= 1
    var hole = slot
    var next = slot
    while true {
      next = (next &+ 1) & mask
      let tag = Self.unsafeSlot(slots, next).pointee.tag
      if tag == 0 { break }
      if LinearProbing.movesBack(from: next, home: home(of: tag), into: hole, mask: mask) {
        Self.unsafeSlot(slots, hole).moveInitialize(from: Self.unsafeSlot(slots, next), count: 1)
        hole = next
      }
    }
    UnsafeMutableRawPointer(Self.unsafeSlot(slots, hole)).storeBytes(of: 0, as: UInt64.self)
  }

  /// Removes every key and gives the memory back.
  mutating func removeAll() {
    release()
  }

  /// Gives the memory back once the table is empty, and rebuilds it smaller (at most 3/8
  /// full) once it has more than 64 slots and keys in fewer than an eighth of them; amortised
  /// O(1) per removal.
  @inlinable
  mutating func shrinkIfSparse() {
    if count == 0 {
      if unsafeSlots != nil { release() }
    } else if capacity > 64, count < capacity / 8 {
      rebuild(capacity: Self.capacity(for: count * 2))
    }
  }

  /// Every occupied slot, in table order.
  var occupiedSlots: [Int] {
    var result: [Int] = []
    result.reserveCapacity(count)
    forEachSlot { result.append($0) }
    return result
  }

  /// Calls `body` with each occupied slot; `body` may change values but not add or remove keys.
  @inlinable
  func forEachSlot(_ body: (Int) -> Void) {
    guard let slots = unsafeSlots else { return }
    for index in 0...mask where Self.unsafeSlot(slots, index).pointee.tag != 0 {
      body(index)
    }
  }

  // MARK: Growth

  /// The smallest power of two of at least 16 slots whose 3/4 hold `count` keys.
  @inlinable
  static func capacity(for count: Int) -> Int {
    var capacity = 16
    while capacity / 4 * 3 < count { capacity *= 2 }
    return capacity
  }

  @inlinable @inline(never)  // specialised for the key and value types, but out of the hot path
  mutating func grow() {
    rebuild(capacity: Swift.max(16, capacity * 2))
  }

  @inlinable
  mutating func rebuild(capacity: Int) {
    // Zeroed: every tag says empty. After the swap, `old` holds the old slots, whose memory it
    // frees once they have moved.
    var old = KeyedStorage<Slot>(capacity: capacity)
    swap(&storage, &old)
    let newSlots = storage.unsafeBase.unsafelyUnwrapped
    let oldMask = mask
    mask = capacity - 1
    shift = UInt64(64 - capacity.trailingZeroBitCount)
    if let oldSlots = old.unsafeBase {
      for index in 0...oldMask where Self.unsafeSlot(oldSlots, index).pointee.tag != 0 {
        var target = home(of: Self.unsafeSlot(oldSlots, index).pointee.tag)
        while Self.unsafeSlot(newSlots, target).pointee.tag != 0 { target = (target &+ 1) & mask }
        Self.unsafeSlot(newSlots, target).moveInitialize(from: Self.unsafeSlot(oldSlots, index), count: 1)
      }
    }
    publishHint()
  }

  @inlinable
  func publishHint() {
    pace_store_relaxed(unsafePrefetchHint, UInt(bitPattern: unsafeSlots))
    pace_store_relaxed(unsafePrefetchHint + 1, UInt(shift))
    pace_store_relaxed(unsafePrefetchHint + 2, UInt(truncatingIfNeeded: seed))
  }

  /// Deinitialises the keys and values, leaving the memory to the storage.
  @inlinable
  func deinitializeSlots() {
    guard let slots = unsafeSlots else { return }
    forEachSlot { slot in Self.unsafeSlot(slots, slot).deinitialize(count: 1) }
  }

  @usableFromInline
  mutating func release() {
    // Unpublish first: a prefetch of freed memory is harmless, but pointless.
    pace_store_relaxed(unsafePrefetchHint, 0)
    deinitializeSlots()
    storage = KeyedStorage()
    mask = 0
    shift = 64
    count = 0
  }
}
