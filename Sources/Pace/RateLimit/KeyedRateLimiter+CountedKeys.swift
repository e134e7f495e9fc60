// A key counted under another name than the one its limit is looked up by: a middleware counts a
// long key under its digest, but the key's plan is the key's own.
extension KeyedRateLimiter {
  /// `limit` as the decisions use it: a limiter with one limit has it converted already.
  func keyLimit(given limit: RateLimit) -> KeyLimit {
    if case .uniform(let uniform) = limits, uniform.limit == limit { return uniform }
    return KeyLimit(limit, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin)
  }

  /// ``tryAcquire(_:cost:)`` on `key`'s counter under `limit`, which the caller looked up (with
  /// ``limit(for:)``) by the key a request sent, of which `key` is the name it is counted under.
  ///
  /// - Precondition: `cost` is not negative.
  package func tryAcquire(_ key: Key, cost: Int, limit: RateLimit) -> RateLimitDecision {
    precondition(cost >= 0, "KeyedRateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    let keyLimit = keyLimit(given: limit)
    if cost > keyLimit.burst { return .limited(retryAfter: RateLimitDecision.never) }
    return decideLocally(key, cost: cost, limit: keyLimit)
  }

  /// ``decide(_:cost:)`` on `key`'s counter under `limit`, which the caller looked up (with
  /// ``limit(for:)``) by the key a request sent, of which `key` is the name it is counted under.
  ///
  /// - Throws: ``InvalidInput`` for a key or cost outside ``InputRules``; what the store throws.
  package func decide(_ key: Key, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    if let storeBacked { return try await storeBacked.decide(key, cost: cost, limit: limit) }
    let keyLimit = keyLimit(given: limit)
    try InputRules.check(cost: cost, limit: limit)
    if let key = key as? String { try InputRules.check(key: key) }
    return decideLocally(key, cost: cost, limit: keyLimit)
  }

  /// ``timeUntilWindowEnds(for:)`` of a key whose limit is `limit`: a window's end depends on the
  /// limit and the clock alone.
  package func timeUntilWindowEnds(under limit: RateLimit) -> Duration? {
    guard case .fixedWindow = limit.algorithm else { return nil }
    return keyLimit(given: limit).timeUntilWindowEnds(clock: clock)
  }
}
