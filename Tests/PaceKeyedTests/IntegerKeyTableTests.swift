import PaceTestSupport
import Testing

@testable import Pace

/// The table a batcher keeps its ids and items' hash values in: seeded random operations against
/// a `Dictionary` (through every way of writing: the subscript, a change in place, `updateValue`,
/// `removeValue`), keys whose homes are all alike and runs of slots that wrap past the table's
/// end, the extremes of its key types, and the lifetimes of its values.
@Suite(.offThePool) struct IntegerKeyTableTests {
  typealias LiveInstances = KeyTableTests.LiveInstances
  typealias LifetimeProbe = KeyTableTests.LifetimeProbe

  /// A key of one of three kinds: from a small range (so that runs of slots form, collide and
  /// wrap), the next id of a counter, or any 64-bit value.
  static func key(_ generator: inout SeededGenerator, next: inout UInt64) -> UInt64 {
    switch Int.random(in: 0..<3, using: &generator) {
    case 0: return UInt64.random(in: 0..<48, using: &generator)
    case 1:
      next &+= 1
      return next
    default:
      let extremes: [UInt64] = [0, 1, 1 << 63, .max - 1, .max]
      guard Bool.random(using: &generator) else { return UInt64.random(in: .min ... .max, using: &generator) }
      return extremes[Int.random(in: 0..<extremes.count, using: &generator)]
    }
  }

