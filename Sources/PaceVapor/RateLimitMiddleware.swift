#if Vapor
import Logging
import Metrics
import Pace
import PaceEventLoops
@_exported import PaceHTTPServer
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
/// In memory (each instance counts alone) by default; give it a `StoreBackedRateLimiter` on
/// `PostgresRateLimitStore` (PacePostgres) to share the limit between instances. What it answers,
/// and its initialisers, are PaceHTTPServer's `RateLimitingMiddleware`'s, the same as
/// PaceHummingbird's; this type reads Vapor's request and writes its response. A policy without a
/// key counts a request against its client's address (``ClientAddress/peer``).
public struct RateLimitMiddleware: AsyncMiddleware, RateLimitingMiddleware {
  /// The policies and the gate, read by PaceHTTPServer.
  public let _rateLimitState: RateLimitMiddlewareState<Request>

  /// The middleware made of `state`: what every initialiser comes to.
  public init(_rateLimitState state: RateLimitMiddlewareState<Request>) {
    _rateLimitState = state
  }

  /// The middleware's answer to `request`, for a caller that awaits it; Vapor itself calls the
  /// future-based `respond(to:chainingTo:)` with a `Responder`, which answers the same.
  public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
    let outcome = try await _rateLimitState.outcome(request, client: Self.client)
    switch outcome {
    case .proceed(let fields):
      var permit: RequestPermit?
      switch try await _rateLimitState.admitConcurrency(request, client: Self.client) {
      case .admitted(let admitted): permit = admitted
      case .refused(let plain): return Self.response(plain, to: request)
      }
      let response: Response
      do {
        response = try await next.respond(to: request)
      } catch {
        permit?.release(.failed(status: (error as? any AbortError).map { Int($0.status.code) }))
        throw error
      }
      if let permit { Self.hold(permit, until: response, answering: request) }
      return Self.adding(fields, to: response)
    case .respond(let plain):
      return Self.response(plain, to: request)
    }
  }

  /// Vapor's entry point. One policy whose limiter decides in memory answers on the request's
  /// event loop at once, with no task per request; a store's decision, or several policies', is
  /// awaited in a task, as an `AsyncMiddleware`'s is, whose jobs run on the request's event loop
  /// where the system has task executors (Linux; macOS 15, iOS 18 and later), so that neither the
  /// task's start nor its answer wakes another thread. The same answers either way.
  public func respond(to request: Request, chainingTo next: any Responder) -> EventLoopFuture<Response> {
    // A concurrency limit holds its place past the handler: the async path, which wraps the body.
    guard _rateLimitState.policies.count == 1, _rateLimitState.concurrency == nil else {
      return request.eventLoop.makeFutureWithTaskOnLoop {
        try await respond(to: request, chainingTo: AsyncBasicResponder { try await next.respond(to: $0).get() })
      }
    }
    // Read once: the key and the cost are user code.
    let charge: RateLimitGate.Charge
    switch _rateLimitState.admitOne(request, client: Self.client) {
    case .answered(let outcome): return respond(outcome, to: request, chainingTo: next)
    case .decide(let admitted): charge = admitted
    }
    let gate = _rateLimitState.gate
    if let outcome = gate.outcomeAtOnce(key: charge.key, cost: charge.cost) {
      return respond(outcome, to: request, chainingTo: next)
    }
    return request.eventLoop.makeFutureWithTaskOnLoop {
      try await gate.outcome(key: charge.key, cost: charge.cost)
    }.flatMap { outcome in
      respond(outcome, to: request, chainingTo: next)
    }
  }

  /// How a request's client is read: its peer, and its forwarding header.
  static let client = ClientReader<Request>(
    peer: { $0.remoteAddress }, forwarded: { request, name in request.headers[name] })

  private func respond(
    _ outcome: RateLimitOutcome, to request: Request, chainingTo next: any Responder
  ) -> EventLoopFuture<Response> {
    switch outcome {
    case .proceed(let fields):
      if fields.isEmpty { return next.respond(to: request) }
      return next.respond(to: request).map { Self.adding(fields, to: $0) }
    case .respond(let plain):
      return request.eventLoop.makeSucceededFuture(Self.response(plain, to: request))
    }
  }

  /// Makes `response`'s body hold `permit` until it is written: a body of bytes is sent as a
  /// stream of known length (the same `Content-Length`), whose `.end` releases the permit once
  /// Vapor has written and flushed it, and whose failed write (the client left) releases it at
  /// once. A streamed body (`Response.Body(stream:)` or `asyncStream:`), whose closure Vapor keeps
  /// with no public accessor, gives the permit back as the handler returns: Vapor offers no way
  /// to wrap its writer. No body (`HEAD`, `204`, an empty body) releases it now.
  static func hold(_ permit: RequestPermit, until response: Response, answering request: Request) {
    let status = Int(response.status.code)
    let body = response.body
    if request.method == .HEAD || response.status == .noContent {
      permit.release(.written(status: status))
      return
    }
    if let buffer = body.buffer {
      response.body = Response.Body(
        stream: { writer in
          let releasing = ReleasingBodyStreamWriter(writer, permit: permit, status: status)
          releasing.write(.buffer(buffer), promise: nil)
          releasing.write(.end, promise: nil)
        }, count: buffer.readableBytes)
      return
    }
    // No body, or a stream whose writer cannot be wrapped: the place is given back now.
    permit.release(.written(status: status))
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

  /// The middleware's own answer to `request`: a `429`, a `400` or a `503`; problem details for
  /// a client that accepts JSON, the plain text otherwise.
  private static func response(_ answer: PlainTextResponse, to request: Request) -> Response {
    let plain = answer.negotiated(accept: request.headers[.accept])
    return Response(
      status: HTTPResponseStatus(statusCode: plain.status, reasonPhrase: plain.reasonPhrase),
      headers: HTTPHeaders(plain.fields.map { ($0.name, $0.value) }),
      body: Response.Body(string: plain.body))
  }
}
/// A body stream's writer that releases a request's permit when the stream ends (its `.end` or
/// `.error` written) or a write fails (the client left).
struct ReleasingBodyStreamWriter: BodyStreamWriter {
  let inner: any BodyStreamWriter
  let permit: RequestPermit
  let status: Int

  init(_ inner: any BodyStreamWriter, permit: RequestPermit, status: Int) {
    self.inner = inner
    self.permit = permit
    self.status = status
  }

  var eventLoop: any EventLoop { inner.eventLoop }

  func write(_ result: BodyStreamResult, promise: EventLoopPromise<Void>?) {
    let written = promise ?? inner.eventLoop.makePromise()
    let permit = permit
    let status = status
    written.futureResult.whenComplete { outcome in
      switch (outcome, result) {
      case (.failure, _): permit.release(.abandoned)
      case (.success, .end): permit.release(.written(status: status))
      case (.success, .error): permit.release(.failed(status: nil))
      case (.success, .buffer): break
      }
    }
    inner.write(result, promise: written)
  }
}

#endif
