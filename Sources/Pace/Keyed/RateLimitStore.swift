/// The rate a rate limiter enforces, for each key of a keyed one: `permits` per `interval`, up to
/// `burst` at once.
public struct RateLimit: Sendable, Hashable, CustomStringConvertible {
  /// How many permits come back per ``interval``.
  public let permits: Int
  /// The period of the rate.
  public let interval: Duration
  /// How many permits can be taken at once after a quiet period.
  public let burst: Int

  /// A rate of `permits` per `interval`, with a bucket of `burst` (by default `permits`).
  ///
  /// - Parameters:
  ///   - permits: How many permits come back per `interval`. Positive.
  ///   - interval: The period of the rate. Positive.
  ///   - burst: How many permits can be taken at once; `permits` by default. Positive.
  public init(permits: Int, per interval: Duration, burst: Int? = nil) {
    precondition(permits > 0, "RateLimit: permits must be positive (got \(permits))")
    precondition(interval > .zero, "RateLimit: interval must be positive (got \(interval))")
    let burst = burst ?? permits
    precondition(burst > 0, "RateLimit: burst must be positive (got \(burst))")
    self.permits = permits
    self.interval = interval
    self.burst = burst
  }

  /// Such as `"100 per 60 s, burst 20"`.
  public var description: String { "\(permits) per \(interval.paceDescription), burst \(burst)" }
}

/// What a rate limiter decided for one request.
public enum RateLimitDecision: Sendable, Hashable {
  /// The request may go ahead; `remaining` permits are left for the key right now.
  case allowed(remaining: Int)
  /// The request is over the limit; the same request would be allowed after `retryAfter`.
  case limited(retryAfter: Duration)

  /// Whether the request may go ahead.
  public var isAllowed: Bool {
    if case .allowed = self { return true }
    return false
  }
}

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
