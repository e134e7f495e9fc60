#if Hummingbird || Vapor
import Pace

/// One named limit of a rate-limit middleware: what a request counts against (its key), how much
/// it takes (its cost), and where the decisions are made (its limiter). The same type on every
/// framework, generic over what the framework's middleware reads a request from: Vapor's
/// `Request`, Hummingbird's request and context.
///
/// ```swift
/// // Vapor: 300 a minute per client address (the default key), 100 per API key.
/// let perAddress = RateLimitPolicy("per-address", limit: RateLimit(permits: 300, per: .seconds(60)))
/// let perKey = RateLimitPolicy("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) { request in
///   request.headers.first(name: "X-API-Key").map { "key:\($0)" }
/// }
/// ```
///
/// Each initialiser takes the same labels in the same order on every framework:
/// `(_ name:, limit: | limiter:, key:, cost:)`.
public struct RateLimitPolicy<Input>: Sendable {
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields and in the metrics.
  public let name: String
  /// Where the decisions are made.
  package let decider: PolicyLimiter
  /// The share of its quota a key has used when the policy signals it (``NearLimitSignal``).
  package var nearLimit = NearLimitThreshold.default
  /// The key a request counts against, nil to let it through unlimited; no closure for the
  /// client's address, which the framework's middleware reads.
  package let key: (@Sendable (Input) -> String?)?
  /// How many permits a request takes.
  package let cost: @Sendable (Input) -> Int
  /// What makes the `pk` of the policy's `RateLimit` members; nil (the default) for none.
  package var partitionKeys: RateLimitPartitionKeys?

  /// A policy that takes permits from `limiter`, in this process's memory: each instance of the
  /// server counts alone.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made; its limit is the policy's, or each key's own for a
  ///     limiter with limits per key (`KeyedRateLimiter(limits:)`, a plan per API key), which the
  ///     fields report per key.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited;
  ///     the client's address by default (``ClientAddress/peer``). Key on what the client cannot
  ///     choose freely (``ClientAddress``, an API key checked against the known ones): a client
  ///     that invents keys gets a fresh bucket with each. Before `cost`, so that a trailing
  ///     closure is the key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`, and a cost of 0 asks
  ///     without taking, answered as a cost of 1 would be, so it never passes a limited key.
  public init(
    _ name: String, limiter: KeyedRateLimiter<String>, key: (@Sendable (Input) -> String?)? = nil,
    cost: @escaping @Sendable (Input) -> Int = { _ in 1 }
  ) {
    self.init(name: name, decider: .inMemory(limiter), key: key, cost: cost)
  }

  /// A policy whose decisions are made by `limiter`'s store, shared by every instance of the
  /// server that uses it.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made; its limit is the policy's, or each key's own.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited;
  ///     the client's address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    _ name: String, limiter: StoreBackedRateLimiter<String>, key: (@Sendable (Input) -> String?)? = nil,
    cost: @escaping @Sendable (Input) -> Int = { _ in 1 }
  ) {
    self.init(name: name, decider: .storeBacked(limiter), key: key, cost: cost)
  }

  /// A policy with its own in-memory limiter: each instance of the server counts alone.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields.
  ///   - limit: The limit per key.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited;
  ///     the client's address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    _ name: String, limit: RateLimit, key: (@Sendable (Input) -> String?)? = nil,
    cost: @escaping @Sendable (Input) -> Int = { _ in 1 }
  ) {
    self.init(name: name, decider: .inMemory(KeyedRateLimiter(limit: limit)), key: key, cost: cost)
  }

  package init(
    name: String, decider: PolicyLimiter, key: (@Sendable (Input) -> String?)?, cost: @escaping @Sendable (Input) -> Int
  ) {
    self.name = name
    self.decider = decider
    self.key = key
    self.cost = cost
  }

  /// The policy's limiter, for a policy made with a `KeyedRateLimiter` or a limit.
  ///
  /// A policy made with a ``StoreBackedRateLimiter`` has no `KeyedRateLimiter`: this then answers
  /// a new one whose `decide` and `acquire` ask the same store, and whose `tryAcquire` decides in
  /// this process's memory. Keep the limiter you gave the policy instead.
  @available(*, deprecated, message: "Keep the limiter you gave the policy: it may be a StoreBackedRateLimiter")
  public var limiter: KeyedRateLimiter<String> {
    switch decider {
    case .inMemory(let limiter): limiter
    case .storeBacked(let limiter): KeyedRateLimiter(sharing: limiter)
    }
  }
}

/// Where a policy's decisions are made: in this process's memory, or in a store.
package enum PolicyLimiter: Sendable {
  /// In memory: the decision is taken at once, without suspending (or by a limiter made with a
  /// store, deprecated, whose `decide` asks its store).
  case inMemory(KeyedRateLimiter<String>)
  /// In the limiter's store: the decision is awaited.
  case storeBacked(StoreBackedRateLimiter<String>)

  /// The limit of `key`.
  package func limit(for key: String) -> RateLimit {
    switch self {
    case .inMemory(let limiter): limiter.limit(for: key)
    case .storeBacked(let limiter): limiter.limit(for: key)
    }
  }

  /// The one limit of a limiter made with one; nil for limits per key.
  var uniformLimit: RateLimit? {
    switch self {
    case .inMemory(let limiter): limiter.uniformLimit
    case .storeBacked(let limiter): limiter.uniformLimit
    }
  }

  /// How long until the fixed window that counts a key whose limit is `limit` now ends, for a
  /// fixed window.
  func timeUntilWindowEnds(under limit: RateLimit) -> Duration? {
    switch self {
    case .inMemory(let limiter): limiter.timeUntilWindowEnds(under: limit)
    case .storeBacked(let limiter): limiter.timeUntilWindowEnds(under: limit)
    }
  }

  /// The limiter's decision, where it is made, on the counter of `key` under `limit`: the limit of
  /// the key the request sent, which `key` may stand for (a long key's digest).
  func decide(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    switch self {
    case .inMemory(let limiter): try await limiter.decide(key, cost: cost, limit: limit)
    case .storeBacked(let limiter): try await limiter.decide(key, cost: cost, limit: limit)
    }
  }

  /// The limiter that decides in this process's memory at once, if it does: the gate's fast path.
  var decidingInMemory: KeyedRateLimiter<String>? {
    guard case .inMemory(let limiter) = self, limiter.decidesInMemory else { return nil }
    return limiter
  }
}
#endif
