#if Hummingbird
import Hummingbird
import Pace
import PaceHTTP

/// One named limit of a ``RateLimitMiddleware``: what a request counts against (its key), how
/// much it takes (its cost), and where the decisions are made (its limiter).
///
/// ```swift
/// let apiKey = HTTPField.Name("X-API-Key")!
/// let perKey = RateLimitPolicy<BasicRequestContext>("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) {
///   request, _ in request.headers[apiKey].map { "key:\($0)" }
/// }
/// ```
public struct RateLimitPolicy<Context: RequestContext>: Sendable {
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields and in the metrics.
  public let name: String
  /// Where the decisions are made: in memory, or in the limiter's store.
  public let limiter: KeyedRateLimiter<String>
  let key: @Sendable (Request, Context) -> String?
  let cost: @Sendable (Request, Context) -> Int

  /// A policy that takes permits from `limiter`.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made; its limit is the policy's, or each key's own for a
  ///     limiter with limits per key (`KeyedRateLimiter(limits:)`, a plan per API key), which
  ///     the fields report per key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`, and a cost of 0 asks
  ///     without taking, answered as a cost of 1 would be, so it never passes a limited key.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited.
  ///     Key on what the client cannot choose freely (``ClientAddress``, an API key checked
  ///     against the known ones): a client that invents keys gets a fresh bucket with each.
  public init(
    _ name: String,
    limiter: KeyedRateLimiter<String>,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.name = name
    self.limiter = limiter
    self.key = key
    self.cost = cost
  }

  /// A policy with its own in-memory limiter: each instance of the server counts alone.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields.
  ///   - limit: The limit per key.
  ///   - cost: How many permits a request takes; 1 by default.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited.
  public init(
    _ name: String,
    limit: RateLimit,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(name, limiter: KeyedRateLimiter(limit: limit), cost: cost, key: key)
  }
}

/// What a rate-limit middleware does with a key longer than `KeyPolicy.maximumBytes` (an API key,
/// a JWT): count it, or refuse it.
public enum LongKeyPolicy: Sendable, Hashable {
  /// Counts the request against `sha256:` and the key's SHA-256 in hexadecimal. A short key that
  /// itself starts with `sha256:` is hashed too, so no key can be chosen to share a long key's
  /// bucket. The default.
  case hash
  /// Answers `400 Bad Request`, naming the key's length.
  case refuse

  var rule: LongKeyRule {
    switch self {
    case .hash: .hash
    case .refuse: .refuse
    }
  }
}
#endif
