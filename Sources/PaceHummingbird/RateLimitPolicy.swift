#if Hummingbird
import Hummingbird
import Pace
@_exported import PaceHTTPServer

/// One named limit of a ``RateLimitMiddleware``: PaceHTTPServer's `RateLimitPolicy`, reading a
/// request and its context.
///
/// ```swift
/// let apiKey = HTTPField.Name("X-API-Key")!
/// let perKey = RateLimitPolicy<BasicRequestContext>("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) {
///   request, _ in request.headers[apiKey].map { "key:\($0)" }
/// }
/// ```
public typealias RateLimitPolicy<Context: RequestContext> = PaceHTTPServer.RateLimitPolicy<(Request, Context)>

/// What a rate-limit middleware does with a key longer than `InputRules.maximumKeyBytes`.
@available(*, deprecated, renamed: "LongKeyHandling")
public typealias LongKeyPolicy = LongKeyHandling

extension PaceHTTPServer.RateLimitPolicy {
  /// A policy that takes permits from `limiter`, in this process's memory; `key` and `cost` read
  /// a request and its context.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited.
  ///   - cost: How many permits a request takes; 1 by default.
  public init<Context: RequestContext>(
    _ name: String, limiter: KeyedRateLimiter<String>, key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) where Input == (Request, Context) {
    self.init(name, .inMemory(limiter), key: key, cost: cost)
  }

  /// A policy whose decisions are made by `limiter`'s store; `key` and `cost` read a request and
  /// its context.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields: printable ASCII, one of its own per middleware.
  ///   - limiter: Where the decisions are made.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited.
  ///   - cost: How many permits a request takes; 1 by default.
  public init<Context: RequestContext>(
    _ name: String, limiter: StoreBackedRateLimiter<String>, key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) where Input == (Request, Context) {
    self.init(name, .storeBacked(limiter), key: key, cost: cost)
  }

  /// A policy with its own in-memory limiter; `key` and `cost` read a request and its context.
  ///
  /// - Parameters:
  ///   - name: The policy's name in the fields.
  ///   - limit: The limit per key.
  ///   - key: The key a request counts against, or nil to let it through this policy unlimited.
  ///   - cost: How many permits a request takes; 1 by default.
  public init<Context: RequestContext>(
    _ name: String, limit: RateLimit, key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) where Input == (Request, Context) {
    self.init(name, .inMemory(KeyedRateLimiter(limit: limit)), key: key, cost: cost)
  }

  /// PaceHummingbird 0.3.0's order, `cost:` before `key:`.
  @available(*, deprecated, message: "Pass key: before cost:, as every framework's RateLimitPolicy takes them")
  public init<Context: RequestContext>(
    _ name: String, limiter: KeyedRateLimiter<String>, cost: @escaping @Sendable (Request, Context) -> Int,
    key: @escaping @Sendable (Request, Context) -> String?
  ) where Input == (Request, Context) {
    self.init(name, .inMemory(limiter), key: key, cost: cost)
  }

  /// PaceHummingbird 0.3.0's order, `cost:` before `key:`.
  @available(*, deprecated, message: "Pass key: before cost:, as every framework's RateLimitPolicy takes them")
  public init<Context: RequestContext>(
    _ name: String, limit: RateLimit, cost: @escaping @Sendable (Request, Context) -> Int,
    key: @escaping @Sendable (Request, Context) -> String?
  ) where Input == (Request, Context) {
    self.init(name, .inMemory(KeyedRateLimiter(limit: limit)), key: key, cost: cost)
  }

  /// The policy whose closures read a request and its context.
  init<Context: RequestContext>(
    _ name: String, _ decider: PolicyLimiter, key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int
  ) where Input == (Request, Context) {
    self.init(name: name, decider: decider, key: { key($0.0, $0.1) }, cost: { cost($0.0, $0.1) })
  }
}
#endif
