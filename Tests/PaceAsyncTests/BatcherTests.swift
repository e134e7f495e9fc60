import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// An error a test's `send` throws.
private struct SendFailed: Error, Equatable {}

/// `BatchMachine` driven directly: one event, one expected action.
@Suite struct BatchMachineTests {
  typealias Action = BatchAction<String>

  func machine(
    maxCount: Int = 3, maxWait: Int64 = 100, maxInFlight: Int = 1, capacity: Int = 100,
    overflow: BatchOverflow = .suspend
  ) -> BatchMachine<String> {
    BatchMachine(
      maxCount: maxCount, maxWaitNanoseconds: maxWait * 1_000_000, maxInFlight: maxInFlight, capacity: capacity,
      overflow: overflow)
  }

  @Test func aBatchIsDueAtMaxCountAtMaxWaitOrOnFlush() {
    var batcher = machine()
    #expect(
      batcher.add("a", caller: 1, joins: true, now: ms(0))
        == Action(admitted: [.init(caller: 1, entry: 1)], arm: ms(100)))
    #expect(batcher.add("b", caller: 2, joins: true, now: ms(10)) == Action(admitted: [.init(caller: 2, entry: 2)]))
    #expect(
      batcher.add("c", caller: 3, joins: true, now: ms(20))
        == Action(
          admitted: [.init(caller: 3, entry: 3)], batches: [.init(id: 1, entries: [1, 2, 3], items: ["a", "b", "c"])]))
    #expect(batcher.batchEnded(now: ms(30)) == Action())
    // The timer armed for "a" is kept: it fires first, finds nothing due, and arms for "d".
    #expect(batcher.add("d", caller: 4, joins: true, now: ms(40)) == Action(admitted: [.init(caller: 4, entry: 4)]))
    #expect(batcher.timerFired(now: ms(100)) == Action(arm: ms(140)))
    #expect(batcher.timerFired(now: ms(140)) == Action(batches: [.init(id: 2, entries: [4], items: ["d"])]))
    #expect(batcher.batchEnded(now: ms(150)) == Action())
    _ = batcher.add("e", caller: 5, joins: false, now: ms(150))
    #expect(batcher.flush(now: ms(160)) == Action(batches: [.init(id: 3, entries: [5], items: ["e"])]))
  }

  @Test func aLoadJoinsABufferedEntryOfItsItemAndASubmitDoesNot() {
    var batcher = machine()
    _ = batcher.add("a", caller: 1, joins: true, now: ms(0))
    #expect(batcher.add("a", caller: 2, joins: true, now: ms(0)) == Action(admitted: [.init(caller: 2, entry: 1)]))
    #expect(batcher.add("a", caller: 3, joins: false, now: ms(0)) == Action(admitted: [.init(caller: 3, entry: 2)]))
    #expect(batcher.bufferedCount == 2)
  }

  @Test func aDueBatchWaitsForASlotAndTheEndOfABatchSendsIt() {
    var batcher = machine(maxCount: 2)
    _ = batcher.add("a", caller: 1, joins: true, now: ms(0))
    #expect(batcher.add("b", caller: 2, joins: true, now: ms(0)).batches.count == 1)
    _ = batcher.add("c", caller: 3, joins: true, now: ms(10))
    #expect(
      batcher.add("d", caller: 4, joins: true, now: ms(20))
        == Action(admitted: [.init(caller: 4, entry: 4)]))
    _ = batcher.add("e", caller: 5, joins: true, now: ms(30))
    #expect(batcher.batchEnded(now: ms(500)) == Action(batches: [.init(id: 2, entries: [3, 4], items: ["c", "d"])]))
    #expect(batcher.batchEnded(now: ms(600)) == Action(batches: [.init(id: 3, entries: [5], items: ["e"])]))
  }

  @Test func overflowRejectsDropsTheOldestOrSuspends() {
    var rejecting = machine(maxCount: 10, capacity: 2, overflow: .reject)
    _ = rejecting.add("a", caller: 1, joins: true, now: ms(0))
    _ = rejecting.add("b", caller: 2, joins: true, now: ms(0))
    #expect(rejecting.add("c", caller: 3, joins: true, now: ms(0)) == Action(rejected: 3))
    #expect(rejecting.add("a", caller: 4, joins: true, now: ms(0)) == Action(admitted: [.init(caller: 4, entry: 1)]))

    var dropping = machine(maxCount: 10, capacity: 2, overflow: .dropOldest)
    _ = dropping.add("a", caller: 1, joins: true, now: ms(0))
    _ = dropping.add("b", caller: 2, joins: true, now: ms(50))
    // "b" is now the oldest: the timer armed for "a" fires first and arms for "b".
    #expect(
      dropping.add("c", caller: 3, joins: true, now: ms(60))
        == Action(admitted: [.init(caller: 3, entry: 3)], dropped: [1]))
    #expect(dropping.timerFired(now: ms(100)) == Action(arm: ms(150)))

    var suspending = machine(maxCount: 2, capacity: 2, overflow: .suspend)
    _ = suspending.add("a", caller: 1, joins: true, now: ms(0))
    _ = suspending.add("b", caller: 2, joins: true, now: ms(0))  // sent
    _ = suspending.add("c", caller: 3, joins: true, now: ms(0))
    _ = suspending.add("d", caller: 4, joins: true, now: ms(0))  // due, no slot
    #expect(suspending.add("e", caller: 5, joins: true, now: ms(0)) == Action())
    #expect(suspending.add("f", caller: 6, joins: true, now: ms(0)) == Action())
    #expect(suspending.waitingCount == 2)
    #expect(suspending.cancel(caller: 6) == Action(refused: 6))
    #expect(suspending.cancel(caller: 6) == Action())
    #expect(
      suspending.batchEnded(now: ms(70))
        == Action(
          admitted: [.init(caller: 5, entry: 5)], batches: [.init(id: 2, entries: [3, 4], items: ["c", "d"])]))
    #expect(suspending.timerFired(now: ms(100)) == Action(arm: ms(170)))  // armed for "a"
  }

  @Test func aSubmitBehindAWaitingItemIsBufferedQuietlyUnlessItFillsTheBatch() {
    var batcher = machine(maxCount: 4)
    #expect(batcher.bufferQuietly("a", hash: nil) == false)  // the first item reads the clock: its maxWait starts
    #expect(batcher.buffer("a", hash: nil, now: ms(0)) == Action(arm: ms(100)))
    #expect(batcher.bufferQuietly("b", hash: nil) == true)
    #expect(batcher.bufferQuietly("c", hash: nil) == true)
    #expect(batcher.bufferQuietly("d", hash: nil) == false)  // it fills the batch
    #expect(batcher.bufferedCount == 3)
    #expect(
      batcher.buffer("d", hash: nil, now: ms(50))
        == Action(batches: [.init(id: 1, entries: [1, 2, 3, 4], items: ["a", "b", "c", "d"])]))
    // The next batch's first item starts its own maxWait, and the timer armed for "a" is kept
    // until it fires.
    #expect(batcher.bufferQuietly("e", hash: nil) == false)
    #expect(batcher.buffer("e", hash: nil, now: ms(60)) == Action())
    #expect(batcher.bufferQuietly("f", hash: nil) == true)
    #expect(batcher.timerFired(now: ms(100)) == Action(arm: ms(160)))
    #expect(batcher.timerFired(now: ms(160)) == Action())  // due, but the slot is taken
    // While a due batch waits for a slot, the items behind it wait too, quietly, except the one
    // that will be the next batch's first.
    #expect(batcher.bufferQuietly("g", hash: nil) == true)
    #expect(batcher.bufferQuietly("h", hash: nil) == true)
    #expect(batcher.bufferQuietly("i", hash: nil) == false)
    #expect(batcher.buffer("i", hash: nil, now: ms(165)) == Action())
    #expect(batcher.bufferQuietly("j", hash: nil) == true)
    #expect(
      batcher.batchEnded(now: ms(170))
        == Action(
          batches: [.init(id: 2, entries: [5, 6, 7, 8], items: ["e", "f", "g", "h"])], arm: ms(265)))
    #expect(batcher.bufferQuietly("k", hash: nil) == true)
    #expect(batcher.timerFired(now: ms(265)) == Action())
    #expect(
      batcher.batchEnded(now: ms(270))
        == Action(batches: [.init(id: 3, entries: [9, 10, 11], items: ["i", "j", "k"])]))
  }

  @Test func aDroppingBatcherAndABatchOfOneAlwaysReadTheClock() {
    var dropping = machine(maxCount: 4, capacity: 2, overflow: .dropOldest)
    _ = dropping.buffer("a", hash: nil, now: ms(0))
    #expect(dropping.bufferQuietly("b", hash: nil) == false)
    var single = machine(maxCount: 1, maxInFlight: 1)
    _ = single.buffer("a", hash: nil, now: ms(0))
    #expect(single.bufferQuietly("b", hash: nil) == false)
  }

  @Test func hostileDurationsSaturate() {
    var forever = machine(maxWait: .max / 1_000_000)
    #expect(
      forever.add("a", caller: 1, joins: true, now: ms(5))
        == Action(admitted: [.init(caller: 1, entry: 1)], arm: .max))
    #expect(forever.timerFired(now: .max) == Action(batches: [.init(id: 1, entries: [1], items: ["a"])]))
    var never = machine(maxWait: 0)
    #expect(never.add("a", caller: 1, joins: true, now: .max).batches.count == 1)
  }
}

