/// The keys of one shard of a keyed primitive and their states: an open-addressing hash table
/// that stores each key beside its state, so that finding a key among a million touches one slot.
///
/// `Dictionary` keeps keys and values in two arrays (and its occupancy in a third), so a call on
/// one of a million keys missed the cache two or three times under the shard's lock; it also
/// hashes with a seed of its own, so the hash the shard was chosen by could not be reused. With
/// this table a call hashes its key once (``KeyedPacer`` and ``KeyedRateLimiter`` pass the hash
/// in) and misses the cache once, on its slot; the control bytes are a byte per slot and stay
/// in the cache.
///
/// The layout is that of Abseil's SwissTable, probed with plain integer arithmetic: slots come in
/// groups of 8, each slot has a control byte (empty, deleted, or the top 7 bits of the key's
/// hash), a lookup compares a group's 8 control bytes at once as one `UInt64` and visits the
/// groups in triangular order until one has an empty slot. Removal leaves a tombstone unless the
/// group has an empty slot (then no probe can have passed through it). At most 7/8 of the slots
/// are used; a table that has shrunk to a quarter of that is rebuilt smaller, and an empty one
/// holds no memory at all, so evicted keys give their memory back.
///
/// A class, because its storage is two raw allocations it frees in `deinit`; it is only used
/// under its shard's lock and never copied. Slot indices stay valid until the next insertion or
/// ``shrinkIfSparse()``.
@usableFromInline
final class KeyTable<Key: Hashable, Value> {
  @usableFromInline
  struct Slot {
    @usableFromInline var key: Key
    @usableFromInline var value: Value

    @inlinable init(key: Key, value: Value) {
      self.key = key
      self.value = value
    }
  }

  /// One `UInt64` per group of 8 slots, the control byte of slot `8 * group + j` in byte `j`
  /// (little-endian); `nil` while the table has no slots.
  @usableFromInline var controls: UnsafeMutablePointer<UInt64>?
  @usableFromInline var slots: UnsafeMutablePointer<Slot>?
  /// The number of groups minus one; groups are a power of two.
  @usableFromInline var groupMask = 0
  /// Mixed into every hash; a new one at each rebuild, so that rebuilding never inserts keys in
  /// an order that clusters them.
  @usableFromInline var seed: UInt64 = 0
  @usableFromInline var count = 0
  /// How many empty slots may still be filled before the table grows or is rebuilt.
  @usableFromInline var growthLeft = 0

  @usableFromInline init() {}

  deinit {
    release()
  }

  /// The number of slots.
  var capacity: Int { controls == nil ? 0 : (groupMask + 1) * 8 }

  // MARK: Control bytes

  @usableFromInline static var empty: UInt8 { 0x80 }
  @usableFromInline static var deleted: UInt8 { 0xFE }
  @usableFromInline static var lowBits: UInt64 { 0x0101_0101_0101_0101 }
  @usableFromInline static var highBits: UInt64 { 0x8080_8080_8080_8080 }

  /// The high bit of each byte of `group` that may hold `tag` (false positives are full slots,
  /// which the caller tells apart by comparing keys).
  @inlinable @inline(__always)
  static func matching(_ tag: UInt8, in group: UInt64) -> UInt64 {
    let difference = group ^ (lowBits &* UInt64(tag))
    return (difference &- lowBits) & ~difference & highBits
  }

  @inlinable @inline(__always)
  static func emptySlots(in group: UInt64) -> UInt64 { group & ~(group << 6) & highBits }

  @inlinable @inline(__always)
  static func emptyOrDeletedSlots(in group: UInt64) -> UInt64 { group & ~(group << 7) & highBits }

  /// The slot of the lowest byte set in `matches`, within its group.
  @inlinable @inline(__always)
  static func firstSlot(in matches: UInt64) -> Int { matches.trailingZeroBitCount >> 3 }

