#if PostgreSQL && Hummingbird && Vapor
import InMemoryLogging
import Logging
import Metrics
import MetricsTestKit
import Pace
import PaceHTTPServer
import Testing

/// A middleware whose requests are their key, made through the public initialiser with a shadow
/// control, its counters and its log.
struct ShadowedServer: Sendable {
  let shadow: RateLimitShadowMode
  let logs = InMemoryLogHandler()
  let metrics = TestMetrics()
  let state: RateLimitMiddlewareState<String>

  /// `limits` by policy name, in order, each on virtual time and keyed on the request.
  init(_ limits: [(String, Int)], shadow: RateLimitShadowMode) {
    self.shadow = shadow
    let policies = limits.map { name, permits in
      RateLimitPolicy<String>(
        name, limiter: KeyedRateLimiter(permits: permits, per: .seconds(3600), clock: TestScheduler()), key: { $0 })
    }
    let logs = self.logs
    state =
      PublicInitialiser<String>(
        policies: policies, logger: Logger(label: "test", factory: { _ in logs }), metricsFactory: metrics,
        shadowMode: shadow
      )._rateLimitState
  }

  static let noClient = ClientReader<String>(peer: { _ in nil }, forwarded: { _, _ in [] })

  func outcome(_ key: String) async throws -> RateLimitOutcome {
    try await state.outcome(key, client: Self.noClient)
  }

  func responses(_ policy: String, _ outcome: String) -> Int64 {
    (try? metrics.expectCounter(
      "pace_http_rate_limit_responses_total", [("policy", policy), ("outcome", outcome)]))?.totalValue ?? 0
  }

  func shadowLimited(_ policy: String) -> Int64 {
    (try? metrics.expectCounter("pace_http_rate_limit_shadow_limited_total", [("policy", policy)]))?.totalValue ?? 0
  }

  func logLines(containing text: String) -> Int {
    logs.entries.filter { $0.message.description.contains(text) }.count
  }
}

extension RateLimitOutcome {
  var status: Int {
    switch self {
    case .proceed: 200
    case .respond(let response): response.status
    }
  }

  var fieldList: [HeaderField] {
    switch self {
    case .proceed(let fields): fields
    case .respond(let response): response.fields
    }
  }
}

@Suite("RateLimitShadowMode: refusals observed, not enforced, switched at run time")
struct ShadowModeTests {
  /// The whole middleware in shadow: every request passes, the refusals are counted as limited
  /// and as shadow-limited, and the fields say `r=0` without `Retry-After`. Switched back, the
  /// same key is refused at once; then one policy alone in shadow.
  @Test func aMiddlewareInShadowRefusesNothingUntilSwitched() async throws {
    let controlLogs = InMemoryLogHandler()
    let server = ShadowedServer(
      [("default", 1)],
      shadow: try RateLimitShadowMode(
        enforcedFraction: 0, logger: Logger(label: "control", factory: { _ in controlLogs })))
    let outcomes = [try await server.outcome("a"), try await server.outcome("a"), try await server.outcome("a")]
    #expect(outcomes.map(\.status) == [200, 200, 200])
    #expect(
      outcomes[1]
        == .proceed(fields: [
          HeaderField("RateLimit-Policy", "\"default\";q=1;w=3600"),
          HeaderField("RateLimit", "\"default\";r=0;t=3600"),
        ]))
    #expect(server.responses("default", "allowed") == 1)
    #expect(server.responses("default", "limited") == 2)
    #expect(server.shadowLimited("default") == 2)
    #expect(server.logLines(containing: "let through in shadow") == 1, "one line per 10 s")

    try server.shadow.setEnforcedFraction(1)
    let enforced = try await server.outcome("a")
    #expect(enforced.status == 429)
    #expect(enforced.fieldList.contains(HeaderField("Retry-After", "3600")))
    #expect(server.shadowLimited("default") == 2)

