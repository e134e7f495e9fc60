#if Hummingbird
import HTTPTypes
import Hummingbird
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
/// Errors the limiter throws propagate (Hummingbird answers 500); a store with a failure policy,
/// such as `PostgresRateLimitStore(client:whenUnavailable:)`, decides before that.
public struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware {
  /// Where the decisions are made: in memory, or in the limiter's store.
  public let limiter: KeyedRateLimiter<String>
  /// The limit for every key: the limiter's.
  public var limit: RateLimit { limiter.limit }
  /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public let policyName: String
  private let key: @Sendable (Request, Context) -> String?
  private let cost: @Sendable (Request, Context) -> Int

  /// A middleware that takes permits from `limiter`: in memory, or shared through its store.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its `KeyedRateLimiter.limit` is the policy.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - cost: How many permits a request takes; 1 by default. Not negative.
  ///   - key: The key a request counts against, or nil to let it through unlimited.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.limiter = limiter
    self.policyName = policyName
    self.key = key
    self.cost = cost
  }

  /// A middleware with its own in-memory limiter: each instance of the server counts alone, so N
  /// instances allow up to N times `limit`.
  ///
  /// - Parameters:
  ///   - limit: The rate per key.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - cost: How many permits a request takes; 1 by default. Not negative.
  ///   - key: The key a request counts against, or nil to let it through unlimited.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 },
    key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      limiter: KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst),
      policyName: policyName, cost: cost, key: key)
  }

  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    guard let key = key(request, context) else { return try await next(request, context) }
    let decision = try await limiter.decide(key, cost: cost(request, context))
    let fields = RateLimitFields(limit: limit, policyName: policyName)
    switch decision {
    case .allowed(let remaining):
      var response = try await next(request, context)
      fields.add(remaining: remaining, to: &response.headers)
      return response
    case .limited(let retryAfter):
      var headers = HTTPFields()
      fields.add(retryAfter: retryAfter, to: &headers)
      headers[.contentType] = "text/plain; charset=utf-8"
      let body = "Too many requests: retry after \(RateLimitFields.wholeSeconds(retryAfter)) s\n"
      return Response(status: .tooManyRequests, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
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
