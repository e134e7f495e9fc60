import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

/// 2019-08-05 09:27:00 UTC, the `Date` of draft -11's appendix B.1.4.
let august5 = Duration.seconds(1_564_997_220)

/// The UTF-8 bytes of `text`: a partition key the draft's examples spell in base64.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// draft-ietf-httpapi-ratelimit-headers-11's own examples, each field value as the draft writes
/// it, parsed to the exact values it means; then the parameters -11 defines beyond -10's reading
/// (`qu`, `pk`), and the editor's copy after -11, which spells the `RateLimit` field's parameters
/// `a` and `w`.
@Suite struct RateLimitDraftConformanceTests {
  typealias Policy = ServerRateLimitFields.Policy
  typealias State = ServerRateLimitFields.State

  func fields(_ fields: (String, String)..., receivedAt: Duration = .zero) -> ServerRateLimitFields {
    ServerRateLimitFields(
      parsing: ResponseHead(status: 200, headerFields: fields.map { (name: $0.0, value: $0.1) }),
      receivedAt: receivedAt)
  }

  // MARK: Section 3: RateLimit-Policy

  /// Sections 3 and 3.2: policies with and without a partition key and a quota unit.
  @Test func theRateLimitPolicyExamples() {
    #expect(
      fields(("RateLimit-Policy", #""burst";q=100;w=60,"daily";q=1000;w=86400"#)).policies == [
        Policy(name: "burst", quota: 100, window: .seconds(60)),
        Policy(name: "daily", quota: 1000, window: .seconds(86_400)),
      ])
    #expect(
      fields(("RateLimit-Policy", #""default";q=100;w=10"#)).policies == [
        Policy(name: "default", quota: 100, window: .seconds(10))
      ])
    #expect(
      fields(("RateLimit-Policy", #""permin";q=50;w=60,"perhr";q=1000;w=3600"#)).policies == [
        Policy(name: "permin", quota: 50, window: .seconds(60)),
        Policy(name: "perhr", quota: 1000, window: .seconds(3600)),
      ])
    // The draft's keys carry non-zero pad bits, which RFC 9651 section 4.2.7 asks a parser to accept.
    let peruser = fields(("RateLimit-Policy", #""peruser";q=100;w=60;pk=:cHsdsRa894==:"#)).policies
    #expect(
      peruser == [
        Policy(
          name: "peruser", quota: 100, window: .seconds(60), quotaUnit: nil,
          partitionKey: [0x70, 0x7B, 0x1D, 0xB1, 0x16, 0xBC, 0xF7])
      ])
    let bytesPolicy = fields(
      ("RateLimit-Policy", #""peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:"#)
    ).policies
    #expect(
      bytesPolicy == [
        Policy(
          name: "peruser", quota: 65535, window: .seconds(10), quotaUnit: .contentBytes,
          partitionKey: [0xB1, 0xD7, 0xE3, 0x2C, 0x95, 0x0E, 0x50])
      ])
  }

  // MARK: Section 4: RateLimit

  /// Sections 4, 4.2, 6 and 7: the available quota, the effective window, a partition key.
  @Test func theRateLimitExamples() {
    #expect(
      fields(("RateLimit", #""default";r=50;t=30"#)).states == [
        State(name: "default", remaining: 50, resetsIn: .seconds(30))
      ])
    #expect(
      fields(("RateLimit", #""default";r=999;pk=:dHJpYWwxMjEzMjM=:"#)).states == [
        State(name: "default", remaining: 999, resetsIn: nil, partitionKey: bytes("trial121323"))
      ])
    #expect(
      fields(("RateLimit", #""default";r=300000000;t=60;pk=:QXBwLTk5OQ==:"#)).states == [
        State(name: "default", remaining: 300_000_000, resetsIn: .seconds(60), partitionKey: bytes("App-999"))
      ])
    #expect(
      fields(("RateLimit", #""problemPolicy";r=0;t=10"#)).states == [
        State(name: "problemPolicy", remaining: 0, resetsIn: .seconds(10))
      ])
    #expect(
      fields(("RateLimit", #""default";r=1;t=7"#)).states == [
        State(name: "default", remaining: 1, resetsIn: .seconds(7))
      ])
  }

  /// Section 8.5: a daily reset read against the response's `Date`, and a policy whose quota is
  /// far below what its available quota and effective window alone suggest.
  @Test func theResourceExhaustionExamples() {
    let daily = fields(
      ("Date", "Tue, 15 Nov 1994 18:00:00 GMT"), ("RateLimit", #""daily";r=1;t=86400"#),
      receivedAt: .seconds(784_922_400))
    #expect(daily.quota == ServerQuota(remaining: 1, resetsIn: .seconds(86_400)))
    let some = fields(
      ("RateLimit-Policy", #""somepolicy";q=10000;w=1000"#), ("RateLimit", #""somepolicy";r=10000;t=10"#))
    #expect(some.quota == ServerQuota(quota: 10_000, window: .seconds(1000), remaining: 10_000, resetsIn: .seconds(10)))
  }

  // MARK: Appendix B

  /// B.1: responses without policies; two in a row; a policy and its state.
  @Test func responsesWithoutDefiningPolicies() {
    #expect(fields(("RateLimit", #""default";r=0;t=50"#)).quota == ServerQuota(remaining: 0, resetsIn: .seconds(50)))
    #expect(fields(("RateLimit", #""default";r=0;t=48"#)).quota == ServerQuota(remaining: 0, resetsIn: .seconds(48)))
    #expect(
      fields(("RateLimit", #""dayLimit";r=100;t=36000"#)).quota
        == ServerQuota(remaining: 100, resetsIn: .seconds(36_000)))
    for (remaining, resetsIn) in [(60, 58), (20, 56)] {
      let basic = fields(
        ("RateLimit-Policy", #""basic";q=100;w=60"#), ("RateLimit", #""basic";r=\#(remaining);t=\#(resetsIn)"#))
      #expect(
        basic.quota
          == ServerQuota(quota: 100, window: .seconds(60), remaining: remaining, resetsIn: .seconds(Int64(resetsIn))))
    }
  }

  /// B.1.4: a throttled response whose `Retry-After` is an HTTP date five seconds after its `Date`.
  @Test func aThrottledResponseWithADateRetryAfter() {
    let throttled = fields(
      ("Date", "Mon, 05 Aug 2019 09:27:00 GMT"), ("Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT"),
      ("RateLimit", #""default";r=0;t=5"#), receivedAt: august5)
    #expect(throttled.quota == ServerQuota(remaining: 0, resetsIn: .seconds(5), retryAfter: .seconds(5)))
  }

  /// B.2 and B.3: policies with their states, a lowered quota, a push-back with and without
  /// `Retry-After`, two windows.
  @Test func responsesWithDefinedPolicies() {
    #expect(
      fields(("RateLimit", #""fixedwindow";r=99;t=50"#), ("RateLimit-Policy", #""fixedwindow";q=100;w=60"#)).quota
        == ServerQuota(quota: 100, window: .seconds(60), remaining: 99, resetsIn: .seconds(50)))
    #expect(
      fields(("RateLimit-Policy", #""dynamic";q=100;w=60"#), ("RateLimit", #""dynamic";r=9;t=50"#)).quota
        == ServerQuota(quota: 100, window: .seconds(60), remaining: 9, resetsIn: .seconds(50)))
    #expect(
      fields(("RateLimit-Policy", #""dynamic";q=15;w=20"#), ("RateLimit", #""dynamic";r=0;t=20"#)).quota
        == ServerQuota(quota: 15, window: .seconds(20), remaining: 0, resetsIn: .seconds(20)))
    #expect(
      fields(
        ("Retry-After", "20"), ("RateLimit-Policy", #""dynamic";q=100;w=60"#), ("RateLimit", #""dynamic";r=15;t=40"#)
      ).quota
        == ServerQuota(
          quota: 100, window: .seconds(60), remaining: 15, resetsIn: .seconds(40), retryAfter: .seconds(20)))
    let twoWindows = fields(
      ("RateLimit-Policy", #""hour";q=1000;w=3600, "day";q=5000;w=86400"#), ("RateLimit", #""day";r=100;t=36000"#))
    #expect(twoWindows.policies.map(\.name) == ["hour", "day"])
    // The lowest rate is the day's (5000 a day, below 1000 an hour).
    #expect(
      twoWindows.quota
        == ServerQuota(quota: 5000, window: .seconds(86_400), remaining: 100, resetsIn: .seconds(36_000)))
  }

  /// The FAQ's fields: the simplest form without a space, policies over two field lines with a
  /// vendor parameter (a comment), and a state with a `q` (a comment too).
  @Test func theFAQsAndTheAppendixsFields() {
    #expect(fields(("RateLimit", #""default";r=50;t=60"#)).quota == ServerQuota(remaining: 50, resetsIn: .seconds(60)))
    let sliding = fields(
      ("RateLimit-Policy", #""sliding";q=100;w=60;burst=1000"#),
      ("RateLimit-Policy", #""fixed";q=5000;w=3600;burst=0"#),
      ("RateLimit", #""sliding";r=50;t=44"#))
    #expect(
      sliding.policies == [
        Policy(name: "sliding", quota: 100, window: .seconds(60)),
        Policy(name: "fixed", quota: 5000, window: .seconds(3600)),
      ])
    #expect(sliding.states == [State(name: "sliding", remaining: 50, resetsIn: .seconds(44))])
    for remaining in [6, 1] {
      let throughput = fields(
        ("RateLimit-Policy", #""sliding";q=12;w=1"#), ("RateLimit", #""sliding";q=12;r=\#(remaining);t=1"#))
      #expect(
        throughput.quota == ServerQuota(quota: 12, window: .seconds(1), remaining: remaining, resetsIn: .seconds(1)))
    }
  }

  // MARK: Quota units and partition keys

  /// `qu` (section 3.1.2): absent is the default unit, requests; the three defined units; an
  /// unknown unit kept as sent; a token read as its name; any other type makes the item malformed.
  @Test func quotaUnits() {
    let parsed = fields(
      (
        "RateLimit-Policy",
        #"a;q=1, b;q=1;qu="requests", c;q=1;qu="content-bytes", d;q=1;qu="concurrent-requests", e;q=1;qu="acme-tokens", f;q=1;qu=requests, g;q=1;qu=5, h;q=1;qu=:AA==:"#
      ))
    #expect(parsed.policies.map(\.name) == ["a", "b", "c", "d", "e", "f"])
    #expect(
      parsed.policies.map(\.quotaUnit) == [
        nil, .requests, .contentBytes, .concurrentRequests, ServerRateLimitFields.QuotaUnit(rawValue: "acme-tokens"),
        .requests,
      ])
    #expect(ServerRateLimitFields.QuotaUnit.contentBytes.rawValue == "content-bytes")
    #expect(ServerRateLimitFields.QuotaUnit.concurrentRequests.description == "concurrent-requests")
  }

  /// A policy in another unit than requests does not pace requests: its quota is not a count of
  /// them, and a state of it counts only once spent.
  @Test func aQuotaInAnotherUnitDoesNotPaceRequests() {
    let bytesAndRequests = fields(
      ("RateLimit-Policy", #""bytes";q=65535;qu="content-bytes";w=10, "reqs";q=100;w=60"#),
      ("RateLimit", #""bytes";r=1000;t=5, "reqs";r=40;t=30"#))
    #expect(
      bytesAndRequests.quota == ServerQuota(quota: 100, window: .seconds(60), remaining: 40, resetsIn: .seconds(30)))
    let spentBytes = fields(
      ("RateLimit-Policy", #""bytes";q=65535;qu="content-bytes";w=10, "reqs";q=100;w=60"#),
      ("RateLimit", #""BYTES";r=0;t=5, "reqs";r=40;t=30"#))
    #expect(spentBytes.quota == ServerQuota(quota: 100, window: .seconds(60), remaining: 0, resetsIn: .seconds(5)))
    // The registry's spelling of the default unit (section 10.3) counts requests too.
    let registry = fields(("RateLimit-Policy", #""r";q=7;w=1;qu="request""#))
    #expect(registry.quota == ServerQuota(quota: 7, window: .seconds(1)))
    let concurrency = fields(("RateLimit-Policy", #""c";q=7;w=1;qu="concurrent-requests""#))
    #expect(concurrency.quota.isEmpty)
  }

  /// `pk` (sections 3.1.4, 4.1.3): a Byte Sequence, with or without padding; anything else, or
  /// base64 that does not decode, is no key (the item still counts).
  @Test func partitionKeys() {
    let parsed = fields(
      (
        "RateLimit",
        #"a;r=1;pk=:QXBwLTk5OQ:, b;r=1;pk=::, c;r=1;pk="App", d;r=1;pk=App, e;r=1;pk=:QQ=A:, f;r=1;pk=:Q===:"#
      ))
    #expect(parsed.states.map(\.name) == ["a", "b", "c", "d", "e", "f"])
    #expect(parsed.states.map(\.partitionKey) == [bytes("App-999"), [], nil, nil, nil, nil])
  }

  /// Names are Strings (-10, -11) or Tokens (the editor's copy after -11): both are read.
  @Test func namesAreStringsOrTokens() {
    let parsed = fields(
      ("RateLimit-Policy", #"burst;q=100;w=60,"daily";q=1000;w=86400"#), ("RateLimit", #"burst;r=5;t=1, "daily";r=9"#))
    #expect(parsed.policies.map(\.name) == ["burst", "daily"])
    #expect(parsed.states.map(\.name) == ["burst", "daily"])
  }

  // MARK: The editor's copy after -11: `a` and `w`

  /// The editor's copy's examples, and both spellings read by default.
  @Test func theEditorsCopysParameters() {
    #expect(
      fields(("RateLimit", "default;a=50;w=30")).states == [
        State(name: "default", remaining: 50, resetsIn: .seconds(30))
      ])
    #expect(
      fields(("RateLimit", #""api";a=99;w=60;pk=:R0VUH2FsaWNl:"#)).states == [
        State(name: "api", remaining: 99, resetsIn: .seconds(60), partitionKey: bytes("GET\u{1F}alice"))
      ])
    #expect(
      fields(("RateLimit", #""problemPolicy";a=0;w=10"#)).quota == ServerQuota(remaining: 0, resetsIn: .seconds(10)))
  }

  /// Each draft version read alone, and an item that both could read: under -11 `w` is a comment
  /// and `a` unknown; under the editor's copy `t` is; when an item carries both spellings of the
  /// available quota, the more cautious of the two readings counts.
  @Test func eachDraftVersionReadAlone() {
    typealias Draft = ServerRateLimitFields.DraftVersion
    func states(_ value: String, _ drafts: Set<Draft>) -> [State] {
      ServerRateLimitFields(
        parsing: ResponseHead(status: 200, headerFields: [(name: "RateLimit", value: value)]), receivedAt: .zero,
        reading: drafts
      ).states
    }
    #expect(Set(Draft.allCases) == [.draft11, .editorsCopy])
    let old = #""x";r=5;t=30;w=60"#
    let new = #""x";a=5;w=30;t=60"#
    #expect(states(old, [.draft11]) == [State(name: "x", remaining: 5, resetsIn: .seconds(30))])
    #expect(states(old, [.editorsCopy]) == [])
    #expect(states(old, Set(Draft.allCases)) == [State(name: "x", remaining: 5, resetsIn: .seconds(30))])
    #expect(states(new, [.draft11]) == [])
    #expect(states(new, [.editorsCopy]) == [State(name: "x", remaining: 5, resetsIn: .seconds(30))])
    #expect(states(new, Set(Draft.allCases)) == [State(name: "x", remaining: 5, resetsIn: .seconds(30))])
    let both = #""x";r=5;t=10;a=3;w=20"#
    #expect(states(both, Set(Draft.allCases)) == [State(name: "x", remaining: 3, resetsIn: .seconds(20))])
    #expect(states(both, [.draft11]) == [State(name: "x", remaining: 5, resetsIn: .seconds(10))])
    #expect(states(both, []) == [])
  }
}
