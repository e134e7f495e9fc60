#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import Pace
import PaceHTTPServer

/// A Hummingbird middleware that limits requests per key: an API key, a client address, a user;
/// under one policy, or several at once (per client address and per API key, per route and
/// global), each reported in the fields. What it answers, and its initialisers, are
/// PaceHTTPServer's `RateLimitingMiddleware`'s, the same as PaceVapor's, byte for byte; this type
/// reads Hummingbird's request and writes its response.
///
/// In memory (each instance counts alone) by default; give it a `StoreBackedRateLimiter` on
/// `PostgresRateLimitStore` (PacePostgres) to share the limit between instances:
///
/// ```swift
/// let apiKey = HTTPField.Name("X-API-Key")!
/// router.add(middleware: RateLimitMiddleware(limit: RateLimit(permits: 100, per: .seconds(60))) { request, _ in
///   request.headers[apiKey]
/// })
/// // Shared: every instance that uses the database makes the same decisions.
/// let shared = StoreBackedRateLimiter(permits: 100, per: .seconds(60), store: try PostgresRateLimitStore(client: client))
/// router.add(middleware: RateLimitMiddleware(limiter: shared) { request, _ in request.headers[apiKey] })
/// ```
///
/// A policy without a key counts a request against its client's address, for a context that
/// knows it (`RemoteAddressRequestContext`), and against `ip:unknown` for one that does not. See
/// <doc:RateLimitsOnHummingbird>.
public struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware, RateLimitingMiddleware {
  /// A request and its context: what a policy reads a request's key and cost from.
  public typealias PolicyInput = (Request, Context)

  /// The policies and the gate, read by PaceHTTPServer.
  public let _rateLimitState: RateLimitMiddlewareState<(Request, Context)>

  /// The middleware made of `state`: what every initialiser comes to.
  public init(_rateLimitState state: RateLimitMiddlewareState<(Request, Context)>) {
    _rateLimitState = state
  }

  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    switch try await _rateLimitState.outcome((request, context), client: Self.client) {
    case .proceed(let fields):
      var permit: RequestPermit?
      switch try await _rateLimitState.admitConcurrency((request, context), client: Self.client) {
      case .admitted(let admitted): permit = admitted
      case .refused(let answer): return Self.response(answer, to: request)
      }
      var response: Response
      do {
        response = try await next(request, context)
      } catch {
        permit?.release(.failed(status: (error as? any HTTPResponseError).map { Int($0.status.code) }))
        throw error
      }
      Self.add(fields, to: &response.headers)
      if let permit { Self.hold(permit, until: &response) }
      return response
    case .respond(let answer):
      return Self.response(answer, to: request)
    }
  }

  /// `response`'s body, holding `permit` until the body's `write` returns (the last byte handed to
  /// the connection and the response finished) or throws (the client left, the body failed).
  static func hold(_ permit: RequestPermit, until response: inout Response) {
    let body = response.body
    let status = Int(response.status.code)
    response.body = ResponseBody(contentLength: body.contentLength) { writer in
      do {
        try await body.write(writer)
      } catch {
        permit.release(.abandoned)
        throw error
      }
      permit.release(.written(status: status))
    }
  }

  /// The middleware's own answer: problem details for a client that accepts JSON, the plain text
  /// otherwise.
  static func response(_ answer: PlainTextResponse, to request: Request) -> Response {
    let plain = answer.negotiated(accept: request.headers[values: .accept])
    var headers = HTTPFields()
    for field in plain.fields { headers[Self.name(field.name)] = field.value }
    return Response(
      status: HTTPResponse.Status(code: plain.status, reasonPhrase: plain.reasonPhrase), headers: headers,
      body: ResponseBody(byteBuffer: ByteBuffer(string: plain.body)))
  }

  /// How a request's client is read: the peer of a context that knows it
  /// (`RemoteAddressRequestContext`), and the request's forwarding header.
  static var client: ClientReader<(Request, Context)> {
    ClientReader(
      peer: { ($0.1 as? any RemoteAddressRequestContext)?.remoteAddress },
      forwarded: { input, name in input.0.headers[values: HTTPField.Name(name)!] })
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

// MARK: Key and cost closures that read a request and its context

extension RateLimitMiddleware {
  /// A middleware that takes permits from `limiter`, in this process's memory; `key` and `cost`
  /// read a request and its context (`RateLimitingMiddleware`'s initialiser says the rest).
  public init(
    limiter: KeyedRateLimiter<String>, policyName: String = "default", longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, .inMemory(limiter), key: key, cost: cost)], longKeys, logger,
      metricsFactory)
  }

  /// A middleware whose decisions are made by `limiter`'s store; `key` and `cost` read a request
  /// and its context.
  public init(
    limiter: StoreBackedRateLimiter<String>, policyName: String = "default", longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, .storeBacked(limiter), key: key, cost: cost)], longKeys, logger,
      metricsFactory)
  }

  /// A middleware with its own in-memory limiter; `key` and `cost` read a request and its context.
  public init(
    limit: RateLimit, policyName: String = "default", longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: @escaping @Sendable (Request, Context) -> String?,
    cost: @escaping @Sendable (Request, Context) -> Int = { _, _ in 1 }
  ) {
    self.init(
      limiter: KeyedRateLimiter(limit: limit), policyName: policyName, longKeys: longKeys, logger: logger,
      metricsFactory: metricsFactory, key: key, cost: cost)
  }

  /// PaceHummingbird 0.3.0's order, `cost:` before `key:`.
  @available(*, deprecated, message: "Pass key: before cost:, as every framework's RateLimitMiddleware takes them")
  public init(
    limiter: KeyedRateLimiter<String>, policyName: String = "default", longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int, key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, .inMemory(limiter), key: key, cost: cost)], longKeys, logger,
      metricsFactory)
  }

  /// PaceHummingbird 0.3.0's order, `cost:` before `key:`.
  @available(*, deprecated, message: "Pass key: before cost:, as every framework's RateLimitMiddleware takes them")
  public init(
    limit: RateLimit, policyName: String = "default", longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    cost: @escaping @Sendable (Request, Context) -> Int, key: @escaping @Sendable (Request, Context) -> String?
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, .inMemory(KeyedRateLimiter(limit: limit)), key: key, cost: cost)],
      longKeys, logger, metricsFactory)
  }

  private init(
    policies: [RateLimitPolicy<Context>], _ longKeys: LongKeyHandling, _ logger: Logger,
    _ metricsFactory: any MetricsFactory
  ) {
    self.init(policies: policies, longKeys: longKeys, logger: logger, metricsFactory: metricsFactory)
  }
}
#endif
