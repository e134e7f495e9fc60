#if PostgreSQL && Hummingbird
@testable import PacePostgres
import Testing

/// The store's pure parts, driven directly: no database, no clock.
@Suite("DecisionBatchMachine and DenialCacheState")
struct BatchingAndDenialCacheTests {
  let start = ContinuousClock().now

  /// Two lanes as the store's `run()` starts them: parked without a connection.
  static func twoIdleLanes(maximumBatch: Int) -> DecisionBatchMachine<Int> {
    var machine = DecisionBatchMachine<Int>(maximumBatch: maximumBatch)
    for _ in 0..<2 { _ = machine.park(holding: false) }
    return machine
  }

  @Test func aLoneCallerWakesALaneAndWaitsForNothingElse() {
    var machine = Self.twoIdleLanes(maximumBatch: 4)
    #expect(machine.parkedIdle == 2)
    let answer1 = machine.submit(1)
    #expect(answer1 == .wakeIdleLane)
    let answer2 = machine.next()
    #expect(answer2 == [1])
    let answer3 = machine.next()
    #expect(answer3 == nil)
    // Its batch answered, the lane parks holding its connection.
    let answer4 = machine.park(holding: true)
    #expect(answer4)
    // The lane that holds a connection is woken by the next caller, which is sent alone at once.
    let answer5 = machine.submit(2)
    #expect(answer5 == .wakeHoldingLane)
    let answer6 = machine.next()
    #expect(answer6 == [2])
  }

  @Test func callersWhileEveryLaneIsBusyGatherIntoBatchesInCallOrder() {
    var machine = Self.twoIdleLanes(maximumBatch: 3)
    var actions = [machine.submit(0)]
    let first = machine.next()
    actions.append(machine.submit(1))
    let second = machine.next()
    #expect(actions == [.wakeIdleLane, .wakeIdleLane])
    #expect(first == [0] && second == [1])
    // Both lanes busy: callers queue, and a lane that asks takes a full batch, oldest first.
    let queued = (2..<9).map { machine.submit($0) }
    #expect(queued.allSatisfy { $0 == .queued })
    let batches = [machine.next(), machine.next(), machine.next(), machine.next()]
    #expect(batches == [[2, 3, 4], [5, 6, 7], [8], nil])
  }

  @Test func aLaneDoesNotParkWhileWorkIsQueued() {
    var machine = DecisionBatchMachine<Int>(maximumBatch: 8)
    // The lane has not parked yet: the request waits for it.
    let answer7 = machine.submit(1)
    #expect(answer7 == .queued)
    let answer8 = machine.park(holding: false)
    #expect(!answer8)
    let answer9 = machine.next()
    #expect(answer9 == [1])
    let answer10 = machine.park(holding: true)
    #expect(answer10)
    #expect(machine.parked == 1 && machine.parkedHolding == 1)
    let answer11 = machine.submit(2)
    #expect(answer11 == .wakeHoldingLane)
    #expect(machine.parked == 0)
  }

  @Test func aLaneThatGivesBackItsConnectionIsBusyUntilItAsksAgain() {
    var machine = DecisionBatchMachine<Int>(maximumBatch: 4)
    _ = machine.park(holding: false)
    let woken = machine.submit(1)
    #expect(woken == .wakeIdleLane)
    let first = machine.next()
    #expect(first == [1])
    let none = machine.next()
    #expect(none == nil)
    let parked = machine.park(holding: true)
    #expect(parked)
    // It lingered idle: it leaves its parking to give its connection back.
    machine.unpark()
    #expect(machine.parked == 0)
    // A request meanwhile is queued for it, not a wake for a lane that is not parked.
    let queued = machine.submit(2)
    #expect(queued == .queued)
    let parksWithWork = machine.park(holding: false)
    #expect(!parksWithWork)
    let second = machine.next()
    #expect(second == [2])
    let parkedAgain = machine.park(holding: false)
    #expect(parkedAgain)
    let wokenAgain = machine.submit(3)
    #expect(wokenAgain == .wakeIdleLane)
  }

