import PaceTestSupport
import Testing

@testable import Pace

/// The rate limit machine driven directly: `now` in, grants and wake times out.
@Suite struct RateLimitStateMachineTests {
  typealias Machine = RateLimitStateMachine

  /// Permits every `interval / permits`; a full bucket at 0 ms.
  func machine(permits: Int = 10, per interval: Duration = .seconds(1), burst: Int? = nil) -> Machine {
    Machine(bucket: TokenBucket(permits: permits, per: interval, burst: burst ?? permits, now: ms(0)))
  }

  func grant(_ ids: UInt64..., wakeAt: PaceInstant? = nil) -> RateLimitAction {
    RateLimitAction(granted: ids, wakeAt: wakeAt)
  }

  func wake(at deadline: PaceInstant) -> RateLimitAction {
    RateLimitAction(wakeAt: deadline)
  }

  @Test func waitingRequestsAreGrantedInOrderAsTheirPermitsComeBack() {
    var m = machine(burst: 1)
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 1, now: ms(0)) == wake(at: ms(100)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(0)) == wake(at: ms(100)))  // behind the first
    #expect(m.waitingCount == 2)
    #expect(m.timerFired(now: ms(99)) == wake(at: ms(100)))  // early: nothing fits yet
    #expect(m.timerFired(now: ms(100)) == grant(1, wakeAt: ms(200)))
    #expect(m.timerFired(now: ms(200)) == grant(2))
    #expect(!m.isWaiting)
    #expect(m.timerFired(now: ms(300)) == .none)
  }

  @Test func everyRequestThatFitsIsGrantedAtOnceInOrder() {
    var m = machine(burst: 3)
    #expect(m.tryAcquire(cost: 3, now: ms(0)) == .allowed(remaining: 0))
    for id in UInt64(1)...3 {
      #expect(m.enqueue(id: id, cost: 1, now: ms(0)) == wake(at: ms(100)))
    }
    #expect(m.timerFired(now: ms(250)) == grant(1, 2, wakeAt: ms(300)))
    #expect(m.timerFired(now: ms(300)) == grant(3))
    // A request of cost 0 waits as cost 1 would, and takes nothing.
    #expect(m.enqueue(id: 4, cost: 0, now: ms(300)) == wake(at: ms(400)))
    #expect(m.timerFired(now: ms(400)) == grant(4))
    #expect(m.availablePermits(now: ms(400)) == 1)
    // A request that fits when nobody waits is granted as it joins.
    #expect(m.enqueue(id: 5, cost: 1, now: ms(400)) == grant(5))
  }

  @Test func aSmallRequestNeverOvertakesABigOne() {
    var m = machine()
    #expect(m.tryAcquire(cost: 10, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 5, now: ms(0)) == wake(at: ms(500)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(0)) == wake(at: ms(500)))
    // One permit is back at 100 ms, enough for the small request, which still waits its turn.
    #expect(m.availablePermits(now: ms(100)) == 1)
    #expect(m.timerFired(now: ms(100)) == wake(at: ms(500)))
    #expect(m.timerFired(now: ms(500)) == grant(1, wakeAt: ms(600)))
    #expect(m.timerFired(now: ms(600)) == grant(2))
  }

  @Test func cancellingTheHeadGrantsWhatFitsBehindIt() {
    var m = machine()
    #expect(m.tryAcquire(cost: 10, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 5, now: ms(0)) == wake(at: ms(500)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(0)) == wake(at: ms(500)))
    #expect(m.enqueue(id: 3, cost: 2, now: ms(0)) == wake(at: ms(500)))
    #expect(m.cancel(id: 1, now: ms(100)) == RateLimitAction(granted: [2], refused: 1, wakeAt: ms(300)))
    #expect(m.availablePermits(now: ms(100)) == 0)
    #expect(m.timerFired(now: ms(300)) == grant(3))
  }

  @Test func cancellingBehindTheHeadKeepsTheHeadsTimeAndWhatRefusalsWaitBehind() {
    var m = machine()
    #expect(m.tryAcquire(cost: 10, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 2, now: ms(0)) == wake(at: ms(200)))
    #expect(m.enqueue(id: 2, cost: 5, now: ms(0)) == wake(at: ms(200)))
    #expect(m.enqueue(id: 3, cost: 1, now: ms(0)) == wake(at: ms(200)))
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .limited(retryAfter: .milliseconds(900)))
    #expect(m.cancel(id: 2, now: ms(0)) == RateLimitAction(refused: 2, wakeAt: ms(200)))
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .limited(retryAfter: .milliseconds(400)))
    // A request no longer waiting (granted, or cancelled before) is not refused twice.
    #expect(m.cancel(id: 2, now: ms(0)) == wake(at: ms(200)))
    #expect(m.timerFired(now: ms(300)) == grant(1, 3))
    #expect(m.cancel(id: 3, now: ms(300)) == .none)
  }

  /// The token bucket's arithmetic queues a request above the burst until the bucket is full and
  /// leaves a debt; the limiters throw before they queue one, and `tryAcquire` never grants one.
  @Test func aQueuedRequestAboveTheBurstWaitsForAFullBucketAndLeavesDebt() {
    var m = machine(permits: 2, per: .milliseconds(200), burst: 2)
    #expect(m.tryAcquire(cost: 2, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 5, now: ms(0)) == wake(at: ms(200)))  // the bucket full again
    #expect(m.timerFired(now: ms(200)) == grant(1))
    // 5 taken from 2: a debt of 3, then 1 more for the next request.
    #expect(m.availablePermits(now: ms(200)) == 0)
    #expect(m.tryAcquire(cost: 1, now: ms(200)) == .limited(retryAfter: .milliseconds(400)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(200)) == wake(at: ms(600)))
    #expect(m.timerFired(now: ms(600)) == grant(2))
    // Nobody waiting, a full bucket: a request above the burst is still never granted.
    #expect(m.tryAcquire(cost: 7, now: ms(800)) == .limited(retryAfter: RateLimitDecision.never))
    #expect(m.tryAcquire(cost: 0, now: ms(800)) == .allowed(remaining: 2))
  }

  @Test func tryAcquireIsRefusedWhileARequestWaitsAndChangesNothing() {
    var m = machine()
    #expect(m.tryAcquire(cost: 9, now: ms(0)) == .allowed(remaining: 1))
    #expect(m.enqueue(id: 1, cost: 3, now: ms(0)) == wake(at: ms(200)))
    // One permit is in the bucket, but the waiting request's 3 go first.
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .limited(retryAfter: .milliseconds(300)))
    // Cost 0 is answered as cost 1: behind the waiting 3.
    #expect(m.tryAcquire(cost: 0, now: ms(0)) == .limited(retryAfter: .milliseconds(300)))
    #expect(m.availablePermits(now: ms(0)) == 1)
    #expect(m.waitingCount == 1)
    #expect(m.timerFired(now: ms(200)) == grant(1))
    #expect(m.tryAcquire(cost: 0, now: ms(200)) == .limited(retryAfter: .milliseconds(100)))
    #expect(m.tryAcquire(cost: 0, now: ms(300)) == .allowed(remaining: 1))
  }

  @Test func permitsThatComeBackOnlyAfterTheEndOfTheTimelineNeedNoTimer() {
    var m = Machine(
      bucket: TokenBucket(permits: 1, per: .seconds(Int64.max), burst: 1, now: PaceInstant(nanoseconds: 1)))
    #expect(m.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: 1)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 1, now: PaceInstant(nanoseconds: 1)) == .none)
    #expect(m.isWaiting)
    #expect(m.cancel(id: 1, now: .max) == RateLimitAction(refused: 1))
  }

  /// The three limits where the capacity saturates 64 bits, and an ordinary one: the
  /// permits a full bucket holds, then after taking one. Both limiters report these, through
  /// this machine.
  @Test(arguments: [
    (1, Duration.seconds(365 * 86_400), 300, 292, 291),
    (2, Duration.nanoseconds(Int64.max), 2, 1, 0),
    (Int.max, Duration.seconds(1), Int.max, 9_223_372_036, 9_223_372_035),
    (3, Duration.seconds(1), 3, 3, 2),
  ])
  func theReportedPermitsAtEveryLimit(permits: Int, interval: Duration, burst: Int, full: Int, afterOne: Int) {
    var m = machine(permits: permits, per: interval, burst: burst)
    #expect(m.bucket.rate.fullPermits == full)
    #expect(m.availablePermits(now: ms(0)) == full)
    #expect(m.tryAcquire(cost: 0, now: ms(0)) == .allowed(remaining: full))
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .allowed(remaining: afterOne))
    #expect(m.availablePermits(now: ms(0)) == afterOne)
  }

  @Test func anIntervalBeyondInt64MaxSecondsSaturates() {
    var m = machine(permits: 1, per: .seconds(Int64.max) * 4, burst: 1)
    #expect(m.bucket.unitsPerPermit == .max)
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .limited(retryAfter: .nanoseconds(Int64.max)))
    #expect(m.enqueue(id: 1, cost: 1, now: ms(0)) == wake(at: .max))
    #expect(m.timerFired(now: .max) == grant(1))
  }

  /// ``KeyedRateLimiter`` builds machines from copies of its stored queues, so a copy of a queue
  /// or a machine must change alone, though copies share the ids' ring until one of them changes.
  @Test func aCopiedQueueOrMachineChangesAlone() {
    var queue = RateLimitQueue()
    for id in UInt64(1)...3 { queue.append(id: id, cost: Int(id)) }
    var copy = queue
    #expect(copy.order === queue.order)
    // Cancelled in the copy, then dropped from the copy's ring as its head is looked at.
    let removed = copy.remove(id: 1)
    #expect(removed)
    let head = copy.first
    #expect(head?.id == 2 && head?.cost == 2)
    #expect(copy.order !== queue.order)
    copy.append(id: 4, cost: 4)
    copy.removeFirst()
    let (copyIDs, copyPermits) = (copy.order.ring.count, copy.permits)
    #expect(copyIDs == 2 && copyPermits == 7)
    let (ids, permits) = (queue.order.ring.count, queue.permits)
    #expect(ids == 3 && permits == 6 && queue.count == 3)
    let originalHead = queue.first
    #expect(originalHead?.id == 1 && originalHead?.cost == 1)

    // The last waiter cancelled in a copy: the copy gets an empty order of its own.
    var single = RateLimitQueue()
    single.append(id: 1, cost: 1)
    var emptied = single
    let removedLast = emptied.remove(id: 1)
    #expect(removedLast)
    let (emptiedIDs, singleIDs) = (emptied.order.ring.count, single.order.ring.count)
    let singleHead = single.first
    #expect(emptiedIDs == 0 && singleIDs == 1 && singleHead?.id == 1)

    var m = machine()
    #expect(m.tryAcquire(cost: 10, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 5, now: ms(0)) == wake(at: ms(500)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(0)) == wake(at: ms(500)))
    var other = m
    #expect(other.cancel(id: 1, now: ms(100)) == RateLimitAction(granted: [2], refused: 1))
    #expect(other.enqueue(id: 3, cost: 1, now: ms(100)) == wake(at: ms(200)))
    #expect(m.waitingCount == 2)
    #expect(m.timerFired(now: ms(500)) == grant(1, wakeAt: ms(600)))
    #expect(m.timerFired(now: ms(600)) == grant(2))
    #expect(other.timerFired(now: ms(200)) == grant(3))
  }

  /// A queue that fills and empties in turn, its last waiter granted or cancelled, keeps its ring
  /// and the ring's storage, so that it allocates nothing after the first time.
  @Test func aQueueThatFillsAndEmptiesInTurnKeepsItsStorage() {
    var m = machine(burst: 1)
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 1, now: ms(0)) == wake(at: ms(100)))
    // Weak, so that the queue's order stays uniquely referenced, as in a limiter.
    weak let order = m.queue!.order
    for round in UInt64(1)...40 {
      let (now, next) = (ms(Int64(round) * 100), ms(Int64(round) * 100 + 100))
      // Granted, then cancelled: both leave the queue empty, its storage kept.
      #expect(m.timerFired(now: now) == grant(round * 2 - 1))
      let afterGrant = m.queue!.order.ring.capacity
      #expect(m.enqueue(id: round * 2, cost: 1, now: now) == wake(at: next))
      #expect(m.cancel(id: round * 2, now: now) == RateLimitAction(refused: round * 2, wakeAt: nil))
      let (afterCancel, same) = (m.queue!.order.ring.capacity, m.queue!.order === order)
      #expect(afterGrant == 16 && afterCancel == 16 && same)
      #expect(m.enqueue(id: round * 2 + 1, cost: 1, now: now) == wake(at: next))
    }
  }
}