/// The machine against a reference model written the obvious way (arrays, linear scans), on
/// seeded random timelines: the same admissions, refusals, drops and batches.
@Suite(.offThePool) struct BatchReferenceModelTests {
  struct Model {
    let maxCount: Int
    let maxWait: Int64
    let maxInFlight: Int
    let capacity: Int
    let overflow: BatchOverflow
    var buffer: [(id: UInt64, item: Int, arrival: Int64, flushed: Bool)] = []
    var waiters: [(caller: UInt64, item: Int, joins: Bool)] = []
    var inFlight = 0
    var lastEntry: UInt64 = 0
    var lastBatch: UInt64 = 0

    func joinable(_ item: Int) -> UInt64? { buffer.last { $0.item == item }?.id }

    mutating func append(_ item: Int, now: Int64) -> UInt64 {
      lastEntry += 1
      buffer.append((lastEntry, item, now, false))
      return lastEntry
    }

    mutating func add(_ item: Int, caller: UInt64, joins: Bool, now: Int64) -> BatchAction<Int> {
      var action = BatchAction<Int>()
      if joins, let id = joinable(item) {
        action.admitted = [.init(caller: caller, entry: id)]
      } else if buffer.count < capacity {
        action.admitted = [.init(caller: caller, entry: append(item, now: now))]
      } else if overflow == .reject {
        action.rejected = caller
        return action
      } else if overflow == .dropOldest {
        action.dropped = [buffer.removeFirst().id]
        action.admitted = [.init(caller: caller, entry: append(item, now: now))]
      } else {
        waiters.append((caller, item, joins))
      }
      send(now: now, into: &action)
      return action
    }

    mutating func send(now: Int64, into action: inout BatchAction<Int>) {
      func due() -> Bool {
        guard let first = buffer.first else { return false }
        return buffer.count >= maxCount || first.flushed || first.arrival.addingSaturating(maxWait) <= now
      }
      while inFlight < maxInFlight, due() {
        let batch = Array(buffer.prefix(maxCount))
        buffer.removeFirst(batch.count)
        lastBatch += 1
        inFlight += 1
        action.batches.append(.init(id: lastBatch, entries: batch.map(\.id), items: batch.map(\.item)))
        while let waiter = waiters.first {
          if waiter.joins, let id = joinable(waiter.item) {
            action.admitted.append(.init(caller: waiter.caller, entry: id))
          } else if buffer.count < capacity {
            action.admitted.append(.init(caller: waiter.caller, entry: append(waiter.item, now: now)))
          } else {
            break
          }
          waiters.removeFirst()
        }
      }
    }
  }

