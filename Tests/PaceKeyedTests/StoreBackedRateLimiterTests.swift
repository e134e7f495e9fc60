import PaceTestSupport
import Testing

@testable import Pace

/// `StoreBackedRateLimiter`: every decision is its store's, asked with the key's limit; hostile
/// costs are refused before the store is asked; `acquire` sleeps on the limiter's clock for each
/// `retryAfter`. And `KeyedRateLimiter`'s deprecated initialisers with a store keep their
/// behaviour: `decide` and `acquire` ask the store, `tryAcquire` decides in memory.
@Suite(.timeLimit(.minutes(1))) struct StoreBackedRateLimiterTests {
  let scheduler = TestScheduler()

  /// A store that decides with an in-memory limiter under the limit it is given, on virtual time,
  /// and records what it is asked.
  final class FakeStore: RateLimitStore {
    let local: KeyedRateLimiter<String>
    let asked = LockedState<[(key: String, cost: Int, limit: RateLimit)]>([])

    init(clock: TestScheduler) {
      local = KeyedRateLimiter(limits: { _ in RateLimit(permits: 2, per: .seconds(1)) }, clock: clock)
    }

    var askedLimits: [RateLimit] { asked.withLock { $0.map(\.limit) } }
    var askedCount: Int { asked.withLock { $0.count } }

    func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
      asked.withLock { $0.append((key, cost, limit)) }
      return answer(key, cost: cost)
    }

    /// Synchronous, so that it calls the in-memory limiter's synchronous decision.
    private func answer(_ key: String, cost: Int) -> RateLimitDecision {
      local.tryAcquire(key, cost: cost)
    }
  }

  static let limit = RateLimit(permits: 2, per: .seconds(1))

  @Test func everyDecisionIsTheStores() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter<String>(permits: 2, per: .seconds(1), clock: scheduler, store: store)
    #expect(limiter.limit(for: "k") == Self.limit)
    #expect(try await limiter.decide("k") == .allowed(remaining: 1))
    #expect(try await limiter.decide("k", cost: 0) == .allowed(remaining: 1))
    #expect(try await limiter.decide("k") == .allowed(remaining: 0))
    #expect(try await limiter.decide("k") == .limited(retryAfter: .milliseconds(500)))
    #expect(store.askedLimits == Array(repeating: Self.limit, count: 4))
    #expect(store.asked.withLock { $0.map(\.cost) } == [1, 0, 1, 1])
  }

  /// A plan per key: each decision passes the key's own limit, and a cost is checked against it.
  @Test func eachKeysLimitGoesToTheStore() async throws {
    let paid = RateLimit(permits: 10, per: .seconds(1))
    let store = FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter<String>(
      limits: { $0.hasPrefix("paid-") ? paid : Self.limit }, clock: scheduler, store: store)
    _ = try await limiter.decide("paid-1")
    _ = try await limiter.decide("free-1")
    await #expect(throws: InvalidInput.costAboveBurst(cost: 3, burst: 2)) {
      try await limiter.decide("free-1", cost: 3)
    }
    #expect(store.askedLimits == [paid, Self.limit])
    #expect(limiter.limit(for: "paid-2") == paid)
  }

  /// Hostile input is an error, before the store is asked, and takes nothing.
  @Test func hostileInputNeverReachesTheStore() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter<String>(limit: Self.limit, clock: scheduler, store: store)
    await #expect(throws: InvalidInput.negativeCost(-1)) { try await limiter.decide("k", cost: -1) }
    await #expect(throws: InvalidInput.costAboveBurst(cost: Int.max, burst: 2)) {
      try await limiter.decide("k", cost: .max)
    }
    await #expect(throws: InvalidInput.negativeCost(Int.min)) { try await limiter.acquire("k", cost: .min) }
    await #expect(throws: InvalidInput.costAboveBurst(cost: 3, burst: 2)) { try await limiter.acquire("k", cost: 3) }
    await #expect(throws: InvalidInput.emptyKey) { try await limiter.decide("") }
    #expect(store.askedCount == 0)
  }

  /// `acquire` asks, sleeps on the limiter's clock for the `retryAfter` it is told, and asks
  /// again then: granted at exactly 500 ms.
  @Test func acquireAsksAgainAfterEachRetryAfter() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter<String>(limit: Self.limit, clock: scheduler, store: store)
    _ = try await limiter.decide("k", cost: 2)
    let waiting = Task { try await limiter.acquire("k") }
    // The waiter asks, is told 500 ms, and sleeps that long on the limiter's clock.
    await waitUntil("the store asked 2 times and the timer at 500 ms armed") {
      store.askedCount >= 2 && scheduler.pendingDeadlines.contains(ms(500))
    }
    scheduler.advance(to: ms(499))
    #expect(store.askedCount == 2)
    scheduler.advance(to: ms(500))
    try await waiting.value
    #expect(store.askedCount == 3)
    #expect(store.asked.withLock { $0.last?.cost } == 1)
  }

  /// A cancelled waiter throws and asks no more.
  @Test func aCancelledAcquireThrows() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter = StoreBackedRateLimiter<String>(limit: Self.limit, clock: scheduler, store: store)
    _ = try await limiter.decide("k", cost: 2)
    let waiting = Task { try await limiter.acquire("k") }
    await waitUntil("the store asked 2 times and the timer at 500 ms armed") {
      store.askedCount >= 2 && scheduler.pendingDeadlines.contains(ms(500))
    }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
    #expect(store.askedCount == 2)
  }

  /// A fixed window's end, read on the limiter's clock (windows from a test clock's origin).
  @Test func aFixedWindowsEndIsReadOnTheLimitersClock() {
    let limiter = StoreBackedRateLimiter<String>(
      limits: { $0 == "window" ? .fixedWindow(permits: 2, per: .seconds(10)) : Self.limit }, clock: scheduler,
      store: FakeStore(clock: scheduler))
    scheduler.advance(to: ms(3_500))
    #expect(limiter.timeUntilWindowEnds(for: "window") == .milliseconds(6_500))
    #expect(limiter.timeUntilWindowEnds(for: "bucket") == nil)
  }

  // MARK: The deprecated spellings of 0.3.0

  /// `KeyedRateLimiter(…, store:)` (deprecated): `decide` and `acquire` ask the store, as a
  /// `StoreBackedRateLimiter` does; `tryAcquire` decides in this process's memory under the same
  /// limit, never asks the store, and never traps.
  @Test func aKeyedRateLimiterMadeWithAStoreKeepsItsBehaviour() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter: KeyedRateLimiter<String> = .legacy(permits: 2, per: .seconds(1), clock: scheduler, store: store)
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 1))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    #expect(limiter.tryAcquire("k") == .limited(retryAfter: .milliseconds(500)))
    #expect(store.askedCount == 0)
    #expect(try await limiter.decide("k") == .allowed(remaining: 1))
    #expect(try await limiter.decide("k") == .allowed(remaining: 0))
    let waiting = Task { try await limiter.acquire("k") }
    await waitUntil("the store asked 3 times and the timer at 500 ms armed") {
      store.askedCount >= 3 && scheduler.pendingDeadlines.contains(ms(500))
    }
    scheduler.advance(to: ms(500))
    try await waiting.value
    #expect(store.askedLimits == Array(repeating: Self.limit, count: 4))
    #expect(limiter.trackedKeyCount == 1)  // the in-memory decisions' key; the store's are the store's
  }

  /// The deprecated initialisers with one limit and with limits per key give the store each key's
  /// limit; `limit` (deprecated) answers a per-key limiter with a limit no key has.
  @Test func theOtherDeprecatedInitialisersAndLimit() async throws {
    let store = FakeStore(clock: scheduler)
    let uniform: KeyedRateLimiter<String> = .legacy(limit: Self.limit, clock: scheduler, store: store)
    let paid = RateLimit(permits: 10, per: .seconds(1))
    let perKey: KeyedRateLimiter<String> = .legacy(limits: { _ in paid }, clock: scheduler, store: store)
    _ = try await uniform.decide("a")
    _ = try await perKey.decide("b")
    #expect(store.askedLimits == [Self.limit, paid])
    #expect(uniform.oneLimit == Self.limit)
    #expect(perKey.oneLimit == RateLimit(permits: .max, per: .nanoseconds(1)))
  }
}

