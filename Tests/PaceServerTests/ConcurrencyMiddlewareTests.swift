#if Hummingbird && Vapor && AsyncHTTPClient
import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Pace
import PaceHTTPServer
import PaceHummingbird
import PaceVapor
import Testing
import Vapor

/// A one-shot signal between a handler's body and the test.
actor ConcurrencyGate {
  private var isOpen = false
  private var waiters: [CheckedContinuation<Void, Never>] = []

  func open() {
    isOpen = true
    for waiter in waiters { waiter.resume() }
    waiters = []
  }

  func wait() async {
    if isOpen { return }
    await withCheckedContinuation { waiters.append($0) }
  }
}

/// A server on loopback with a concurrency limit in its rate-limit middleware, on either
/// framework: `/` answers `ok`; `/stream` writes `first`, opens `started`, waits for `finish`,
/// then writes `second` and ends (on Vapor, `/slow` does the same in its handler, its body sent
/// after); `/endless`
/// writes `first`, opens `started`, then writes until the client is gone. `X-Priority` names a
/// request's class.
struct ConcurrencyFixture: Sendable {
  enum Framework: String, Sendable, CaseIterable, CustomStringConvertible {
    case hummingbird, vapor
    var description: String { rawValue }
  }

  let limiter: ConcurrencyLimiter
  var shadowMode: RateLimitShadowMode?
  let started = ConcurrencyGate()
  let finish = ConcurrencyGate()

  init(_ limiter: ConcurrencyLimiter, shadowMode: RateLimitShadowMode? = nil) {
    self.limiter = limiter
    self.shadowMode = shadowMode
  }

  func limit<Input>(_ priority: @escaping @Sendable (Input) -> String?) -> RequestConcurrencyLimit<Input> {
    RequestConcurrencyLimit(limiter: limiter) { input in
      switch priority(input) {
      case "critical": .critical
      case "sheddable": .sheddable
      default: .default
      }
    }
  }

  static let generous = RateLimit(permits: 1000, per: .seconds(60))

  /// Runs the server on `framework`, calls `body` with its port, and stops it.
  func run(_ framework: Framework, _ body: @Sendable (Int) async throws -> Void) async throws {
    switch framework {
    case .hummingbird: try await runHummingbird(body)
    case .vapor: try await runVapor(body)
    }
  }

  private func runHummingbird(_ body: @Sendable (Int) async throws -> Void) async throws {
    let priority = HTTPField.Name("X-Priority")!
    let router = Router()
    let middleware = PaceHummingbird.RateLimitMiddleware<BasicRequestContext>(
      policies: [PaceHTTPServer.RateLimitPolicy("default", limiter: KeyedRateLimiter(limit: Self.generous))],
      shadowMode: shadowMode
    ).limitingConcurrency(limit { input in input.0.headers[priority] })
    router.add(middleware: middleware)
    router.get("/") { _, _ in "ok" }
    let (started, finish) = (started, finish)
    router.get("/stream") { _, _ in
      Hummingbird.Response(
        status: .ok,
        body: ResponseBody { writer in
          try await writer.write(ByteBuffer(string: "first\n"))
          await started.open()
          await finish.wait()
          try await writer.write(ByteBuffer(string: "second\n"))
          try await writer.finish(nil)
        })
    }
    router.get("/endless") { _, _ in
      Hummingbird.Response(
        status: .ok,
        body: ResponseBody { writer in
          try await writer.write(ByteBuffer(string: "first\n"))
          await started.open()
          while true {
            try await Task.sleep(for: .milliseconds(10))  // real-time: a body that goes on until the client leaves
            try await writer.write(ByteBuffer(string: "more\n"))
          }
        })
    }
    let ports = AsyncStream.makeStream(of: Int.self)
    let app = Hummingbird.Application(
      router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
      onServerRunning: { channel in
        ports.continuation.yield(channel.localAddress?.port ?? 0)
        ports.continuation.finish()
      },
      logger: Logger(label: "pace.tests.concurrency", factory: { _ in SwiftLogNoOpLogHandler() }))
    try await TestServer.serve(app, ports: ports, body)
  }

