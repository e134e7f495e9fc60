import PaceTestSupport
import Testing

@testable import Pace

/// The open-addressing table behind the keyed primitives' shards, white-box: seeded random
/// operations against a `Dictionary`, keys that all hash alike, keys placed on purpose around the
/// end of the table, the lifetimes of keys and values through every rebuild, and the addresses
/// that `unsafeValuePointer(at:)` and `prefetch(_:hash:)` compute.
///
/// A failure names its seed and step. Where a key lands also depends on the process's hash seed
/// and on the table's address (its own seed), so a rerun of a seed tries other placements of the
/// same operations; the structural check below tells which invariant broke.
@Suite(.offThePool) struct KeyTableTests {
  // MARK: Reference model

  /// What the random runs reached, so that a test can check they reached the cases it is about.
  struct Coverage {
    /// Checks that found a key in a slot before its home: its probe run wrapped past the end.
    var wrappedSlots = 0
    /// Removals whose following run of slots wrapped past the end to slot 0.
    var removalsAcrossTheEnd = 0
    /// `shrinkIfSparse()` calls that rebuilt or released the table.
    var shrinks = 0
  }

  /// The expected contents, with the keys in an array too, to pick a present key in O(1).
  struct Model<Key: Hashable> {
    var values: [Key: Int] = [:]
    var keys: [Key] = []
    var positions: [Key: Int] = [:]

    mutating func set(_ key: Key, _ value: Int) {
      if values.updateValue(value, forKey: key) == nil {
        positions[key] = keys.count
        keys.append(key)
      }
    }

    mutating func remove(_ key: Key) {
      guard values.removeValue(forKey: key) != nil, let position = positions.removeValue(forKey: key) else { return }
      let last = keys.removeLast()
      if position < keys.count {
        keys[position] = last
        positions[last] = position
      }
    }

    mutating func removeAll() {
      self = Model()
    }
  }

  /// How `key` differs between `table` and `values`: presence, the key in its slot, its value
  /// read both through `withValue(at:_:)` and through `unsafeValuePointer(at:)`.
  static func difference<Key: Hashable>(_ table: borrowing KeyTable<Key, Int>, _ values: [Key: Int], at key: Key)
    -> String?
  {
    let index = table.index(of: key, hash: key.hashValue)
    switch (index, values[key]) {
    case (nil, nil):
      return nil
    case (nil, let expected?):
      return "\(key) (value \(expected)) not found"
    case (let index?, nil):
      return "\(key) found in slot \(index) but was never inserted or was removed"
    case (let index?, let expected?):
      let found = table.key(at: index)
      if found != key { return "index(of: \(key)) is slot \(index), which holds \(found)" }
      let value = table.withValue(at: index) { $0 }
      let pointed = table.unsafeValuePointer(at: index).pointee
      if value != expected || pointed != expected {
        return "\(key) holds \(value) (pointer: \(pointed)), expected \(expected)"
      }
      return nil
    }
  }

  /// Every way `table` differs from `values`: its structure, each expected key, and the keys and
  /// values of its occupied slots, which must be exactly the expected ones.
  static func fullDifference<Key: Hashable>(
    _ table: borrowing KeyTable<Key, Int>, _ values: [Key: Int], coverage: inout Coverage
  ) -> String? {
    if let difference = structuralDifference(table, coverage: &coverage) { return difference }
    for key in values.keys {
      if let difference = difference(table, values, at: key) { return difference }
    }
    let occupied = table.occupiedSlots
    if occupied != occupied.sorted() { return "occupiedSlots not in table order: \(occupied)" }
    var found: [Key: Int] = [:]
    for index in occupied {
      let key = table.key(at: index)
      if found.updateValue(table.unsafeValuePointer(at: index).pointee, forKey: key) != nil {
        return "\(key) occupies two slots"
      }
    }
    if found != values { return "occupied slots hold \(found.count) keys, expected \(values.count)" }
    return nil
  }