  @Test func aCallerWhoAsksAgainBeforeItsLaneParksWaitsForThatLane() {
    var machine = Self.twoIdleLanes(maximumBatch: 4)
    let woken = machine.submit(1)
    #expect(woken == .wakeIdleLane)
    let first = machine.next()
    #expect(first == [1])
    // Its answer is out; the caller asks again before the lane has looked for work.
    machine.finished()
    let again = machine.submit(2)
    #expect(again == .queued, "no second lane woken, hence no second connection, for a lone caller")
    let second = machine.next(finishing: true)
    #expect(second == [2])
    #expect(machine.finishing == 0)
    // Finished with nothing waiting: it parks holding its connection, and the next caller wakes it.
    machine.finished()
    let parked = machine.park(holding: true, finishing: true)
    #expect(parked && machine.finishing == 0)
    let wokenAgain = machine.submit(3)
    #expect(wokenAgain == .wakeHoldingLane)
    // While that lane is busy (not finishing), a caller wakes the second lane.
    let more = machine.submit(4)
    #expect(more == .wakeIdleLane)
  }

  @Test func requestsThatLeaveBeforeTheyAreSentAreForgotten() {
    var machine = DecisionBatchMachine<Int>(maximumBatch: 8)
    _ = machine.submit(1)
    _ = machine.submit(2)
    _ = machine.submit(3)
    machine.remove([2])
    let answer12 = machine.next()
    #expect(answer12 == [1, 3])
  }

  /// Removals anywhere in the queue, batches taken between them: call order kept, nothing sent
  /// twice or lost, against a plain array as the reference.
  @Test func removalsKeepCallOrderAgainstAReferenceQueue() {
    var machine = DecisionBatchMachine<Int>(maximumBatch: 5)
    var reference: [Int] = []
    var sent: [Int] = []
    var generator = SystemRandomNumberGenerator()
    var next = 0
    for round in 0..<2000 {
      switch round % 7 {
      case 0, 1, 2, 3:
        _ = machine.submit(next)
        reference.append(next)
        next += 1
      case 4, 5:
        guard let victim = reference.randomElement(using: &generator) else { continue }
        machine.remove([victim, -1])  // an id that is not queued is ignored
        reference.removeAll { $0 == victim }
      default:
        let batch = machine.next() ?? []
        #expect(batch == Array(reference.prefix(5)), "round \(round)")
        reference.removeFirst(batch.count)
        sent += batch
      }
      #expect(machine.queue == reference, "round \(round)")
    }
    while let batch = machine.next() { sent += batch }
    #expect(Set(sent).count == sent.count)
    #expect(sent == sent.sorted())
  }

  /// 200,000 callers queued, then all but the last cancelled one at a time: each removal is O(1)
  /// (a removal that scanned the queue would take 2 · 10^10 steps here, far beyond the time limit).
  @Test(.timeLimit(.minutes(1))) func cancellingQueuedCallersOneAtATimeIsLinearInTotal() {
    var machine = DecisionBatchMachine<Int>(maximumBatch: 64)
    _ = machine.submit(-1)
    _ = machine.next()  // no lane is parked: the rest queue
    for id in 0..<200_000 { _ = machine.submit(id) }
    for id in 0..<199_999 { machine.remove(CollectionOfOne(id)) }
    #expect(machine.next() == [199_999])
    #expect(machine.next() == nil)
    // A removed id submitted again is sent once.
    _ = machine.submit(7)
    machine.remove([7])
    _ = machine.submit(7)
    #expect(machine.next() == [7])
  }

  /// Statement names: renamed on a refusal a preparation can cause, at most once a second and
  /// eight times between migrations; a migration renames once more and restores the allowance.
  @Test func statementNamesAreRenamedBoundedly() {
    var names = StatementNamesMachine()
    #expect(names.refused(sqlState: "23505", now: start) == .kept)  // a unique violation: not a preparation's
    #expect(names.refused(sqlState: nil, now: start) == .kept)
    #expect(names.refused(sqlState: "42P01", now: start) == .renamed(generation: 1))
    #expect(names.refused(sqlState: "42P01", now: start + .milliseconds(999)) == .kept)
    var outcomes: [StatementNamesMachine.Refusal] = []
    for second in 1...100 { outcomes.append(names.refused(sqlState: "42501", now: start + .seconds(second))) }
    #expect(Array(outcomes.prefix(6)) == (2...7).map { StatementNamesMachine.Refusal.renamed(generation: $0) })
    #expect(outcomes[6] == .exhausted(generation: 8))
    #expect(outcomes.dropFirst(7).allSatisfy { $0 == .kept })
    #expect(names.generation == 8)
    names.migrated()
    #expect(names.generation == 9)
    #expect(names.refused(sqlState: "3F000", now: start + .seconds(101)) == .renamed(generation: 10))
  }

