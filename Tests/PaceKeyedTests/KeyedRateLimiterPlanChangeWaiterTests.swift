import PaceTestSupport
import Testing

@testable import Pace

/// A request waiting (`acquire`) when its key's plan changes: it was queued under the old limit,
/// and is granted at the first instant the key's state under the new limit, with what the change
/// assumes, lets it through. The property, on seeded timelines for every pair of algorithms: the
/// instant it is granted is one at which the old limit or the new one, applied to the key's
/// whole history, allows one more permit (`RateLimitHistoryOracle.allows`; a new token bucket
/// with its debt capped at its whole burst at the change, the bound a change assumes).
@Suite(.offThePool) struct KeyedRateLimiterPlanChangeWaiterTests {
  typealias Oracle = KeyedRateLimiterLimitChangePropertyTests

  static let pairs: [(RateLimit.Algorithm, RateLimit.Algorithm)] = {
    let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
    return algorithms.flatMap { old in algorithms.map { (old, $0) } }
  }()

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test(arguments: pairs)
  func aRequestWaitingThroughAChangeIsGrantedOnlyWhenTheOldOrTheNewLimitAllows(
    old oldAlgorithm: RateLimit.Algorithm, new newAlgorithm: RateLimit.Algorithm
  ) async throws {
    for seed: UInt64 in 0..<60 {
      for ownLimit in [false, true] {
        try await Self.check(oldAlgorithm, newAlgorithm, seed: seed, ownLimit: ownLimit)
      }
    }
  }

  /// One timeline: a key used at random, then filled, so that one `acquire` waits; its limit
  /// changes while it waits (the default's, or the key's own); time moves 1 ns at a time until
  /// the request is granted.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  static func check(
    _ oldAlgorithm: RateLimit.Algorithm, _ newAlgorithm: RateLimit.Algorithm, seed: UInt64, ownLimit: Bool
  ) async throws {
    var random = SeededGenerator(seed: seed)
    let old = Oracle.randomLimit(oldAlgorithm, &random)
    let new = Oracle.randomLimit(newAlgorithm, &random)
    let scheduler = TestScheduler()
    let plans = RateLimitPlans<String>(default: old, limits: ownLimit ? ["k": old] : [:])
    let limiter = KeyedRateLimiter(plans: plans, clock: scheduler)
    var grants: [Int64] = []
    var t: Int64 = 0
    let queuedAt = Int64.random(in: 50...200, using: &random)
    while t < queuedAt {
      t += Int64.random(in: 0...6, using: &random)
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      if Bool.random(using: &random), limiter.tryAcquire("k").isAllowed { grants.append(t) }
    }
    while limiter.tryAcquire("k").isAllowed { grants.append(t) }
    let request = Task.immediate { try await limiter.acquire("k") }
    #expect(limiter.waitingCount == 1, "seed \(seed): the request waits")
    let changeAt = t + Int64.random(in: 0...30, using: &random)
    var changed = false
    var grantedAt: Int64?
    while grantedAt == nil, t < 100_000 {
      if !changed, t >= changeAt {
        if ownLimit { try plans.setLimit(new, for: "k") } else { try plans.setDefaultLimit(new) }
        changed = true
      }
      t += 1
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      if limiter.waitingCount == 0 { grantedAt = t }
    }
    try await request.value
    guard let g = grantedAt else {
      Issue.record("seed \(seed): never granted under \(old) then \(new)")
      return
    }
    let s = changeAt
    if g > s {
      let newAllows =
        new.algorithm == .tokenBucket
        ? RateLimitHistoryOracle.bucketAllows(new, grants, at: g, debtCappedAt: [s])
        : Oracle.allows(new, grants, at: g)
      #expect(
        Oracle.allows(old, grants, at: g) || newAllows,
        "seed \(seed), own \(ownLimit): granted at \(g) under \(new), after \(old) until \(s); grants \(grants.suffix(20))"
      )
    } else {
      #expect(
        Oracle.allows(old, grants, at: g), "seed \(seed): granted at \(g) under \(old); grants \(grants.suffix(20))")
    }
  }
  #endif
}

