import PaceTestSupport
import Testing

@testable import Pace

/// The machine over the window policies, driven directly: `now` in, grants and wake times out,
/// at exact instants.
@Suite struct RateLimitStateMachineWindowTests {
  typealias Machine = RateLimitMachine<RateLimitCounter>

  func machine(_ limit: RateLimit, now: PaceInstant = .zero) -> Machine {
    Machine(counter: RateLimitCounter(limit: limit, now: now))
  }

  func grant(_ ids: UInt64..., wakeAt: PaceInstant? = nil) -> RateLimitAction {
    RateLimitAction(granted: ids, wakeAt: wakeAt)
  }

  func wake(at deadline: PaceInstant) -> RateLimitAction {
    RateLimitAction(wakeAt: deadline)
  }

  func s(_ seconds: Int64) -> PaceInstant { PaceInstant(.seconds(seconds)) }

  /// The example: five uploads at 0 s under "3 in any 10 s" are granted at 0, 0, 0, then
  /// 10 and 10 s (a token bucket of 3 per 10 s grants the 4th and 5th at 3.33 and 6.67 s).
  @Test func aSlidingWindowOfThreeInTenSecondsGrantsTheFourthAtTenSeconds() {
    var m = machine(.slidingWindow(permits: 3, per: .seconds(10)))
    #expect(m.enqueue(id: 1, cost: 1, now: .zero) == grant(1))
    #expect(m.enqueue(id: 2, cost: 1, now: .zero) == grant(2))
    #expect(m.enqueue(id: 3, cost: 1, now: .zero) == grant(3))
    #expect(m.enqueue(id: 4, cost: 1, now: .zero) == wake(at: s(10)))
    #expect(m.enqueue(id: 5, cost: 1, now: .zero) == wake(at: s(10)))
    #expect(m.timerFired(now: PaceInstant(nanoseconds: 9_999_999_999)) == wake(at: s(10)))
    #expect(m.timerFired(now: s(10)) == grant(4, 5))
    #expect(m.availablePermits(now: s(10)) == 1)

    var bucket = Machine(counter: RateLimitCounter(limit: RateLimit(permits: 3, per: .seconds(10)), now: .zero))
    for id in UInt64(1)...3 { #expect(bucket.enqueue(id: id, cost: 1, now: .zero) == grant(id)) }
    #expect(bucket.enqueue(id: 4, cost: 1, now: .zero) == wake(at: PaceInstant(nanoseconds: 3_333_333_334)))
  }

  /// A grant at `g` counts during `[g, g + T)`: each permit comes back exactly `T` after it was
  /// granted, oldest first.
  @Test func aSlidingWindowsPermitsComeBackOneWindowAfterTheirGrant() {
    var m = machine(.slidingWindow(permits: 3, per: .seconds(10)))
    #expect(m.tryAcquire(cost: 1, now: s(0)) == .allowed(remaining: 2))
    #expect(m.tryAcquire(cost: 1, now: s(4)) == .allowed(remaining: 1))
    #expect(m.tryAcquire(cost: 1, now: s(7)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 1, now: s(8)) == .limited(retryAfter: .seconds(2)))
    #expect(m.tryAcquire(cost: 2, now: s(8)) == .limited(retryAfter: .seconds(6)))
    #expect(m.tryAcquire(cost: 3, now: s(8)) == .limited(retryAfter: .seconds(9)))
    #expect(
      m.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: 9_999_999_999)) == .limited(retryAfter: .nanoseconds(1)))
    #expect(m.tryAcquire(cost: 1, now: s(10)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 0, now: s(12)) == .limited(retryAfter: .seconds(2)))
    #expect(m.tryAcquire(cost: 0, now: s(14)) == .allowed(remaining: 1))
    // Any 10 s holds at most 3 grants: 4, 7, 10 s.
    #expect(m.availablePermits(now: s(20)) == 3)
    #expect(m.counter.isIdle)
  }

  /// Windows aligned to the clock's origin: the count starts again at each window's start, and a
  /// refused request waits exactly until then (the window's well-known edge: 3 at 9 s and 3
  /// more at 10 s).
  @Test func aFixedWindowStartsCountingAgainAtEachWindowsStart() {
    var m = machine(.fixedWindow(permits: 3, per: .seconds(10)))
    #expect(m.tryAcquire(cost: 3, now: s(9)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 1, now: s(9)) == .limited(retryAfter: .seconds(1)))
    #expect(m.tryAcquire(cost: 0, now: s(9)) == .limited(retryAfter: .seconds(1)))
    #expect(m.tryAcquire(cost: 2, now: s(10)) == .allowed(remaining: 1))
    #expect(m.tryAcquire(cost: 2, now: s(19)) == .limited(retryAfter: .seconds(1)))
    #expect(m.tryAcquire(cost: 0, now: s(19)) == .allowed(remaining: 1))
    #expect(m.enqueue(id: 1, cost: 2, now: s(19)) == wake(at: s(20)))
    #expect(m.enqueue(id: 2, cost: 2, now: s(19)) == wake(at: s(20)))
    #expect(m.timerFired(now: s(20)) == grant(1, wakeAt: s(30)))
    #expect(m.timerFired(now: s(30)) == grant(2))
    #expect(m.availablePermits(now: s(35)) == 1)
    #expect(m.counter.idleTime == s(40))
  }

  /// Instants before the origin fall in negative windows (floor division).
  @Test func aFixedWindowBeforeTheOriginIsFloored() {
    var m = machine(.fixedWindow(permits: 1, per: .seconds(10)), now: PaceInstant(nanoseconds: -1))
    #expect(m.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: -1)) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: -1)) == .limited(retryAfter: .nanoseconds(1)))
    #expect(m.tryAcquire(cost: 1, now: .zero) == .allowed(remaining: 0))
    #expect(m.tryAcquire(cost: 1, now: s(-5)) == .limited(retryAfter: .seconds(15)))  // time never goes back
  }

  /// First come, first served with mixed costs: a small request never overtakes a large one,
  /// even when it would fit; once the head is granted, everything behind it that fits goes too.
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 5, per: .seconds(10)), .fixedWindow(permits: 5, per: .seconds(10)),
  ])
  func waitingRequestsAreGrantedInOrderWithMixedCosts(limit: RateLimit) {
    var m = machine(limit)
    #expect(m.tryAcquire(cost: 3, now: s(0)) == .allowed(remaining: 2))
    #expect(m.tryAcquire(cost: 2, now: s(2)) == .allowed(remaining: 0))
    if limit.algorithm == .slidingWindow {
      // 4 needs both grants gone: at 12 s; the 1 behind it would fit at 10 s, and waits.
      #expect(m.enqueue(id: 1, cost: 4, now: s(3)) == wake(at: s(12)))
      #expect(m.enqueue(id: 2, cost: 1, now: s(3)) == wake(at: s(12)))
      // Behind them: both granted at 12 s fill the window, until the 4 leave it at 22 s.
      #expect(m.tryAcquire(cost: 1, now: s(3)) == .limited(retryAfter: .seconds(19)))
      #expect(m.tryAcquire(cost: 0, now: s(3)) == .limited(retryAfter: .seconds(19)))
      #expect(m.timerFired(now: s(10)) == wake(at: s(12)))
      #expect(m.timerFired(now: s(12)) == grant(1, 2))
    } else {
      #expect(m.enqueue(id: 1, cost: 4, now: s(3)) == wake(at: s(10)))
      #expect(m.enqueue(id: 2, cost: 1, now: s(3)) == wake(at: s(10)))
      // Behind them: both granted at 10 s fill that window; the next starts at 20 s.
      #expect(m.tryAcquire(cost: 1, now: s(3)) == .limited(retryAfter: .seconds(17)))
      #expect(m.timerFired(now: s(10)) == grant(1, 2))
    }
    #expect(!m.isWaiting)
  }

  /// A cancelled head leaves the queue; what fits behind it is granted at once.
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 5, per: .seconds(10)), .fixedWindow(permits: 5, per: .seconds(10)),
  ])
  func cancellingTheHeadGrantsWhatFitsBehindIt(limit: RateLimit) {
    var m = machine(limit)
    #expect(m.tryAcquire(cost: 4, now: s(1)) == .allowed(remaining: 1))
    #expect(m.enqueue(id: 1, cost: 5, now: s(1)) == wake(at: s(limit.algorithm == .slidingWindow ? 11 : 10)))
    #expect(m.enqueue(id: 2, cost: 1, now: s(1)) == wake(at: s(limit.algorithm == .slidingWindow ? 11 : 10)))
    #expect(m.cancel(id: 1, now: s(2)) == RateLimitAction(granted: [2], refused: 1))
    #expect(m.availablePermits(now: s(2)) == 0)
    #expect(m.cancel(id: 2, now: s(2)) == .none)
  }

  /// A cost of 0 waits as a cost of 1 and takes nothing.
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 2, per: .seconds(10)), .fixedWindow(permits: 2, per: .seconds(10)),
  ])
  func aRequestOfCostZeroWaitsAsCostOneAndTakesNothing(limit: RateLimit) {
    var m = machine(limit)
    #expect(m.tryAcquire(cost: 2, now: s(0)) == .allowed(remaining: 0))
    #expect(m.enqueue(id: 1, cost: 0, now: s(0)) == wake(at: s(10)))
    #expect(m.timerFired(now: s(10)) == grant(1))
    #expect(m.availablePermits(now: s(10)) == 2)
  }

  /// The cost rule, in the machine for every policy: 0 is cost 1's answer and takes nothing,
  /// the burst fits a fresh key, above it is never.
  @Test(arguments: [
    RateLimit(permits: 3, per: .seconds(1)), .slidingWindow(permits: 3, per: .seconds(1)),
    .fixedWindow(permits: 3, per: .seconds(1)),
  ])
  func theCostRule(limit: RateLimit) {
    var m = machine(limit)
    #expect(m.tryAcquire(cost: 0, now: .zero) == .allowed(remaining: 3))
    #expect(m.tryAcquire(cost: 4, now: .zero) == .limited(retryAfter: RateLimitDecision.never))
    #expect(m.tryAcquire(cost: .max, now: .zero) == .limited(retryAfter: RateLimitDecision.never))
    #expect(m.tryAcquire(cost: 3, now: .zero) == .allowed(remaining: 0))
    let one = m.tryAcquire(cost: 1, now: .zero)
    #expect(!one.isAllowed)
    #expect(m.tryAcquire(cost: 0, now: .zero) == one)
    #expect(m.availablePermits(now: .zero) == 0)
  }

  /// Windows of `Int64.max` seconds count as `Int64.max` nanoseconds, and instants near the end
  /// of the timeline never trap: a permit that comes back only after the end waits with no timer.
  @Test(arguments: [Duration.seconds(Int64.max), .seconds(Int64.max) * 4, .nanoseconds(Int64.max)])
  func windowsAndInstantsAtTheEndOfTheTimeline(window: Duration) {
    let late = PaceInstant(nanoseconds: .max - 5)
    var sliding = machine(.slidingWindow(permits: 1, per: window), now: late)
    #expect(sliding.tryAcquire(cost: 1, now: late) == .allowed(remaining: 0))
    // The permit comes back past the end of the timeline: never.
    #expect(sliding.tryAcquire(cost: 1, now: late) == .limited(retryAfter: RateLimitDecision.never))
    #expect(sliding.enqueue(id: 1, cost: 1, now: late) == .none)
    #expect(sliding.timerFired(now: .max) == .none)
    #expect(sliding.cancel(id: 1, now: .max) == RateLimitAction(refused: 1))
    #expect(sliding.counter.idleTime == nil)

    // A grant at the start of the timeline has left any window by the origin: its age does not fit
    // 64 bits.
    let start = PaceInstant(nanoseconds: .min)
    var early = machine(.slidingWindow(permits: 1, per: window), now: start)
    #expect(early.tryAcquire(cost: 1, now: start) == .allowed(remaining: 0))
    #expect(early.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: -2)) == .limited(retryAfter: .nanoseconds(1)))
    #expect(early.tryAcquire(cost: 1, now: PaceInstant(nanoseconds: -1)) == .allowed(remaining: 0))

    // Fixed windows of `Int64.max` ns: the second starts at the end of the timeline, the third
    // never does.
    var fixed = machine(.fixedWindow(permits: 1, per: window), now: late)
    #expect(fixed.tryAcquire(cost: 1, now: late) == .allowed(remaining: 0))
    #expect(fixed.tryAcquire(cost: 1, now: late) == .limited(retryAfter: .nanoseconds(5)))
    #expect(fixed.enqueue(id: 1, cost: 1, now: late) == wake(at: .max))
    #expect(fixed.timerFired(now: .max) == grant(1))
    #expect(fixed.enqueue(id: 2, cost: 1, now: .max) == .none)
    #expect(!fixed.tryAcquire(cost: 1, now: .max).isAllowed)
    #expect(fixed.counter.idleTime == nil)
  }

  /// "Never" has one spelling: a refusal whose permits never come back, even at the end of the
  /// timeline, answers `RateLimitDecision.never` (it was the duration until `PaceInstant.max`, and
  /// 0 at that instant), as a cost above the burst does; a permit that comes back at the last
  /// instant is a real wait.
  @Test(arguments: [RateLimit.Algorithm.tokenBucket, .slidingWindow, .fixedWindow])
  func aRefusalThatNoWaitPassesAnswersNever(algorithm: RateLimit.Algorithm) throws {
    let window = RateLimit.maximumInterval
    let limit = try RateLimit.validated(permits: 1, per: window, algorithm: algorithm)
    let late = PaceInstant(nanoseconds: .max - 5)
    var limiter = machine(limit, now: late)
    #expect(limiter.tryAcquire(cost: 1, now: late) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire(cost: 2, now: late) == .limited(retryAfter: RateLimitDecision.never))
    let atTheEnd = limiter.tryAcquire(cost: 1, now: .max)
    if algorithm == .fixedWindow {
      #expect(atTheEnd == .allowed(remaining: 0))  // the second window starts at the last instant
      #expect(limiter.tryAcquire(cost: 1, now: .max) == .limited(retryAfter: RateLimitDecision.never))
    } else {
      #expect(atTheEnd == .limited(retryAfter: RateLimitDecision.never))
    }
  }

  /// A sliding window's memory: one 16-byte entry per instant with grants still in the window
  /// (at most N), given back once they have all left it; a fixed window's is 16 bytes.
  @Test func theMemoryOfEachWindowPerKey() {
    var log = SlidingWindowLog(rate: WindowRate(permits: 100, per: .seconds(1)), now: .zero)
    for _ in 0..<50 {
      let taken = log.tryTake(1, now: .zero)
      #expect(taken)
    }
    #expect(log.grants.count - log.head == 1)
    for instant in Int64(1)...50 {
      let taken = log.tryTake(1, now: ms(instant))
      #expect(taken)
    }
    #expect(log.grants.count - log.head == 51)
    let atTheEnd = log.available(now: ms(999))
    #expect(atTheEnd == 0)
    let taken = log.tryTake(50, now: ms(1_000))  // the 50 granted at 0 ms left the window
    #expect(taken)
    #expect(log.readyTime(for: 1) == ms(1_001))
    let later = log.available(now: ms(1_050))
    #expect(later == 50)  // the 50 granted from 1 to 50 ms left too
    #expect(log.idleTime == ms(2_000))
    log.refill(now: ms(2_000))
    #expect(log.isIdle)
    #expect(log.grants.isEmpty)
    #expect(MemoryLayout<SlidingWindowLog.Grant>.stride == 16)
    #expect(MemoryLayout<FixedWindowCounter>.size - MemoryLayout<WindowRate>.size == 16)
    #expect(MemoryLayout<TokenBucketLevel>.size == 16)
  }
}
