/// Where a keyed rate limiter keeps its state and makes its decisions, when that state is shared
/// beyond one process (a database every instance of a server talks to, for instance).
///
/// A store makes each decision atomically: two instances asking at once for the last permit of a
/// key never both get it.
public protocol RateLimitStore<Key>: Sendable {
  /// The key type the store understands.
  associatedtype Key: Hashable & Sendable

  /// Takes `cost` permits for `key` under `limit` if they are available now, atomically.
  ///
  /// - Returns: `.allowed(remaining:)` if the permits were taken, `.limited(retryAfter:)` if not
  ///   (nothing is taken then).
  /// - Throws: When the store cannot decide (its database is unreachable, say); the store's own
  ///   documentation says what its failure policy is.
  func tryAcquire(_ key: Key, cost: Int, limit: RateLimit) async throws -> RateLimitDecision
}
