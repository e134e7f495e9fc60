import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `RateLimiter(limit:)` under every policy, on virtual time with exact instants: the window
/// policies' grants and waits, and the cost rule.
@Suite(.timeLimit(.minutes(3))) struct RateLimiterWindowTests {
  let scheduler = TestScheduler()

  static let limits: [RateLimit] = [
    RateLimit(permits: 3, per: .seconds(10)), .slidingWindow(permits: 3, per: .seconds(10)),
    .fixedWindow(permits: 3, per: .seconds(10)),
  ]

  /// The example, synchronously: "3 in any 10 s" allows 3 at 0 s, then nothing until
  /// 10 s, whereas a token bucket of 3 per 10 s allows a 4th at 3.33 s.
  @Test func aSlidingWindowNeverAllowsAFourthWithinTenSeconds() {
    let window = RateLimiter(limit: .slidingWindow(permits: 3, per: .seconds(10)), clock: scheduler)
    let bucket = RateLimiter(permits: 3, per: .seconds(10), clock: scheduler)
    for remaining in [2, 1, 0] {
      #expect(window.tryAcquire() == .allowed(remaining: remaining))
      #expect(bucket.tryAcquire() == .allowed(remaining: remaining))
    }
    #expect(window.tryAcquire() == .limited(retryAfter: .seconds(10)))
    scheduler.advance(to: PaceInstant(nanoseconds: 3_333_333_334))
    #expect(bucket.tryAcquire() == .allowed(remaining: 0))
    #expect(window.tryAcquire() == .limited(retryAfter: .nanoseconds(6_666_666_666)))
    scheduler.advance(to: PaceInstant(.seconds(10)))
    #expect(window.tryAcquire() == .allowed(remaining: 2))
  }

  @Test func aFixedWindowAllowsItsPermitsAgainAtEachWindowsStart() {
    let limiter = RateLimiter(limit: .fixedWindow(permits: 3, per: .seconds(10)), clock: scheduler)
    scheduler.advance(to: PaceInstant(.seconds(9)))
    #expect(limiter.tryAcquire(cost: 3) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire() == .limited(retryAfter: .seconds(1)))
    scheduler.advance(to: PaceInstant(.seconds(10)))
    #expect(limiter.availablePermits == 3)
    #expect(limiter.tryAcquire(cost: 3) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire() == .limited(retryAfter: .seconds(10)))
  }

  /// The cost rule, for every policy: 0 takes nothing and is answered as 1; the burst fits a
  /// fresh limiter; above it, `tryAcquire` answers never and `acquire` throws, taking nothing;
  /// a negative cost throws from `acquire`.
  @Test(arguments: limits)
  func theCostRule(limit: RateLimit) async throws {
    let limiter = RateLimiter(limit: limit, clock: scheduler)
    #expect(limiter.tryAcquire(cost: 0) == .allowed(remaining: 3))
    #expect(limiter.tryAcquire(cost: 4) == .limited(retryAfter: RateLimitDecision.never))
    #expect(limiter.tryAcquire(cost: .max) == .limited(retryAfter: RateLimitDecision.never))
    await #expect(throws: InvalidInput.negativeCost(-1)) { try await limiter.acquire(cost: -1) }
    await #expect(throws: InvalidInput.negativeCost(.min)) { try await limiter.acquire(cost: .min) }
    await #expect(throws: InvalidInput.costAboveBurst(cost: 4, burst: 3)) { try await limiter.acquire(cost: 4) }
    await #expect(throws: InvalidInput.costAboveBurst(cost: .max, burst: 3)) { try await limiter.acquire(cost: .max) }
    #expect(limiter.availablePermits == 3)
    try await limiter.acquire(cost: 0)
    #expect(limiter.availablePermits == 3)
    try await limiter.acquire(cost: 3)
    let one = limiter.tryAcquire(cost: 1)
    #expect(!one.isAllowed)
    #expect(limiter.tryAcquire(cost: 0) == one)
    #expect(limiter.waitingCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  #if compiler(>=6.2)  // Task.immediate
  /// Five uploads under "3 in any 10 s": three at 0 s, two at 10 s, in the order they came.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func waitingUploadsAreGrantedWhenTheWindowLetsThem() async throws {
    let limiter = RateLimiter(limit: .slidingWindow(permits: 3, per: .seconds(10)), clock: scheduler)
    let started = LockedRecorder<Int>(scheduler: scheduler)
    let uploads = (1...5).map { upload in
      Task.immediate {
        try await limiter.acquire()
        started.record(upload)
      }
    }
    for upload in uploads.prefix(3) { try await upload.value }
    #expect(limiter.waitingCount == 2)
    #expect(scheduler.pendingDeadlines == [.seconds(10)])
    scheduler.advance(to: PaceInstant(.seconds(10)))
    for upload in uploads.suffix(2) { try await upload.value }
    #expect(started.times == [.zero, .zero, .zero, .seconds(10), .seconds(10)])
    #expect(Set(started.values.suffix(2)) == [4, 5])
  }

  /// Mixed costs wait in order under a window; a cancelled head takes nothing and lets the
  /// request behind it through at once; a cost of 0 waits as a cost of 1.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 5, per: .seconds(10)), .fixedWindow(permits: 5, per: .seconds(10)),
  ])
  func mixedCostsWaitInOrderAndACancelledOneTakesNothing(limit: RateLimit) async throws {
    let limiter = RateLimiter(limit: limit, clock: scheduler)
    #expect(limiter.tryAcquire(cost: 4) == .allowed(remaining: 1))
    let large = Task.immediate { try await limiter.acquire(cost: 5) }
    let small = Task.immediate { try await limiter.acquire(cost: 1) }
    let free = Task.immediate { try await limiter.acquire(cost: 0) }
    #expect(limiter.waitingCount == 3)
    #expect(scheduler.pendingDeadlines == [.seconds(10)])
    // Cost 1 behind the waiting 5 and 1: the window after theirs.
    #expect(limiter.tryAcquire(cost: 1) == .limited(retryAfter: .seconds(20)))
    scheduler.advance(to: PaceInstant(.seconds(1)))
    large.cancel()
    await #expect(throws: CancellationError.self) { try await large.value }
    // The small one fits now; the free one waits for one more permit.
    try await small.value
    #expect(limiter.waitingCount == 1)
    #expect(scheduler.pendingDeadlines == [.seconds(10)])
    scheduler.advance(to: PaceInstant(.seconds(10)))
    try await free.value
    #expect(limiter.availablePermits == (limit.algorithm == .slidingWindow ? 4 : 5))
  }

  /// A sequence paced by a window limit of its own.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aSequenceRateLimitedToASlidingWindow() async throws {
    let uploads = ImmediateSequence(elements: [1, 2, 3, 4])
    let reader = IteratorBox(
      uploads.rateLimited(to: .slidingWindow(permits: 3, per: .seconds(10)), clock: scheduler).makeAsyncIterator())
    for upload in 1...3 { #expect(try await reader.next() == upload) }
    let fourth = Task.immediate { try await reader.next() }
    #expect(scheduler.pendingDeadlines == [.seconds(10)])
    scheduler.advance(to: PaceInstant(.seconds(10)))
    #expect(try await fourth.value == 4)
  }
  #endif
}
