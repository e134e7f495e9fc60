import PaceTestSupport
import Testing

@testable import Pace

/// A `KeyedRateLimiter(limits:)` whose key's new limit looks further back and allows more at once
/// than its old one: at the key's first decision under the new limit, the part of the new
/// look-back that the key's state no longer records is taken as used at the old limit's maximum,
/// as a limiter made with `RateLimitPlans` does at the change; and a key idle under its old limit
/// is kept until it is idle under the longest look-back of any limit the limiter has seen.
@Suite(.timeLimit(.minutes(1))) struct KeyedRateLimiterUnrecordedUseTests {
  /// How many permits "k" gets, one at a time, before it is refused, without time passing.
  static func grantedAtOnce(_ limiter: KeyedRateLimiter<String>) -> Int {
    var granted = 0
    while limiter.tryAcquire("k").isAllowed { granted += 1 }
    return granted
  }

  /// The window change: 3 per 10 ns used to the full for 30 ns, then 10 per 60 ns. The
  /// log holds only the last 3; the 6 before them still count in the new window, so the new limit
  /// allows 1 more, the old one 3: at most 3 at 30, none at 31.
  @Test func aLongerWindowWithMorePermitsCountsWhatTheLogNoLongerHolds() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit.slidingWindow(permits: 3, per: .nanoseconds(10)))
    let limiter = KeyedRateLimiterLimitChangeTests.limiter(current, scheduler)
    for t in [0, 10, 20] as [Int64] {
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      #expect(limiter.tryAcquire("k", cost: 3).isAllowed)
    }
    current.withLock { $0 = .slidingWindow(permits: 10, per: .nanoseconds(60)) }
    scheduler.advance(to: PaceInstant(nanoseconds: 30))
    let granted = Self.grantedAtOnce(limiter)
    #expect(granted <= 3)
    scheduler.advance(to: PaceInstant(nanoseconds: 31))
    #expect(!limiter.tryAcquire("k").isAllowed)
  }

  /// A slower token bucket with a larger burst (10 per 10 ns, burst 10, to 1 per 10 ns, burst
  /// 20): the old bucket, used to the full, could have let through far more than its burst
  /// before; the new one starts empty at the key's first decision under it.
  @Test func aSlowerBucketWithALargerBurstStartsEmpty() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit(permits: 10, per: .nanoseconds(10)))
    let limiter = KeyedRateLimiterLimitChangeTests.limiter(current, scheduler)
    for t in [0, 10, 20] as [Int64] {
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      #expect(limiter.tryAcquire("k", cost: 10).isAllowed)
    }
    current.withLock { $0 = RateLimit(permits: 1, per: .nanoseconds(10), burst: 20) }
    scheduler.advance(to: PaceInstant(nanoseconds: 25))
    #expect(!limiter.tryAcquire("k").isAllowed)
  }

  /// A fixed window's state once its shard has seen two fixed windows: another key of the shard
  /// decided under 10 per 60 ns first, then "k" used 3 per 10 ns to the full in [0, 30). Changed to 10 per
  /// 60 ns at 25, its state (3 in [20, 30)) is read as stored under 3 per 10 ns (the shard
  /// records the fixed window of a key not under the first it saw), so the 6 of [0, 20) are
  /// assumed: the new limit allows 1 more in [0, 60), the old one none at 25.
  @Test func aFixedWindowStateKnowsItsWindowWhenSeveralFixedWindowsAreSeen() {
    let scheduler = TestScheduler()
    let short = RateLimit.fixedWindow(permits: 3, per: .nanoseconds(10))
    let long = RateLimit.fixedWindow(permits: 10, per: .nanoseconds(60))
    // Another key of "k"'s shard: each shard notes the limits its keys were decided under.
    let shard = KeyedRateLimiter<String>.shardIndex(hash: "k".hashValue)
    let other = (0...).lazy.map { "other \($0)" }.first {
      KeyedRateLimiter<String>.shardIndex(hash: $0.hashValue) == shard
    }!
    let limits = LockedState(["k": short, other: long])
    let limiter = KeyedRateLimiter<String>(limits: { key in limits.withLock { $0[key]! } }, clock: scheduler)
    #expect(limiter.tryAcquire(other, cost: 0).isAllowed)
    for t in [0, 10, 20] as [Int64] {
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      #expect(limiter.tryAcquire("k", cost: 3).isAllowed)
    }
    scheduler.advance(to: PaceInstant(nanoseconds: 25))
    limits.withLock { $0["k"] = long }
    let granted = Self.grantedAtOnce(limiter)
    #expect(granted <= 1)
  }

  /// A key idle under its old limit (3 per 10 ns, used at 0) is kept while a limit the limiter
  /// has seen (10 per 60 ns, another key's) would still count its grants: changed to it at 15,
  /// the key counts the old limit's maximum, not a fresh window of 10.
  @Test func aKeyIdleUnderItsOldLimitIsKeptForTheLongestLookBackSeen() {
    let scheduler = TestScheduler()
    let long = RateLimit.slidingWindow(permits: 10, per: .nanoseconds(60))
    let limits = LockedState(["k": RateLimit.slidingWindow(permits: 3, per: .nanoseconds(10)), "other": long])
    let limiter = KeyedRateLimiter<String>(limits: { key in limits.withLock { $0[key]! } }, clock: scheduler)
    #expect(limiter.tryAcquire("other").isAllowed)
    #expect(limiter.tryAcquire("k", cost: 3).isAllowed)
    scheduler.advance(to: PaceInstant(nanoseconds: 15))
    limits.withLock { $0["k"] = long }
    let granted = Self.grantedAtOnce(limiter)
    // The old limit allows 3 at 15; the new one 7 over the key's history.
    #expect(granted <= 7)
    // Kept until idle under the longest look-back seen, then forgotten.
    scheduler.advance(to: PaceInstant(nanoseconds: 200))
    #expect(limiter.trackedKeyCount == 0)
  }
}
