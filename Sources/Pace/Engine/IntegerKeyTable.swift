/// A hash table from integer keys that are spread already (ids a counter hands out, hash values
/// that came out of `Hasher`) to values, each key's home slot found by one multiplication.
///
/// `Dictionary` hashes every key through `Hasher` (SipHash, seeded per process), which guards a
/// table against keys chosen to collide. These keys need no such guard: a counter's ids are never
/// chosen from outside, and an item's hash value went through `Hasher` already. `Batcher.load`
/// looks up an entry id, a caller id and an item's hash value several times a load, each a SipHash
/// with `Dictionary`, on a path the caller's actor waits for. Fibonacci hashing (the
/// key times 2⁶⁴/φ, its top bits) spreads consecutive ids evenly over the slots. Each key is
/// mixed with a seed taken from the slots' address, as ``KeyTable`` does, so that where a key
/// lands is not known from outside even for a type that implements the deprecated `hashValue`
/// itself, whose hash values skip `Hasher`.
///
/// Open addressing with linear probing, at most 3/4 full; a removal shifts the following slots
/// back instead of leaving tombstones. Like `Dictionary`, it keeps its capacity when keys are
/// removed: a batcher's tables empty after each batch and fill again with the next. A value type,
/// copied on write.
@usableFromInline
struct IntegerKeyTable<Key: FixedWidthInteger, Value> {
  @usableFromInline
  struct Slot {
    @usableFromInline var key: Key
    /// `nil` in an empty slot.
    @usableFromInline var value: Value?

    @inlinable init(key: Key, value: Value?) {
      self.key = key
      self.value = value
    }
  }

  /// `capacity` slots, a power of two, or none.
  @usableFromInline var slots: ContiguousArray<Slot> = []
  /// `64 - log2(capacity)`: a key's home is its product's top bits.
  @usableFromInline var shift: UInt64 = 64
  /// Mixed into every key: from the slots' address, made again with them at each growth.
  @usableFromInline var seed: UInt64 = 0
  /// How many keys the table holds.
  @usableFromInline private(set) var count = 0

  @inlinable init() {}

  @inlinable var isEmpty: Bool { count == 0 }

  /// The number of slots.
  @inlinable var capacity: Int { slots.count }

  @inlinable @inline(__always)
  func home(of key: Key) -> Int {
    Int(truncatingIfNeeded: LinearProbing.mix(UInt64(truncatingIfNeeded: key), seed: seed) >> shift)
  }

  /// The slot holding `key`, or the empty slot that ends its probe run, where it would go. The
  /// table must have slots.
  @inlinable
  func place(of key: Key) -> (index: Int, found: Bool) {
    let mask = slots.count &- 1
    var index = home(of: key)
    while true {
      if slots[index].value == nil { return (index, false) }
      if slots[index].key == key { return (index, true) }
      index = (index &+ 1) & mask
    }
  }

  /// The value for `key`, `nil` if there is none; setting `nil` removes the key. A
  /// read-and-write (`table[key]?.change()`, `&table[key]`) looks the key up once.
  @inlinable
  subscript(key: Key) -> Value? {
    get {
      guard !slots.isEmpty else { return nil }
      let place = place(of: key)
      return place.found ? slots[place.index].value : nil
    }
    _modify {
      let place = slots.isEmpty ? nil : place(of: key)
      var value: Value? = nil
      // Moved out while the caller changes it, so that no copy of it is made.
      if let place, place.found { swap(&value, &slots[place.index].value) }
      defer { settle(key, value, at: place) }
      yield &value
    }
  }

  /// Sets the value for `key`; returns the value it replaced, if any.
  @inlinable
  @discardableResult
  mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
    var old: Value? = value
    swap(&old, &self[key])
    return old
  }

  /// Removes `key`; returns its value, if it had one.
  @inlinable
  @discardableResult
  mutating func removeValue(forKey key: Key) -> Value? {
    guard !slots.isEmpty else { return nil }
    let place = place(of: key)
    guard place.found else { return nil }
    var old: Value? = nil
    swap(&old, &slots[place.index].value)
    closeGap(at: place.index)
    return old
  }

  /// Calls `body` with each key and its value, in no particular order.
  @inlinable
  func forEach(_ body: (Key, Value) -> Void) {
    for slot in slots {
      if let value = slot.value { body(slot.key, value) }
    }
  }

  /// Stores what a read-and-write left for `key`, whose slot was `place` before it (`nil`: the
  /// table had none); a found key's slot is empty meanwhile.
  @inlinable
  mutating func settle(_ key: Key, _ value: Value?, at place: (index: Int, found: Bool)?) {
    if let place, place.found {
      if value == nil {
        closeGap(at: place.index)
      } else {
        slots[place.index].value = value
      }
    } else if let value {
      insert(key, value, at: place?.index)
    }
  }

  /// Inserts `key`, which the table does not hold, at `index`, the empty slot that ended its
  /// probe run (`nil` if the table has no slots); grows first if the table is 3/4 full.
  @inlinable
  mutating func insert(_ key: Key, _ value: Value, at index: Int?) {
    var index = index ?? 0
    if count >= slots.count / 4 * 3 {
      grow()
      index = place(of: key).index
    }
    slots[index] = Slot(key: key, value: value)
    count += 1
  }

  /// Empties the slot at `hole` (its value is taken already, or about to be: it is cleared
  /// here), moving back the slots after it that belong nearer their home.
  @inlinable
  mutating func closeGap(at hole: Int) {
    slots[hole].value = nil
    count -= 1
    let mask = slots.count &- 1
    var hole = hole
    var next = hole
    while true {
      next = (next &+ 1) & mask
      if slots[next].value == nil { return }
      if LinearProbing.movesBack(from: next, home: home(of: slots[next].key), into: hole, mask: mask) {
        slots.swapAt(hole, next)
        hole = next
      }
    }
  }

  @inlinable @inline(never)  // specialised, but out of the lookups' path
  mutating func grow() {
    let capacity = Swift.max(16, slots.count * 2)
    var old = ContiguousArray(repeating: Slot(key: .zero, value: nil), count: capacity)
    swap(&old, &slots)
    shift = UInt64(64 - capacity.trailingZeroBitCount)
    seed = LinearProbing.seed(fromAddress: slots.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) })
    let mask = capacity - 1
    for slot in old where slot.value != nil {
      var index = home(of: slot.key)
      while slots[index].value != nil { index = (index &+ 1) & mask }
      slots[index] = slot
    }
  }
}

extension IntegerKeyTable: Sendable where Key: Sendable, Value: Sendable {}
extension IntegerKeyTable.Slot: Sendable where Key: Sendable, Value: Sendable {}
