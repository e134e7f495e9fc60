#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceHTTP
import Testing

/// One request of a table that runs through every framework's middleware.
struct Probe: Sendable, CustomStringConvertible {
  /// `X-API-Key`, the key; nil for a request the middleware lets through unlimited.
  var key: String?
  /// `X-Cost`, the cost; nil for 1.
  var cost: String?

  var description: String { "key \(key ?? "none"), cost \(cost ?? "default")" }

  static let keyField = "X-API-Key"
  static let costField = "X-Cost"
  /// The response fields the middlewares write; the rest (`Date`, `Server`) are the framework's, and
  /// so is the `Content-Type` of the route's own response.
  static func comparedFields(status: Int) -> [String] {
    (status == 200 ? [] : ["Content-Type"]) + ["RateLimit-Policy", "RateLimit", "Retry-After"]
  }
}

/// What a client sees of one response.
struct Answer: Hashable, Sendable {
  var status: Int
  var reasonPhrase: String
  /// `comparedFields` that are present, by name.
  var fields: [String: String]
  var body: String
}

/// A store that never decides, for the 503.
struct FailingStore: RateLimitStore {
  struct Down: Error {}
  func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision { throw Down() }
}

@Suite("The rate-limit middlewares answer alike on Hummingbird and Vapor", .timeLimit(.minutes(2)))
struct SameAnswersOnEveryFramework {
  static let probes: [Probe] = [
    Probe(key: "a"), Probe(key: "a"), Probe(key: "a"), Probe(key: "a"),  // the fourth is limited
    Probe(key: "a", cost: "-5"), Probe(key: "b", cost: "4"), Probe(key: String(repeating: "x", count: 1025)),
    Probe(key: nil), Probe(key: "b", cost: "0"), Probe(key: "b", cost: "3"),
    Probe(key: "b", cost: "1"),
  ]

  /// A limiter on virtual time, so that `t` and `Retry-After` are exact and the same on both.
  static func limiter() -> KeyedRateLimiter<String> {
    KeyedRateLimiter(permits: 3, per: .seconds(3600), clock: TestScheduler())
  }

  @Test func theSameTableGetsTheSameAnswers() async throws {
    let hummingbird = try await hummingbirdAnswers(Self.limiter(), Self.probes)
    let vapor = try await vaporAnswers(Self.limiter(), Self.probes)
    #expect(hummingbird.count == Self.probes.count && vapor.count == Self.probes.count)
    for (probe, (one, other)) in zip(Self.probes, zip(hummingbird, vapor)) {
      #expect(one == other, "\(probe)")
    }
    // And they are the answers the module says, not merely equal.
    #expect(vapor.map(\.status) == [200, 200, 200, 429, 400, 400, 400, 200, 200, 200, 429])
    #expect(vapor[3].fields["Retry-After"] == "1200")
    #expect(vapor[3].body == "Too many requests: retry after 1200 s\n")
    #expect(vapor[4].body == "Bad request: the cost -5 is negative\n")
    #expect(vapor[7].fields.isEmpty && vapor[7].body == "ok")
  }

  @Test func aLimiterThatCannotDecideGetsTheSame503() async throws {
    let probes = [Probe(key: "a")]
    func limiter() -> KeyedRateLimiter<String> {
      KeyedRateLimiter(permits: 3, per: .seconds(60), store: FailingStore())
    }
    let hummingbird = try await hummingbirdAnswers(limiter(), probes)
    let vapor = try await vaporAnswers(limiter(), probes)
    #expect(hummingbird == vapor)
    #expect(vapor.first?.status == 503 && vapor.first?.fields["Retry-After"] == "1")
  }
}

/// The decision-to-response function, directly.
@Suite("RateLimitFields: each answer of the limiter as a response")
struct RateLimitFieldsTests {
  let fields = RateLimitFields(limit: RateLimit(permits: 100, per: .seconds(60), burst: 100), policyName: "api")

  @Test func anAllowedRequestProceedsWithTheFields() {
    #expect(
      fields.outcome(for: .decided(.allowed(remaining: 42)))
        == .proceed(fields: [
          HeaderField("RateLimit-Policy", "\"api\";q=100;w=60"), HeaderField("RateLimit", "\"api\";r=42;t=35"),
        ]))
  }

  @Test func aLimitedRequestGets429WithWholeSecondsRoundedUp() {
    let outcome = fields.outcome(for: .decided(.limited(retryAfter: .milliseconds(1500))))
    #expect(
      outcome
        == .respond(
          PlainTextResponse(
            status: 429,
            fields: [
              HeaderField("RateLimit-Policy", "\"api\";q=100;w=60"), HeaderField("RateLimit", "\"api\";r=0;t=2"),
              HeaderField("Retry-After", "2"),
            ],
            body: "Too many requests: retry after 2 s\n")))
  }

  @Test func invalidInputAndFailuresGet400And503() {
    #expect(
      fields.outcome(for: .invalid("the cost -1 is negative"))
        == .respond(PlainTextResponse(status: 400, fields: [], body: "Bad request: the cost -1 is negative\n")))
    guard case .respond(let unavailable) = fields.outcome(for: .unavailable) else {
      Issue.record("a failure must be answered")
      return
    }
    #expect(unavailable.status == 503 && unavailable.reasonPhrase == "Service Unavailable")
    #expect(
      unavailable.fields == [
        HeaderField("Content-Type", "text/plain; charset=utf-8"), HeaderField("Retry-After", "1"),
      ])
  }

  @Test func wholeSecondsNeverGoBelowZero() {
    #expect(RateLimitFields.wholeSeconds(.zero - .seconds(3)) == 0)
    #expect(RateLimitFields.wholeSeconds(.nanoseconds(1)) == 1)
    #expect(RateLimitFields.wholeSeconds(.seconds(2)) == 2)
    #expect(RateLimitFields.wholeSeconds(.milliseconds(2_001)) == 3)
  }

  /// A configured interval beyond `Int64.max` seconds saturates at the end of the timeline
  /// (`Int64.max` nanoseconds, 9,223,372,037 s rounded up) instead of trapping.
  @Test func wholeSecondsSaturatesBeyondTheTimeline() {
    #expect(RateLimitFields.wholeSeconds(.seconds(Int64.max) * 4) == 9_223_372_037)
    let fields = RateLimitFields(limit: RateLimit(permits: 1, per: .seconds(Int64.max) * 4), policyName: "p")
    #expect(fields.policyValue == "\"p\";q=1;w=9223372037")
  }
}
#endif