  /// The invariants a lookup relies on: the capacity, the count and the prefetch hint agree with
  /// the slots; each tag is the key's mixed hash; no empty slot lies between a key's home and its
  /// slot (else a lookup would stop before reaching it); at most 3/4 of the slots are full.
  /// `hash` is the hash the keys were inserted with.
  static func structuralDifference<Key: Hashable, Value>(
    _ table: borrowing KeyTable<Key, Value>, coverage: inout Coverage, hash: (Key) -> Int = { $0.hashValue }
  ) -> String? {
    let hint = (table.unsafePrefetchHint[0], table.unsafePrefetchHint[1], table.unsafePrefetchHint[2])
    guard let slots = table.unsafeSlots else {
      if table.count != 0 || table.capacity != 0 { return "no slots, count \(table.count), capacity \(table.capacity)" }
      if hint.0 != 0 { return "a table without slots publishes slots \(hint.0) for prefetching" }
      return nil
    }
    let capacity = table.capacity
    if capacity < 16 || capacity.nonzeroBitCount != 1 { return "capacity \(capacity)" }
    if table.shift != UInt64(64 - capacity.trailingZeroBitCount) { return "shift \(table.shift), capacity \(capacity)" }
    if table.count > capacity / 4 * 3 { return "\(table.count) keys in \(capacity) slots: more than 3/4 full" }
    if hint != (UInt(bitPattern: slots), UInt(table.shift), UInt(truncatingIfNeeded: table.seed)) {
      return "stale prefetch hint \(hint)"
    }
    var occupied = 0
    for index in 0..<capacity {
      let tag = KeyTable<Key, Value>.unsafeSlot(slots, index).pointee.tag
      guard tag != 0 else { continue }
      occupied += 1
      let key = KeyTable<Key, Value>.unsafeSlot(slots, index).pointee.key
      if tag != KeyTable<Key, Value>.mix(hash(key), seed: table.seed) { return "slot \(index): tag \(tag) for \(key)" }
      let home = table.home(of: tag)
      if index < home { coverage.wrappedSlots += 1 }
      var probe = home
      while probe != index {
        if KeyTable<Key, Value>.unsafeSlot(slots, probe).pointee.tag == 0 {
          return "\(key) in slot \(index) is unreachable: slot \(probe), between it and its home \(home), is empty"
        }
        probe = (probe + 1) & table.mask
      }
    }
    if occupied != table.count { return "\(occupied) occupied slots, count \(table.count)" }
    return nil
  }

  /// Whether the run of occupied slots after `index` continues past the end of the table.
  static func runWrapsAroundTheEnd<Key: Hashable, Value>(_ table: borrowing KeyTable<Key, Value>, after index: Int)
    -> Bool
  {
    guard let slots = table.unsafeSlots else { return false }
    var probe = index
    while true {
      let next = (probe + 1) & table.mask
      if KeyTable<Key, Value>.unsafeSlot(slots, next).pointee.tag == 0 { return false }
      if next == 0 { return true }
      probe = next
    }
  }

  /// Random operations on a table and on a model, half on keys present and half on new keys from
  /// `newKey`, compared after every operation (the key operated on, two more, the count) and in
  /// full every 16 operations and at the end. Returns the first difference.
  static func randomRun<Key: Hashable>(
    seed: UInt64, operations: Int, coverage: inout Coverage, newKey: (inout SeededGenerator) -> Key
  ) -> String? {
    var generator = SeededGenerator(seed: seed)
    var table = KeyTable<Key, Int>()
    var model = Model<Key>()
    for step in 0..<operations {
      let key =
        model.keys.isEmpty || Bool.random(using: &generator)
        ? newKey(&generator) : model.keys.randomElement(using: &generator)!
      let hash = key.hashValue
      KeyTable<Key, Int>.prefetch(table.unsafePrefetchHint, hash: hash)
      let operation: String
      var failure: String?
      switch Int.random(in: 0..<100, using: &generator) {
      case 0..<35:
        operation = "insert \(key)"
        let value = Int.random(in: -1_000...1_000, using: &generator)
        var madeValue = false
        let index = table.indexInserting(
          key, hash: hash,
          {
            madeValue = true
            return value
          }()
        )
        if madeValue != (model.values[key] == nil) { failure = "made a value: \(madeValue)" }
        if table.key(at: index) != key { failure = "returned slot \(index), which holds \(table.key(at: index))" }
        if madeValue { model.set(key, value) }
      case 35..<55:
        operation = "look up \(key)"
      case 55..<70:
        operation = "add to \(key)"
        if let index = table.index(of: key, hash: hash) {
          let delta = Int.random(in: 1...9, using: &generator)
          let old = table.withValue(at: index) { (value: inout Int) -> Int in
            defer { value += delta }
            return value
          }
          if old != model.values[key] { failure = "withValue passed \(old)" }
          model.set(key, old + delta)
        }
      case 70..<90:
        operation = "remove \(key)"
        if let index = table.index(of: key, hash: hash) {
          if runWrapsAroundTheEnd(table, after: index) { coverage.removalsAcrossTheEnd += 1 }
          table.remove(at: index)
          model.remove(key)
        }
      case 90..<97:
        operation = "shrink"
        let before = table.capacity
        table.shrinkIfSparse()
        if table.capacity != before { coverage.shrinks += 1 }
        if table.count == 0 ? table.capacity != 0 : table.capacity > 64 && table.count < table.capacity / 8 {
          failure = "still sparse: \(table.count) keys in \(table.capacity) slots"
        }
      case 97..<99:
        operation = "add 1 to every value"
        table.forEachSlot { index in table.unsafeValuePointer(at: index).pointee += 1 }
        for key in model.keys { model.values[key]! += 1 }
      default:
        operation = "remove all"
        table.removeAll()
        model.removeAll()
      }
      failure =
        failure ?? (table.count != model.values.count ? "count \(table.count), expected \(model.values.count)" : nil)
        ?? difference(table, model.values, at: key)
        ?? difference(table, model.values, at: newKey(&generator))
        ?? model.keys.randomElement(using: &generator).flatMap { difference(table, model.values, at: $0) }
      if failure == nil, step % 16 == 15 || step == operations - 1 {
        failure = fullDifference(table, model.values, coverage: &coverage)
      }
      if let failure { return "seed \(seed), step \(step), \(operation): \(failure)" }
    }
    return nil
  }