  @Test func theMachineAgreesWithTheReferenceModel() {
    for seed in 0..<UInt64(fuzzRuns(300)) {
      var random = SeededGenerator(seed: seed)
      let overflow = [BatchOverflow.suspend, .dropOldest, .reject][Int.random(in: 0..<3, using: &random)]
      let maxCount = Int.random(in: 1...4, using: &random)
      let maxWait = Int64.random(in: 0...200, using: &random)
      let maxInFlight = Int.random(in: 1...2, using: &random)
      let capacity = Int.random(in: 1...6, using: &random)
      // A third of the runs only submit: their items are never hashed. Half the runs hash items
      // by their lowest bit, so that unequal items (0 and 2, 1 and 3) hash alike.
      let loads = seed % 3 != 0
      let identity =
        seed % 2 == 0 ? BatchIdentity<Int>(hash: { $0 & 1 }, areEqual: { $0 == $1 }) : BatchIdentity<Int>.hashable
      var machine = BatchMachine<Int>(
        maxCount: maxCount, maxWaitNanoseconds: maxWait * 1_000_000, maxInFlight: maxInFlight, capacity: capacity,
        overflow: overflow)
      var model = Model(
        maxCount: maxCount, maxWait: maxWait, maxInFlight: maxInFlight, capacity: capacity, overflow: overflow)
      var now: Int64 = 0
      var caller: UInt64 = 0
      var armed: Int64?
      for _ in 0..<200 {
        let event = Int.random(in: 0..<10, using: &random)
        now += Int64.random(in: 0...60, using: &random)
        // The timer fires first if it is due.
        if let deadline = armed, deadline <= now {
          now = deadline
          armed = nil
          var expected = BatchAction<Int>()
          model.send(now: now, into: &expected)
          let action = machine.timerFired(now: ms(now))
          #expect(action.batches == expected.batches && action.admitted == expected.admitted, "seed \(seed)")
          track(action.arm, &armed)
          continue
        }
        let action: BatchAction<Int>
        var expected = BatchAction<Int>()
        switch event {
        case 0..<6:
          caller += 1
          let item = Int.random(in: 0..<4, using: &random)
          let joins = loads && Bool.random(using: &random)
          expected = model.add(item, caller: caller, joins: joins, now: now)
          // The driver's path: keys are made from the first `load` on (the items buffered before
          // it are indexed then); a load that joins, and a call that finds room behind items that
          // wait, are taken quietly where the machine can.
          if joins, !machine.indexesKeys { machine.indexKeys(identity) }
          let hash = machine.indexesKeys ? identity.hash(item) : nil
          let quietEntry =
            hash == nil
            ? (machine.hasRoom && machine.bufferQuietly(item) ? machine.lastEntry : nil)
            : machine.addQuietly(item, hash: hash, joins: joins)
          if let quietEntry {
            action = BatchAction(admitted: [.init(caller: caller, entry: quietEntry)])
          } else {
            action = machine.add(item, hash: hash, caller: caller, joins: joins, now: ms(now))
          }
        case 6:
          for index in model.buffer.indices { model.buffer[index].flushed = true }
          model.send(now: now, into: &expected)
          action = machine.flush(now: ms(now))
        case 7:
          guard let waiter = model.waiters.randomElement(using: &random) else { continue }
          model.waiters.removeAll { $0.caller == waiter.caller }
          expected.refused = waiter.caller
          action = machine.cancel(caller: waiter.caller)
        default:
          guard model.inFlight > 0 else { continue }
          model.inFlight -= 1
          model.send(now: now, into: &expected)
          action = machine.batchEnded(now: ms(now))
        }
        var compared = action
        compared.arm = nil
        #expect(compared == expected, "seed \(seed)")
        track(action.arm, &armed)
        // While the oldest item waits only for maxWait, the timer is armed for then or before (an
        // earlier timer is kept: it fires, and the model agrees that nothing is due).
        let waitsForMaxWait =
          model.buffer.first.map { first in
            model.buffer.count < maxCount && !first.flushed && first.arrival + maxWait > now
          } ?? false
        if waitsForMaxWait {
          #expect(armed.map { $0 <= model.buffer[0].arrival + maxWait } == true, "seed \(seed)")
        }
        #expect(machine.bufferedCount == model.buffer.count && machine.inFlight == model.inFlight, "seed \(seed)")
      }
    }
  }

  func track(_ arm: PaceInstant?, _ armed: inout Int64?) {
    if let arm { armed = arm.nanoseconds / 1_000_000 }
  }
}

/// A `send` that records each batch with its virtual time, and waits for the test's word when
/// asked to.
final class BatchLog: Sendable {
  let scheduler: TestScheduler
  let sent = Signals<(items: [Int], at: PaceInstant)>()
  /// Each batch waits for a post here, if `holds`.
  let release = Signals<Void>()
  let holds: Bool

  init(scheduler: TestScheduler, holds: Bool = false) {
    self.scheduler = scheduler
    self.holds = holds
  }

  func send(_ items: [Int]) async throws -> [Int: Int] {
    sent.post((items, scheduler.now))
    if holds { await release.next() }
    return Dictionary(uniqueKeysWithValues: items.map { ($0, $0 * 10) })
  }
}

