#if Vapor
import Logging
import Metrics
import Pace
import PaceEventLoops
import PaceHTTP
import Vapor

/// A Vapor middleware that limits requests per key, by default the client's address; under one
/// policy, or several at once (per client address and per API key, per route and global), each
/// reported in the fields.
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
/// Several policies in one middleware are all asked before any is charged: a request one of them
/// denies is charged by none, and its `429` names that policy (see <doc:RateLimitsOnVapor>).
/// Middlewares stacked on one route each add their members to the lists, the outer one's first;
/// an outer one charges before an inner one decides.
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
  /// The policies, in the order a request meets them and the fields list them.
  public let policies: [RateLimitPolicy]
  /// What happens to a key longer than `KeyPolicy.maximumBytes`.
  public let longKeys: LongKeyPolicy
  /// The first policy's limiter: in memory, or in the limiter's store.
  public var limiter: KeyedRateLimiter<String> { policies[0].limiter }
  /// The first policy's limit, for a limiter with one limit (`KeyedRateLimiter.limit`); a
  /// limiter with limits per key reports each key's own in the fields.
  public var limit: RateLimit { limiter.limit }
  /// The first policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public var policyName: String { policies[0].name }
  /// Where invalid requests and limiter failures are logged.
  public var logger: Logger { gate.logger }
  private let gate: RateLimitGate

  /// A middleware that limits each request by every one of `policies`.
  ///
  /// - Parameters:
  ///   - policies: The limits, in order; at least one, each with a name of its own.
  ///   - longKeys: What to do with a key over `KeyPolicy.maximumBytes`; hashed by default.
  ///   - logger: Where to log invalid requests and failures; silent by default (pass `app.logger`).
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  public init(
    policies: [RateLimitPolicy],
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.vapor.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) {
    self.policies = policies
    self.longKeys = longKeys
    self.gate = RateLimitGate(
      policies: policies.map { ($0.name, $0.limiter) }, longKeys: longKeys.rule, logger: logger,
      metricsFactory: metricsFactory)
  }

  /// A middleware that takes permits from `limiter`: in memory, or shared through its store.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its limit is the policy, or each key's own for a
  ///     limiter with limits per key (`KeyedRateLimiter(limits:)`, a plan per API key).
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - longKeys: What to do with a key over `KeyPolicy.maximumBytes`; hashed by default.
  ///   - logger: Where to log invalid requests and failures; silent by default (pass `app.logger`).
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the peer's
  ///     address by default (``ClientAddress/peer``). Key on what the client cannot choose freely:
  ///     a client that invents keys gets a fresh bucket with each. Before `cost`, so that a
  ///     trailing closure is the key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`; a cost of 0 asks without
  ///     taking and is limited when a cost of 1 would be.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.vapor.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, limiter: limiter, key: key, cost: cost)], longKeys: longKeys,
      logger: logger, metricsFactory: metricsFactory)
  }

  /// A middleware with its own in-memory limiter: each instance of the server counts alone, so N
  /// instances allow up to N times `limit`.
  ///
  /// - Parameters:
  ///   - limit: The limit per key.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - longKeys: What to do with a key over `KeyPolicy.maximumBytes`; hashed by default.
  ///   - logger: Where to log invalid requests; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the peer's
  ///     address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.vapor.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request) -> String? = ClientAddress.peer.key,
    cost: @escaping @Sendable (Request) -> Int = { _ in 1 }
  ) {
    self.init(
      limiter: KeyedRateLimiter(limit: limit), policyName: policyName, longKeys: longKeys, logger: logger,
      metricsFactory: metricsFactory, key: key, cost: cost)
  }

  /// The middleware's answer to `request`, for a caller that awaits it; Vapor itself calls the
  /// future-based `respond(to:chainingTo:)` with a `Responder`, which answers the same.
  public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
    let outcome: RateLimitOutcome
    if policies.count == 1 {
      // One policy, the usual case: no list of charges.
      outcome = try await gate.outcome(key: policies[0].key(request), cost: policies[0].cost(request))
    } else {
      outcome = try await gate.outcome(
        policies.map { RateLimitGate.Charge(key: $0.key(request), cost: $0.cost(request)) })
    }
    switch outcome {
    case .proceed(let fields):
      return Self.adding(fields, to: try await next.respond(to: request))
    case .respond(let plain):
      return Self.response(plain)
    }
  }

  /// Vapor's entry point. One policy whose limiter decides in memory answers on the request's
  /// event loop at once, with no task per request; a store's decision, or several policies', is
  /// awaited in a task, as an `AsyncMiddleware`'s is, whose jobs run on the request's event loop
  /// where the system has task executors (Linux; macOS 15, iOS 18 and later), so that neither the
  /// task's start nor its answer wakes another thread. The same answers either way.
  public func respond(to request: Request, chainingTo next: any Responder) -> EventLoopFuture<Response> {
    guard policies.count == 1 else {
      return request.eventLoop.makeFutureWithTaskOnLoop {
        try await respond(to: request, chainingTo: AsyncBasicResponder { try await next.respond(to: $0).get() })
      }
    }
    // Read once: the key and the cost are user code.
    let key = policies[0].key(request)
    let cost = policies[0].cost(request)
    if let outcome = gate.outcomeAtOnce(key: key, cost: cost) {
      return respond(outcome, to: request, chainingTo: next)
    }
    return request.eventLoop.makeFutureWithTaskOnLoop {
      try await gate.outcome(key: key, cost: cost)
    }.flatMap { outcome in
      respond(outcome, to: request, chainingTo: next)
    }
  }

  private func respond(
    _ outcome: RateLimitOutcome, to request: Request, chainingTo next: any Responder
  ) -> EventLoopFuture<Response> {
    switch outcome {
    case .proceed(let fields):
      if fields.isEmpty { return next.respond(to: request) }
      return next.respond(to: request).map { Self.adding(fields, to: $0) }
    case .respond(let plain):
      return request.eventLoop.makeSucceededFuture(Self.response(plain))
    }
  }

  /// `response` with the fields of the limits that let its request through.
  private static func adding(_ fields: [HeaderField], to response: Response) -> Response {
    for field in fields {
      // The route's response has none of these fields unless an inner middleware wrote them.
      guard response.headers.contains(name: field.name) else {
        response.headers.add(name: field.name, value: field.value)
        continue
      }
      let merged = RateLimitFields.merged([field]) { name in
        let values = response.headers[name]
        return values.isEmpty ? nil : values.joined(separator: ", ")
      }
      response.headers.replaceOrAdd(name: field.name, value: merged[0].value)
    }
    return response
  }

  /// The middleware's own answer: a `429`, a `400` or a `503`.
  private static func response(_ plain: PlainTextResponse) -> Response {
    Response(
      status: HTTPResponseStatus(statusCode: plain.status, reasonPhrase: plain.reasonPhrase),
      headers: HTTPHeaders(plain.fields.map { ($0.name, $0.value) }),
      body: Response.Body(string: plain.body))
  }
}
#endif