  private func runVapor(_ body: @Sendable (Int) async throws -> Void) async throws {
    let app = try await Vapor.Application.make(.testing)
    app.logger = Logger(label: "pace.tests.concurrency", factory: { _ in SwiftLogNoOpLogHandler() })
    let middleware = PaceVapor.RateLimitMiddleware(
      policies: [PaceHTTPServer.RateLimitPolicy("default", limiter: KeyedRateLimiter(limit: Self.generous))],
      shadowMode: shadowMode
    ).limitingConcurrency(limit { request in request.headers.first(name: "X-Priority") })
    let limited = app.grouped(middleware)
    limited.get { _ in "ok" }
    let (started, finish) = (started, finish)
    limited.get("stream") { _ in
      Vapor.Response(
        status: .ok,
        body: .init(asyncStream: { writer in
          try await writer.writeBuffer(ByteBuffer(string: "first\n"))
          await started.open()
          await finish.wait()
          try await writer.writeBuffer(ByteBuffer(string: "second\n"))
          try await writer.write(.end)
        }))
    }
    // Vapor gives a streamed body's place back as the handler returns (its writer cannot be
    // wrapped): a handler that waits holds it.
    limited.get("slow") { _ in
      await started.open()
      await finish.wait()
      return "first\nsecond\n"
    }
    limited.get("endless") { _ in
      Vapor.Response(
        status: .ok,
        body: .init(asyncStream: { writer in
          try await writer.writeBuffer(ByteBuffer(string: "first\n"))
          await started.open()
          while true {
            try await Task.sleep(for: .milliseconds(10))  // real-time: a body that goes on until the client leaves
            try await writer.writeBuffer(ByteBuffer(string: "more\n"))
          }
        }))
    }
    do {
      try await app.asyncBoot()
      try await app.server.start(address: .hostname("127.0.0.1", port: 0))
      let port = try #require(app.http.server.shared.localAddress?.port)
      try await body(port)
    } catch {
      await app.server.shutdown()
      try? await app.asyncShutdown()
      throw error
    }
    await app.server.shutdown()
    try await app.asyncShutdown()
  }
}

/// What a client received: the status, the fields the test reads, the body.
struct ConcurrencyAnswer: Sendable {
  var status: Int
  var retryAfter: String?
  var contentType: String?
  var body: String
  /// The `RateLimit-Policy` field.
  var policy: String? = nil
}

/// `GET path` on loopback, read whole.
func concurrencyGet(
  _ port: Int, _ path: String = "/", priority: String? = nil, accept: String? = nil
) async throws -> ConcurrencyAnswer {
  var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
  if let priority { request.headers.add(name: "X-Priority", value: priority) }
  if let accept { request.headers.add(name: "Accept", value: accept) }
  let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
  let body = try await response.body.collect(upTo: 1 << 20)
  return ConcurrencyAnswer(
    status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"),
    contentType: response.headers.first(name: "Content-Type"), body: String(buffer: body),
    policy: response.headers[canonicalForm: "RateLimit-Policy"].joined(separator: ", "))
}