/// A clock on a `TestScheduler` that runs an action once, at a chosen read of its time: what lets
/// a test change a plan between a limiter's reads of the clock.
final class ClockWithAHook: Clock, Sendable {
  let scheduler: TestScheduler
  /// The reads to let pass before the action runs, and the action.
  let hook = LockedState<(reads: Int, action: (@Sendable () -> Void)?)>((0, nil))

  init(_ scheduler: TestScheduler) { self.scheduler = scheduler }

  /// Runs `action` at the read after the next `reads` ones.
  func run(after reads: Int, _ action: @escaping @Sendable () -> Void) {
    hook.withLock { $0 = (reads, action) }
  }

  var now: PaceInstant {
    let action = hook.withLock { hook -> (@Sendable () -> Void)? in
      guard let action = hook.action else { return nil }
      if hook.reads > 0 {
        hook.reads -= 1
        return nil
      }
      hook.action = nil
      return action
    }
    action?()
    return scheduler.now
  }

  var minimumResolution: Duration { .nanoseconds(1) }

  func sleep(until deadline: PaceInstant, tolerance: Duration?) async throws {
    try await scheduler.sleep(until: deadline, tolerance: tolerance)
  }
}

/// A request whose key's limit was read before a change, and that reaches the key's state to
/// wait after the change was applied, is queued under the new limit, with what the change
/// assumed: sliding 3 per 10 ns, 3 taken at 0, 10 and 20; the limit becomes 10 per 60 ns
/// at 29, between `acquire`'s decision (under 3 per 10 ns: the 3 at 20 still count) and its
/// queuing. Queued under the old limit, it was granted at 30 (when the 3 at 20 leave its window)
/// and stored the key under it, forgetting what the new limit counts (the grants at 0, 10 and 20
/// and the use assumed before them): 9 more through at 30, where the old limit allows 1 and the
/// new one none. Queued under the new one, it waits for the window to have room.
@Suite struct KeyedRateLimiterStaleWaiterTests {
  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test(arguments: [false, true])
  func aRequestQueuedAfterAChangeItDidNotReadWaitsUnderTheNewLimit(ownLimit: Bool) async throws {
    let scheduler = TestScheduler()
    let clock = ClockWithAHook(scheduler)
    let old = RateLimit.slidingWindow(permits: 3, per: .nanoseconds(10))
    let new = RateLimit.slidingWindow(permits: 10, per: .nanoseconds(60))
    let plans = RateLimitPlans<String>(default: old, limits: ownLimit ? ["k": old] : [:])
    let limiter = KeyedRateLimiter(plans: plans, clock: clock)
    for t: Int64 in [0, 10, 20] {
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    }
    scheduler.advance(to: PaceInstant(nanoseconds: 29))
    // The decision reads the clock once, the queuing once more: the change comes between them.
    clock.run(after: 1) {
      if ownLimit { try? plans.setLimit(new, for: "k") } else { try? plans.setDefaultLimit(new) }
    }
    let request = Task.immediate { try await limiter.acquire("k") }
    #expect(plans.limit(for: "k") == new)
    #expect(limiter.waitingCount == 1)
    let queuedUnder = limiter.shards.withLock(KeyedRateLimiter<String>.shardIndex(hash: "k".hashValue)) {
      $0.queues["k"]?.rate
    }
    #expect(queuedUnder == KeyedRateLimiter<String>.KeyLimit(new).rate)
    // With what the change assumed, the window has room for the request by 69.
    scheduler.advance(to: PaceInstant(nanoseconds: 69))
    try await request.value
    // (9, 69] holds 3 at 10, 3 at 20 and the request's: 3 left, as the new limit over the whole
    // history says.
    #expect(limiter.availablePermits(for: "k") == 3)
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    // Full until the 3 the change assumed at 19 (the old limit's latest before its window) leave.
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(10)))
  }
  #endif
}
