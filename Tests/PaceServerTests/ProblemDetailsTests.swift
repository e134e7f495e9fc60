#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceHTTPServer
import PaceTestSupport
import Testing

@Suite("ProblemDetails: the rate-limit draft's problem types, and which clients get them")
struct ProblemDetailsTests {
  /// Each `Accept` (its field lines) and whether it gets the JSON form.
  static let negotiations: [([String], Bool)] = [
    ([], false),
    (["*/*"], true),
    (["application/json"], true),
    (["application/problem+json"], true),
    (["APPLICATION/Problem+JSON; charset=utf-8"], true),
    (["application/*"], true),
    (["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"], true),
    (["text/plain"], false),
    (["text/*"], false),
    (["text/html"], false),
    (["text/plain, */*;q=0.5"], false),
    (["application/json;q=0.5, text/plain"], false),
    (["application/json, text/plain"], true),
    (["application/problem+json;q=0, */*"], false),
    (["text/plain;q=0", "application/json;q=0.1"], true),
    (["image/png", "*/*;q=0.01"], true),
    // Members that do not parse are skipped; a list of nothing but them gets plain text.
    (["application/json;q=2"], false),
    (["application/json;q=abc"], false),
    (["json"], false),
    (["*/json"], false),
    ([",,, ;;;"], false),
    (["application/json;q=0.0001"], false),
    (["  application/json  ;  q=0.5  "], true),
  ]

  @Test(arguments: negotiations)
  func jsonIsChosenByTheRule(accept: [String], json: Bool) {
    #expect(ProblemDetails.prefersJSON(accept: accept) == json, "\(accept)")
  }

  /// Members in code-point order, every control character escaped, the rest as UTF-8.
  @Test func theJSONIsWrittenByHandInOneOrder() {
    let problem = ProblemDetails(
      .quotaExceeded, status: 429, detail: "tab\tnul\u{0}del\u{7F} é \"q\" \\",
      violatedPolicies: ["a", #"b"\"#])
    #expect(
      problem.json
        == #"{"detail":"tab\tnul\u0000del\u007f é \"q\" \\","status":429,"title":"Quota Exceeded","#
        + #""type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#
        + #""violated-policies":["a","b\"\\"]}"# + "\n")
    let unavailable = ProblemDetails(.temporaryReducedCapacity, status: 503, detail: "d", violatedPolicies: [])
    #expect(
      unavailable.json
        == #"{"detail":"d","status":503,"title":"Temporary Reduced Capacity","#
        + #""type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","#
        + #""violated-policies":[]}"# + "\n")
  }

  /// A 400 has no problem details, so it is plain text for any client; a 429 keeps its status and
  /// fields in either form, with `Vary: Accept`.
  @Test func negotiationKeepsTheStatusAndFields() throws {
    let bad = RateLimitFields.badRequest("no")
    #expect(bad.negotiated(accept: ["application/json"]) == bad)
    let fields = RateLimitFields(limit: .init(permits: 1, per: .seconds(60)), policyName: "p")
    let refused = RateLimitFields.tooManyRequests(states: [(fields, .limited(retryAfter: .seconds(30)))], deniedBy: 0)
    let json = refused.negotiated(accept: ["*/*"])
    let text = refused.negotiated(accept: [])
    #expect(json.status == 429 && text.status == 429)
    #expect(json.fields.first == HeaderField("Content-Type", "application/problem+json"))
    #expect(text.fields.first == HeaderField("Content-Type", "text/plain; charset=utf-8"))
    #expect(Array(json.fields.dropFirst()) == Array(text.fields.dropFirst()))
    #expect(json.fields.contains(HeaderField("Vary", "Accept")))
    #expect(json.body == refused.problem?.json && text.body == refused.body)
    #expect(refused.problem?.violatedPolicies == ["p"])
  }

  /// Hostile `Accept` values: never a trap, a clear answer either way.
  @Test func hostileAcceptValuesNeverTrap() {
    var generator = SeededGenerator(seed: 45)
    let alphabet = Array("*/;=,. qQ0123456789abcdefjnopstx+\t\u{0}é\"\\")
    for _ in 0..<fuzzRuns(20_000) {
      let length = Int(generator.next() % 64)
      let value = String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
      _ = ProblemDetails.prefersJSON(accept: [value, value])
    }
    _ = ProblemDetails.prefersJSON(accept: [String(repeating: "application/json;q=1,", count: 10_000)])
  }
}

#endif
