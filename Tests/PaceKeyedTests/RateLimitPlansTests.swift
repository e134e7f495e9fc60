import PaceTestSupport
import Testing

@testable import Pace

/// `RateLimitPlans`: each key's limit set and removed at run time, read by the limiters made with
/// it at the key's next decision; a limit no limiter could count exactly is refused with an error.
@Suite(.timeLimit(.minutes(1))) struct RateLimitPlansTests {
  let scheduler = TestScheduler()

  static let free = RateLimit(permits: 2, per: .seconds(1))
  static let pro = RateLimit(permits: 10, per: .seconds(1), burst: 5)

  @Test func aKeyHasTheDefaultUntilItIsGivenALimitOfItsOwn() throws {
    let plans = RateLimitPlans<String>(default: Self.free)
    #expect(plans.limit(for: "k") == Self.free)
    #expect(plans.ownLimit(for: "k") == nil)
    try plans.setLimit(Self.pro, for: "k")
    #expect(plans.limit(for: "k") == Self.pro)
    #expect(plans.limit(for: "other") == Self.free)
    #expect(plans.ownLimits == ["k": Self.pro])
    #expect(plans.removeLimit(for: "k") == Self.pro)
    #expect(plans.removeLimit(for: "k") == nil)
    #expect(plans.limit(for: "k") == Self.free)
    try plans.setDefaultLimit(Self.pro)
    #expect(plans.limit(for: "k") == Self.pro)
    #expect(plans.defaultLimit == Self.pro)
  }

  /// The version grows at each change, and only then.
  @Test func theVersionCountsChanges() throws {
    let plans = RateLimitPlans<String>(default: Self.free, limits: ["a": Self.pro])
    #expect(plans.version == 0)
    try plans.setLimit(Self.pro, for: "a")
    #expect(plans.version == 0)
    try plans.setLimit(Self.free, for: "a")
    #expect(plans.version == 1)
    plans.removeLimit(for: "absent")
    #expect(plans.version == 1)
    plans.removeLimit(for: "a")
    #expect(plans.version == 2)
    try plans.replaceLimits(with: ["b": Self.pro])
    try plans.replaceLimits(with: ["b": Self.pro])
    #expect(plans.version == 3)
    try plans.setDefaultLimit(Self.free)
    #expect(plans.version == 3)
  }

  /// A limit that `RateLimit.validated` refuses is refused when set, with its error, and nothing
  /// changes: a limiter never meets it.
  @Test func aLimitNoLimiterCanCountExactlyIsRefusedWhenSet() throws {
    let plans = RateLimitPlans<String>(default: Self.free, limits: ["k": Self.pro])
    let hugeBurst = RateLimit(permits: 1, per: .seconds(1), burst: .max)
    #expect(throws: RateLimitError.burstTooLarge(.max, maximum: 9_223_372_036)) {
      try plans.setLimit(hugeBurst, for: "k")
    }
    let tooLong = RateLimit.slidingWindow(permits: 1, per: .seconds(Int64.max))
    #expect(throws: RateLimitError.intervalTooLong(.seconds(Int64.max))) { try plans.setLimit(tooLong, for: "k") }
    #expect(throws: RateLimitError.intervalTooLong(.seconds(Int64.max))) { try plans.setDefaultLimit(tooLong) }
    #expect(throws: RateLimitError.intervalTooLong(.seconds(Int64.max))) {
      try plans.replaceLimits(with: ["a": Self.free, "b": tooLong])
    }
    #expect(plans.ownLimits == ["k": Self.pro])
    #expect(plans.defaultLimit == Self.free)
    #expect(plans.version == 0)
  }

  /// A key's limit changes for its next decision; it keeps what it used (two permits of the free
  /// plan are two of the pro plan's five), and the default again once its own limit is removed.
  @Test func aKeysLimitChangesForItsNextDecision() throws {
    let plans = RateLimitPlans<String>(default: Self.free)
    let limiter = KeyedRateLimiter(plans: plans, clock: scheduler)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 1))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(500)))
    try plans.setLimit(Self.pro, for: "k")
    #expect(limiter.limit(for: "k") == Self.pro)
    for remaining in [2, 1, 0] { #expect(limiter.tryAcquire("k") == .allowed(remaining: remaining)) }
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(100)))
    // Back on the free plan, the key owes the pro plan's five permits: two and a half seconds.
    plans.removeLimit(for: "k")
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(2000)))
    scheduler.advance(by: .milliseconds(2000))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    scheduler.advance(by: .seconds(10))
    #expect(limiter.trackedKeyCount == 0)
  }

  /// A store-backed limiter made with plans passes each key's plan of the moment to its store.
  @Test func aStoreBackedLimiterPassesThePlanToItsStore() async throws {
    let plans = RateLimitPlans<String>(default: Self.free)
    let store = StoreBackedRateLimiterTests.FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter(plans: plans, clock: scheduler, store: store)
    _ = try await limiter.decide("k")
    try plans.setLimit(Self.pro, for: "k")
    _ = try await limiter.decide("k")
    await #expect(throws: InvalidInput.costAboveBurst(cost: 6, burst: 5)) { try await limiter.decide("k", cost: 6) }
    #expect(store.askedLimits == [Self.free, Self.pro])
    #expect(limiter.limit(for: "k") == Self.pro)
  }
}