/// `Batcher` on virtual time, with exact times.
@Suite(.timeLimit(.minutes(3))) struct BatcherTests {
  let scheduler = TestScheduler()

  @Test func aBatchIsSentWhenMaxCountItemsWait() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 3, maximumWait: .seconds(1), clock: scheduler, send: log.send)
    let first = Task { try await batcher.load(1) }
    let second = Task { try await batcher.load(2) }
    _ = await batcher.waitUntilLoaderCount(2)
    #expect(scheduler.pendingDeadlines == [ms(1000)])
    scheduler.advance(to: ms(200))
    let third = Task { try await batcher.load(3) }
    let batch = await log.sent.next()
    #expect(Set(batch.items) == [1, 2, 3])
    #expect(batch.at == ms(200))
    #expect(try await [first.value, second.value, third.value] == [10, 20, 30])
    // The timer armed for 1 is kept: it fires, finds nothing due, and arms nothing.
    #expect(scheduler.pendingDeadlines == [ms(1000)])
    scheduler.advance(to: ms(1000))
    #expect(scheduler.pendingCount == 0)
    #expect(batcher.sentBatchCount == 1)
  }

  @Test func aBatchIsSentMaxWaitAfterItsFirstItem() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 10, maximumWait: .milliseconds(100), clock: scheduler, send: log.send)
    try await batcher.submit(1)
    scheduler.advance(to: ms(50))
    try await batcher.submit(2)
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(to: ms(99))
    #expect(batcher.bufferedCount == 2)
    scheduler.advance(to: ms(100))
    let batch = await log.sent.next()
    #expect(batch.items == [1, 2])
    #expect(batch.at == ms(100))
  }

  /// An item's hash value and equality are the same whether its type is `Hashable` (a `load`'s)
  /// or it is found `Hashable` at run time (a `submit`'s, to a batcher of any item); an item that
  /// is not `Hashable` has no hash value, and items of different types are unequal.
  @Test func bothIdentitiesHashAndCompareEqualItemsAlike() {
    let statically = BatchIdentity<String>.hashable
    let dynamically = BatchIdentity<String>.ifHashable
    #expect(statically.hash("tap") == "tap".hashValue && dynamically.hash("tap") == "tap".hashValue)
    #expect(statically.areEqual("tap", "tap") && dynamically.areEqual("tap", "tap"))
    #expect(!statically.areEqual("tap", "open") && !dynamically.areEqual("tap", "open"))
    let anyItem = BatchIdentity<any Sendable>.ifHashable
    #expect(anyItem.hash(7) == 7.hashValue)
    #expect(!anyItem.areEqual("7", 7) && anyItem.areEqual(7, 7))
    #expect(anyItem.hash((1, 2)) == nil && !anyItem.areEqual((1, 2), (1, 2)))
  }

  /// An item whose every value hashes alike: entries are found by hash value, then compared.
  struct Colliding: Hashable, Sendable {
    let id: Int
    func hash(into hasher: inout Hasher) { hasher.combine(0) }
  }

  /// Two entries whose items hash alike are still told apart by their items: loads of unequal
  /// items that hash alike do not join, and each is sent, while an equal item joins its own entry,
  /// the newest of the hash value or an older one it links to.
  @Test func itemsThatHashAlikeJoinOnlyEqualItems() {
    #expect(Colliding(id: 1).hashValue == Colliding(id: 2).hashValue)
    let hash = Colliding(id: 1).hashValue
    var machine = BatchMachine<Colliding>(
      maxCount: 10, maxWaitNanoseconds: 100_000_000, maxInFlight: 1, capacity: 10, overflow: .suspend)
    machine.indexKeys(.hashable)
    #expect(machine.add(Colliding(id: 1), caller: 1, joins: true, now: ms(0)).admitted == [.init(caller: 1, entry: 1)])
    #expect(machine.addQuietly(Colliding(id: 2), hash: hash, joins: true) == 2)
    #expect(machine.addQuietly(Colliding(id: 3), hash: hash, joins: true) == 3)
    // The newest of the hash value is entry 3: entry 1 is found through the links.
    #expect(machine.addQuietly(Colliding(id: 1), hash: hash, joins: true) == 1)
    #expect(machine.add(Colliding(id: 2), caller: 5, joins: true, now: ms(1)).admitted == [.init(caller: 5, entry: 2)])
    #expect(
      machine.flush(now: ms(2)).batches == [
        .init(id: 1, entries: [1, 2, 3], items: [.init(id: 1), .init(id: 2), .init(id: 3)])
      ])
    // Sent: the hash value is forgotten, and a new load of any of them is a new entry.
    #expect(machine.add(Colliding(id: 1), caller: 6, joins: true, now: ms(3)).admitted == [.init(caller: 6, entry: 4)])
  }

  /// Entries leave the buffer oldest first: an entry sent while a newer one of its hash value
  /// stays buffered is still linked from it, and a load of its item passes it over as sent.
  @Test func anItemSentIsNotJoinedThroughANewerOneThatHashesAlike() {
    var machine = BatchMachine<Colliding>(
      maxCount: 1, maxWaitNanoseconds: 100_000_000, maxInFlight: 1, capacity: 10, overflow: .suspend)
    func load(_ id: Int, caller: UInt64, at now: Int64) -> BatchAction<Colliding> {
      machine.add(Colliding(id: id), caller: caller, joins: true, now: ms(now))
    }
    // Entry 1 takes the one slot; entries 2 (item 1) and 3 (item 2, linked to 2) wait for it.
    #expect(load(9, caller: 1, at: 0).batches.map(\.entries) == [1..<2])
    #expect(load(1, caller: 2, at: 0).admitted == [.init(caller: 2, entry: 2)])
    #expect(load(2, caller: 3, at: 0).admitted == [.init(caller: 3, entry: 3)])
    // The slot is free: entry 2 is sent, and entry 3, still buffered, links to it.
    #expect(machine.batchEnded(now: ms(1)).batches.map(\.entries) == [2..<3])
    #expect(load(1, caller: 4, at: 1).admitted == [.init(caller: 4, entry: 4)])
    #expect(load(2, caller: 5, at: 1).admitted == [.init(caller: 5, entry: 3)])
    #expect(load(1, caller: 6, at: 1).admitted == [.init(caller: 6, entry: 4)])
  }

  /// A batcher indexes its items by key only from its first `load` (a batcher that only submits
  /// makes and hashes no key): items submitted before it are indexed then, so the load joins an
  /// equal one, which is sent once; so are those submitted after, and a submit waiting for room.
  @Test func aLoadJoinsAnItemSubmittedBeforeTheFirstLoad() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(
      maximumCount: 4, maximumWait: .milliseconds(100), bufferCapacity: 3, clock: scheduler, send: log.send)
    try await batcher.submit(1)
    try await batcher.submit(2)
    let first = Task { try await batcher.load(1) }
    #expect(await batcher.waitUntilLoaderCount(1, timeout: .seconds(10)))
    try await batcher.submit(3)
    let waitingForRoom = Task { try await batcher.submit(4) }
    #expect(await batcher.waitUntilWaitingCount(1, timeout: .seconds(10)))
    let second = Task { try await batcher.load(3) }
    #expect(await batcher.waitUntilLoaderCount(2, timeout: .seconds(10)))
    #expect(batcher.bufferedCount == 3)
    scheduler.advance(to: ms(100))
    let batch = await log.sent.next()
    #expect(batch.items == [1, 2, 3])
    #expect(try await [first.value, second.value] == [10, 30])
    try await waitingForRoom.value
    #expect(batcher.bufferedCount == 1)
  }

  @Test func flushSendsWhatIsBufferedAtOnce() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(60), clock: scheduler, send: log.send)
    for item in 1...5 { try await batcher.submit(item) }  // [1, 2] and [3, 4] are sent
    scheduler.advance(to: ms(30))
    batcher.flush()
    var batches: [[Int]] = []
    for _ in 0..<3 {
      let batch = await log.sent.next()
      batches.append(batch.items)
    }
    #expect(batches == [[1, 2], [3, 4], [5]])
    #expect(batcher.bufferedCount == 0)
    #expect(scheduler.pendingDeadlines == [ms(60_000)])  // armed for 1, kept: it will find nothing due
  }

  /// Where a load's bookkeeping runs: on a plain task's executor, or off the main actor that
  /// called it with `isolation: nil`.
  enum LoadCaller: CaseIterable, Sendable {
    case plainTask, mainActorWithoutIsolation

    func load(_ item: Int, from batcher: Batcher<Int, Int>) -> Task<Int, any Error> {
      switch self {
      case .plainTask: Task { try await batcher.load(item) }
      case .mainActorWithoutIsolation: Task { @MainActor in try await batcher.load(item, isolation: nil) }
      }
    }
  }

  /// Equal items loaded before their batch goes are sent once, and each loader gets the output,
  /// wherever the loads' bookkeeping runs.
  @Test(arguments: LoadCaller.allCases)
  func duplicateLoadsInOneBatchAreSentOnce(from caller: LoadCaller) async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 10, maximumWait: .milliseconds(100), clock: scheduler, send: log.send)
    let loads = [7, 7, 8, 7].map { caller.load($0, from: batcher) }
    _ = await batcher.waitUntilLoaderCount(4)
    #expect(batcher.bufferedCount == 2)
    scheduler.advance(to: ms(100))
    #expect(await log.sent.next().items.sorted() == [7, 8])
    var outputs: [Int] = []
    for load in loads { outputs.append(try await load.value) }
    #expect(outputs == [70, 70, 80, 70])
  }

  /// A load runs its bookkeeping on its caller's actor: loads the main actor starts one after
  /// another are batched in that order, which `isolation: nil` gives up.
  @MainActor @Test func loadsFromTheMainActorAreBatchedInTheOrderItStartsThem() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 10, maximumWait: .milliseconds(100), clock: scheduler, send: log.send)
    let loads = [5, 3, 9, 1, 7].map { item in Task { @MainActor in try await batcher.load(item) } }
    _ = await batcher.waitUntilLoaderCount(5)
    scheduler.advance(to: ms(100))
    #expect(await log.sent.next().items == [5, 3, 9, 1, 7])
    for load in loads { _ = try await load.value }
  }

  @Test func aFailedBatchGivesEachItemItsErrorAndAMissingOutputIsReported() async throws {
    let failing = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(1), clock: scheduler) { _ in
      throw SendFailed()
    }
    let first = Task { try await failing.load(1) }
    let second = Task { try await failing.load(2) }
    await #expect(throws: SendFailed.self) { try await first.value }
    await #expect(throws: SendFailed.self) { try await second.value }

    let partial = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(1), clock: scheduler) { _ in [1: 10] }
    let answered = Task { try await partial.load(1) }
    let missing = Task { try await partial.load(2) }
    #expect(try await answered.value == 10)
    await #expect(throws: BatcherError.noResult) { try await missing.value }
  }

  @Test func batchesAreSentInOrderAtMostMaxInFlightAtOnce() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let batcher = Batcher<Int, Int>(
      maximumCount: 2, maximumWait: .seconds(1), maximumInFlight: 2, clock: scheduler, send: log.send)
    for item in 1...6 { try await batcher.submit(item) }
    // The two sends run at once, each in its own task: either may log first.
    let firstTwo = [await log.sent.next().items, await log.sent.next().items]
    #expect(firstTwo.sorted { $0[0] < $1[0] } == [[1, 2], [3, 4]])
    #expect(batcher.inFlightCount == 2)
    #expect(batcher.bufferedCount == 2)  // [5, 6] is due and waits for a slot
    #expect(scheduler.pendingDeadlines == [ms(1000)])  // armed for 1, kept: [5, 6] waits for a slot, not for it
    scheduler.advance(to: ms(500))
    log.release.post(())
    let third = await log.sent.next()
    #expect(third.items == [5, 6])
    #expect(third.at == ms(500))
    log.release.post(())
    log.release.post(())
  }

  @Test func batchesThatWaitedForTheSlotAreSentInOrderByTheTaskThatFreedIt() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let senders = LockedState<[Int]>([])
    let batcher = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(1), clock: scheduler) { items in
      senders.withLock { $0.append(withUnsafeCurrentTask { $0?.hashValue } ?? 0) }
      return try await log.send(items)
    }
    for item in 1...6 { try await batcher.submit(item) }
    #expect(await log.sent.next().items == [1, 2])
    #expect(batcher.bufferedCount == 4)  // [3, 4] and [5, 6] wait for the slot
    log.release.post(())
    #expect(await log.sent.next().items == [3, 4])
    log.release.post(())
    #expect(await log.sent.next().items == [5, 6])
    log.release.post(())
    let tasks = senders.withLock { $0 }
    #expect(tasks.count == 3)
    #expect(Set(tasks).count == 1)  // one task sent all three: no task started, nor thread woken, per batch
  }

  @Test func aFullBufferRejects() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(
      maximumCount: 10, maximumWait: .seconds(1), bufferCapacity: 2, overflow: .reject, clock: scheduler, send: log.send
    )
    try await batcher.submit(1)
    try await batcher.submit(2)
    await #expect(throws: BatcherError.bufferFull) { try await batcher.submit(3) }
    await #expect(throws: BatcherError.bufferFull) { try await batcher.load(3) }
    batcher.flush()
    #expect(await log.sent.next().items == [1, 2])
  }

  @Test func aFullBufferDropsTheOldest() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(
      maximumCount: 10, maximumWait: .seconds(1), bufferCapacity: 2, overflow: .dropOldest, clock: scheduler,
      send: log.send)
    let oldest = Task { try await batcher.load(1) }
    _ = await batcher.waitUntilLoaderCount(1)
    try await batcher.submit(2)
    try await batcher.submit(3)
    await #expect(throws: BatcherError.dropped) { try await oldest.value }
    scheduler.advance(to: ms(1000))  // the oldest left is 2, buffered at 0
    let batch = await log.sent.next()
    #expect(batch.items == [2, 3])
    #expect(batch.at == ms(1000))
  }

  @Test func trySubmitBuffersWhereSubmitWouldNotWait() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let batcher = Batcher<Int, Int>(
      maximumCount: 2, maximumWait: .seconds(1), bufferCapacity: 2, clock: scheduler, send: log.send)
    #expect(batcher.trySubmit(1))  // buffered at 0: its maxWait starts
    #expect(scheduler.pendingDeadlines == [ms(1000)])
    #expect(batcher.trySubmit(2))  // the batch is full: sent at once
    #expect(await log.sent.next().items == [1, 2])
    #expect(batcher.trySubmit(3) && batcher.trySubmit(4))  // [3, 4] waits for the slot
    #expect(batcher.trySubmit(5) == false)  // full: a submit would wait, so nothing is buffered
    let waiting = Task { try await batcher.submit(6) }
    _ = await batcher.waitUntilWaitingCount(1)
    scheduler.advance(to: ms(200))
    log.release.post(())  // [1, 2] ends: [3, 4] is sent, and 6, which waited, finds room first
    #expect(await log.sent.next().items == [3, 4])
    try await waiting.value
    #expect(batcher.trySubmit(7))
    log.release.post(())
    batcher.flush()
    #expect(await log.sent.next().items == [6, 7])
    log.release.post(())
  }

  @MainActor @Test func aSubmitFromTheMainActorWaitsForRoomAndReturnsThere() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let batcher = Batcher<Int, Int>(
      maximumCount: 1, maximumWait: .seconds(1), bufferCapacity: 1, clock: scheduler, send: log.send)
    try await batcher.submit(1)  // sent at once
    try await batcher.submit(2)  // waits for the slot: the buffer is full
    #expect(await log.sent.next().items == [1])
    let waiting = Task { @MainActor in
      try await batcher.submit(3)
      MainActor.assertIsolated()  // resumed on the caller's executor
    }
    #expect(await batcher.waitUntilWaitingCount(1))
    log.release.post(())  // [1] ends: [2] is sent, and 3 finds room
    #expect(await log.sent.next().items == [2])
    try await waiting.value
    #expect(batcher.bufferedCount == 1)
    log.release.post(())
    #expect(await log.sent.next().items == [3])
    log.release.post(())
  }

  @available(*, deprecated, message: "calls the deprecated spelling")
  @Test func theSpellingWithAnIsolationStillSubmits() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(1), clock: scheduler, send: log.send)
    try await batcher.submit(1, isolation: nil)
    try await batcher.submit(2, isolation: nil)
    #expect(await log.sent.next().items == [1, 2])
  }

  @Test func trySubmitRefusesAFullBufferUnderRejectAndDropsTheOldestUnderDropOldest() async throws {
    let log = BatchLog(scheduler: scheduler)
    let rejecting = Batcher<Int, Int>(
      maximumCount: 10, maximumWait: .seconds(1), bufferCapacity: 1, overflow: .reject, clock: scheduler,
      send: log.send)
    #expect(rejecting.trySubmit(1) && !rejecting.trySubmit(2))
    #expect(rejecting.bufferedCount == 1)
    let dropping = Batcher<Int, Int>(
      maximumCount: 10, maximumWait: .seconds(1), bufferCapacity: 2, overflow: .dropOldest, clock: scheduler,
      send: log.send)
    let oldest = Task { try await dropping.load(1) }
    _ = await dropping.waitUntilLoaderCount(1)
    #expect(dropping.trySubmit(2) && dropping.trySubmit(3))
    await #expect(throws: BatcherError.dropped) { try await oldest.value }
    dropping.flush()
    #expect(await log.sent.next().items == [2, 3])
  }

  @Test func aFullBufferSuspendsTheCallerUntilThereIsRoom() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let batcher = Batcher<Int, Int>(
      maximumCount: 2, maximumWait: .seconds(1), bufferCapacity: 2, clock: scheduler, send: log.send)
    for item in 1...4 { try await batcher.submit(item) }  // [1, 2] in flight, [3, 4] buffered
    #expect(await log.sent.next().items == [1, 2])
    let suspended = Task { try await batcher.submit(5) }
    let cancelled = Task { try await batcher.submit(6) }
    _ = await batcher.waitUntilWaitingCount(2)
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    scheduler.advance(to: ms(300))
    log.release.post(())  // [1, 2] ends: [3, 4] is sent, and 5 finds room
    #expect(await log.sent.next().items == [3, 4])
    try await suspended.value
    #expect(batcher.bufferedCount == 1)
    // The timer armed for 1 is kept; at 1 s it arms for 5's maxWait, from when it found room.
    #expect(scheduler.pendingDeadlines == [ms(1000)])
    log.release.post(())
    scheduler.advance(to: ms(1300))
    let last = await log.sent.next()
    #expect(last.items == [5])
    #expect(last.at == ms(1300))
    log.release.post(())
  }

  @Test func submitsWithRoomKeepTheFirstItemsMaxWaitTheCapacityAndTheOrderOfWaitingSubmitters() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(
      maximumCount: 4, maximumWait: .seconds(1), bufferCapacity: 3, clock: scheduler, send: log.send)
    try await batcher.submit(1)
    scheduler.advance(to: ms(100))
    try await batcher.submit(2)
    try await batcher.submit(3)  // the buffer is exactly full
    #expect(batcher.bufferedCount == 3)
    let fourth = Task { try await batcher.submit(4) }
    _ = await batcher.waitUntilWaitingCount(1)
    let fifth = Task { try await batcher.submit(5) }
    _ = await batcher.waitUntilWaitingCount(2)
    #expect(scheduler.pendingDeadlines == [ms(1000)])  // the first item's maxWait
    scheduler.advance(to: ms(1000))
    let first = await log.sent.next()
    #expect(first.items == [1, 2, 3] && first.at == ms(1000))
    try await fourth.value
    try await fifth.value
    try await batcher.submit(6)
    #expect(batcher.bufferedCount == 3)
    #expect(scheduler.pendingDeadlines == [ms(2000)])  // the fourth's, from when it found room
    scheduler.advance(to: ms(2000))
    let second = await log.sent.next()
    #expect(second.items == [4, 5, 6] && second.at == ms(2000))
  }

  @Test func aLoaderCancelsAloneAndTheItemIsStillSent() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 10, maximumWait: .milliseconds(100), clock: scheduler, send: log.send)
    let leaving = Task { try await batcher.load(1) }
    let staying = Task { try await batcher.load(1) }
    _ = await batcher.waitUntilLoaderCount(2)
    leaving.cancel()
    await #expect(throws: CancellationError.self) { try await leaving.value }
    scheduler.advance(to: ms(100))
    #expect(await log.sent.next().items == [1])
    #expect(try await staying.value == 10)
  }

  @Test func fireAndForgetItemsAreAllSentDuplicatesIncluded() async throws {
    let sent = Signals<[String]>()
    let analytics = Batcher<String, Void>(maximumCount: 3, maximumWait: .seconds(30), clock: scheduler) { events in
      sent.post(events)
    }
    for event in ["open", "tap", "tap"] { try await analytics.submit(event) }
    #expect(await sent.next() == ["open", "tap", "tap"])
  }

  /// A batcher made without output takes any item, but one that is `Hashable` at run time is
  /// still joined by a `load` of an equal item: the keys made both ways are equal.
  @Test func aLoadJoinsAnEqualSubmittedItemOfABatcherWithoutOutput() async throws {
    let sent = Signals<[String]>()
    let analytics = Batcher<String, Void>(maximumCount: 2, maximumWait: .seconds(30), clock: scheduler) { events in
      sent.post(events)
    }
    try await analytics.submit("tap")
    let load = Task { try await analytics.load("tap") }  // joins the buffered "tap"
    _ = await analytics.waitUntilLoaderCount(1)
    try await analytics.submit("open")  // the second entry: the batch is sent
    #expect(await sent.next() == ["tap", "open"])
    try await load.value
  }

  /// Events need not be `Hashable`: a batcher of items without output takes any `Sendable` item.
  @Test func itemsThatAreNotHashableAreSubmitted() async throws {
    struct Tap: Sendable { let point: (x: Int, y: Int) }
    let sent = Signals<[Int]>()
    let taps = Batcher<Tap, Void>(maximumCount: 2, maximumWait: .seconds(30), clock: scheduler) { taps in
      sent.post(taps.map(\.point.x))
    }
    try await taps.submit(Tap(point: (1, 1)))
    try await taps.submit(Tap(point: (1, 1)))  // two taps at one point are two taps
    #expect(await sent.next() == [1, 1])
  }

  /// A failed batch's submitted items reach `onFailure` with the error, once, outside the lock;
  /// its loaders get the error themselves, and are not reported again.
  @Test func aFailedBatchReportsTheItemsNobodyWaitsFor() async throws {
    struct UploadFailed: Error {}
    let failures = Signals<([Int], Bool)>()
    let batcher = Batcher<Int, Int>(
      maximumCount: 3, maximumWait: .seconds(1), clock: scheduler,
      onFailure: { items, error in failures.post((items, error is UploadFailed)) }
    ) { _ in throw UploadFailed() }
    try await batcher.submit(1)
    let loader = Task { try await batcher.load(2) }
    _ = await batcher.waitUntilLoaderCount(1)
    try await batcher.submit(3)  // the third item: the batch is sent
    await #expect(throws: UploadFailed.self) { try await loader.value }
    let (items, isTheError) = await failures.next()
    #expect(items == [1, 3])
    #expect(isTheError)
    await batcher.waitForEndedBatches(1)
  }

  /// The analytics example's retry: `send` tries again before anyone is told.
  @Test func aSendThatRetriesDeliversWithoutAFailure() async throws {
    struct Offline: Error {}
    let attempts = LockedRecorder<Int>(scheduler: scheduler)
    let failures = LockedRecorder<[String]>()
    let analytics = Batcher<String, Void>(
      maximumCount: 2, maximumWait: .seconds(30), clock: scheduler, onFailure: { events, _ in failures.record(events) }
    ) { events in
      for attempt in 1...3 {
        attempts.record(attempt)
        if attempt < 2 { continue }  // the first attempt fails (offline), the second delivers
        return
      }
      throw Offline()
    }
    try await analytics.submit("open")
    try await analytics.submit("tap")
    await analytics.waitForEndedBatches(1)
    #expect(attempts.values == [1, 2])
    #expect(failures.count == 0)
  }

  @Test func aMaxWaitBeyondTheTimelineSaturates() async throws {
    let log = BatchLog(scheduler: scheduler)
    let batcher = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(Int64.max), clock: scheduler, send: log.send)
    try await batcher.submit(1)
    #expect(scheduler.pendingDeadlines == [.max])
    try await batcher.submit(2)
    #expect(await log.sent.next().items == [1, 2])
    #expect(scheduler.pendingDeadlines == [.max])  // kept, and never reached
  }

  @Test func aCancelledTasksSubmitBuffersWithRoomAndThrowsWhereItWouldWait() async throws {
    let log = BatchLog(scheduler: scheduler, holds: true)
    let batcher = Batcher<Int, Int>(
      maximumCount: 2, maximumWait: .seconds(1), bufferCapacity: 2, clock: scheduler, send: log.send)
    let withRoom = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await batcher.submit(1)
    }
    try await withRoom.value
    #expect(batcher.bufferedCount == 1)
    try await batcher.submit(2)  // [1, 2] in flight, held
    #expect(await log.sent.next().items == [1, 2])
    try await batcher.submit(3)
    try await batcher.submit(4)  // the buffer is full
    let withoutRoom = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await batcher.submit(5)
    }
    await #expect(throws: CancellationError.self) { try await withoutRoom.value }
    #expect(batcher.bufferedCount == 2)
    log.release.post(())
    #expect(await log.sent.next().items == [3, 4])  // 5 is not among them, nor after them
    #expect(batcher.bufferedCount == 0)
    log.release.post(())
  }

  @Test func aCancelledTaskThrowsWithoutBufferingAnything() async {
    let batcher = Batcher<Int, Int>(maximumCount: 2, maximumWait: .seconds(1), clock: scheduler) { _ in [:] }
    let cancelled = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await batcher.load(1)
    }
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(batcher.bufferedCount == 0)
  }
}