  @Test(arguments: 0..<2)
  func matchesADictionaryOnAFewKeysUsedOverAndOver(batch: UInt64) {
    var coverage = Coverage()
    for seed in batch * 100..<(batch + 1) * 100 {
      let failure = Self.randomRun(seed: seed, operations: 300, coverage: &coverage) { generator in
        Int.random(in: 0..<20, using: &generator)
      }
      #expect(failure == nil)
      if failure != nil { break }
    }
    #expect(coverage.shrinks > 0)
  }

  @Test(arguments: 0..<2)
  func matchesADictionaryOnKeysFromAllOfInt(batch: UInt64) {
    var coverage = Coverage()
    for seed in 1_000 + batch * 100..<1_000 + (batch + 1) * 100 {
      let failure = Self.randomRun(seed: seed, operations: 300, coverage: &coverage) { generator in
        Int.random(in: .min ... .max, using: &generator)
      }
      #expect(failure == nil)
      if failure != nil { break }
    }
    #expect(coverage.shrinks > 0)
  }

  @Test func matchesADictionaryOnStringKeys() {
    var coverage = Coverage()
    for seed: UInt64 in 2_000..<2_050 {
      let failure = Self.randomRun(seed: seed, operations: 300, coverage: &coverage) { generator in
        "a key long enough to live on the heap, number \(Int.random(in: 0..<60, using: &generator))"
      }
      #expect(failure == nil)
      if failure != nil { break }
    }
  }

  /// Grows to thousands of keys (the capacity exactly `capacity(for:)` after each insertion),
  /// shrinks back step by step as almost all are removed, frees everything when the last goes,
  /// grows again, and shrinks in one rebuild when `shrinkIfSparse()` comes only at the end.
  @Test func thousandsOfKeysShrinkBackAndGrowAgain() {
    var generator = SeededGenerator(seed: 3_000)
    var coverage = Coverage()
    var table = KeyTable<Int, Int>()
    var model: [Int: Int] = [:]
    func randomKeys(_ count: Int) -> [Int] {
      var keys = Set<Int>()
      while keys.count < count { keys.insert(Int.random(in: .min ... .max, using: &generator)) }
      return keys.shuffled(using: &generator)
    }

    var keys = randomKeys(3_000)
    for (inserted, key) in keys.enumerated() {
      _ = table.indexInserting(key, hash: key.hashValue, key / 2)
      model[key] = key / 2
      let capacity = table.capacity
      #expect(capacity == KeyTable<Int, Int>.capacity(for: inserted + 1))
      if capacity != KeyTable<Int, Int>.capacity(for: inserted + 1) { break }
    }
    #expect(Self.fullDifference(table, model, coverage: &coverage) == nil)

    keys.shuffle(using: &generator)
    for (removed, key) in keys.dropLast(5).enumerated() {
      guard let index = table.index(of: key, hash: key.hashValue) else {
        Issue.record("key \(removed) to remove not found")
        break
      }
      table.remove(at: index)
      model[key] = nil
      table.shrinkIfSparse()
      let (count, capacity) = (table.count, table.capacity)
      #expect(capacity <= 64 || count >= capacity / 8, "\(count) keys in \(capacity) slots")
      if removed % 256 == 0 {
        let failure = Self.fullDifference(table, model, coverage: &coverage)
        #expect(failure == nil)
        if failure != nil { break }
      }
    }
    #expect(table.count == 5)
    #expect(table.capacity == 64)
    #expect(Self.fullDifference(table, model, coverage: &coverage) == nil)

    for key in keys.suffix(5) { Self.remove(key, from: &table) }
    table.shrinkIfSparse()
    #expect(table.capacity == 0)
    #expect(table.unsafePrefetchHint[0] == 0)
    model = [:]

    keys = randomKeys(2_000)
    for key in keys {
      _ = table.indexInserting(key, hash: key.hashValue, ~key)
      model[key] = ~key
    }
    #expect(table.capacity == 4_096)
    #expect(Self.fullDifference(table, model, coverage: &coverage) == nil)
    for key in keys.dropLast(20) {
      Self.remove(key, from: &table)
      model[key] = nil
    }
    #expect(Self.fullDifference(table, model, coverage: &coverage) == nil)
    table.shrinkIfSparse()
    #expect(table.capacity == KeyTable<Int, Int>.capacity(for: 40))
    #expect(Self.fullDifference(table, model, coverage: &coverage) == nil)
  }

