import PaceTestSupport
import Testing

@testable import Pace

/// A limit changed through `RateLimitPlans` to one that looks further back and allows more at
/// once than the old one: the part of its look-back that the key's state no longer records is
/// taken as used at the old limit's maximum, at the latest instants it allows, so the key gets no
/// more than the old limit or the new one would have allowed over its history.
@Suite(.timeLimit(.minutes(1))) struct KeyedRateLimiterPlanChangeTests {
  let scheduler = TestScheduler()

  /// A limiter of `plans` made from these arguments, on this suite's scheduler.
  func planned(
    default limit: RateLimit, limits: [String: RateLimit] = [:]
  ) -> (RateLimitPlans<String>, KeyedRateLimiter<String>) {
    let plans = RateLimitPlans<String>(default: limit, limits: limits)
    return (plans, KeyedRateLimiter(plans: plans, clock: scheduler))
  }

  func advance(to nanoseconds: Int64) {
    scheduler.advance(to: PaceInstant(nanoseconds: nanoseconds))
  }

  /// Sliding 3 per 10 ns, then 10 per 60 ns from 30: the log holds nothing the old window still
  /// counts, but the new one counts the grants at 0, 10 and 20. Taken as 3 at each of 20, 10,
  /// 0 and -10 (the latest the old window allows; the older ones matter only while the window is
  /// full): full until -10's grants leave at 50, then exactly the new limit.
  @Test func aLongerSlidingWindowWithMorePermitsCountsWhatTheOldOneHadLetThrough() throws {
    let (plans, limiter) = planned(
      default: .slidingWindow(permits: 3, per: .nanoseconds(10)),
      limits: ["k": .slidingWindow(permits: 3, per: .nanoseconds(10))])
    for t: Int64 in [0, 10, 20] {
      advance(to: t)
      #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    }
    advance(to: 30)
    try plans.setLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)), for: "k")
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(20)))
    #expect(limiter.availablePermits(for: "k") == 0)
    advance(to: 50)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    // (0, 60] holds the grants at 10, 20 and 50.
    advance(to: 60)
    #expect(limiter.availablePermits(for: "k") == 3)
    advance(to: 109)
    #expect(limiter.availablePermits(for: "k") == 9)
    advance(to: 110)
    #expect(limiter.availablePermits(for: "k") == 10)
    advance(to: 150)
    #expect(limiter.trackedKeyCount == 0)
  }

  /// A token bucket of 10 per 10 ns, burst 10, then 1 per 10 ns with a burst of 20 from 15: the
  /// key took 10 at 0, was full again at 10 and forgotten. The new, slower bucket would still owe
  /// for what the old one let through; taken as empty at the change, it fills at its own rate.
  @Test func aSlowerBucketWithALargerBurstStartsEmpty() throws {
    let (plans, limiter) = planned(default: RateLimit(permits: 10, per: .nanoseconds(10)))
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    advance(to: 15)
    #expect(limiter.trackedKeyCount == 0)
    try plans.setDefaultLimit(RateLimit(permits: 1, per: .nanoseconds(10), burst: 20))
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(10)))
    advance(to: 25)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    advance(to: 224)
    #expect(limiter.availablePermits(for: "k") == 19)
    advance(to: 225)
    #expect(limiter.availablePermits(for: "k") == 20)
    #expect(limiter.trackedKeyCount == 0)
    // A key never seen before the change starts empty too, and so does one first seen later,
    // until an empty bucket at the change would be full again.
    #expect(limiter.tryAcquire("never seen", cost: 20) == .allowed(remaining: 0))
  }

  /// Fixed windows of 3 per 10 s, then 10 per 60 s from 25 s, for a key that took 3 at 0 s and
  /// 3 at 10 s and was forgotten at 20 s: the new window [0, 60 s) is taken to hold 3 for each
  /// old window before [20 s, 30 s), 6 in all, so it lets 4 through, not 10.
  @Test func aLongerFixedWindowCountsWhatAForgottenKeyHadUsed() throws {
    let (plans, limiter) = planned(default: .fixedWindow(permits: 3, per: .seconds(10)))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    scheduler.advance(to: PaceInstant(.seconds(10)))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    scheduler.advance(to: PaceInstant(.seconds(25)))
    #expect(limiter.trackedKeyCount == 0)
    try plans.setDefaultLimit(.fixedWindow(permits: 10, per: .seconds(60)))
    #expect(limiter.tryAcquire("k", cost: 5) == .limited(retryAfter: .seconds(35)))
    #expect(limiter.tryAcquire("k", cost: 4) == .allowed(remaining: 0))
    scheduler.advance(to: PaceInstant(.seconds(60)))
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
  }

  /// A key's own limit removed, or replaced with the others, is a change of its limit too: fixed
  /// windows of 3 per 10 s of their own, then the default of 10 per 60 s from 25 s, for keys that
  /// took 3 at 0 s and 3 at 10 s.
  @Test func removingOrReplacingAKeysOwnLimitIsAChange() throws {
    let own = RateLimit.fixedWindow(permits: 3, per: .seconds(10))
    let (plans, limiter) = planned(
      default: .fixedWindow(permits: 10, per: .seconds(60)), limits: ["a": own, "b": own])
    for t in [0, 10] {
      scheduler.advance(to: PaceInstant(.seconds(t)))
      for key in ["a", "b"] { #expect(limiter.tryAcquire(key, cost: 3) == .allowed(remaining: 0)) }
    }
    scheduler.advance(to: PaceInstant(.seconds(25)))
    plans.removeLimit(for: "a")
    try plans.replaceLimits(with: [:])
    for key in ["a", "b"] {
      #expect(limiter.tryAcquire(key, cost: 5) == .limited(retryAfter: .seconds(35)))
      #expect(limiter.tryAcquire(key, cost: 4) == .allowed(remaining: 0))
    }
  }

  /// A change that looks no further back, or allows no more, assumes nothing: a shorter window
  /// starts from what the key used, as with a `limits:` closure.
  @Test func aChangeThatLooksNoFurtherBackAssumesNothing() throws {
    let (plans, limiter) = planned(default: .slidingWindow(permits: 3, per: .nanoseconds(60)))
    #expect(limiter.tryAcquire("k", cost: 2) == .allowed(remaining: 1))
    advance(to: 30)
    try plans.setDefaultLimit(.slidingWindow(permits: 10, per: .nanoseconds(10)))
    #expect(limiter.availablePermits(for: "k") == 10)
    #expect(limiter.availablePermits(for: "never seen") == 10)
  }

  /// Sliding 3 per 10 ns, then fixed 10 per 60 ns from 30: the log holds nothing the old window
  /// still counts, but the new window [0, 60) counts the grants at 0, 10 and 20. Taken as 3 at
  /// each of 20, 10 and 0, the latest the old window allows: 1 left until 60, not 10.
  @Test func aSlidingWindowChangedToALongerFixedWindowCountsWhatTheOldOneHadLetThrough() throws {
    let (plans, limiter) = planned(default: .slidingWindow(permits: 3, per: .nanoseconds(10)))
    for t: Int64 in [0, 10, 20] {
      advance(to: t)
      #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    }
    advance(to: 30)
    try plans.setDefaultLimit(.fixedWindow(permits: 10, per: .nanoseconds(60)))
    #expect(limiter.availablePermits(for: "k") == 1)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(30)))
    advance(to: 60)
    #expect(limiter.availablePermits(for: "k") == 10)
  }

  /// A token bucket of 3 per 10 ns, burst 3, then a sliding window of 10 per 60 ns from 30: the
  /// bucket is full again at 30 and records nothing, but could have let one permit through each
  /// time it earned one: at 26, 23, 20, 16, 13, 10, 6, 3, 0 and -4, a full window. The first
  /// leaves at 56; the new limit alone from 86.
  @Test func aBucketChangedToALongerSlidingWindowCountsWhatTheBucketCouldHaveLetThrough() throws {
    let (plans, limiter) = planned(default: RateLimit(permits: 3, per: .nanoseconds(10), burst: 3))
    for t: Int64 in [0, 10, 20] {
      advance(to: t)
      #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    }
    advance(to: 30)
    try plans.setDefaultLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)))
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(26)))
    advance(to: 56)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    advance(to: 86)
    #expect(limiter.availablePermits(for: "k") == 9)
    advance(to: 116)
    #expect(limiter.availablePermits(for: "k") == 10)
  }

  /// A sliding window of 3 per 10 ns, then a token bucket of 1 per 10 ns with a burst of 10 from
  /// 35: the old window, three times faster, could have left the new bucket any debt, so it is
  /// taken as empty at the change, as a slower bucket with a larger burst is.
  @Test func aWindowChangedToASlowerBucketStartsItEmpty() throws {
    let (plans, limiter) = planned(default: .slidingWindow(permits: 3, per: .nanoseconds(10)))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    advance(to: 35)
    #expect(limiter.trackedKeyCount == 0)
    try plans.setDefaultLimit(RateLimit(permits: 1, per: .nanoseconds(10), burst: 10))
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(10)))
    advance(to: 135)
    #expect(limiter.availablePermits(for: "k") == 10)
  }

  /// A decision that read the key's old limit just before a change, and takes the shard's lock
  /// after the change was applied: made under the old limit, it would store the key's state
  /// under it, which no longer records the usage the change assumed. It reads the limit again:
  /// sliding 3 per 10 ns, then 10 per 60 ns from 30, the new window full until 50.
  @Test func aDecisionThatReadTheOldLimitBeforeAChangeIsMadeUnderTheNewOne() throws {
    let (plans, limiter) = planned(
      default: .slidingWindow(permits: 3, per: .nanoseconds(10)),
      limits: ["k": .slidingWindow(permits: 3, per: .nanoseconds(10))])
    for t: Int64 in [0, 10, 20] {
      advance(to: t)
      #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    }
    advance(to: 30)
    let readBeforeTheChange = limiter.keyLimit(for: "k")
    try plans.setLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)), for: "k")
    #expect(limiter.decideLocally("k", cost: 1, limit: readBeforeTheChange) == .limited(retryAfter: .nanoseconds(20)))
    #expect(limiter.availablePermits(for: "k") == 0)
    advance(to: 50)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
  }

  /// The same for a change of the default, whose assumed usage a key with no state finds in its
  /// shard: a token bucket of 3 per 10 ns, then a sliding window of 10 per 60 ns from 30.
  @Test func aDecisionThatReadTheOldDefaultBeforeAChangeIsMadeUnderTheNewOne() throws {
    let (plans, limiter) = planned(default: RateLimit(permits: 3, per: .nanoseconds(10), burst: 3))
    advance(to: 30)
    let readBeforeTheChange = limiter.keyLimit(for: "k")
    try plans.setDefaultLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)))
    #expect(limiter.decideLocally("k", cost: 1, limit: readBeforeTheChange) == .limited(retryAfter: .nanoseconds(26)))
    #expect(limiter.availablePermits(for: "k") == 0)
  }

  /// Two changes within one look-back: sliding 10 per 60 ns, 10 taken at 0; 1 per 10 ns from 1
  /// (the key is forgotten at 10); 10 per 60 ns again from 20. Assuming only the previous limit's
  /// maximum before what the state records (1 at 10, 0, …) would let 5 through at 20, where the
  /// limit before it allows 1 and the new one none; the first limit's 10 at 0 counts too.
  @Test func twoChangesWithinOneLookBackAssumeTheMaximumOfEveryLimitInForce() throws {
    let (plans, limiter) = planned(default: .slidingWindow(permits: 10, per: .nanoseconds(60)))
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    advance(to: 1)
    try plans.setDefaultLimit(.slidingWindow(permits: 1, per: .nanoseconds(10)))
    advance(to: 20)
    #expect(limiter.trackedKeyCount == 0)
    try plans.setDefaultLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)))
    // 10 at 0 (10 per 60 ns until 1) and 1 at 10 (1 per 10 ns until 20): full until 0 leaves.
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(40)))
    advance(to: 60)
    #expect(limiter.availablePermits(for: "k") == 9)
    advance(to: 70)
    #expect(limiter.availablePermits(for: "k") == 10)
    #expect(limiter.trackedKeyCount == 0)
  }

  /// The same with the key's own limit, changed three times (fixed 10 per 60 ns, sliding 1 per
  /// 10 ns, a token bucket of 1 per 10 ns, then sliding 10 per 60 ns): each limit in force within
  /// the last one's look-back counts at its maximum over its own time, and none lets the key
  /// start afresh.
  @Test func threeChangesOfAKeysOwnLimitAssumeTheMaximumOfEveryLimitInForce() throws {
    let (plans, limiter) = planned(
      default: .fixedWindow(permits: 10, per: .nanoseconds(60)),
      limits: ["k": .fixedWindow(permits: 10, per: .nanoseconds(60))])
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    advance(to: 1)
    try plans.setLimit(.slidingWindow(permits: 1, per: .nanoseconds(10)), for: "k")
    advance(to: 11)
    try plans.setLimit(RateLimit(permits: 1, per: .nanoseconds(10)), for: "k")
    advance(to: 30)
    try plans.setLimit(.slidingWindow(permits: 10, per: .nanoseconds(60)), for: "k")
    // (-30, 30] holds the 10 taken at 0: nothing before 60.
    #expect(limiter.availablePermits(for: "k") == 0)
    advance(to: 59)
    #expect(limiter.availablePermits(for: "k") == 0)
  }

  /// A sliding window shortened at the instant of the key's last grant: the grants the shorter
  /// window no longer counts leave the log at once (a refill at that instant skips them), so the
  /// key has its permits and goes idle; kept, they made it never idle, and its timer re-armed at
  /// the same instant forever.
  @Test func aSlidingWindowShortenedAtTheInstantOfALastGrantDropsWhatItNoLongerCounts() throws {
    let (plans, limiter) = planned(default: .slidingWindow(permits: 4, per: .nanoseconds(100)))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 1))
    advance(to: 50)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    try plans.setDefaultLimit(.slidingWindow(permits: 4, per: .nanoseconds(10)))
    #expect(limiter.availablePermits(for: "k") == 3)
    advance(to: 60)
    #expect(limiter.availablePermits(for: "k") == 4)
    #expect(limiter.trackedKeyCount == 0)
  }

  #if compiler(>=6.2)  // Task.immediate
  /// A request waiting when its key's plan changes is granted under the new limit, with what the
  /// change assumes: 1 per 10 ns, burst 1, then 1 per 100 ns with a burst of 2 from 5: the bucket
  /// is empty at 5, so the request waiting since 0 for 10 is granted at 105.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aWaitingRequestIsGrantedUnderTheNewLimit() async throws {
    let (plans, limiter) = planned(
      default: RateLimit(permits: 1, per: .nanoseconds(10)), limits: ["k": RateLimit(permits: 1, per: .nanoseconds(10))]
    )
    #expect(limiter.tryAcquire("k").isAllowed)
    let request = Task.immediate { try await limiter.acquire("k") }
    #expect(limiter.waitingCount == 1)
    advance(to: 5)
    try plans.setLimit(RateLimit(permits: 1, per: .nanoseconds(100), burst: 2), for: "k")
    advance(to: 104)
    #expect(limiter.waitingCount == 1)
    advance(to: 105)
    try await request.value
    #expect(limiter.waitingCount == 0)
    #expect(limiter.availablePermits(for: "k") == 0)
    advance(to: 305)
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }
  #endif
}
