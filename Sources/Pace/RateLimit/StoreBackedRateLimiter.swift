/// A keyed rate limiter whose state lives in a ``RateLimitStore`` (a database every instance of a
/// server talks to): every decision is the store's, shared by every process that uses it.
///
/// ```swift
/// let limiter = StoreBackedRateLimiter(limit: RateLimit(permits: 100, per: .seconds(60)), store: store)
/// switch try await limiter.decide(apiKey) {
/// case .allowed(let remaining): response.headers["RateLimit-Remaining"] = "\(remaining)"
/// case .limited(let retryAfter): return .tooManyRequests(retryAfter: retryAfter)
/// }
/// try await limiter.acquire(apiKey)   // or wait until the store allows it
/// ```
///
/// It offers only the calls that ask the store, each asynchronous and throwing: there is no
/// synchronous `tryAcquire`, which could not wait for the store and would have to decide in this
/// process's memory (N instances would then allow N times the limit). For a limit in this
/// process's memory alone, use ``KeyedRateLimiter``.
///
/// Each decision passes the key's limit to the store: the one limit of ``init(limit:clock:store:)``,
/// or what the `limits` closure of ``init(limits:clock:store:)`` answers for the key (a plan per
/// API key). Keys and costs follow ``InputRules`` as ``KeyedRateLimiter/decide(_:cost:)`` does, in
/// memory and in every store, so a cost from a request is an error, never a trap.
public final class StoreBackedRateLimiter<Key: Hashable & Sendable>: Sendable {
  /// Where each key's limit comes from.
  @usableFromInline let limits: KeyedRateLimiter<Key>.Limits
  /// The clock ``acquire(_:cost:)`` sleeps on and fixed windows are read on.
  @usableFromInline let clock: AsyncClock
  private let sleep: @Sendable (Duration) async throws -> Void
  /// Where the state lives and the decisions are made.
  let store: any RateLimitStore<Key>

