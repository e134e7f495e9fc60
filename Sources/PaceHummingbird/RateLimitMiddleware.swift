#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import Pace

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
  public let limiter: KeyedRateLimiter<String>
  /// The limit for every key: the limiter's.
  public var limit: RateLimit { limiter.limit }
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public let policyName: String
  /// Where invalid requests and limiter failures are logged.
  public let logger: Logger
  private let key: @Sendable (Request, Context) -> String?
  private let cost: @Sendable (Request, Context) -> Int
  private let responses: ResponseMetrics
  private let invalidReport = OccasionalReport(every: .seconds(10))

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
    self.limiter = limiter
    self.policyName = policyName
    self.logger = logger
    self.key = key
    self.cost = cost
    self.responses = ResponseMetrics(policy: policyName, factory: metricsFactory)
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
    let fields = RateLimitFields(limit: limit, policyName: policyName)
    let decision: RateLimitDecision
    do {
      decision = try await limiter.decide(key, cost: cost(request, context))
    } catch let invalid as InvalidInput {
      responses.invalid.increment()
      if let requests = invalidReport.record() {
        logger.notice(
          "rate limit: invalid request answered 400",
          metadata: ["pace.reason": "\(invalid)", "pace.requests": "\(requests)", "pace.policy": "\(policyName)"])
      }
      return Self.plainText(.badRequest, "Bad request: \(invalid)\n")
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      responses.unavailable.increment()
      logger.error(
        "rate limit: the limiter could not decide; answered 503",
        metadata: ["error": "\(String(reflecting: error))", "pace.policy": "\(policyName)"])
      var response = Self.plainText(.serviceUnavailable, "Service unavailable: the rate limiter could not decide\n")
      response.headers[.retryAfter] = "1"
      return response
    }
    switch decision {
    case .allowed(let remaining):
      responses.allowed.increment()
      var response = try await next(request, context)
      fields.add(remaining: remaining, to: &response.headers)
      return response
    case .limited(let retryAfter):
      responses.limited.increment()
      var response = Self.plainText(
        .tooManyRequests, "Too many requests: retry after \(RateLimitFields.wholeSeconds(retryAfter)) s\n")
      fields.add(retryAfter: retryAfter, to: &response.headers)
      return response
    }
  }

  static func plainText(_ status: HTTPResponse.Status, _ body: String) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = "text/plain; charset=utf-8"
    return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
  }
}

/// The counters of `pace_http_rate_limit_responses_total`, made once per middleware.
struct ResponseMetrics: Sendable {
  let allowed: Counter
  let limited: Counter
  let invalid: Counter
  let unavailable: Counter

  init(policy: String, factory: any MetricsFactory) {
    func counter(_ outcome: String) -> Counter {
      Counter(
        label: "pace_http_rate_limit_responses_total", dimensions: [("policy", policy), ("outcome", outcome)],
        factory: factory)
    }
    allowed = counter("allowed")
    limited = counter("limited")
    invalid = counter("invalid")
    unavailable = counter("unavailable")
  }
}

/// The fields of draft-ietf-httpapi-ratelimit-headers-10 and `Retry-After` for one decision.
struct RateLimitFields {
  static let policy = HTTPField.Name("RateLimit-Policy")!
  static let rateLimit = HTTPField.Name("RateLimit")!

  let limit: RateLimit
  let policyName: String

  init(limit: RateLimit, policyName: String) {
    self.limit = limit
    self.policyName = policyName
  }

  /// `"name";q=permits;w=seconds`: the quota and its window.
  var policyValue: String {
    "\"\(policyName)\";q=\(limit.permits);w=\(Self.wholeSeconds(limit.interval))"
  }

  /// The fields of an allowed request: `t` is when the key's bucket is full again, at most.
  func add(remaining: Int, to headers: inout HTTPFields) {
    let refill = limit.interval / limit.permits * max(0, limit.burst - remaining)
    headers[Self.policy] = policyValue
    headers[Self.rateLimit] = "\"\(policyName)\";r=\(remaining);t=\(Self.wholeSeconds(refill))"
  }

  /// The fields of a limited request.
  func add(retryAfter: Duration, to headers: inout HTTPFields) {
    let seconds = Self.wholeSeconds(retryAfter)
    headers[Self.policy] = policyValue
    headers[Self.rateLimit] = "\"\(policyName)\";r=0;t=\(seconds)"
    headers[.retryAfter] = String(seconds)
  }

  /// Seconds rounded up: a client that waits that long is not turned away again.
  static func wholeSeconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return max(0, attoseconds > 0 ? seconds + 1 : seconds)
  }
}
#endif