/// The batcher under real concurrency, for the thread sanitizer: loads, submits and flushes from
/// many tasks at once, with two batches in flight.
@Suite(.timeLimit(.minutes(3))) struct BatcherStressTests {
  @Test func manyLoadersAndSubmittersAtOnce() async {
    let sentItems = Counter()
    let batcher = Batcher<Int, Int>(
      maximumCount: 16, maximumWait: .milliseconds(1), maximumInFlight: 2, bufferCapacity: 64
    ) { items in
      for _ in items { sentItems.increment() }
      await Task.yield()
      return Dictionary(items.map { ($0, $0 + 1) }, uniquingKeysWith: { first, _ in first })
    }
    let outcomes = await withTaskGroup(of: Bool.self) { group in
      for index in 0..<2_000 {
        group.addTask {
          if index % 5 == 0 { batcher.flush() }
          let call = Task { () throws -> Bool in
            if index % 2 == 0 { return try await batcher.load(index % 50) == index % 50 + 1 }
            // A third of the submits from synchronous code, which may find the buffer full.
            if index % 3 == 0 {
              batcher.trySubmit(index)
              return true
            }
            try await batcher.submit(index)
            return true
          }
          if index % 7 == 0 { call.cancel() }
          switch await call.result {
          case .success(let correct): return correct
          case .failure(let error): return error is CancellationError
          }
        }
      }
      return await group.reduce(into: [Bool]()) { $0.append($1) }
    }
    #expect(outcomes.count == 2_000)
    #expect(outcomes.allSatisfy { $0 })
    batcher.flush()
  }
}