/// The initialisers of 0.3.0 that give a `KeyedRateLimiter` a store, and its `limit`, now
/// deprecated; a protocol lets a test call them without a deprecation warning.
protocol DeprecatedKeyedRateLimiterSpelling<Key> {
  associatedtype Key: Hashable & Sendable
  init<C: Clock>(permits: Int, per interval: Duration, burst: Int?, clock: C, store: some RateLimitStore<Key>)
  where C.Duration == Duration
  init<C: Clock>(limit: RateLimit, clock: C, store: some RateLimitStore<Key>) where C.Duration == Duration
  init<C: Clock>(limits: @escaping @Sendable (Key) -> RateLimit, clock: C, store: some RateLimitStore<Key>)
  where C.Duration == Duration
  var limit: RateLimit { get }
}

extension KeyedRateLimiter: DeprecatedKeyedRateLimiterSpelling {}

extension DeprecatedKeyedRateLimiterSpelling {
  static func legacy(
    permits: Int, per interval: Duration, clock: TestScheduler, store: some RateLimitStore<Key>
  ) -> Self {
    Self(permits: permits, per: interval, burst: nil, clock: clock, store: store)
  }

  static func legacy(limit: RateLimit, clock: TestScheduler, store: some RateLimitStore<Key>) -> Self {
    Self(limit: limit, clock: clock, store: store)
  }

  static func legacy(
    limits: @escaping @Sendable (Key) -> RateLimit, clock: TestScheduler, store: some RateLimitStore<Key>
  ) -> Self {
    Self(limits: limits, clock: clock, store: store)
  }

  /// `limit`, deprecated.
  var oneLimit: RateLimit { limit }
}
