import Testing

@testable import Pace

/// `RateLimit.validated`: every duration and rate a caller can configure is checked with a thrown
/// error, never a trap, and a limit it accepts is counted without overflow at the ends of the
/// timeline.
@Suite struct RateLimiterValidationTests {
  static let policies: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]

  @Test(arguments: policies)
  func theExtremesAreRefusedWithAnError(policy: RateLimit.Algorithm) {
    func refusal(_ permits: Int, _ interval: Duration, _ burst: Int? = nil) -> RateLimitError? {
      do {
        _ = try RateLimit.validated(permits: permits, per: interval, burst: burst, algorithm: policy)
        return nil
      } catch {
        return error
      }
    }
    #expect(refusal(0, .seconds(1)) == .permitsNotPositive(0))
    #expect(refusal(-1, .seconds(1)) == .permitsNotPositive(-1))
    #expect(refusal(Int.min, .seconds(1)) == .permitsNotPositive(Int.min))
    #expect(refusal(1, .zero) == .intervalTooShort(.zero))
    #expect(refusal(1, .seconds(-1)) == .intervalTooShort(.seconds(-1)))
    #expect(refusal(1, .nanoseconds(1) / 2) == .intervalTooShort(.nanoseconds(1) / 2))
    #expect(refusal(1, .seconds(Int64.max)) == .intervalTooLong(.seconds(Int64.max)))
    #expect(refusal(1, .seconds(Int64.max) * 4) == .intervalTooLong(.seconds(Int64.max) * 4))
    #expect(
      refusal(1, .nanoseconds(Int64.max) + .nanoseconds(1))
        == .intervalTooLong(.nanoseconds(Int64.max) + .nanoseconds(1)))
    // The shortest and the longest intervals, and the most permits, are accepted.
    #expect(refusal(1, .nanoseconds(1)) == nil)
    #expect(refusal(1, .nanoseconds(Int64.max)) == nil)
    #expect(refusal(Int.max, .seconds(1), policy == .tokenBucket ? 1 : nil) == nil)
    #expect(refusal(Int.max, .nanoseconds(1)) == nil)
    if policy == .tokenBucket {
      #expect(refusal(1, .seconds(1), 0) == .burstNotPositive(0))
      #expect(refusal(1, .seconds(1), -5) == .burstNotPositive(-5))
      // One permit a second is 10^9 units a permit: at most 9,223,372,036 permits in 64 bits.
      #expect(refusal(1, .seconds(1), Int.max) == .burstTooLarge(Int.max, maximum: 9_223_372_036))
      #expect(refusal(1, .seconds(1), 9_223_372_036) == nil)
      #expect(refusal(Int.max, .seconds(1)) == .burstTooLarge(Int.max, maximum: 9_223_372_036))
      #expect(refusal(2, .nanoseconds(Int64.max), 2) == .burstTooLarge(2, maximum: 1))
      #expect(refusal(Int.max, .nanoseconds(1)) == nil)
    } else {
      #expect(refusal(3, .seconds(1), 4) == .burstIsNotPermits(burst: 4, permits: 3))
      #expect(refusal(3, .seconds(1), 3) == nil)
    }
  }

  @Test func anErrorSaysWhichValueAndWhy() {
    #expect("\(RateLimitError.permitsNotPositive(0))" == "the permits 0 are not positive")
    #expect("\(RateLimitError.burstTooLarge(7, maximum: 5))" == "the burst 7 is above 5, the most this rate can count")
  }

  /// The accepted extremes, run by a limiter at the ends of the timeline: no trap, exact counts.
  @Test(arguments: policies)
  func acceptedExtremesAreCountedExactlyAtTheEndsOfTheTimeline(policy: RateLimit.Algorithm) throws {
    let limits = [
      try RateLimit.validated(permits: 1, per: .nanoseconds(1), algorithm: policy),
      try RateLimit.validated(permits: 1, per: RateLimit.maximumInterval, algorithm: policy),
      try RateLimit.validated(permits: Int.max, per: .nanoseconds(1), algorithm: policy),
      try RateLimit.validated(permits: Int.max, per: RateLimit.maximumInterval, algorithm: policy),
    ]
    for limit in limits {
      for start in [Int64.min, -1, 0, Int64.max - 1] {
        let scheduler = TestScheduler(now: PaceInstant(nanoseconds: start))
        let limiter = RateLimiter(limit: limit, clock: scheduler)
        #expect(limiter.availablePermits == limit.burst, "\(limit) at \(start)")
        #expect(limiter.tryAcquire(cost: limit.burst) == .allowed(remaining: 0), "\(limit) at \(start)")
        #expect(!limiter.tryAcquire(cost: 1).isAllowed, "\(limit) at \(start)")
        #expect(limiter.tryAcquire(cost: 0) == limiter.tryAcquire(cost: 1), "\(limit) at \(start)")
        scheduler.advance(to: .max)
        _ = limiter.tryAcquire(cost: 1)
        _ = limiter.availablePermits
      }
    }
  }

  /// `decide(cost:)`: the decision of `tryAcquire(cost:)` for a cost from outside, which throws
  /// where `tryAcquire` would trap, and takes nothing then.
  @Test func decideThrowsForACostNoWaitWouldGrant() throws {
    let limiter = RateLimiter(permits: 2, per: .seconds(1), clock: TestScheduler())
    #expect(throws: InvalidInput.negativeCost(-1)) { try limiter.decide(cost: -1) }
    #expect(throws: InvalidInput.costAboveBurst(cost: 3, burst: 2)) { try limiter.decide(cost: 3) }
    #expect(limiter.availablePermits == 2)
    #expect(try limiter.decide(cost: 0) == .allowed(remaining: 2))
    #expect(try limiter.decide(cost: 2) == .allowed(remaining: 0))
    #expect(try limiter.decide() == .limited(retryAfter: .milliseconds(500)))
  }
}