/// The diagrams of Batcher.md, run through `Batcher` on virtual time. One character is 100 ms; a
/// letter in `items` is a `load` of that item, an `F` in `flushes` a `flush()`. `send` takes
/// `sendSteps`; `sent` shows each batch's items at the step it was sent, `outputs` each loader at
/// the step it got its output.
@Suite(.timeLimit(.minutes(3))) struct BatcherDocDiagramTests {
  let step: Int64 = 100

  func diagram(
    items: String, flushes: String = "", maxCount: Int, maxWaitSteps: Int64, maxInFlight: Int = 1,
    sendSteps: Int64
  ) async -> (sent: String, outputs: String) {
    let scheduler = TestScheduler()
    let step = self.step
    let sent = Signals<(items: [String], at: PaceInstant)>()
    let release = Signals<Void>()
    let outputs = Signals<Emission<String>>()
    let batcher = Batcher<String, String>(
      maximumCount: maxCount, maximumWait: .milliseconds(maxWaitSteps * step), maximumInFlight: maxInFlight,
      clock: scheduler
    ) { items in
      sent.post((items, scheduler.now))
      await release.next()
      return Dictionary(uniqueKeysWithValues: items.map { ($0, $0) })
    }
    var sentLog: [Emission<String>] = []
    var outputLog: [Emission<String>] = []
    var ends: [Int64] = []  // the step each batch in flight ends, in order
    var launched = 0
    var reported = 0
    var ended = 0
    var sentBatches = 0
    var tasks: [Task<Void, Never>] = []
    let itemEvents = Marbles.parse(items, step: 1)
    let flushEvents = Marbles.parse(flushes, step: 1)
    let last = (itemEvents + flushEvents).map(\.0).max() ?? 0

    func drain(at index: Int64) async {
      while sentBatches < batcher.sentBatchCount {
        sentBatches += 1
        let batch = await sent.next()
        for item in batch.items { sentLog.append(.value(item, at: batch.at)) }
        ends.append(index + sendSteps)
      }
      while reported < launched - batcher.loaderCount {
        outputLog.append(await outputs.next())
        reported += 1
      }
    }

    var index: Int64 = 0
    while index <= last || !ends.isEmpty || batcher.bufferedCount > 0 {
      scheduler.advance(to: ms(index * step))
      await drain(at: index)
      while let end = ends.first, end == index {
        ends.removeFirst()
        release.post(())
        ended += 1
        await batcher.waitForEndedBatches(ended)
        await drain(at: index)
      }
      for case (index, .element(let item)) in itemEvents {
        launched += 1
        tasks.append(
          Task {
            guard let output = try? await batcher.load(item) else { return }
            outputs.post(.value(output, at: scheduler.now))
          })
        await batcher.waitForCalls(launched)
        await drain(at: index)
      }
      for case (index, .element) in flushEvents {
        batcher.flush()
        await drain(at: index)
      }
      index += 1
    }
    func sorted(_ emissions: [Emission<String>]) -> [Emission<String>] {
      emissions.sorted { lhs, rhs in
        guard case .value(let left, let leftTime) = lhs, case .value(let right, let rightTime) = rhs else {
          return false
        }
        return (leftTime, left) < (rightTime, right)
      }
    }
    return (Marbles.render(sorted(sentLog), step: step), Marbles.render(sorted(outputLog), step: step))
  }

  @Test func countWaitAndFlushDiagram() async {
    let result = await diagram(
      items: "abc-d-----ef--g", flushes: "------------F", maxCount: 3, maxWaitSteps: 3, sendSteps: 2)
    #expect(result.sent == "--[abc]----d----[ef]----g")
    #expect(result.outputs == "----[abc]----d----[ef]----g")
  }

  @Test func maxInFlightDiagram() async {
    let result = await diagram(items: "abcde", maxCount: 2, maxWaitSteps: 3, sendSteps: 3)
    #expect(result.sent == "-[ab]--[cd]--e")
    #expect(result.outputs == "----[ab]--[cd]--e")
  }
}
