#if PostgreSQL && Hummingbird && Vapor
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Metrics
import Pace
import PaceHTTPServer
import PaceHummingbird
import PaceVapor
import Testing
import Vapor
import VaporTesting

/// What a client receives of one response, byte for byte: the status, every field a middleware
/// writes (in the order they came, each line on its own), and the body's bytes.
struct RawAnswer: Hashable, Sendable, CustomStringConvertible {
  var status: Int
  var fields: [String]
  var body: [UInt8]

  /// The fields a rate-limit middleware writes; the rest (`Date`, `Server`, `Content-Length`) are
  /// the framework's.
  static let written = ["Content-Type", "Vary", "RateLimit-Policy", "RateLimit", "Retry-After"]

  var text: String { String(decoding: body, as: UTF8.self) }

  func field(_ name: String) -> String? {
    fields.first { $0.hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
  }

  var description: String { "\(status) \(fields) \(text.debugDescription)" }
}

/// A server of `policies` (each keyed on `X-API-Key`, or the client's address) with an optional
/// shadow-mode control, made afresh for each framework; `requests` are the `Accept` and
/// `X-API-Key` of each request, in order.
struct ProblemServer: Sendable {
  var policies: [ProbePolicy]
  var shadowMode: RateLimitShadowMode?

  struct Sent: Sendable {
    var key: String?
    var accept: [String] = []
  }

  func state<Input>(_ policies: [PaceHTTPServer.RateLimitPolicy<Input>]) -> RateLimitMiddlewareState<Input> {
    RateLimitMiddlewareState(
      policies: policies, longKeys: .hash, logger: silentRateLimitLogger, metricsFactory: MetricsSystem.factory,
      controls: RateLimitControls(shadowMode: shadowMode))
  }

  /// The same server with `shadow` as its shadow-mode control.
  func shadowed(_ shadow: RateLimitShadowMode) -> ProblemServer {
    var server = self
    server.shadowMode = shadow
    return server
  }

  /// Every request through PaceHummingbird's middleware, in the router test mode.
  func hummingbird(_ requests: [Sent]) async throws -> [RawAnswer] {
    let keyField = HTTPField.Name(Probe.keyField)!
    let policies = self.policies.map {
      policy -> PaceHTTPServer.RateLimitPolicy<(Hummingbird.Request, BasicRequestContext)> in
      var key: (@Sendable ((Hummingbird.Request, BasicRequestContext)) -> String?)?
      if policy.keyField != nil { key = { input in input.0.headers[keyField] } }
      switch policy.limiter {
      case .inMemory(let limiter): return PaceHTTPServer.RateLimitPolicy(policy.name, limiter: limiter, key: key)
      case .storeBacked(let limiter): return PaceHTTPServer.RateLimitPolicy(policy.name, limiter: limiter, key: key)
      }
    }
    let router = Router()
    router.add(middleware: PaceHummingbird.RateLimitMiddleware<BasicRequestContext>(_rateLimitState: state(policies)))
    router.get("/") { _, _ in "ok" }
    return try await Application(router: router).test(.router) { client in
      var answers: [RawAnswer] = []
      for request in requests {
        var headers = HTTPFields()
        if let key = request.key { headers[keyField] = key }
        for line in request.accept { headers.append(HTTPField(name: .accept, value: line)) }
        let response = try await client.execute(uri: "/", method: .get, headers: headers)
        let fields = RawAnswer.written.flatMap { name in
          response.headers[values: HTTPField.Name(name)!].map { "\(name): \($0)" }
        }
        answers.append(
          RawAnswer(status: response.status.code, fields: fields, body: Array(buffer: response.body)))
      }
      return answers
    }
  }

  /// Every request through PaceVapor's middleware, in VaporTesting's in-memory mode.
  func vapor(_ requests: [Sent]) async throws -> [RawAnswer] {
    let policies = self.policies.map { policy -> PaceHTTPServer.RateLimitPolicy<Vapor.Request> in
      var key: (@Sendable (Vapor.Request) -> String?)?
      if policy.keyField != nil { key = { request in request.headers.first(name: Probe.keyField) } }
      switch policy.limiter {
      case .inMemory(let limiter): return PaceHTTPServer.RateLimitPolicy(policy.name, limiter: limiter, key: key)
      case .storeBacked(let limiter): return PaceHTTPServer.RateLimitPolicy(policy.name, limiter: limiter, key: key)
      }
    }
    return try await withApp { app in
      app.grouped(PaceVapor.RateLimitMiddleware(_rateLimitState: state(policies))).get { _ in "ok" }
      var answers: [RawAnswer] = []
      for request in requests {
        var headers = HTTPHeaders()
        if let key = request.key { headers.add(name: Probe.keyField, value: key) }
        for line in request.accept { headers.add(name: "Accept", value: line) }
        let response = try await app.testing().sendRequest(.GET, "/", headers: headers)
        let fields = RawAnswer.written.flatMap { name in response.headers[name].map { "\(name): \($0)" } }
        answers.append(
          RawAnswer(status: Int(response.status.code), fields: fields, body: Array(buffer: response.body)))
      }
      return answers
    }
  }
}

@Suite("A refusal's problem details are the same bytes on Hummingbird and Vapor", .timeLimit(.minutes(2)))
struct ProblemDetailsFrameworkTests {
  /// One policy of one permit an hour on `X-API-Key`, on virtual time, so that `t` and
  /// `Retry-After` are exact and the same on both.
  static func onePermit(_ name: String = "default") -> ProblemServer {
    ProblemServer(policies: [
      ProbePolicy(
        name: name, limiter: KeyedRateLimiter(permits: 1, per: .seconds(3600), clock: TestScheduler()),
        keyField: Probe.keyField)
    ])
  }