  /// The mixed hash: the tag is its top 7 bits, the first group comes from the bits below.
  @inlinable @inline(__always)
  func mix(_ hash: Int) -> UInt64 {
    (UInt64(UInt(bitPattern: hash)) ^ seed) &* 0x9E37_79B9_7F4A_7C15
  }

  @inlinable @inline(__always)
  func group(_ index: Int) -> UInt64 { UInt64(littleEndian: controls.unsafelyUnwrapped[index]) }

  @inlinable @inline(__always)
  func setControl(_ control: UInt8, at slot: Int) {
    let controls = UnsafeMutableRawPointer(self.controls.unsafelyUnwrapped).assumingMemoryBound(to: UInt8.self)
    // Byte `j` of group `g` is byte `8g + j` in memory, since the groups are little-endian.
    controls[slot] = control
  }

  // MARK: Lookup and insertion

  /// The slot holding `key`, whose `hashValue` is `hash`; `nil` if the table has none.
  @inlinable
  func index(of key: Key, hash: Int) -> Int? {
    guard let slots else { return nil }
    let mixed = mix(hash)
    let tag = UInt8(truncatingIfNeeded: mixed >> 57)
    var groupIndex = Int(truncatingIfNeeded: mixed >> 7) & groupMask
    var step = 0
    while true {
      let group = self.group(groupIndex)
      var matches = Self.matching(tag, in: group)
      while matches != 0 {
        let slot = groupIndex &* 8 &+ Self.firstSlot(in: matches)
        if slots[slot].key == key { return slot }
        matches &= matches &- 1
      }
      if Self.emptySlots(in: group) != 0 { return nil }
      step &+= 1
      groupIndex = (groupIndex &+ step) & groupMask
    }
  }

  /// The slot holding `key`, inserting it with `makeValue()` if the table has none.
  @inlinable
  func indexInserting(_ key: Key, hash: Int, _ makeValue: @autoclosure () -> Value) -> Int {
    while true {
      if let slots {
        let mixed = mix(hash)
        let tag = UInt8(truncatingIfNeeded: mixed >> 57)
        var groupIndex = Int(truncatingIfNeeded: mixed >> 7) & groupMask
        var step = 0
        var free = -1
        while true {
          let group = self.group(groupIndex)
          var matches = Self.matching(tag, in: group)
          while matches != 0 {
            let slot = groupIndex &* 8 &+ Self.firstSlot(in: matches)
            if slots[slot].key == key { return slot }
            matches &= matches &- 1
          }
          if free < 0 {
            let available = Self.emptyOrDeletedSlots(in: group)
            if available != 0 { free = groupIndex &* 8 &+ Self.firstSlot(in: available) }
          }
          if Self.emptySlots(in: group) != 0 { break }
          step &+= 1
          groupIndex = (groupIndex &+ step) & groupMask
        }
        // Reusing a tombstone takes no growth; filling an empty slot does.
        let reusesTombstone = controlByte(at: free) == Self.deleted
        if reusesTombstone || growthLeft > 0 {
          if !reusesTombstone { growthLeft -= 1 }
          setControl(tag, at: free)
          (slots + free).initialize(to: Slot(key: key, value: makeValue()))
          count += 1
          return free
        }
      }
      grow()
    }
  }

  @inlinable @inline(__always)
  func controlByte(at slot: Int) -> UInt8 {
    UnsafeMutableRawPointer(controls.unsafelyUnwrapped).assumingMemoryBound(to: UInt8.self)[slot]
  }

  /// Calls `body` with the value in `slot`, in place.
  @inlinable @inline(__always)
  func withValue<Result>(at slot: Int, _ body: (inout Value) -> Result) -> Result {
    body(&slots.unsafelyUnwrapped[slot].value)
  }

  @inlinable @inline(__always)
  func key(at slot: Int) -> Key { slots.unsafelyUnwrapped[slot].key }

  // MARK: Removal

