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
    // A request that fits when nobody waits is granted as it joins.
    #expect(m.enqueue(id: 4, cost: 0, now: ms(300)) == grant(4))
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

  @Test func aRequestAboveTheBurstWaitsForAFullBucketAndLeavesDebt() {
    var m = machine(permits: 2, per: .milliseconds(200), burst: 2)
    #expect(m.tryAcquire(cost: 2, now: ms(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 5, now: ms(0)) == wake(at: ms(200)))  // the bucket full again
    #expect(m.timerFired(now: ms(200)) == grant(1))
    // 5 taken from 2: a debt of 3, then 1 more for the next request.
    #expect(m.availablePermits(now: ms(200)) == 0)
    #expect(m.tryAcquire(cost: 1, now: ms(200)) == .limited(retryAfter: .milliseconds(400)))
    #expect(m.enqueue(id: 2, cost: 1, now: ms(200)) == wake(at: ms(600)))
    #expect(m.timerFired(now: ms(600)) == grant(2))
    // Nobody waiting: a request above the burst takes a full bucket at once.
    #expect(m.tryAcquire(cost: 7, now: ms(800)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 0, now: ms(1_200)) == .limited(retryAfter: .milliseconds(100)))
  }

  @Test func tryAcquireIsRefusedWhileARequestWaitsAndChangesNothing() {
    var m = machine()
    #expect(m.tryAcquire(cost: 9, now: ms(0)) == .allowed(remaining: 1))
    #expect(m.enqueue(id: 1, cost: 3, now: ms(0)) == wake(at: ms(200)))
    // One permit is in the bucket, but the waiting request's 3 go first.
    #expect(m.tryAcquire(cost: 1, now: ms(0)) == .limited(retryAfter: .milliseconds(300)))
    #expect(m.tryAcquire(cost: 0, now: ms(0)) == .limited(retryAfter: .milliseconds(200)))
    #expect(m.availablePermits(now: ms(0)) == 1)
    #expect(m.waitingCount == 1)
    #expect(m.timerFired(now: ms(200)) == grant(1))
    #expect(m.tryAcquire(cost: 0, now: ms(200)) == .allowed(remaining: 0))
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
}
