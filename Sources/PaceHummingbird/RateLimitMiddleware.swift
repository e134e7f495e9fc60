#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import Pace
import PaceHTTP

/// A Hummingbird middleware that limits requests per key: an API key, a client address, a user.
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
/// Every request gets an answer, never a crash or an empty `500`:
///
/// | The limiter… | Response |
/// |---|---|
/// | allows the request | the route's response, with the fields |
/// | denies it | `429 Too Many Requests`, `Retry-After` and the fields |
/// | refuses the key or the cost (`InvalidInput`: empty, over `KeyPolicy.maximumBytes`, NUL, a negative cost, a cost above the burst) | `400 Bad Request`, with the reason as plain text |
/// | cannot decide (its store throws) | `503 Service Unavailable`, `Retry-After: 1` |
///
/// A store with a failure policy, such as `PostgresRateLimitStore(client:whenUnavailable:)`,
/// decides before that. Invalid requests and failures are logged to `logger` (invalid requests at
/// most one line per 10 s, with how many it stands for) and counted in
/// `pace_http_rate_limit_responses_total`, with dimensions `policy` and `outcome` (`allowed`,
/// `limited`, `invalid`, `unavailable`).
public struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware {
  /// Where the decisions are made: in memory, or in the limiter's store.
  public var limiter: KeyedRateLimiter<String> { gate.limiter }
  /// The limit for every key: the limiter's.
  public var limit: RateLimit { limiter.limit }
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public var policyName: String { gate.fields.policyName }
  /// Where invalid requests and limiter failures are logged.
  public var logger: Logger { gate.logger }
  private let gate: RateLimitGate
  private let key: @Sendable (Request, Context) -> String?
  private let cost: @Sendable (Request, Context) -> Int

  /// A middleware that takes permits from `limiter`: in memory, or shared through its store.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its `KeyedRateLimiter.limit` is the policy.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - logger: Where to log invalid requests and failures; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`.
  ///   - key: The key a request counts against, or nil to let it through unlimited. Key on what
  ///     the client cannot choose freely (the peer address, an API key checked against the known
  ///     ones): a client that invents keys gets a fresh bucket with each.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    logger: Logger = Logger(label: "pace.hummingbird.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
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
  ///   - cost: How many permits a request takes; 1 by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    logger: Logger = Logger(label: "pace.hummingbird.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      limiter: KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst),
      policyName: policyName, logger: logger, metricsFactory: metricsFactory, cost: cost, key: key)
  }

  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    guard let key = key(request, context) else { return try await next(request, context) }
    switch try await gate.outcome(key: key, cost: cost(request, context)) {
    case .proceed(let fields):
      var response = try await next(request, context)
      for field in fields { response.headers[HTTPField.Name(field.name)!] = field.value }
      return response
    case .respond(let plain):
      var headers = HTTPFields()
      for field in plain.fields { headers[HTTPField.Name(field.name)!] = field.value }
      return Response(
        status: HTTPResponse.Status(code: plain.status, reasonPhrase: plain.reasonPhrase), headers: headers,
        body: ResponseBody(byteBuffer: ByteBuffer(string: plain.body)))
    }
  }
}
#endif
