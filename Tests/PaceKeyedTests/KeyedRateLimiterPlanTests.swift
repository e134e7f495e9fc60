import PaceTestSupport
import Testing

@testable import Pace

/// `KeyedRateLimiter(limits:)`: each key under its own limit, looked up at each call, in memory
/// and over a store; what happens when a key's limit changes.
@Suite(.timeLimit(.minutes(1))) struct KeyedRateLimiterPlanTests {
  let scheduler = TestScheduler()

  enum Plan: Sendable {
    case free, paid
  }

  static let free = RateLimit(permits: 2, per: .seconds(1))
  static let paid = RateLimit(permits: 10, per: .seconds(1), burst: 5)

  /// Keys starting with "paid" are on the paid plan.
  static func plan(_ key: String) -> RateLimit {
    key.hasPrefix("paid") ? paid : free
  }

  /// `timeUntilWindowEnds(for:)`: a fixed-window key's window end, exact in virtual time, under
  /// each key's own plan; `nil` for other policies. On a real clock the windows are Unix time's.
  @Test func aFixedWindowKeySaysWhenItsWindowEnds() {
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<String>(
      limits: {
        $0 == "hourly" ? .fixedWindow(permits: 5, per: .seconds(3600)) : .slidingWindow(permits: 5, per: .seconds(60))
      },
      clock: scheduler)
    #expect(limiter.timeUntilWindowEnds(for: "hourly") == .seconds(3600))
    scheduler.advance(by: .milliseconds(3_600_500))
    #expect(limiter.timeUntilWindowEnds(for: "hourly") == .milliseconds(3_599_500))
    #expect(limiter.timeUntilWindowEnds(for: "sliding") == nil)
    #expect(
      KeyedRateLimiter<String>(permits: 1, per: .seconds(1), clock: scheduler).timeUntilWindowEnds(for: "k") == nil)
    let real = KeyedRateLimiter<String>(limit: .fixedWindow(permits: 1, per: .seconds(1)))
    let untilNextSecond = Duration.nanoseconds(1_000_000_000 - unixTimeNanoseconds() % 1_000_000_000)
    let answer = real.timeUntilWindowEnds(for: "k") ?? .zero
    // Real time: a generous 100 ms.
    #expect(abs((answer - untilNextSecond) / .milliseconds(1)) < 100, "\(answer) vs \(untilNextSecond)")
  }

  @Test func eachKeyIsDecidedUnderItsPlan() {
    let limiter = KeyedRateLimiter<String>(limits: Self.plan, clock: scheduler)
    #expect(limiter.limit(for: "free-1") == Self.free)
    #expect(limiter.limit(for: "paid-1") == Self.paid)
    for remaining in [1, 0] { #expect(limiter.tryAcquire("free-1") == .allowed(remaining: remaining)) }
    #expect(limiter.tryAcquire("free-1") == .limited(retryAfter: .milliseconds(500)))
    for remaining in [4, 3, 2, 1, 0] { #expect(limiter.tryAcquire("paid-1") == .allowed(remaining: remaining)) }
    #expect(limiter.tryAcquire("paid-1") == .limited(retryAfter: .milliseconds(100)))
    #expect(limiter.availablePermits(for: "free-2") == 2)
    #expect(limiter.availablePermits(for: "paid-2") == 5)
    scheduler.advance(by: .milliseconds(100))
    #expect(limiter.tryAcquire("paid-1") == .allowed(remaining: 0))
    #expect(limiter.tryAcquire("free-1") == .limited(retryAfter: .milliseconds(400)))
    // Each bucket full again (at 1 s and 600 ms), each key is kept while the other plan's bucket
    // would count its last grant (at 500 ms at the latest, for up to 1 s), then forgotten, with
    // no timer left.
    scheduler.advance(to: ms(1_499))
    #expect(limiter.trackedKeyCount == 2)
    scheduler.advance(to: ms(1_500))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(limiter.heldStorageBytes == 0)
  }

  @Test func theCostRuleUsesEachKeysBurst() async throws {
    let limiter = KeyedRateLimiter<String>(limits: Self.plan, clock: scheduler)
    #expect(limiter.tryAcquire("free-1", cost: 3) == .limited(retryAfter: RateLimitDecision.never))
    #expect(limiter.tryAcquire("paid-1", cost: 3) == .allowed(remaining: 2))
    await #expect(throws: InvalidInput.costAboveBurst(cost: 6, burst: 5)) {
      try await limiter.decide("paid-1", cost: 6)
    }
    await #expect(throws: InvalidInput.costAboveBurst(cost: 3, burst: 2)) {
      try await limiter.acquire("free-1", cost: 3)
    }
    #expect(limiter.availablePermits(for: "free-1") == 2)
  }

  /// A plan looked up in a table the application changes: the closure reads it at each call,
  /// outside the limiter's locks, so it may even ask the limiter itself.
  @Test func theLimitsClosureIsCalledOutsideTheLocks() {
    let limiter = LockedState<KeyedRateLimiter<String>?>(nil)
    let calls = LockedState(0)
    let made = KeyedRateLimiter<String>(
      limits: { key in
        calls.withLock { $0 += 1 }
        // Takes every shard's lock: this would deadlock if called under one.
        _ = limiter.withLock { $0 }?.trackedKeyCount
        return Self.plan(key)
      }, clock: scheduler)
    limiter.withLock { $0 = made }
    #expect(made.tryAcquire("free-1").isAllowed)
    #expect(made.availablePermits(for: "free-1") == 1)
    // The timer asks the key's limit once, outside the locks, before it forgets the key.
    let before = calls.withLock { $0 }
    scheduler.advance(by: .seconds(1))
    #expect(made.trackedKeyCount == 0)
    #expect(calls.withLock { $0 } == before + 1)
  }

  /// A key whose limit changes keeps the permits its bucket owes, read under the new limit:
  /// paid back at the new rate, and a bucket never holds more than the new burst less what it owes.
  @Test func aKeyWhoseLimitChangesKeepsThePermitsItOwes() {
    let fast = RateLimit(permits: 10, per: .seconds(1))
    let slow = RateLimit(permits: 1, per: .seconds(1), burst: 2)
    let current = LockedState(fast)
    let limiter = KeyedRateLimiter<String>(limits: { _ in current.withLock { $0 } }, clock: scheduler)
    // 10 permits at 0: 10 owed.
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    current.withLock { $0 = slow }
    // Under the slow limit, 10 owed against a burst of 2: 8 in debt, the next permit in 9 s.
    #expect(limiter.availablePermits(for: "k") == 0)
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .seconds(9)))
    // Back to the fast limit: still 10 owed, the next permit in 100 ms.
    current.withLock { $0 = fast }
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(100)))
    scheduler.advance(to: ms(100))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    // A limit with a larger burst, 100 ms after the key's last change (back to fast, found at
    // 0): the state records nothing from before that change, which the new bucket's 10 s
    // look-back covers, and a bucket taken as empty then would not be full again yet, so it is
    // taken as empty now (the most a bucket owes at a change): at each read until a decision
    // finds the change, then from that decision.
    current.withLock { $0 = RateLimit(permits: 10, per: .seconds(1), burst: 100) }
    #expect(limiter.availablePermits(for: "k") == 0)
    scheduler.advance(to: ms(1_100))
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(100)))
    scheduler.advance(to: ms(2_100))
    #expect(limiter.availablePermits(for: "k") == 10)
    // Forgotten once idle under every limit it was decided under: the new bucket, empty at
    // 1.1 s, is full at 11.1 s, so its last grant was at 11 s at the latest (a permit's time
    // before), which the longest look-back seen (10 s) counts until 21 s.
    scheduler.advance(to: ms(20_999))
    #expect(limiter.trackedKeyCount == 1)
    scheduler.advance(to: ms(21_000))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  /// The same limits far apart: the larger burst holds that burst less the 10 permits owed, and
  /// the key is forgotten once idle under every limit it was decided under.
  @Test func aKeyWhoseLimitChangesOnceKeepsThePermitsItOwesUnderALargerBurst() {
    let fast = RateLimit(permits: 10, per: .seconds(1))
    let current = LockedState(fast)
    let limiter = KeyedRateLimiter<String>(limits: { _ in current.withLock { $0 } }, clock: scheduler)
    // 10 permits at 0: 10 owed.
    #expect(limiter.tryAcquire("k", cost: 10) == .allowed(remaining: 0))
    current.withLock { $0 = RateLimit(permits: 10, per: .seconds(1), burst: 100) }
    #expect(limiter.availablePermits(for: "k") == 90)
    scheduler.advance(to: ms(1_000))
    #expect(limiter.availablePermits(for: "k") == 100)
    scheduler.advance(to: ms(10_000))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  /// What a store is asked: each key's own limit.
  @Test func aStoreIsGivenEachKeysLimit() async throws {
    final class Store: RateLimitStore {
      let asked = LockedState<[String: [RateLimit]]>([:])
      func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
        asked.withLock { $0[key, default: []].append(limit) }
        return .allowed(remaining: limit.burst - cost)
      }
    }
    let store = Store()
    let limiter: KeyedRateLimiter<String> = .legacy(limits: Self.plan, clock: scheduler, store: store)
    #expect(try await limiter.decide("free-1") == .allowed(remaining: 1))
    #expect(try await limiter.decide("paid-1", cost: 5) == .allowed(remaining: 0))
    try await limiter.acquire("paid-2", cost: 2)
    #expect(store.asked.withLock { $0 } == ["free-1": [Self.free], "paid-1": [Self.paid], "paid-2": [Self.paid]])
    // The synchronous decision is this process's, under the key's limit.
    #expect(limiter.tryAcquire("paid-3", cost: 5) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire("free-3", cost: 5) == .limited(retryAfter: RateLimitDecision.never))
  }

  /// A uniform limiter answers its limit for every key; a per-key one has no one limit, and its
  /// `limit` (deprecated for that reason) says so with a limit no key has.
  @Test func theLimitProperty() {
    let uniform = KeyedRateLimiter<String>(limit: Self.paid, clock: scheduler)
    #expect(uniform.oneLimit == Self.paid)
    #expect(uniform.limit(for: "anyone") == Self.paid)
    let legacy = KeyedRateLimiter<String>(permits: 10, per: .seconds(1), burst: 5, clock: scheduler)
    #expect(legacy.oneLimit == Self.paid)
    let perKey = KeyedRateLimiter<String>(limits: Self.plan, clock: scheduler)
    #expect(perKey.oneLimit == RateLimit(permits: .max, per: .nanoseconds(1)))
    #expect(perKey.limit(for: "free-1") == Self.free && perKey.limit(for: "paid-1") == Self.paid)
  }

  #if compiler(>=6.2)  // Task.immediate
  /// Waiting requests are granted in order under the key's limit; a free key's waiter is not held
  /// up by a paid key's, nor the other way round.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func waitingRequestsAreGrantedUnderTheirKeysPlan() async throws {
    let limiter = KeyedRateLimiter<String>(limits: Self.plan, clock: scheduler)
    #expect(limiter.tryAcquire("free", cost: 2).isAllowed)
    #expect(limiter.tryAcquire("paid", cost: 5).isAllowed)
    let free = Task.immediate { try await limiter.acquire("free", cost: 2) }
    let paid = Task.immediate { try await limiter.acquire("paid", cost: 5) }
    #expect(limiter.waitingCount == 2)
    scheduler.advance(to: ms(499))
    #expect(limiter.waitingCount == 2)
    scheduler.advance(to: ms(500))
    try await paid.value
    #expect(limiter.waitingCount == 1)
    scheduler.advance(to: ms(1_000))
    try await free.value
    #expect(limiter.waitingCount == 0)
    // The free key, full at 2 s, is kept while its plan's bucket (1 s from empty) would count its
    // last grant (1.5 s at the latest); the paid plan's bucket is the other one seen.
    scheduler.advance(to: ms(2_500))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }
  #endif
}