  /// Runs `requests` through both frameworks, each with a server of its own (fresh limiters on
  /// fresh virtual clocks, so alike), expects the same bytes, and returns them.
  func sameBytes(_ server: @autoclosure () -> ProblemServer, _ requests: [ProblemServer.Sent]) async throws
    -> [RawAnswer]
  {
    let hummingbird = try await server().hummingbird(requests)
    let vapor = try await server().vapor(requests)
    #expect(hummingbird.count == requests.count && vapor.count == requests.count)
    for (index, (one, other)) in zip(hummingbird, vapor).enumerated() {
      #expect(one == other, "request \(index): Hummingbird \(one), Vapor \(other)")
    }
    return vapor
  }

  static let quotaExceeded =
    "{\"detail\":\"Too many requests (policy \\\"default\\\"): retry after 3600 s\",\"status\":429,"
    + "\"title\":\"Quota Exceeded\",\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\","
    + "\"violated-policies\":[\"default\"]}\n"

  /// A 429 as problem details for each `Accept` that prefers JSON, as plain text for the others.
  @Test func aRefusalIsProblemDetailsForAClientThatAcceptsJSON() async throws {
    let accepts: [[String]] = [
      ["application/problem+json"], ["application/json"], ["*/*"], ["text/html, */*;q=0.8"], [],
      ["text/plain"], ["text/plain, */*;q=0.5"], ["text/html"], ["application/json;q=0"],
    ]
    let requests = [ProblemServer.Sent(key: "a")] + accepts.map { ProblemServer.Sent(key: "a", accept: $0) }
    let answers = try await sameBytes(Self.onePermit(), requests)
    #expect(answers.map(\.status) == [200] + Array(repeating: 429, count: accepts.count))
    for (accept, answer) in zip(accepts, answers.dropFirst()) {
      let json = ProblemDetails.prefersJSON(accept: accept)
      #expect(json == (accepts.firstIndex(of: accept)! < 4), "\(accept)")
      #expect(answer.field("Content-Type") == (json ? "application/problem+json" : "text/plain; charset=utf-8"))
      #expect(answer.field("Vary") == "Accept")
      #expect(answer.field("Retry-After") == "3600")
      #expect(answer.field("RateLimit") == "\"default\";r=0;t=3600")
      #expect(
        answer.text
          == (json ? Self.quotaExceeded : "Too many requests (policy \"default\"): retry after 3600 s\n"),
        "\(accept)")
    }
  }

  /// Two policies: the one that refuses is the violated one; a name with a quote and a backslash
  /// is escaped alike in the fields and the JSON.
  @Test func theViolatedPolicyIsNamedAndEscaped() async throws {
    let name = #"per-"key"\"#
    func server() -> ProblemServer {
      ProblemServer(policies: [
        ProbePolicy(
          name: "per-client", limiter: KeyedRateLimiter(permits: 5, per: .seconds(3600), clock: TestScheduler()),
          keyField: nil),
        ProbePolicy(
          name: name, limiter: KeyedRateLimiter(permits: 1, per: .seconds(3600), clock: TestScheduler()),
          keyField: Probe.keyField),
      ])
    }
    let json = ProblemServer.Sent(key: "a", accept: ["application/json"])
    let answers = try await sameBytes(server(), [json, json])
    #expect(answers.map(\.status) == [200, 429])
    let expected =
      #"{"detail":"Too many requests (policy \"per-\\\"key\\\"\\\\\"): retry after 3600 s","status":429,"#
      + #""title":"Quota Exceeded","type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#
      + #""violated-policies":["per-\"key\"\\"]}"# + "\n"
    #expect(answers[1].text == expected)
  }

  /// A limiter that cannot decide: 503, `temporary-reduced-capacity`, naming the policy.
  @Test func anUnavailableLimiterIsTemporaryReducedCapacity() async throws {
    let server = ProblemServer(policies: [
      ProbePolicy(
        name: "shared", limiter: StoreBackedRateLimiter(permits: 1, per: .seconds(60), store: FailingStore()),
        keyField: Probe.keyField)
    ])
    let answers = try await sameBytes(
      server, [ProblemServer.Sent(key: "a", accept: ["*/*"]), ProblemServer.Sent(key: "a")])
    #expect(answers.map(\.status) == [503, 503])
    #expect(answers[0].field("Content-Type") == "application/problem+json")
    #expect(answers[0].field("Retry-After") == "1")
    #expect(
      answers[0].text
        == #"{"detail":"Service unavailable: the rate limiter could not decide","status":503,"#
        + #""title":"Temporary Reduced Capacity","#
        + #""type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","#
        + #""violated-policies":["shared"]}"# + "\n")
    #expect(answers[1].text == "Service unavailable: the rate limiter could not decide\n")
  }

  /// A 400 has no problem type of the draft's: plain text whatever the client accepts.
  @Test func aBadRequestStaysPlainText() async throws {
    let answers = try await sameBytes(
      Self.onePermit(), [ProblemServer.Sent(key: "", accept: ["application/json"])])
    #expect(answers.map(\.status) == [400])
    #expect(answers[0].field("Content-Type") == "text/plain; charset=utf-8")
    #expect(answers[0].field("Vary") == nil)
  }
}

#endif
