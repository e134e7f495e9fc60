import PaceTestSupport
import Testing

@testable import Pace

/// The heap of deadlines behind each keyed shard's one scheduler timer, white-box: seeded random
/// additions and firings against a sorted array, deadlines added during a firing, the stale
/// generations, and the lifetimes of keys through growth, shrinking (in place and by moving),
/// the mapped-pages threshold both ways, `removeAll()` and `deinit`.
@Suite(.offThePool) struct ShardTimerTests {
  typealias LiveInstances = KeyTableTests.LiveInstances
  typealias LifetimeProbe = KeyTableTests.LifetimeProbe

  static func instant(_ nanoseconds: Int64) -> PaceInstant { PaceInstant(nanoseconds: nanoseconds) }

  /// Takes every entry due at `now`, adding `addDuring(entry)` for each as it comes out.
  static func fire(
    _ timer: inout ShardTimer<Int>, at now: PaceInstant,
    addDuring: (ShardTimer<Int>.Entry) -> PaceInstant? = { _ in nil }
  ) -> [ShardTimer<Int>.Entry] {
    // An empty heap has no timer to fire.
    guard let generation = timer.reserveIfNeeded()?.generation ?? Self.armedGeneration(timer) else { return [] }
    let began = timer.beginFiring(generation: generation, now: now)
    #expect(began)
    var due: [ShardTimer<Int>.Entry] = []
    while let entry = timer.nextDue() {
      due.append(entry)
      if let deadline = addDuring(entry) { timer.add(deadline, for: entry.key) }
    }
    timer.endFiring()
    return due
  }

  /// The generation of the timer already reserved; `nil` if none is.
  static func armedGeneration<Key>(_ timer: borrowing ShardTimer<Key>) -> UInt64? {
    timer.slot.isArmed ? timer.slot.generation : nil
  }

  /// Seeded timelines of up to 60,000 deadlines each; more with `PACE_FUZZ_SCALE`.
  @Test(arguments: 0..<UInt64(fuzzRuns(50)))
  func matchesASortedArrayOnRandomTimelines(seed: UInt64) {
    var generator = SeededGenerator(seed: seed)
    var timer = ShardTimer<Int>()
    // The reference: every (deadline, key) in the heap; a firing takes those due, earliest first.
    var model: [(deadline: Int64, key: Int)] = []
    var now: Int64 = 0
    var nextKey = 0
    let burst = [1, 10, 100, 1_000][Int.random(in: 0..<4, using: &generator)]
    for step in 0..<60 {
      for _ in 0..<Int.random(in: 0...burst, using: &generator) {
        // Deadlines from now (due at once) to well after; extremes included.
        let deadline =
          Int.random(in: 0..<50, using: &generator) == 0
          ? Int64.max : now + Int64.random(in: 0...1_000, using: &generator)
        timer.add(Self.instant(deadline), for: nextKey)
        model.append((deadline, nextKey))
        nextKey += 1
      }
      let (count, earliest) = (timer.count, timer.earliest)
      #expect(count == model.count, "seed \(seed), step \(step)")
      #expect(earliest?.nanoseconds == model.map(\.deadline).min(), "seed \(seed), step \(step)")
      // The timer is armed for the earliest deadline; it fires at it or later (late timers).
      let armedFor = model.map(\.deadline).min() ?? .max
      now = Swift.max(now + Int64.random(in: 0...700, using: &generator), Swift.min(armedFor, now + 700))
      // Some entries coming out add a deadline, due already (deferred) or later.
      var addedDuring: [(deadline: Int64, key: Int)] = []
      let due = Self.fire(&timer, at: Self.instant(now)) { entry in
        guard entry.key % 3 == 0 else { return nil }
        let deadline = entry.key % 2 == 0 ? now : now + 1 + Int64(entry.key % 500)
        addedDuring.append((deadline, entry.key))
        return Self.instant(deadline)
      }
      // Those before its instant, and those up to the deadline it was armed for; one at exactly
      // its instant, if later than that, waits for a timer armed for it.
      let isDue = { (entry: (deadline: Int64, key: Int)) in
        entry.deadline < now || (entry.deadline == now && entry.deadline <= armedFor)
      }
      let expected = model.filter(isDue)
      model.removeAll(where: isDue)
      model += addedDuring
      // Earliest first; keys of equal deadlines in any order.
      #expect(due.map(\.deadline.nanoseconds) == expected.map(\.deadline).sorted(), "seed \(seed), step \(step)")
      #expect(Set(due.map(\.key)) == Set(expected.map(\.key)), "seed \(seed), step \(step)")
      let (countAfter, capacity) = (timer.count, timer.capacity)
      #expect(countAfter == model.count, "seed \(seed), step \(step)")
      // Sparse storage shrinks: at most 64 entries' room, or under four times the entries.
      #expect(capacity <= Swift.max(64, 4 * countAfter), "seed \(seed), step \(step)")
    }
    // Everything still in the heap comes out, in order, once the end of time is reached: the
    // deadlines at the end itself at a second firing, armed for them.
    var rest: [ShardTimer<Int>.Entry] = []
    while timer.count > 0 { rest += Self.fire(&timer, at: .max) }
    #expect(rest.map(\.deadline.nanoseconds) == model.map(\.deadline).sorted(), "seed \(seed)")
    let emptied = timer.count == 0 && timer.capacity == 0 && timer.heap.storage.unsafeBase == nil
    #expect(emptied, "seed \(seed)")
  }