  /// A limiter granting each key `permits` per `interval` from `store`: the same as
  /// ``init(limit:clock:store:)`` with a token bucket, `RateLimit(permits:per:burst:)`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. At least 1 ns.
  ///   - burst: How many permits a key can take at once; `permits` by default. Positive.
  ///   - clock: The clock ``acquire(_:cost:)`` sleeps on between attempts: `ContinuousClock` by
  ///     default, or a ``TestScheduler``.
  ///   - store: Where the keys' state lives and the decisions are made.
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock(),
    store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    precondition(permits > 0, "StoreBackedRateLimiter: permits must be positive (got \(permits))")
    precondition(
      interval >= .nanoseconds(1), "StoreBackedRateLimiter: interval must be at least 1 ns (got \(interval))")
    precondition((burst ?? permits) > 0, "StoreBackedRateLimiter: burst must be positive (got \(burst ?? permits))")
    self.init(limit: RateLimit(permits: permits, per: interval, burst: burst), clock: clock, store: store)
  }

  /// A limiter with one limit for every key, passed to `store` with each decision.
  ///
  /// - Parameters:
  ///   - limit: Every key's limit.
  ///   - clock: The clock ``acquire(_:cost:)`` sleeps on between attempts.
  ///   - store: Where the keys' state lives and the decisions are made.
  public convenience init<C: Clock>(
    limit: RateLimit, clock: C = ContinuousClock(), store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limits: .uniform(.init(limit)), clock: clock, store: store)
  }

  /// A limiter whose keys have limits of their own (a plan looked up from the key, say), each
  /// passed to `store` with the key's decisions.
  ///
  /// - Parameters:
  ///   - limits: A key's limit. Called at each decision; it should be quick, and answer the same
  ///     limit for a key until the key's plan changes.
  ///   - clock: The clock ``acquire(_:cost:)`` sleeps on between attempts.
  ///   - store: Where the keys' state lives and the decisions are made.
  public convenience init<C: Clock>(
    limits: @escaping @Sendable (Key) -> RateLimit, clock: C = ContinuousClock(), store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limits: .perKey(limits), clock: clock, store: store)
  }

  private convenience init<C: Clock>(
    limits: KeyedRateLimiter<Key>.Limits, clock: C, store: any RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(
      limits: limits, clock: AsyncClock(clock), sleep: { duration in try await clock.sleep(for: duration) },
      store: store)
  }

  /// The limiter behind a ``KeyedRateLimiter`` made with a store (deprecated), on its clock.
  init(
    limits: KeyedRateLimiter<Key>.Limits, clock: AsyncClock, sleep: @escaping @Sendable (Duration) async throws -> Void,
    store: any RateLimitStore<Key>
  ) {
    if case .uniform(let uniform) = limits {
      self.limits = .uniform(.init(uniform.limit, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin))
    } else {
      self.limits = limits
    }
    self.clock = clock
    self.sleep = sleep
    self.store = store
  }

  /// The one limit of a limiter made with one; `nil` for limits per key.
  package var uniformLimit: RateLimit? { limits.uniformLimit }

  /// The limit of `key`: the one limit of a limiter made with one, or what its `limits` closure
  /// answers for `key` now.
  public func limit(for key: Key) -> RateLimit {
    limits.limit(for: key)
  }

  /// How long until the fixed window that counts `key`'s requests now ends; `nil` unless `key`'s
  /// limit is a ``RateLimit/Algorithm/fixedWindow``. A store's windows start at whole multiples of
  /// the window in Unix time on the database's clock; this answers on the limiter's clock, within
  /// the clocks' difference.
  ///
  /// For a response's `RateLimit` field, whose `t` of an allowed request is the window's end.
  public func timeUntilWindowEnds(for key: Key) -> Duration? {
    limits.keyLimit(for: key, clock: clock).timeUntilWindowEnds(clock: clock)
  }

  /// Takes `cost` permits for `key` if the store has them now; never waits for them.
  ///
  /// This is the path for keys and costs that come from requests: they are checked against
  /// ``InputRules`` (`String` keys and every cost) before the store is asked, so hostile input is
  /// an error, never a trap, and takes nothing.
  ///
  /// - Parameters:
  ///   - key: Whose permits to take.
  ///   - cost: How many permits to take; 1 by default. 0 asks how many are left and takes none:
  ///     it gets the answer a cost of 1 would get, so it is limited where a cost of 1 would be.
  /// - Returns: `.allowed(remaining:)` if the store took the permits, `.limited(retryAfter:)` if
  ///   not (nothing is taken then).
  /// - Throws: ``InvalidInput`` for a key or cost outside ``InputRules`` (a negative cost, or one
  ///   above the key's burst); what the store throws when it cannot decide.
  public func decide(_ key: Key, cost: Int = 1) async throws -> RateLimitDecision {
    try await decide(key, cost: cost, limit: limit(for: key))
  }

  /// ``decide(_:cost:)`` on `key`'s state under `limit`, which the caller looked up (with
  /// ``limit(for:)``) by the key a request sent, of which `key` is the name it is counted under (a
  /// long key's digest, whose plan is the long key's).
  ///
  /// - Throws: ``InvalidInput`` for a key or cost outside ``InputRules``; what the store throws.
  package func decide(_ key: Key, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    try InputRules.check(cost: cost, limit: limit)
    if let key = key as? String { try InputRules.check(key: key) }
    return try await store.tryAcquire(key, cost: cost, limit: limit)
  }

  /// ``timeUntilWindowEnds(for:)`` of a key whose limit is `limit`: a window's end depends on the
  /// limit and the clock alone.
  package func timeUntilWindowEnds(under limit: RateLimit) -> Duration? {
    guard case .fixedWindow = limit.algorithm else { return nil }
    return KeyedRateLimiter<Key>.KeyLimit(limit, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin)
      .timeUntilWindowEnds(clock: clock)
  }

  /// Waits until the store grants `cost` permits for `key`: asks it, and sleeps on the limiter's
  /// clock for each `retryAfter` it answers, until it allows the request. Waiters of one key are
  /// not served in strict first-come first-served order: each asks again when its own sleep ends.
  ///
  /// A cost of 0 waits as a cost of 1 would, and takes nothing. A cost above the key's burst, or a
  /// negative one, throws at once, before the store is asked: no wait would ever let it through.
  ///
  /// - Parameters:
  ///   - key: Whose permits to take.
  ///   - cost: How many permits to take; 1 by default. From 0 to the key's burst.
  /// - Throws: ``InvalidInput`` for a cost no wait would let through; `CancellationError` if the
  ///   task is cancelled before the store grants the permits; or what the store throws.
  public func acquire(_ key: Key, cost: Int = 1) async throws {
    let limit = limit(for: key)
    try InputRules.check(cost: cost, limit: limit)
    try Task.checkCancellation()
    while true {
      switch try await store.tryAcquire(key, cost: cost, limit: limit) {
      case .allowed: return
      case .limited(let retryAfter): try await sleep(Swift.max(retryAfter, .nanoseconds(1)))
      }
    }
  }
}

extension StoreBackedRateLimiter {
  /// A limiter that looks each key's limit up in `plans` at each decision and passes it to
  /// `store`: ``init(limits:clock:store:)`` with ``RateLimitPlans/limit(for:)``. A plan changed at
  /// run time is in force from the key's next request; what the key keeps is the store's rule.
  ///
  /// - Parameters:
  ///   - plans: The default limit and the keys' own limits.
  ///   - clock: The clock ``acquire(_:cost:)`` sleeps on between attempts.
  ///   - store: Where the keys' state lives and the decisions are made.
  public convenience init<C: Clock>(
    plans: RateLimitPlans<Key>, clock: C = ContinuousClock(), store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limits: { plans.limit(for: $0) }, clock: clock, store: store)
  }
}
