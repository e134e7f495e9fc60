#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import Pace
import PaceHTTP

/// A Hummingbird middleware that limits requests per key: an API key, a client address, a user;
/// under one policy, or several at once (per client address and per API key, per route and
/// global), each reported in the fields.
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
/// In memory (each instance counts alone) by default; give it a `KeyedRateLimiter` backed by
/// `PostgresRateLimitStore` (PacePostgres) to share the limit between instances:
///
/// ```swift
/// let apiKey = HTTPField.Name("X-API-Key")!
/// router.add(middleware: RateLimitMiddleware(limit: RateLimit(permits: 100, per: .seconds(60))) { request, _ in
///   request.headers[apiKey]
/// })
/// // Shared: every instance that uses the database makes the same decisions.
/// let shared = KeyedRateLimiter(permits: 100, per: .seconds(60), store: try PostgresRateLimitStore(client: client))
/// router.add(middleware: RateLimitMiddleware(limiter: shared) { request, _ in request.headers[apiKey] })
/// ```
///
/// Several policies in one middleware are all asked before any is charged: a request one of them
/// denies is charged by none, and its `429` names that policy (see
/// <doc:RateLimitsOnHummingbird>). Middlewares stacked on one route each add their members to
/// the lists, the outer one's first; an outer one charges before an inner one decides.
///
/// Every request gets an answer, never a crash or an empty `500`:
///
/// | The limiter… | Response |
/// |---|---|
/// | allows the request | the route's response, with the fields |
/// | denies it | `429 Too Many Requests`, `Retry-After` and the fields |
/// | refuses the key or the cost (`InvalidInput`: empty, NUL, a negative cost, a cost above the burst; a key over `KeyPolicy.maximumBytes` only under ``LongKeyPolicy/refuse``) | `400 Bad Request`, with the reason as plain text |
/// | cannot decide (its store throws) | `503 Service Unavailable`, `Retry-After: 1` |
///
/// A store with a failure policy, such as `PostgresRateLimitStore(client:whenUnavailable:)`,
/// decides before that. Invalid requests and failures are logged to `logger` (invalid requests at
/// most one line per 10 s, with how many it stands for) and counted in
/// `pace_http_rate_limit_responses_total`, with dimensions `policy` and `outcome` (`allowed`,
/// `limited`, `invalid`, `unavailable`).
public struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware {
  /// The policies, in the order a request meets them and the fields list them.
  public let policies: [RateLimitPolicy<Context>]
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
  ///   - logger: Where to log invalid requests and failures; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  public init(
    policies: [RateLimitPolicy<Context>],
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.hummingbird.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
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
  ///   - logger: Where to log invalid requests and failures; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`; a cost of 0 asks without
  ///     taking and is limited when a cost of 1 would be.
  ///   - key: The key a request counts against, or nil to let it through unlimited. Key on what
  ///     the client cannot choose freely (``ClientAddress``, an API key checked against the known
  ///     ones): a client that invents keys gets a fresh bucket with each.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.hummingbird.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, limiter: limiter, cost: cost, key: key)], longKeys: longKeys,
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
  ///   - cost: How many permits a request takes; 1 by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    longKeys: LongKeyPolicy = .hash,
    logger: Logger = Logger(label: "pace.hummingbird.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      limiter: KeyedRateLimiter(limit: limit), policyName: policyName, longKeys: longKeys, logger: logger,
      metricsFactory: metricsFactory, cost: cost, key: key)
  }

  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    let outcome: RateLimitOutcome
    if policies.count == 1 {
      // One policy, the usual case: no list of charges.
      let policy = policies[0]
      outcome = try await gate.outcome(key: policy.key(request, context), cost: policy.cost(request, context))
    } else {
      outcome = try await gate.outcome(
        policies.map { policy in
          RateLimitGate.Charge(key: policy.key(request, context), cost: policy.cost(request, context))
        })
    }
    switch outcome {
    case .proceed(let fields):
      var response = try await next(request, context)
      Self.add(fields, to: &response.headers)
      return response
    case .respond(let plain):
      var headers = HTTPFields()
      for field in plain.fields { headers[Self.name(field.name)] = field.value }
      return Response(
        status: HTTPResponse.Status(code: plain.status, reasonPhrase: plain.reasonPhrase), headers: headers,
        body: ResponseBody(byteBuffer: ByteBuffer(string: plain.body)))
    }
  }

  /// Adds `fields` in front of the members an inner middleware wrote, if any.
  static func add(_ fields: [HeaderField], to headers: inout HTTPFields) {
    for field in fields {
      let name = Self.name(field.name)
      // The route's response has none of these fields unless an inner middleware wrote them.
      guard headers.contains(name) else {
        headers.append(HTTPField(name: name, value: field.value))
        continue
      }
      let merged = RateLimitFields.merged([field]) { _ in
        let values = headers[values: name]
        return values.isEmpty ? nil : values.joined(separator: ", ")
      }
      headers[name] = merged[0].value
    }
  }

  private static func name(_ name: String) -> HTTPField.Name {
    switch name {
    case RateLimitFields.policy: FieldNames.rateLimitPolicy
    case RateLimitFields.rateLimit: FieldNames.rateLimit
    case RateLimitFields.retryAfter: FieldNames.retryAfter
    case "Content-Type": .contentType
    default: HTTPField.Name(name)!
    }
  }
}

/// The fields' names, checked once rather than at each request.
private enum FieldNames {
  static let rateLimitPolicy = HTTPField.Name(RateLimitFields.policy)!
  static let rateLimit = HTTPField.Name(RateLimitFields.rateLimit)!
  static let retryAfter = HTTPField.Name(RateLimitFields.retryAfter)!
}
#endif