  /// Removes `key`, or records that `table` does not hold it (instead of trapping on `nil`).
  static func remove<Key: Hashable, Value>(
    _ key: Key, hash: Int? = nil, from table: inout KeyTable<Key, Value>,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    guard let index = table.index(of: key, hash: hash ?? key.hashValue) else {
      Issue.record("\(key), to remove, not found", sourceLocation: sourceLocation)
      return
    }
    table.remove(at: index)
  }

  // MARK: Collisions

  /// A key whose hash keeps only `value % 3`: three hashes for any number of keys, so the three
  /// probe runs grow to a third of the table each and keys are told apart by `==` alone.
  struct ThreeHashKey: Hashable, CustomStringConvertible {
    var value: Int

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.value == rhs.value }
    func hash(into hasher: inout Hasher) { hasher.combine(value % 3) }
    var description: String { "#\(value)" }
  }

  @Test func keysThatAllHashAlikeStillMatchADictionary() {
    var coverage = Coverage()
    for seed: UInt64 in 4_000..<4_040 {
      let failure = Self.randomRun(seed: seed, operations: 250, coverage: &coverage) { generator in
        ThreeHashKey(value: Int.random(in: 0..<120, using: &generator))
      }
      #expect(failure == nil)
      if failure != nil { break }
    }
    // Runs of a third of the table start at three random homes: they wrap in most seeds.
    #expect(coverage.wrappedSlots > 0)
    #expect(coverage.removalsAcrossTheEnd > 0)
  }

  /// The inverse of the multiplier of `KeyTable.mix` (read from it: `mix(1, seed: 0)`), to make
  /// hashes whose home slot a test chooses.
  static let mixMultiplierInverse: UInt64 = {
    let multiplier = KeyTable<Int, Int>.mix(1, seed: 0)
    var inverse = multiplier
    for _ in 0..<6 { inverse = inverse &* (2 &- multiplier &* inverse) }  // Newton: 3, 6, ... 96 bits
    return inverse
  }()

  /// The slot of each key of `hashes` in `table`, for the keys it holds.
  static func slots(_ table: borrowing KeyTable<Int, Int>, _ hashes: [Int: Int]) -> [Int: Int] {
    var slots: [Int: Int] = [:]
    for (key, hash) in hashes {
      if let index = table.index(of: key, hash: hash), table.unsafeValuePointer(at: index).pointee == key * 10 {
        slots[key] = index
      }
    }
    return slots
  }

  /// Keys placed on purpose at the end of a 16-slot table: their run wraps to slot 0, and removal
  /// shifts keys back across the end, or leaves them where their home lies after the hole.
  @Test func probeRunsWrapAroundTheEndAndRemovalShiftsBackAcrossIt() {
    var table = KeyTable<Int, Int>()
    let seed = table.seed
    #expect(Self.mixMultiplierInverse &* KeyTable<Int, Int>.mix(1, seed: 0) == 1)
    // A hash whose mixed value has `home` (of 16 slots) in its top 4 bits, the key below them.
    var hashes: [Int: Int] = [:]
    func place(_ key: Int, home: UInt64) {
      let mixed = home << 60 | UInt64(key) << 1
      hashes[key] = Int(bitPattern: UInt((mixed &* Self.mixMultiplierInverse) ^ seed))
      #expect(KeyTable<Int, Int>.mix(hashes[key]!, seed: seed) == mixed | 1)
    }
    func insert(_ key: Int, home: UInt64) -> Int {
      place(key, home: home)
      return table.indexInserting(key, hash: hashes[key]!, key * 10)
    }
    func remove(_ key: Int) {
      Self.remove(key, hash: hashes[key], from: &table)
      hashes[key] = nil
    }

    // Five keys at home 15 fill 15 and wrap to 0...3; two at home 0 follow them; one at 14.
    for key in 1...5 { _ = insert(key, home: 15) }
    for key in 6...7 { _ = insert(key, home: 0) }
    #expect(insert(8, home: 14) == 14)
    #expect(Self.slots(table, hashes) == [1: 15, 2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 14])
    // Every key after slot 14 has its home after it: nothing moves.
    remove(8)
    #expect(Self.slots(table, hashes) == [1: 15, 2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5])
    // The key in slot 0 moves back to 15, across the end, and the rest of the run follows.
    remove(1)
    #expect(Self.slots(table, hashes) == [2: 15, 3: 0, 4: 1, 5: 2, 6: 3, 7: 4])
    remove(4)
    #expect(Self.slots(table, hashes) == [2: 15, 3: 0, 5: 1, 6: 2, 7: 3])
    #expect(insert(9, home: 1) == 4)
    #expect(insert(10, home: 3) == 5)
    remove(6)
    #expect(Self.slots(table, hashes) == [2: 15, 3: 0, 5: 1, 7: 2, 9: 3, 10: 4])

    // A key at its home in slot 0 stays; the one after it, at home 15, moves back across it.
    table.removeAll()
    hashes = [:]
    #expect(insert(21, home: 15) == 15)
    #expect(insert(22, home: 0) == 0)
    #expect(insert(23, home: 15) == 1)
    remove(21)
    #expect(Self.slots(table, hashes) == [22: 0, 23: 15])
    remove(23)
    #expect(Self.slots(table, hashes) == [22: 0])
    remove(22)
    #expect(table.count == 0)

    // Thirteen keys at the last home outgrow 16 slots: the rebuild to 32 takes the wrapped
    // ones first; their run wraps again, and they leave one by one.
    table.removeAll()
    hashes = [:]
    for key in 31...43 { _ = insert(key, home: 15) }
    #expect(table.capacity == 32)
    var coverage = Coverage()
    var remaining = Array(31...43)
    while !remaining.isEmpty {
      let failure = Self.structuralDifference(table, coverage: &coverage) { hashes[$0]! }
      #expect(failure == nil)
      #expect(Set(Self.slots(table, hashes).keys) == Set(remaining))
      if failure != nil { break }
      if remaining.count == 13 {
        let wraps = Self.runWrapsAroundTheEnd(table, after: 30)
        #expect(wraps)
      }
      remove(remaining.remove(at: remaining.count / 2))
    }
    #expect(coverage.wrappedSlots > 0)
  }

  // MARK: Lifetimes

  /// Counts the ``LifetimeProbe`` instances made and deinitialised, and any deinitialised twice.
  final class LiveInstances {
    var made = 0
    var deinitialised: Set<Int> = []
    var deinitialisedTwice = 0
    var live: Int { made - deinitialised.count }
  }

  /// A key or value that reports its deinitialisation; equal by `id`, hashed by `id % hashModulus`.
  final class LifetimeProbe: Hashable {
    let id: Int
    let hashModulus: Int
    let serial: Int
    let instances: LiveInstances

    init(_ id: Int, _ instances: LiveInstances, hashModulus: Int) {
      self.id = id
      self.hashModulus = hashModulus
      self.instances = instances
      serial = instances.made
      instances.made += 1
    }

    deinit {
      if !instances.deinitialised.insert(serial).inserted { instances.deinitialisedTwice += 1 }
    }

    static func == (lhs: LifetimeProbe, rhs: LifetimeProbe) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id % hashModulus) }
  }

  typealias ProbeTable = KeyTable<LifetimeProbe, LifetimeProbe>

  /// Inserts each key with the value `-id`; a key already there keeps its value, and the probe
  /// made to look it up dies on return.
  static func insert(_ ids: Range<Int>, into table: inout ProbeTable, _ instances: LiveInstances, modulus: Int) {
    for id in ids {
      let key = LifetimeProbe(id, instances, hashModulus: modulus)
      _ = table.indexInserting(key, hash: key.hashValue, LifetimeProbe(-id, instances, hashModulus: modulus))
    }
  }

  static func remove(
    _ ids: Range<Int>, from table: inout ProbeTable, _ instances: LiveInstances, modulus: Int, shrinking: Bool
  ) {
    for id in ids {
      let key = LifetimeProbe(id, instances, hashModulus: modulus)
      guard let index = table.index(of: key, hash: key.hashValue) else { continue }
      table.remove(at: index)
      if shrinking { table.shrinkIfSparse() }
    }
  }

  /// The ids in `ids` whose key is missing or whose value is not `-id * sign`.
  static func wrongValues(
    _ ids: Range<Int>, in table: borrowing ProbeTable, _ instances: LiveInstances, modulus: Int, sign: Int = 1
  ) -> [Int] {
    ids.filter { id in
      let key = LifetimeProbe(id, instances, hashModulus: modulus)
      guard let index = table.index(of: key, hash: key.hashValue) else { return true }
      return table.key(at: index).id != id || table.unsafeValuePointer(at: index).pointee.id != -id * sign
    }
  }

  @Test(arguments: [Int.max, 3])
  func everyKeyAndValueIsDeinitialisedExactlyOnce(hashModulus modulus: Int) {
    let instances = LiveInstances()
    do {
      var table = ProbeTable()
      // Growth: rebuilds from 16 to 2048 slots move every pair.
      Self.insert(0..<1_000, into: &table, instances, modulus: modulus)
      #expect(instances.live == 2 * table.count)
      #expect(table.count == 1_000)
      // A key already there: only the probe made to look it up; no value made.
      let made = instances.made
      Self.insert(0..<100, into: &table, instances, modulus: modulus)
      #expect(instances.made == made + 100)
      #expect(instances.live == 2_000)
      // Values replaced in place release the old ones.
      for id in 0..<100 {
        let key = LifetimeProbe(id, instances, hashModulus: modulus)
        guard let index = table.index(of: key, hash: key.hashValue) else {
          Issue.record("key \(id) not found")
          continue
        }
        table.withValue(at: index) { $0 = LifetimeProbe(id, instances, hashModulus: modulus) }
      }
      #expect(instances.live == 2_000)
      #expect(Self.wrongValues(0..<100, in: table, instances, modulus: modulus, sign: -1) == [])
      // Removal with backward shifts, then one shrinking rebuild.
      Self.remove(0..<900, from: &table, instances, modulus: modulus, shrinking: false)
      #expect(instances.live == 200)
      table.shrinkIfSparse()
      #expect(table.capacity == ProbeTable.capacity(for: 200))
      #expect(instances.live == 200)
      #expect(Self.wrongValues(900..<1_000, in: table, instances, modulus: modulus) == [])
      table.removeAll()
      #expect(instances.live == 0)
      #expect(table.capacity == 0)
      // Shrinking after each removal, down to freeing the slots.
      Self.insert(0..<300, into: &table, instances, modulus: modulus)
      #expect(instances.live == 600)
      Self.remove(0..<300, from: &table, instances, modulus: modulus, shrinking: true)
      #expect(instances.live == 0)
      #expect(table.capacity == 0)
      // Left for the table's deinit.
      Self.insert(0..<500, into: &table, instances, modulus: modulus)
      Self.remove(0..<250, from: &table, instances, modulus: modulus, shrinking: true)
      #expect(instances.live == 500)
    }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
    #expect(instances.made > 0)
  }

  @Test func aTableLargeEnoughToMapItsOwnPagesKeepsEveryPairThroughGrowthAndShrinking() {
    let instances = LiveInstances()
    let count = 20_000
    let small = 100
    // The test is about the mapped pages: it must cross the threshold both ways.
    #expect(ProbeTable.capacity(for: count) * ProbeTable.slotStride >= ProbeTable.mappedBytes)
    #expect(ProbeTable.capacity(for: small) * ProbeTable.slotStride < ProbeTable.mappedBytes)
    do {
      var table = ProbeTable()
      // Every rebuild past the threshold starts from fresh pages, whose zero tags say empty.
      Self.insert(0..<count, into: &table, instances, modulus: .max)
      #expect(table.count == count)
      #expect(instances.live == 2 * count)
      #expect(Self.wrongValues(0..<count, in: table, instances, modulus: .max) == [])
      // Shrinking back under the threshold: from mapped pages to malloc's memory.
      Self.remove(small..<count, from: &table, instances, modulus: .max, shrinking: true)
      #expect(table.capacity * ProbeTable.slotStride < ProbeTable.mappedBytes)
      #expect(instances.live == 2 * small)
      #expect(Self.wrongValues(0..<small, in: table, instances, modulus: .max) == [])
      // Growing past it again, and left mapped for the table's deinit.
      Self.insert(small..<count, into: &table, instances, modulus: .max)
      #expect(table.capacity * ProbeTable.slotStride >= ProbeTable.mappedBytes)
      #expect(Self.wrongValues(0..<count, in: table, instances, modulus: .max) == [])
    }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }

  @Test func valuesBesideStringKeysAreDeinitialisedExactlyOnce() {
    let instances = LiveInstances()
    func key(_ id: Int) -> String { "a key long enough to live on the heap, number \(id)" }
    do {
      var table = KeyTable<String, LifetimeProbe>()
      for id in 0..<600 {
        _ = table.indexInserting(key(id), hash: key(id).hashValue, LifetimeProbe(id, instances, hashModulus: .max))
      }
      for id in 0..<550 {
        Self.remove(key(id), from: &table)
        table.shrinkIfSparse()
      }
      #expect(instances.live == 50)
      #expect(table.capacity == 256)  // 1024, then 512 below 128 keys, 256 below 64
      let wrong = (550..<600).filter { id in
        table.index(of: key(id), hash: key(id).hashValue).map { table.unsafeValuePointer(at: $0).pointee.id } != id
      }
      #expect(wrong == [])
    }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }

  // MARK: Layout and edges

  struct TwoWords: Equatable {
    var first: Int64
    var second: Int64
  }

  struct SixteenByteAligned: Equatable {
    var lanes: SIMD2<Double>
    var flag: UInt8
  }

  struct NoBytes: Hashable {}

  /// The keys whose value, written through `unsafeValuePointer(at:)`, is not what the slot holds, or
  /// whose pointer is not aligned for the value.
  static func misplacedValues<Key: Hashable, Value: Equatable>(
    _ keys: [Key], _ value: (Key) -> Value
  ) -> [Key] {
    var table = KeyTable<Key, Value>()
    for key in keys {
      let index = table.indexInserting(key, hash: key.hashValue, value(key))
      table.unsafeValuePointer(at: index).pointee = value(key)
    }
    return keys.filter { key in
      guard let index = table.index(of: key, hash: key.hashValue), let slots = table.unsafeSlots else { return true }
      let pointer = table.unsafeValuePointer(at: index)
      return KeyTable<Key, Value>.unsafeSlot(slots, index).pointee.value != value(key)
        || table.withValue(at: index, { $0 }) != value(key)
        || Int(bitPattern: pointer) % MemoryLayout<Value>.alignment != 0
    }
  }

  @Test func valuePointerAddressesTheValueInItsSlot() {
    let bytes = Array(UInt8.min...UInt8.max).filter { $0 % 3 != 0 }
    #expect(Self.misplacedValues(bytes) { SIMD4<Float>(Float($0), 1, 2, 3) } == [])
    #expect(Self.misplacedValues(bytes) { SixteenByteAligned(lanes: [Double($0), -1], flag: $0) } == [])
    let optionals = (0..<200).map { $0 % 7 == 0 ? nil : $0 }
    #expect(Self.misplacedValues(optionals) { SIMD4<Float>(Float($0 ?? -1), 0, 0, 0) } == [])
    #expect(Self.misplacedValues(bytes) { TwoWords(first: Int64($0), second: -Int64($0)) } == [])
    #expect(Self.misplacedValues(Array(0..<200)) { UInt8(truncatingIfNeeded: $0) } == [])
    #expect(Self.misplacedValues(Array(0..<200).map { "key \($0)" }) { [$0.count, $0.utf8.count] } == [])

    var table = KeyTable<Int, DebounceKeyState<Int>>()
    for key in 0..<100 {
      let index = table.indexInserting(key, hash: key.hashValue, DebounceKeyState())
      table.withValue(at: index) { state in
        state.lastCall = PaceInstant(nanoseconds: Int64(key))
        state.pending = key
      }
    }
    let slots = table.unsafeSlots!
    let wrong = (0..<100).filter { key in
      guard let index = table.index(of: key, hash: key.hashValue) else { return true }
      let state = KeyTable<Int, DebounceKeyState<Int>>.unsafeSlot(slots, index).pointee.value
      return state.lastCall != PaceInstant(nanoseconds: Int64(key)) || state.pending != key
        || state.armedDeadline != nil
    }
    #expect(wrong == [])
  }

  @Test func anEmptyTableHoldsNoMemoryAndFindsNothing() {
    var table = KeyTable<Int, Int>()
    #expect(table.index(of: 0, hash: 0.hashValue) == nil)
    #expect(table.index(of: 7, hash: 7.hashValue) == nil)
    #expect(table.capacity == 0)
    #expect(table.count == 0)
    #expect(table.occupiedSlots == [])
    var visited = 0
    table.forEachSlot { _ in visited += 1 }
    #expect(visited == 0)
    #expect(table.unsafePrefetchHint[0] == 0)
    KeyTable<Int, Int>.prefetch(table.unsafePrefetchHint, hash: 7.hashValue)
    table.shrinkIfSparse()
    #expect(table.capacity == 0)
    table.removeAll()
    #expect(table.capacity == 0)
    #expect(table.unsafePrefetchHint[0] == 0)
  }

  @Test func removeAllFreesTheSlotsAndTheTableCanBeUsedAgain() {
    var table = KeyTable<Int, Int>()
    for key in 0..<100 { _ = table.indexInserting(key, hash: key.hashValue, key) }
    #expect(table.capacity == 256)
    table.removeAll()
    #expect(table.count == 0)
    #expect(table.capacity == 0)
    #expect(table.unsafeSlots == nil)
    #expect((0..<100).allSatisfy { table.index(of: $0, hash: $0.hashValue) == nil })
    for key in 50..<60 { _ = table.indexInserting(key, hash: key.hashValue, -key) }
    #expect(table.capacity == 16)
    var coverage = Coverage()
    let expected = Dictionary(uniqueKeysWithValues: (50..<60).map { ($0, -$0) })
    #expect(Self.fullDifference(table, expected, coverage: &coverage) == nil)
  }

  @Test func capacityForACountLeavesAQuarterFree() {
    #expect((0...12).allSatisfy { KeyTable<Int, Int>.capacity(for: $0) == 16 })
    #expect((13...24).allSatisfy { KeyTable<Int, Int>.capacity(for: $0) == 32 })
    #expect((25...48).allSatisfy { KeyTable<Int, Int>.capacity(for: $0) == 64 })
    #expect((49...96).allSatisfy { KeyTable<Int, Int>.capacity(for: $0) == 128 })
    #expect(KeyTable<Int, Int>.capacity(for: 3 << 20) == 1 << 22)
    #expect(KeyTable<Int, Int>.capacity(for: 3 << 20 + 1) == 1 << 23)
    let wrong = (0...5_000).filter { count in
      let capacity = KeyTable<Int, Int>.capacity(for: count)
      let smallest = capacity == 16 || capacity / 2 / 4 * 3 < count
      return capacity.nonzeroBitCount != 1 || capacity / 4 * 3 < count || !smallest
    }
    #expect(wrong == [])
  }

  /// The hint follows the slots through growth, shrinking and `removeAll()`; `prefetch` with it
  /// is harmless in every state, an empty table's included.
  @Test func thePrefetchHintFollowsTheSlots() {
    var table = KeyTable<Int, Int>()
    var coverage = Coverage()
    #expect(table.unsafePrefetchHint[0] == 0)
    _ = table.indexInserting(1, hash: 1.hashValue, 1)
    #expect(table.unsafePrefetchHint[0] != 0)
    #expect(table.unsafePrefetchHint[0] == UInt(bitPattern: table.unsafeSlots))
    #expect(Self.structuralDifference(table, coverage: &coverage) == nil)
    var addresses: Set<UInt> = [table.unsafePrefetchHint[0]]
    for key in 2...1_000 {
      _ = table.indexInserting(key, hash: key.hashValue, key)
      addresses.insert(table.unsafePrefetchHint[0])
      KeyTable<Int, Int>.prefetch(table.unsafePrefetchHint, hash: (key * 7).hashValue)
    }
    #expect(Self.structuralDifference(table, coverage: &coverage) == nil)
    #expect(addresses.count >= 2)  // 16 to 2048 slots: some rebuild lands elsewhere
    for key in 1...990 {
      Self.remove(key, from: &table)
      table.shrinkIfSparse()
      KeyTable<Int, Int>.prefetch(table.unsafePrefetchHint, hash: key.hashValue)
    }
    #expect(table.capacity == 64)
    #expect(Self.structuralDifference(table, coverage: &coverage) == nil)
    table.removeAll()
    #expect(table.unsafePrefetchHint[0] == 0)
    KeyTable<Int, Int>.prefetch(table.unsafePrefetchHint, hash: 5.hashValue)
    _ = table.indexInserting(5, hash: 5.hashValue, 5)
    #expect(Self.structuralDifference(table, coverage: &coverage) == nil)
    #expect(table.unsafePrefetchHint[0] == UInt(bitPattern: table.unsafeSlots))
    Self.remove(5, from: &table)
    table.shrinkIfSparse()
    #expect(table.unsafePrefetchHint[0] == 0)
    KeyTable<Int, Int>.prefetch(table.unsafePrefetchHint, hash: 5.hashValue)
  }
}