    try server.shadow.setEnforcedFraction(0, inPolicy: "default")
    #expect(try await server.outcome("a").status == 200)
    server.shadow.removeEnforcedFraction(inPolicy: "default")
    #expect(try await server.outcome("a").status == 429)
    #expect(server.responses("default", "limited") == 5 && server.shadowLimited("default") == 3)
    #expect(
      controlLogs.entries.filter { $0.level == .notice && $0.message.description.contains("enforced fraction") }
        .count == 3, "each change logged")
  }

  /// Several policies: one in shadow lets the request on to the next, which still decides and is
  /// charged, and may refuse it; the 429's problem details then name both.
  @Test func aPolicyInShadowHandsTheRequestToTheNext() async throws {
    let shadow = RateLimitShadowMode()
    try shadow.setEnforcedFraction(0, inPolicy: "new")
    let server = ShadowedServer([("new", 1), ("old", 2)], shadow: shadow)
    let first = try await server.outcome("a")
    let second = try await server.outcome("a")
    let third = try await server.outcome("a")
    #expect([first, second, third].map(\.status) == [200, 200, 429])
    // The second was limited by "new" in shadow and charged by "old": its last permit.
    #expect(second.fieldList.contains(HeaderField("RateLimit", "\"new\";r=0;t=3600, \"old\";r=0;t=3600")))
    #expect(!second.fieldList.contains { $0.name == "Retry-After" })
    guard case .respond(let refused) = third else { return }
    #expect(refused.problem?.violatedPolicies == ["new", "old"])
    #expect(server.responses("new", "limited") == 2 && server.shadowLimited("new") == 2)
    #expect(server.responses("old", "allowed") == 2 && server.responses("old", "limited") == 1)
    #expect(server.shadowLimited("old") == 0)
  }

  /// A cost of 0 (a question, which the path of several charges asks) limited in shadow passes
  /// too, and is refused once enforced.
  @Test func aQuestionInShadowPasses() async throws {
    let shadow = try RateLimitShadowMode(enforcedFraction: 0)
    // "a" takes a permit of key a; "a?" asks about it with a cost of 0.
    let policy = RateLimitPolicy<String>(
      "q", limiter: KeyedRateLimiter(permits: 1, per: .seconds(60), clock: TestScheduler()),
      key: { String($0.prefix(1)) }, cost: { $0.hasSuffix("?") ? 0 : 1 })
    let state = PublicInitialiser<String>(policies: [policy], shadowMode: shadow)._rateLimitState
    func status(_ input: String) async throws -> Int {
      try await state.outcome(input, client: ShadowedServer.noClient).status
    }
    #expect(try await status("a") == 200)
    #expect(try await status("a?") == 200)
    try shadow.setEnforcedFraction(1)
    #expect(try await status("a?") == 429)
  }

  /// The same shadowed answers, byte for byte, on both frameworks; JSON for a refusal once
  /// enforced.
  @Test func shadowAnswersAreTheSameOnEveryFramework() async throws {
    let shadow = try RateLimitShadowMode(enforcedFraction: 0)
    let json = ProblemServer.Sent(key: "a", accept: ["application/json"])
    let answers = try await ProblemDetailsFrameworkTests().sameBytes(
      ProblemDetailsFrameworkTests.onePermit().shadowed(shadow), [json, json, json])
    #expect(answers.map(\.status) == [200, 200, 200])
    #expect(answers[1].field("RateLimit") == "\"default\";r=0;t=3600" && answers[1].field("Retry-After") == nil)
    #expect(answers[1].text == "ok")
  }

  /// Switched from another task while requests are decided: every limited decision is either a
  /// 429 or a shadow pass, never lost or both.
  @Test func switchingWhileRequestsRunKeepsTheCountsWhole() async throws {
    let server = ShadowedServer([("default", 5)], shadow: RateLimitShadowMode())
    let refused = try await withThrowingTaskGroup(of: Int.self) { group in
      group.addTask {
        for round in 0..<200 { try server.shadow.setEnforcedFraction(round.isMultiple(of: 2) ? 0 : 0.5) }
        return 0
      }
      for task in 0..<4 {
        group.addTask {
          var refused = 0
          for request in 0..<250 where try await server.outcome("key-\((task * 250 + request) % 20)").status == 429 {
            refused += 1
          }
          return refused
        }
      }
      return try await group.reduce(0, +)
    }
    let limited = server.responses("default", "limited")
    #expect(limited == 1_000 - 100, "20 keys of 5 permits on a clock that stands still")
    #expect(Int64(refused) + server.shadowLimited("default") == limited)
  }

  /// The enforced fraction: a fixed hash of the policy's name and the key, the same on every
  /// control (every instance), growing with the fraction, a quarter of the keys at 0.25.
  @Test func theEnforcedKeysAreAFixedGrowingShare() throws {
    let keys = (0..<10_000).map { "key-\($0)" }
    let quarter = try RateLimitShadowMode(enforcedFraction: 1, policies: ["p": 0.25])
    let another = try RateLimitShadowMode(enforcedFraction: 0.25)
    let half = try RateLimitShadowMode(enforcedFraction: 0.5)
    let atQuarter = keys.filter { quarter.enforces(key: $0, inPolicy: "p") }
    #expect(atQuarter == keys.filter { another.enforces(key: $0, inPolicy: "p") })
    #expect(abs(atQuarter.count - 2_500) < 150, "\(atQuarter.count)")
    // Pinned: a change of the hash would move keys between enforced and shadow across a fleet.
    #expect(atQuarter.count == Self.pinnedQuarter)
    #expect(atQuarter.allSatisfy { half.enforces(key: $0, inPolicy: "p") })
    // Another policy places the keys elsewhere.
    #expect(atQuarter != keys.filter { another.enforces(key: $0, inPolicy: "other") })
    #expect(quarter.enforcedFraction == 1 && quarter.enforcedFraction(inPolicy: "p") == 0.25)
    #expect(quarter.enforcedFraction(inPolicy: "other") == 1)
    #expect(keys.allSatisfy { RateLimitShadowMode().enforces(key: $0, inPolicy: "p") })
    #expect(!keys.contains { (try? RateLimitShadowMode(enforcedFraction: 0))!.enforces(key: $0, inPolicy: "p") })
  }

  static let pinnedQuarter = 2_531

  /// A fraction outside `0…1` is a clear error, and changes nothing.
  @Test func aFractionOutOfRangeIsAClearError() throws {
    let shadow = try RateLimitShadowMode(enforcedFraction: 0.5)
    for bad in [-0.1, 1.5, .nan, .infinity] {
      #expect(throws: RateLimitMiddlewareError.self) { try shadow.setEnforcedFraction(bad) }
      #expect(throws: RateLimitMiddlewareError.self) { try shadow.setEnforcedFraction(bad, inPolicy: "p") }
      #expect(throws: RateLimitMiddlewareError.self) { try RateLimitShadowMode(enforcedFraction: bad) }
    }
    #expect(shadow.enforcedFraction == 0.5 && shadow.enforcedFraction(inPolicy: "p") == 1)
    do {
      try shadow.setEnforcedFraction(2)
    } catch {
      #expect(
        error.description
          == "RateLimitShadowMode: enforcedFraction must be a share of keys in 0 ≤ fraction ≤ 1 (got \"2.0\")")
    }
  }
}
#endif