  let entry = DenialCacheState.Entry(key: "k", increment: 10, tolerance: 100)

  @Test func aDenialIsAnsweredUntilItsDeadlineAnchoredAtTheSend() {
    var cache = DenialCacheState(capacity: 10)
    // Sent at start, answered 2 ms later: "retry after 50 ms" runs from the send.
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start + .milliseconds(2))
    let answer13 = cache.retryAfter(entry, now: start + .milliseconds(2))
    #expect(answer13 == .milliseconds(48))
    let answer14 = cache.retryAfter(entry, now: start + .milliseconds(49))
    #expect(answer14 == .milliseconds(1))
    let answer15 = cache.retryAfter(entry, now: start + .milliseconds(50))
    #expect(answer15 == nil)
    #expect(cache.deadlines.isEmpty)
  }

  @Test func onlyTheSameKeyCostAndLimitAreAnswered() {
    var cache = DenialCacheState(capacity: 10)
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start)
    let answer16 = cache.retryAfter(.init(key: "k", increment: 5, tolerance: 100), now: start)
    #expect(answer16 == nil)
    let answer17 = cache.retryAfter(.init(key: "k", increment: 10, tolerance: 200), now: start)
    #expect(answer17 == nil)
    let answer18 = cache.retryAfter(.init(key: "other", increment: 10, tolerance: 100), now: start)
    #expect(answer18 == nil)
    // The same numbers under another policy are another limit.
    let window = DenialCacheState.Entry(
      key: "k", limit: StoredLimit(algorithm: .slidingWindow, amount: 10, capacity: 100, window: 0))
    #expect(cache.retryAfter(window, now: start) == nil)
  }

  @Test func anAnswerThatExpiredOnTheWayIsNotCachedAndDeadlinesOnlyGrow() {
    var cache = DenialCacheState(capacity: 10)
    cache.denied(entry, retryAfter: .milliseconds(1), sent: start, now: start + .milliseconds(5))
    #expect(cache.deadlines.isEmpty)
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start)
    // An answer to an earlier send that arrives later never shortens the deadline.
    cache.denied(entry, retryAfter: .milliseconds(20), sent: start, now: start)
    let answer19 = cache.retryAfter(entry, now: start)
    #expect(answer19 == .milliseconds(50))
  }

  @Test func memoryIsBounded() {
    var cache = DenialCacheState(capacity: 8)
    for index in 0..<100 {
      cache.denied(
        .init(key: "k\(index)", increment: 1, tolerance: 1), retryAfter: .seconds(60), sent: start, now: start)
      #expect(cache.deadlines.count <= 8)
    }
    // Expired entries go first when the cache is full.
    var expiring = DenialCacheState(capacity: 4)
    for index in 0..<4 {
      expiring.denied(
        .init(key: "old\(index)", increment: 1, tolerance: 1), retryAfter: .milliseconds(1), sent: start, now: start)
    }
    expiring.denied(entry, retryAfter: .seconds(1), sent: start, now: start + .milliseconds(2))
    #expect(expiring.deadlines.count == 1)
    let answer20 = expiring.retryAfter(entry, now: start + .milliseconds(2))
    #expect(answer20 != nil)
    #expect(DenialCacheState(capacity: 0).deadlines.isEmpty)
  }
}
extension DenialCacheState.Entry {
  /// A token bucket's entry, by its GCRA arithmetic.
  init(key: String, increment: Int64, tolerance: Int64) {
    self.init(key: key, limit: StoredLimit(algorithm: .tokenBucket, amount: increment, capacity: tolerance, window: 0))
  }
}
#endif