/// Whether `condition` holds within `timeout`, polled: the server's side of a real connection.
func concurrencyEventually(within timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws -> Bool {
  let clock = ContinuousClock()
  let deadline = clock.now + timeout
  while clock.now < deadline {
    if condition() { return true }
    try await Task.sleep(for: .milliseconds(10))  // real-time: polling a real socket's outcome, generous bound
  }
  return condition()
}

@Suite("The concurrency limit in the rate-limit middlewares, over real connections", .timeLimit(.minutes(2)))
struct ConcurrencyMiddlewareTests {
  /// The `503` a refused request gets as JSON, the same bytes on both frameworks.
  static let problem =
    #"{"detail":"Service unavailable: too many requests in flight (limit \"concurrency\"): retry after 1 s","#
    + #""status":503,"title":"Temporary Reduced Capacity","#
    + #""type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","#
    + #""violated-policies":["concurrency"]}"# + "\n"

  static let streams: [(ConcurrencyFixture.Framework, String)] = [
    (.hummingbird, "/stream"), (.vapor, "/slow"),
  ]

  @Test(
    "A streaming body holds its place until it ends: a second request is refused 503, then admitted", arguments: streams
  )
  func streamingBodyHoldsThePlace(_ framework: ConcurrencyFixture.Framework, _ path: String) async throws {
    let fixture = ConcurrencyFixture(ConcurrencyLimiter(maximumInFlight: 1, maximumQueued: 0))
    try await fixture.run(framework) { port async throws in
      let first = Task { try await concurrencyGet(port, path) }
      await fixture.started.wait()
      #expect(fixture.limiter.inFlightCount == 1)
      let refused = try await concurrencyGet(port, accept: "application/json")
      #expect(refused.status == 503)
      #expect(refused.retryAfter == "1")
      #expect(refused.contentType == "application/problem+json")
      #expect(refused.body == Self.problem)
      let plain = try await concurrencyGet(port)
      #expect(plain.status == 503)
      #expect(
        plain.body == "Service unavailable: too many requests in flight (limit \"concurrency\"): retry after 1 s\n")
      await fixture.finish.open()
      let streamed = try await first.value
      #expect(streamed.status == 200)
      #expect(streamed.body == "first\nsecond\n")
      #expect(try await concurrencyEventually { fixture.limiter.inFlightCount == 0 })
      #expect(try await concurrencyGet(port).status == 200)
      #expect(fixture.limiter.forgottenPermitCount == 0)
    }
  }

  @Test(
    "RateLimit-Policy lists the limit as concurrent requests: alone in its 503, after the rate limits otherwise",
    arguments: ConcurrencyFixture.Framework.allCases)
  func policyFieldListsTheConcurrencyLimit(_ framework: ConcurrencyFixture.Framework) async throws {
    let fixture = ConcurrencyFixture(ConcurrencyLimiter(maximumInFlight: 1, maximumQueued: 0))
    try await fixture.run(framework) { port async throws in
      let admitted = try await concurrencyGet(port)
      #expect(admitted.policy == #""default";q=1000;w=60, "concurrency";q=1;qu="concurrent-requests""#)
      let first = Task { try await concurrencyGet(port, framework == .vapor ? "/slow" : "/stream") }
      await fixture.started.wait()
      let refused = try await concurrencyGet(port)
      #expect(refused.status == 503)
      #expect(refused.policy == #""concurrency";q=1;qu="concurrent-requests""#)
      // The maximum in flight when the request is answered.
      fixture.limiter.maximumInFlight = 3
      #expect(
        try await concurrencyGet(port).policy == #""default";q=1000;w=60, "concurrency";q=3;qu="concurrent-requests""#)
      await fixture.finish.open()
      #expect(try await first.value.status == 200)
    }
  }

  @Test("A client that leaves mid-body gives its place back", arguments: [ConcurrencyFixture.Framework.hummingbird])
  func disconnectMidBodyFreesThePlace(_ framework: ConcurrencyFixture.Framework) async throws {
    let fixture = ConcurrencyFixture(ConcurrencyLimiter(maximumInFlight: 1, maximumQueued: 0))
    try await fixture.run(framework) { port async throws in
      // A raw connection that resets once the body has started: what an HTTP client library does
      // to its connection when a read is cancelled mid-body varies (AsyncHTTPClient's, in CI, kept
      // the place held past the bound now and then); a reset is what the server must handle.
      let client = try AbruptClient(port: port, request: "GET /endless HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
      await fixture.started.wait()
      #expect(fixture.limiter.inFlightCount == 1)
      #expect(try await concurrencyGet(port).status == 503)
      client.reset()
      #expect(try await concurrencyEventually { fixture.limiter.inFlightCount == 0 })
      #expect(try await concurrencyGet(port).status == 200)
    }
  }

  @Test(
    "Under load the sheddable class is refused first, the critical one admitted",
    arguments: ConcurrencyFixture.Framework.allCases)
  func sheddableRefusedFirst(_ framework: ConcurrencyFixture.Framework) async throws {
    let limiter = ConcurrencyLimiter(
      maximumInFlight: 2, maximumQueued: 0, shares: PriorityShares(defaultPercent: 100, sheddablePercent: 50))
    let fixture = ConcurrencyFixture(limiter)
    try await fixture.run(framework) { port async throws in
      let first = Task { try await concurrencyGet(port, framework == .vapor ? "/slow" : "/stream") }
      await fixture.started.wait()
      // One in flight: a sheddable request may fill 1 of 2 places, a critical or default one 2.
      #expect(try await concurrencyGet(port, priority: "sheddable").status == 503)
      #expect(try await concurrencyGet(port, priority: "critical").status == 200)
      #expect(try await concurrencyGet(port).status == 200)
      await fixture.finish.open()
      #expect(try await first.value.status == 200)
      #expect(try await concurrencyEventually { limiter.inFlightCount == 0 })
      #expect(try await concurrencyGet(port, priority: "sheddable").status == 200)
    }
  }

  @Test("In shadow a refusal lets the request through", arguments: ConcurrencyFixture.Framework.allCases)
  func shadowLetsThrough(_ framework: ConcurrencyFixture.Framework) async throws {
    let shadow = try RateLimitShadowMode(enforcedFraction: 1, policies: ["concurrency": 0])
    let fixture = ConcurrencyFixture(ConcurrencyLimiter(maximumInFlight: 1, maximumQueued: 0), shadowMode: shadow)
    try await fixture.run(framework) { port async throws in
      let first = Task { try await concurrencyGet(port, framework == .vapor ? "/slow" : "/stream") }
      await fixture.started.wait()
      #expect(try await concurrencyGet(port).status == 200)
      try shadow.setEnforcedFraction(1, inPolicy: "concurrency")
      #expect(try await concurrencyGet(port).status == 503)
      await fixture.finish.open()
      #expect(try await first.value.status == 200)
      #expect(try await concurrencyEventually { fixture.limiter.inFlightCount == 0 })
    }
  }
}
#endif
