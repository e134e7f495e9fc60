#if Vapor
import Logging
import Metrics
import Pace
import PaceHTTP
import Vapor

/// A Vapor middleware that limits requests per key: by default the client's address.
///
/// Allowed requests go on with the IETF rate-limit fields added; limited ones get
/// `429 Too Many Requests` with `Retry-After`. The fields follow
/// [draft-ietf-httpapi-ratelimit-headers-10](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/):
///
/// ```
/// RateLimit-Policy: "default";q=100;w=60
/// RateLimit: "default";r=42;t=35
/// ```
///
/// The responses are PaceHummingbird's, byte for byte: a fleet can mix both frameworks behind
/// one policy. Group the routes it limits, or wrap one route:
///
/// ```swift
/// let limited = app.grouped(RateLimitMiddleware(limit: RateLimit(permits: 100, per: .seconds(60))))
/// limited.get("search") { _ in "results" }
/// app.grouped(RateLimitMiddleware(limit: RateLimit(permits: 5, per: .seconds(60)))).post("login") { _ in "ok" }
/// ```
///
/// In memory (each instance counts alone) by default; give it a `KeyedRateLimiter` backed by
/// `PostgresRateLimitStore` (PacePostgres) to share the limit between instances.
///
/// | The limiter… | Response |
/// |---|---|
/// | allows the request | the route's response, with the fields |
/// | denies it | `429 Too Many Requests`, `Retry-After` and the fields |
/// | refuses the key or the cost (`InvalidInput`) | `400 Bad Request`, with the reason as plain text |
/// | cannot decide (its store throws) | `503 Service Unavailable`, `Retry-After: 1` |
///
/// Invalid requests and failures are logged to `logger` and counted in
/// `pace_http_rate_limit_responses_total`, with dimensions `policy` and `outcome` (`allowed`,
/// `limited`, `invalid`, `unavailable`).
public struct RateLimitMiddleware: AsyncMiddleware {
  /// Where the decisions are made: in memory, or in the limiter's store.
  public var limiter: KeyedRateLimiter<String> { gate.limiter }
  /// The limit for every key: the limiter's.
  public var limit: RateLimit { limiter.limit }
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public var policyName: String { gate.fields.policyName }
  /// Where invalid requests and limiter failures are logged.
  public var logger: Logger { gate.logger }
  private let gate: RateLimitGate
  private let key: @Sendable (Request) -> String?
  private let cost: @Sendable (Request) -> Int

  /// A middleware that takes permits from `limiter`: in memory, or shared through its store.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its `KeyedRateLimiter.limit` is the policy.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - logger: Where to log invalid requests and failures; silent by default (pass `app.logger`).
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the peer's
  ///     address by default (``ClientAddress/peer``). Key on what the client cannot choose freely:
  ///     a client that invents keys gets a fresh bucket with each. Before `cost`, so that a
  ///     trailing closure is the key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    logger: Logger = Logger(label: "pace.vapor.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
  ) {
    self.gate = RateLimitGate(limiter: limiter, policyName: policyName, logger: logger, metricsFactory: metricsFactory)
    self.key = key
    self.cost = cost
  }

  /// A middleware with its own in-memory limiter: each instance of the server counts alone, so N
  /// instances allow up to N times `limit`.
  ///
  /// - Parameters:
  ///   - limit: The rate per key.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - logger: Where to log invalid requests; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the peer's
  ///     address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    logger: Logger = Logger(label: "pace.vapor.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
  ) {
    self.init(
      limiter: KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst),
      policyName: policyName, logger: logger, metricsFactory: metricsFactory, key: key, cost: cost)
  }

  public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
    guard let key = key(request) else { return try await next.respond(to: request) }
    switch try await gate.outcome(key: key, cost: cost(request)) {
    case .proceed(let fields):
      let response = try await next.respond(to: request)
      for field in fields { response.headers.replaceOrAdd(name: field.name, value: field.value) }
      return response
    case .respond(let plain):
      return Response(
        status: HTTPResponseStatus(statusCode: plain.status, reasonPhrase: plain.reasonPhrase),
        headers: HTTPHeaders(plain.fields.map { ($0.name, $0.value) }),
        body: Response.Body(string: plain.body))
    }
  }
}
#endif