  @Test func aDeadlineAddedDuringAFiringThatIsAlreadyDueWaitsForTheNextOne() {
    var timer = ShardTimer<Int>()
    timer.add(Self.instant(10), for: 1)
    timer.add(Self.instant(10), for: 2)
    timer.add(Self.instant(30), for: 3)
    let first = Self.fire(&timer, at: Self.instant(10)) { entry in entry.key == 1 ? Self.instant(5) : nil }
    #expect(first.map(\.key).sorted() == [1, 2])
    // Due at 5, before the firing's instant: in the heap now, so the next arming is for it.
    let (earliest, armedFor) = (timer.earliest, timer.slot.deadline)
    #expect(earliest == Self.instant(5))
    // The firing disarmed the timer; the next event reserves it for the new earliest.
    #expect(armedFor == nil)
    let second = Self.fire(&timer, at: Self.instant(10))
    #expect(second.map(\.key) == [1])
    let count = timer.count
    #expect(count == 1)
  }

  /// Issue 31: on a scheduler whose timers fire at the first tick after their deadline, the
  /// timer armed for 7 fires at the tick 10, which is another key's deadline; that key's own
  /// timer would fire at the next tick, so its deadline waits for a timer armed for it.
  @Test func aLateFiringTakesTheDeadlinesBeforeItsInstantAndUpToTheOneItWasArmedFor() {
    var timer = ShardTimer<Int>()
    timer.add(Self.instant(7), for: 1)
    timer.add(Self.instant(9), for: 2)
    timer.add(Self.instant(10), for: 3)
    timer.add(Self.instant(10), for: 4)
    timer.add(Self.instant(12), for: 5)
    let ticket = timer.reserveIfNeeded()
    #expect(ticket?.deadline == Self.instant(7))
    let late = Self.fire(&timer, at: Self.instant(10))
    #expect(late.map(\.key) == [1, 2])
    // The next timer is armed for 10, which has come: the scheduler fires it when it fires a
    // timer for 10 (at once if exact, at the next tick if late), and it takes both keys.
    let next = timer.reserveIfNeeded()
    #expect(next?.deadline == Self.instant(10))
    let atTheirOwn = Self.fire(&timer, at: Self.instant(20))
    #expect(atTheirOwn.map(\.key).sorted() == [3, 4, 5])
    // A firing at exactly the deadline it was armed for takes that deadline.
    timer.add(Self.instant(30), for: 6)
    let exact = Self.fire(&timer, at: Self.instant(30))
    #expect(exact.map(\.key) == [6])
    let count = timer.count
    #expect(count == 0)
  }

  @Test func aStaleGenerationTakesNothing() {
    var timer = ShardTimer<Int>()
    timer.add(Self.instant(10), for: 1)
    let first = timer.reserveIfNeeded()
    timer.add(Self.instant(5), for: 2)
    let second = timer.reserveIfNeeded()
    // A later deadline than the reserved one needs no new timer.
    timer.add(Self.instant(7), for: 3)
    let third = timer.reserveIfNeeded()
    #expect(first?.deadline == Self.instant(10))
    #expect(second?.deadline == Self.instant(5))
    #expect(third == nil)
    #expect(second.map { $0.generation } != first.map { $0.generation })
    // The first timer fires late: it is stale, and leaves the heap as it is.
    let began = timer.beginFiring(generation: first!.generation, now: Self.instant(20))
    #expect(!began)
    let nextDue = timer.nextDue()
    #expect(nextDue == nil)
    let count = timer.count
    #expect(count == 3)
    // A timer that removeAll() disowned is stale too.
    let cancelled = timer.removeAll()
    #expect(cancelled == nil)  // no handle was kept in this test
    let beganAfterRemoval = timer.beginFiring(generation: second!.generation, now: Self.instant(20))
    #expect(!beganAfterRemoval)
    let emptied = timer.count == 0 && timer.capacity == 0
    #expect(emptied)
  }

  @Test func keysLiveExactlyAsLongAsTheirEntriesThroughEveryResize() {
    let instances = LiveInstances()
    let count = 40_000
    typealias ProbeTimer = ShardTimer<LifetimeProbe>
    let stride = MemoryLayout<ProbeTimer.Entry>.stride
    do {
      var timer = ProbeTimer()
      for id in 0..<count {
        timer.add(Self.instant(Int64(count - id)), for: LifetimeProbe(id, instances, hashModulus: .max))
      }
      // Past the threshold from which storage is pages of its own.
      let grownBytes = timer.capacity * stride
      #expect(grownBytes >= KeyTable<Int, Int>.mappedBytes)
      #expect(instances.live == count)
      // Firings shrink the storage: mapped pages given back in place (twice), then moved into
      // malloc's memory under the threshold, then moved again.
      var next: Int64 = 1
      var capacities: [Int] = []
      // Each firing is late: it takes the deadlines before its instant.
      for now in [Int64(101), 30_001, 39_701, 39_901, 39_991] {
        let generation = timer.reserveIfNeeded()?.generation ?? Self.armedGeneration(timer)
        let began = timer.beginFiring(generation: generation ?? 0, now: Self.instant(now))
        #expect(began)
        while let entry = timer.nextDue() {
          #expect(entry.deadline == Self.instant(next))
          #expect(entry.key.id == count - Int(next))
          next += 1
        }
        timer.endFiring()
        #expect(instances.live == count - Int(now - 1))
        capacities.append(timer.capacity)
      }
      #expect(capacities == [65_536, 32_768, 1_024, 256, 32])
      let mapped = KeyTable<Int, Int>.mappedBytes
      #expect(capacities.map { $0 * stride >= mapped } == [true, true, true, false, false])
      let left = timer.count
      #expect(left == 10)
      // removeAll() releases the rest; more keys are released by deinit.
      _ = timer.removeAll()
      #expect(instances.live == 0)
      for id in 0..<1_000 { timer.add(Self.instant(Int64(id)), for: LifetimeProbe(id, instances, hashModulus: .max)) }
      #expect(instances.live == 1_000)
    }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }
}
