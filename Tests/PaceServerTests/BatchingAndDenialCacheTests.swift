#if PostgreSQL && Hummingbird
@testable import PacePostgres
import Testing

/// The store's pure parts, driven directly: no database, no clock.
@Suite("BatchMachine and DenialCacheState")
struct BatchingAndDenialCacheTests {
  let start = ContinuousClock().now

  @Test func aLoneCallerStartsALaneAndWaitsForNothingElse() {
    var machine = BatchMachine<Int>(maxBatch: 4, maxLanes: 2)
    #expect(machine.submit(1) == .startLane)
    #expect(machine.next() == [1])
    #expect(machine.next() == nil)
    #expect(machine.park())
    // The parked lane is woken by the next caller, which is sent alone at once.
    #expect(machine.submit(2) == .wakeLane)
    #expect(machine.next() == [2])
  }

  @Test func callersWhileEveryLaneIsBusyGatherIntoBatchesInCallOrder() {
    var machine = BatchMachine<Int>(maxBatch: 3, maxLanes: 2)
    #expect(machine.submit(0) == .startLane)
    #expect(machine.submit(1) == .startLane)
    #expect(machine.next() == [0])
    #expect(machine.next() == [1])
    for id in 2..<9 { #expect(machine.submit(id) == .queued) }
    // A lane that finishes takes a full batch, the oldest first.
    #expect(machine.next() == [2, 3, 4])
    #expect(machine.next() == [5, 6, 7])
    #expect(machine.next() == [8])
    #expect(machine.next() == nil)
  }

  @Test func aLaneDoesNotParkWhileWorkIsQueued() {
    var machine = BatchMachine<Int>(maxBatch: 8, maxLanes: 1)
    #expect(machine.submit(1) == .startLane)
    #expect(!machine.park())
    #expect(machine.next() == [1])
    #expect(machine.park())
    #expect(machine.parked == 1)
    #expect(machine.submit(2) == .wakeLane)
    #expect(machine.parked == 0)
  }

  @Test func requestsThatLeaveBeforeTheyAreSentAreForgotten() {
    var machine = BatchMachine<Int>(maxBatch: 8, maxLanes: 1)
    _ = machine.submit(1)
    _ = machine.submit(2)
    _ = machine.submit(3)
    machine.remove([2])
    #expect(machine.next() == [1, 3])
  }

  let entry = DenialCacheState.Entry(key: "k", increment: 10, tolerance: 100)

  @Test func aDenialIsAnsweredUntilItsDeadlineAnchoredAtTheSend() {
    var cache = DenialCacheState(capacity: 10)
    // Sent at start, answered 2 ms later: "retry after 50 ms" runs from the send.
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start + .milliseconds(2))
    #expect(cache.retryAfter(entry, now: start + .milliseconds(2)) == .milliseconds(48))
    #expect(cache.retryAfter(entry, now: start + .milliseconds(49)) == .milliseconds(1))
    #expect(cache.retryAfter(entry, now: start + .milliseconds(50)) == nil)
    #expect(cache.deadlines.isEmpty)
  }

  @Test func onlyTheSameKeyCostAndLimitAreAnswered() {
    var cache = DenialCacheState(capacity: 10)
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start)
    #expect(cache.retryAfter(.init(key: "k", increment: 5, tolerance: 100), now: start) == nil)
    #expect(cache.retryAfter(.init(key: "k", increment: 10, tolerance: 200), now: start) == nil)
    #expect(cache.retryAfter(.init(key: "other", increment: 10, tolerance: 100), now: start) == nil)
  }

  @Test func anAnswerThatExpiredOnTheWayIsNotCachedAndDeadlinesOnlyGrow() {
    var cache = DenialCacheState(capacity: 10)
    cache.denied(entry, retryAfter: .milliseconds(1), sent: start, now: start + .milliseconds(5))
    #expect(cache.deadlines.isEmpty)
    cache.denied(entry, retryAfter: .milliseconds(50), sent: start, now: start)
    // An answer to an earlier send that arrives later never shortens the deadline.
    cache.denied(entry, retryAfter: .milliseconds(20), sent: start, now: start)
    #expect(cache.retryAfter(entry, now: start) == .milliseconds(50))
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
    #expect(expiring.retryAfter(entry, now: start + .milliseconds(2)) != nil)
    #expect(DenialCacheState(capacity: 0).deadlines.isEmpty)
  }
}
#endif
