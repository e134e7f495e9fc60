#if Vapor
import Pace
import PaceHTTP
import Vapor

/// One named limit of a ``RateLimitMiddleware``: what a request counts against (its key), how
/// much it takes (its cost), and where the decisions are made (its limiter).
///
/// ```swift
/// let perAddress = RateLimitPolicy("per-address", limit: RateLimit(permits: 300, per: .seconds(60)))
/// let perKey = RateLimitPolicy("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) { request in
///   request.headers.first(name: "X-API-Key").map { "key:\($0)" }
/// }
/// ```
public struct RateLimitPolicy: Sendable {
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields and in the metrics.
  public let name: String
  /// Where the decisions are made: in memory, or in the limiter's store.
  public let limiter: KeyedRateLimiter<String>
  let key: @Sendable (Request) -> String?
  let cost: @Sendable (Request) -> Int

  /// A policy that takes permits from `limiter`.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made; its limit is the policy's, or each key's own for a
  ///     limiter with limits per key (`KeyedRateLimiter(limits:)`, a plan per API key), which
  ///     the fields report per key.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited;
  ///     the peer's address by default (``ClientAddress/peer``). Before `cost`, so that a
  ///     trailing closure is the key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`, and a cost of 0 asks
  ///     without taking, answered as a cost of 1 would be, so it never passes a limited key.
  public init(
    _ name: String,
    limiter: KeyedRateLimiter<String>,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
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
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited;
  ///     the peer's address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    _ name: String,
    limit: RateLimit,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
  ) {
    self.init(name, limiter: KeyedRateLimiter(limit: limit), key: key, cost: cost)
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
