import PaceTestSupport
import Testing

@testable import Pace

/// A key whose limit changes between calls (`KeyedRateLimiter(limits:)`): what it used carries
/// over and is read under the new limit, so no change lets through more than the old limit or the
/// new one would have allowed over the key's history.
@Suite(.timeLimit(.minutes(1))) struct KeyedRateLimiterLimitChangeTests {
  /// A limiter whose every key has the limit `current` holds at each call.
  static func limiter(_ current: LockedState<RateLimit>, _ scheduler: TestScheduler) -> KeyedRateLimiter<String> {
    KeyedRateLimiter<String>(limits: { _ in current.withLock { $0 } }, clock: scheduler)
  }

  /// Sliding window to fixed window, 3 per 10 ns each: the grants of the log that fall in the
  /// fixed window count there, so the window holds 3, not 6.
  @Test func aSlidingWindowsGrantsCountInTheFixedWindowThatFollowsIt() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit.slidingWindow(permits: 3, per: .nanoseconds(10)))
    let limiter = Self.limiter(current, scheduler)
    scheduler.advance(to: PaceInstant(nanoseconds: 5))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    current.withLock { $0 = .fixedWindow(permits: 3, per: .nanoseconds(10)) }
    scheduler.advance(to: PaceInstant(nanoseconds: 6))
    // The fixed window [0, 10) holds the three grants at 5: full until it ends.
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(4)))
    #expect(limiter.availablePermits(for: "k") == 0)
    scheduler.advance(to: PaceInstant(nanoseconds: 10))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
  }

  /// Fixed window to sliding window: the count of the fixed window goes on counting, as grants
  /// at its last instant before now (the latest they can have been), for the sliding window's
  /// length.
  @Test func aFixedWindowsCountGoesOnCountingInTheSlidingWindowThatFollowsIt() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit.fixedWindow(permits: 3, per: .nanoseconds(10)))
    let limiter = Self.limiter(current, scheduler)
    scheduler.advance(to: PaceInstant(nanoseconds: 5))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    current.withLock { $0 = .slidingWindow(permits: 3, per: .nanoseconds(10)) }
    scheduler.advance(to: PaceInstant(nanoseconds: 6))
    // Counted as granted at 6 at the latest: they stop counting at 16.
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(10)))
    scheduler.advance(to: PaceInstant(nanoseconds: 16))
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
  }

  /// A token bucket downgraded from 10 to 1 per 10 ns, burst 10: the ten permits owed stay owed,
  /// now paid back at the slower rate, instead of shrinking to one.
  @Test func aDowngradedBucketKeepsThePermitsItOwes() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit(permits: 10, per: .nanoseconds(10)))
    let limiter = Self.limiter(current, scheduler)
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    current.withLock { $0 = RateLimit(permits: 1, per: .nanoseconds(10), burst: 10) }
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(10)))
    scheduler.advance(to: PaceInstant(nanoseconds: 10))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    // Ten permits owed again at 10, paid back one per 10 ns: full at 110.
    scheduler.advance(to: PaceInstant(nanoseconds: 109))
    #expect(limiter.availablePermits(for: "k") == 9)
    scheduler.advance(to: PaceInstant(nanoseconds: 110))
    #expect(limiter.availablePermits(for: "k") == 10)
    // Kept while the slow bucket, 100 ns from empty to full, would count its last grant (100 at
    // the latest).
    scheduler.advance(to: PaceInstant(nanoseconds: 199))
    #expect(limiter.trackedKeyCount == 1)
    scheduler.advance(to: PaceInstant(nanoseconds: 200))
    #expect(limiter.trackedKeyCount == 0)
  }

  /// An upgrade keeps what was used too: 10 permits owed under 1 per 10 ns are paid back at 10
  /// per 10 ns.
  @Test func anUpgradedBucketPaysWhatItOwesAtTheNewRate() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit(permits: 1, per: .nanoseconds(10), burst: 10))
    let limiter = Self.limiter(current, scheduler)
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    current.withLock { $0 = RateLimit(permits: 10, per: .nanoseconds(10)) }
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .nanoseconds(1)))
    scheduler.advance(to: PaceInstant(nanoseconds: 5))
    #expect(limiter.availablePermits(for: "k") == 5)
  }

  /// Fixed windows of 3 in 10 s, then 10 in 60 s from 5 s, with no call in between: at 10 s the
  /// key is idle under the old limit but not under the new one, whose window [0, 60 s) holds its
  /// grant at 0; so it is kept, and [0, 60 s) lets at most 10 through, not 11.
  @Test func aKeyIsKeptWhileItsNewLimitStillCountsItsGrants() {
    let scheduler = TestScheduler()
    let current = LockedState(RateLimit.fixedWindow(permits: 3, per: .seconds(10)))
    let limiter = Self.limiter(current, scheduler)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 2))
    scheduler.advance(to: PaceInstant(.seconds(5)))
    current.withLock { $0 = .fixedWindow(permits: 10, per: .seconds(60)) }
    scheduler.advance(to: PaceInstant(.seconds(10)))
    #expect(limiter.trackedKeyCount == 1)
    // The change is found at 10 s, and the old window before it, [0, 10 s), is taken as used to
    // its maximum (3) beside the grant the count holds: stricter than the history, never looser.
    #expect(limiter.tryAcquire("k", cost: 7) == .limited(retryAfter: .seconds(50)))
    #expect(limiter.tryAcquire("k", cost: 6) == .allowed(remaining: 0))
    // Kept once the new window ends, while a window of 60 s could count its last grant (1 ns
    // before 60 s at the latest: the state holds the window's end, not its length), then
    // forgotten, with no timer left.
    scheduler.advance(to: PaceInstant(.seconds(60)))
    #expect(limiter.trackedKeyCount == 1)
    scheduler.advance(to: PaceInstant(.seconds(120) - .nanoseconds(1)))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }
}