  @Test(arguments: 0..<40)
  func matchesADictionaryOnRandomOperations(seed: UInt64) {
    var generator = SeededGenerator(seed: seed)
    var table = IntegerKeyTable<UInt64, Int>()
    var model: [UInt64: Int] = [:]
    var next: UInt64 = 1_000
    for step in 0..<3_000 {
      // Writes more often than removals, so that the table fills and grows.
      let key = Self.key(&generator, next: &next)
      let value = Int.random(in: 0..<1_000, using: &generator)
      switch Int.random(in: 0..<7, using: &generator) {
      case 0, 1:
        table[key] = value
        model[key] = value
      case 2:
        #expect(
          table.updateValue(value, forKey: key) == model.updateValue(value, forKey: key), "seed \(seed), step \(step)")
      case 3:
        #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key), "seed \(seed), step \(step)")
      case 4:
        table[key] = nil
        model[key] = nil
      case 5:
        // A change in place: only a key present changes.
        table[key]? += 1
        model[key]? += 1
      default:
        // One read-and-write that removes a present key or inserts an absent one.
        Self.toggle(&table[key], value)
        Self.toggle(&model[key], value)
      }
      // The first step that goes wrong is reported, and the seed's run ends there.
      let differences = step % 100 == 99 ? Self.differences(table, model) : []
      guard table[key] == model[key], table.count == model.count, table.isEmpty == model.isEmpty, differences.isEmpty
      else {
        Issue.record(
          """
          seed \(seed), step \(step): key \(key) holds \(String(describing: table[key])), expected \
          \(String(describing: model[key])); \(table.count) keys, expected \(model.count); \(differences)
          """)
        return
      }
    }
    #expect(Self.differences(table, model) == [], "seed \(seed)")
    for key in model.keys {
      let removed = table.removeValue(forKey: key)
      guard removed == model[key] else {
        Issue.record(
          "seed \(seed): removing \(key) gave \(String(describing: removed)), expected \(String(describing: model[key]))"
        )
        return
      }
    }
    #expect(table.isEmpty && table.count == 0, "seed \(seed)")
  }

  static func toggle(_ slot: inout Int?, _ value: Int) {
    slot = slot == nil ? value : nil
  }

  /// The first few keys whose values differ between what `forEach` reports and `model` (`nil`
  /// where one has none), so that a failure names them rather than two tables of thousands.
  static func differences(_ table: IntegerKeyTable<UInt64, Int>, _ model: [UInt64: Int]) -> [String] {
    let contents = contents(of: table)
    let keys = Set(contents.keys).union(model.keys)
    let differing = keys.filter { contents[$0] != model[$0] }.sorted().prefix(5)
    return differing.map {
      "\($0): \(contents[$0].map(String.init) ?? "nil") in the table, \(model[$0].map(String.init) ?? "nil") expected"
    }
  }

  /// The keys and values `forEach` reports, each key once.
  static func contents<Key: FixedWidthInteger>(of table: IntegerKeyTable<Key, Int>) -> [Key: Int] {
    var contents: [Key: Int] = [:]
    var repeated = 0
    table.forEach { key, value in
      if contents.updateValue(value, forKey: key) != nil { repeated += 1 }
    }
    #expect(repeated == 0)
    return contents
  }

  /// Keys whose homes in `table`, which has slots, are all `home`, found by trying (a table's
  /// homes depend on its seed).
  static func keys(withHome home: Int, count: Int, in table: IntegerKeyTable<Int, Int>) -> [Int] {
    Array((0...).lazy.filter { table.home(of: $0) == home }.prefix(count))
  }

  @Test(arguments: 0..<7)
  func aRunThatWrapsPastTheEndKeepsEveryKeyAfterARemovalAnywhereInIt(removed: Int) {
    var table = IntegerKeyTable<Int, Int>()
    table.grow()
    #expect(table.capacity == 16)
    // Six keys whose home is the last of 16 slots: their run fills slots 15, 0, 1, 2, 3 and 4.
    let colliding = Self.keys(withHome: 15, count: 6, in: table)
    // And a key at home in slot 1, which the run has taken: it goes after the run.
    let other = Self.keys(withHome: 1, count: 1, in: table)[0]
    let keys = colliding + [other]
    for key in keys { table[key] = key }
    #expect(table.capacity == 16, "no growth: the homes stay those the keys were chosen for")
    let removedKey = keys[removed]
    #expect(table.removeValue(forKey: removedKey) == removedKey)
    for key in keys where key != removedKey {
      #expect(table[key] == key, "after removing \(removedKey)")
    }
    #expect(table[removedKey] == nil && table.count == 6)
  }

  @Test func theExtremesOfTheKeyTypesAreKeysLikeAnyOther() {
    var signed = IntegerKeyTable<Int, Int>()
    let signedKeys = [Int.min, Int.min + 1, -1, 0, 1, Int.max - 1, Int.max]
    for (index, key) in signedKeys.enumerated() { signed[key] = index }
    for (index, key) in signedKeys.enumerated() { #expect(signed[key] == index) }
    var unsigned = IntegerKeyTable<UInt64, Int>()
    let unsignedKeys: [UInt64] = [0, 1, 1 << 63, .max - 1, .max]
    for (index, key) in unsignedKeys.enumerated() { unsigned[key] = index }
    for (index, key) in unsignedKeys.enumerated() { #expect(unsigned.removeValue(forKey: key) == index) }
    #expect(unsigned.isEmpty)
  }

  @Test func anEmptyTableHoldsNoSlotsUntilAKeyIsStored() {
    var table = IntegerKeyTable<UInt64, Int>()
    #expect(table[7] == nil && table.removeValue(forKey: 7) == nil)
    // A read-and-write that stores nothing allocates nothing.
    table[7]? += 1
    table[7] = nil
    #expect(table.capacity == 0)
    table[7] = 1
    #expect(table.capacity == 16 && table.count == 1)
    // Growth keeps 3/4 at most: the 13th key doubles the slots.
    for key in 100..<111 as Range<UInt64> { table[key] = 0 }
    #expect(table.count == 12 && table.capacity == 16)
    table[111] = 0
    #expect(table.count == 13 && table.capacity == 32)
  }

  @Test func valuesLiveWhileTheTableHoldsThem() {
    let instances = LiveInstances()
    do {
      var table = IntegerKeyTable<UInt64, LifetimeProbe>()
      for id in 0..<40 { table[UInt64(id)] = LifetimeProbe(id, instances, hashModulus: .max) }
      #expect(instances.live == 40)
      // Replaced, removed, removed in place, and kept across growth.
      table[0] = LifetimeProbe(100, instances, hashModulus: .max)
      #expect(table.removeValue(forKey: 1)?.id == 1)
      table[2] = nil
      let copy = table
      table[3] = nil
      #expect(copy[3]?.id == 3, "a copy keeps its own values")
      #expect(instances.live == 38)
      _ = copy
    }
    #expect(instances.live == 0 && instances.deinitialisedTwice == 0)
  }
}