  /// Removes the key in `slot`. Call ``shrinkIfSparse()`` once done removing.
  @inlinable
  func remove(at slot: Int) {
    let slots = self.slots.unsafelyUnwrapped
    _ = (slots + slot).move()
    count -= 1
    // A probe stops at a group with an empty slot, so none can have gone past this one: its
    // slot can be empty again. Otherwise a probe may have, and the slot becomes a tombstone.
    if Self.emptySlots(in: group(slot >> 3)) != 0 {
      setControl(Self.empty, at: slot)
      growthLeft += 1
    } else {
      setControl(Self.deleted, at: slot)
    }
  }

  /// Removes every key and gives the memory back.
  func removeAll() {
    release()
  }

  /// Gives the memory back once the table is empty, and rebuilds it smaller once an eighth of
  /// its slots or fewer hold keys; amortised O(1) per removal.
  func shrinkIfSparse() {
    if count == 0 {
      if controls != nil { release() }
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
    guard controls != nil else { return }
    for groupIndex in 0...groupMask {
      var full = ~group(groupIndex) & Self.highBits
      while full != 0 {
        body(groupIndex &* 8 &+ Self.firstSlot(in: full))
        full &= full &- 1
      }
    }
  }

  // MARK: Growth

  /// The smallest power of two of at least 8 slots whose 7/8 hold `count` keys.
  static func capacity(for count: Int) -> Int {
    var capacity = 8
    while capacity / 8 * 7 < count { capacity *= 2 }
    return capacity
  }

  /// Makes room for one more key: doubles the table, or rebuilds it at its size when
  /// tombstones, not keys, took the room.
  @usableFromInline
  func grow() {
    let capacity = self.capacity
    if capacity == 0 {
      rebuild(capacity: 8)
    } else if count < capacity / 8 * 7 / 2 {
      rebuild(capacity: capacity)
    } else {
      rebuild(capacity: capacity * 2)
    }
  }

  func rebuild(capacity: Int) {
    let groups = capacity / 8
    let newControls = UnsafeMutablePointer<UInt64>.allocate(capacity: groups)
    newControls.initialize(repeating: Self.highBits, count: groups)  // every byte empty
    let newSlots = UnsafeMutablePointer<Slot>.allocate(capacity: capacity)
    let oldControls = controls
    let oldSlots = slots
    let oldGroupMask = groupMask
    controls = newControls
    slots = newSlots
    groupMask = groups - 1
    // A different multiplier input per rebuild; the address is as good as any.
    seed = UInt64(UInt(bitPattern: newControls)) &* 0xBF58_476D_1CE4_E5B9
    growthLeft = capacity / 8 * 7 - count
    if let oldControls, let oldSlots {
      for groupIndex in 0...oldGroupMask {
        var full = ~UInt64(littleEndian: oldControls[groupIndex]) & Self.highBits
        while full != 0 {
          let slot = groupIndex &* 8 &+ Self.firstSlot(in: full)
          let moved = (oldSlots + slot).move()
          place(moved, hash: moved.key.hashValue)
          full &= full &- 1
        }
      }
      oldControls.deallocate()
      oldSlots.deallocate()
    }
  }

  /// Puts a slot known to be absent into the first empty slot of its probe sequence.
  private func place(_ slot: Slot, hash: Int) {
    let mixed = mix(hash)
    var groupIndex = Int(truncatingIfNeeded: mixed >> 7) & groupMask
    var step = 0
    while true {
      let empty = Self.emptySlots(in: group(groupIndex))
      if empty != 0 {
        let index = groupIndex &* 8 &+ Self.firstSlot(in: empty)
        setControl(UInt8(truncatingIfNeeded: mixed >> 57), at: index)
        (slots.unsafelyUnwrapped + index).initialize(to: slot)
        return
      }
      step &+= 1
      groupIndex = (groupIndex &+ step) & groupMask
    }
  }

  private func release() {
    guard let controls, let slots else { return }
    forEachSlot { slot in (slots + slot).deinitialize(count: 1) }
    controls.deallocate()
    slots.deallocate()
    self.controls = nil
    self.slots = nil
    groupMask = 0
    count = 0
    growthLeft = 0
  }
}
