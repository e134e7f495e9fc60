import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

/// A response head with `fields`.
func head(_ fields: (String, String)..., status: Int = 200) -> ResponseHead {
  ResponseHead(status: status, headerFields: fields.map { (name: $0.0, value: $0.1) })
}

/// 2015-10-21 07:28:00 UTC.
let october21 = Duration.seconds(1_445_412_480)

/// Every rate-limit field a client reads, in each of its forms: the IETF draft's examples, Pace's
/// own middleware, `Retry-After`'s three date forms, GitHub's `X-RateLimit-*`.
@Suite struct ParsingTests {
  // MARK: RateLimit-Policy and RateLimit

  /// The draft's examples: one policy, then several.
  @Test func theDraftsExamples() {
    let one = ServerQuota(
      parsing: head(("RateLimit-Policy", #""default";q=100;w=10"#), ("RateLimit", #""default";r=50;t=30"#)),
      receivedAt: october21)
    #expect(one == ServerQuota(quota: 100, window: .seconds(10), remaining: 50, resetsIn: .seconds(30)))

    let fields = ServerRateLimitFields(
      parsing: head(
        ("RateLimit-Policy", #""permin";q=50;w=60,"perhr";q=1000;w=3600"#),
        ("RateLimit", #""permin";r=40;t=20, "perhr";r=30;t=1800"#)),
      receivedAt: october21)
    #expect(fields.policies.map(\.name) == ["permin", "perhr"])
    #expect(fields.states.map(\.remaining) == [40, 30])
    // The lowest rate (1000 per hour) and the fewest remaining (30, of "perhr").
    #expect(fields.quota == ServerQuota(quota: 1000, window: .seconds(3600), remaining: 30, resetsIn: .seconds(1800)))
  }

  /// What Pace's own middleware sends, allowed and limited, one policy and two merged.
  @Test func whatPacesMiddlewareSends() {
    let allowed = ServerQuota(
      parsing: head(
        ("Content-Type", "text/plain"), ("RateLimit-Policy", #""api";q=3;w=10"#), ("RateLimit", #""api";r=2;t=10"#)),
      receivedAt: .zero)
    #expect(allowed == ServerQuota(quota: 3, window: .seconds(10), remaining: 2, resetsIn: .seconds(10)))
    let limited = ServerQuota(
      parsing: head(
        ("RateLimit-Policy", #""burst";q=20;w=1, "api";q=100;w=60"#),
        ("RateLimit", #""burst";r=0;t=1, "api";r=0;t=45"#), ("Retry-After", "1"), status: 429),
      receivedAt: .zero)
    #expect(
      limited
        == ServerQuota(quota: 100, window: .seconds(60), remaining: 0, resetsIn: .seconds(45), retryAfter: .seconds(1)))
  }

  /// Names are strings or tokens; a quoted name may hold escapes; field lines are joined.
  @Test func namesAndLines() {
    let fields = ServerRateLimitFields(
      parsing: head(
        ("ratelimit-policy", #""a\"b";q=5;w=1"#), ("RATELIMIT-POLICY", "tok;q=7;w=2"), ("RateLimit", "tok;r=1")),
      receivedAt: .zero)
    #expect(fields.policies.map(\.name) == [#"a"b"#, "tok"])
    #expect(fields.states == [.init(name: "tok", remaining: 1, resetsIn: nil)])
  }

  /// A member that does not fit is dropped alone; a field that is not a Structured Fields list is
  /// dropped whole; the other fields still count.
  @Test func badMembersAndFieldsAreIgnored() {
    let fields = ServerRateLimitFields(
      parsing: head(
        (
          "RateLimit-Policy", #""zero";q=0;w=1, "neg";q=-5;w=1, "dec";q=1.5;w=1, "str";q="9", "noq";w=5, "ok";q=9;w=-1"#
        ),
        ("RateLimit", #""x";r=1;t=2, "y";r=-1, "z";t=5, ("inner");r=1, 5;r=2"#), ("Retry-After", "3")),
      receivedAt: .zero)
    #expect(fields.policies == [.init(name: "ok", quota: 9, window: nil)])
    #expect(fields.states == [.init(name: "x", remaining: 1, resetsIn: .seconds(2))])
    let broken = ServerRateLimitFields(
      parsing: head(
        ("RateLimit-Policy", #""a";q=5;w=1,,"#), ("RateLimit", #""a";r=1;t=2 garbage"#), ("Retry-After", "3")),
      receivedAt: .zero)
    #expect(broken.policies.isEmpty && broken.states.isEmpty)
    #expect(broken.quota == ServerQuota(retryAfter: .seconds(3)))
  }

  /// Huge numbers are clamped: a reset beyond a day is a day; a window is kept, however long; a
  /// quota past 15 digits is not a Structured Fields integer at all.
  @Test func hugeNumbersAreClamped() {
    let quota = ServerQuota(
      parsing: head(
        ("RateLimit-Policy", #""a";q=999999999999999;w=999999999999999"#),
        ("RateLimit", #""a";r=999999999999999;t=999999999999999"#)),
      receivedAt: .zero)
    #expect(
      quota
        == ServerQuota(
          quota: 999_999_999_999_999, window: .seconds(999_999_999_999_999), remaining: 999_999_999_999_999,
          resetsIn: ServerQuota.maximumDelay))
    let tooLong = ServerRateLimitFields(
      parsing: head(("RateLimit-Policy", #""a";q=9999999999999999"#)), receivedAt: .zero)
    #expect(tooLong.policies.isEmpty)
  }

  // MARK: Retry-After

  @Test(arguments: [
    ("120", Duration.seconds(120)), ("0", .zero), (" 7 ", .seconds(7)), ("1.5", .milliseconds(1500)),
    ("0.0000000001", .nanoseconds(1)), ("99999999999999999999999999999999999999999", ServerQuota.maximumDelay),
    ("86401", ServerQuota.maximumDelay),
  ])
  func retryAfterSeconds(value: String, expected: Duration) {
    #expect(ServerQuota(parsing: head(("Retry-After", value)), receivedAt: .zero).retryAfter == expected)
  }

  /// The three HTTP-date forms, against the receiving time, or the response's own `Date`.
  @Test(arguments: ["Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015"])
  func retryAfterDates(value: String) {
    let received = october21 - .seconds(90)
    #expect(ServerQuota(parsing: head(("Retry-After", value)), receivedAt: received).retryAfter == .seconds(90))
    // The server's clock says 07:27:00: a minute to wait, whatever the client's clock says.
    let withDate = head(("Date", "Wed, 21 Oct 2015 07:27:00 GMT"), ("Retry-After", value))
    #expect(ServerQuota(parsing: withDate, receivedAt: .seconds(1)).retryAfter == .seconds(60))
    // A date past is no wait.
    #expect(ServerQuota(parsing: head(("Retry-After", value)), receivedAt: october21 + .seconds(5)).retryAfter == .zero)
  }

  @Test(arguments: [
    "", " ", "-5", "+5", "5s", "1e3", "0x10", "1..5", ".5", "5.", "NaN", "∞", "१२", "Wed, 32 Oct 2015 07:28:00 GMT",
    "Wed, 21 Oct 2015 24:00:00 GMT", "Wed, 21 Foo 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 UTC",
    "Sun, 29 Feb 2015 00:00:00 GMT", "Wed, 21 Oct 15 07:28:00 GMT", "Wed Oct 21 07:28 2015",
  ])
  func retryAfterGarbageIsIgnored(value: String) {
    #expect(ServerQuota(parsing: head(("Retry-After", value)), receivedAt: october21).retryAfter == nil)
  }

  /// Several `Retry-After` values: the longest.
  @Test func severalRetryAftersCountTheLongest() {
    let quota = ServerQuota(
      parsing: head(("Retry-After", "10"), ("Retry-After", "20"), ("Retry-After", "x")), receivedAt: .zero)
    #expect(quota.retryAfter == .seconds(20))
  }

  // MARK: X-RateLimit-*

  /// GitHub's fields: the reset is a Unix time.
  @Test func gitHubsFields() {
    let fields = ServerRateLimitFields(
      parsing: head(
        ("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "4999"), ("x-ratelimit-reset", "1445416080"),
        ("x-ratelimit-used", "1"), ("x-ratelimit-resource", "core")),
      receivedAt: october21)
    #expect(fields.resource == "core")
    #expect(fields.used == 1)
    #expect(fields.quota == ServerQuota(quota: 5000, remaining: 4999, resetsIn: .seconds(3600)))
  }

  /// A reset of 10⁹ or less is seconds from now; above, a Unix time.
  @Test(arguments: [
    ("60", Duration.seconds(60)), ("1.25", .milliseconds(1250)), ("1000000000", ServerQuota.maximumDelay),
    ("1000000001", .zero), ("1445412540", .seconds(60)), ("1445412540.5", .milliseconds(60_500)),
    ("99999999999999999999", ServerQuota.maximumDelay),
  ])
  func resetsAreDeltasOrUnixTimes(value: String, expected: Duration) {
    #expect(ServerQuota(parsing: head(("X-RateLimit-Reset", value)), receivedAt: october21).resetsIn == expected)
  }

  /// Only `Used`: `remaining` is `limit - used`; the earlier drafts' `RateLimit-*` count too.
  @Test func usedAndTheEarlierDraftsFields() {
    #expect(
      ServerQuota(parsing: head(("X-RateLimit-Limit", "60"), ("X-RateLimit-Used", "45")), receivedAt: .zero)
        == ServerQuota(quota: 60, remaining: 15))
    #expect(
      ServerQuota(parsing: head(("X-RateLimit-Limit", "60"), ("X-RateLimit-Used", "99")), receivedAt: .zero)
        == ServerQuota(quota: 60, remaining: 0))
    #expect(
      ServerQuota(
        parsing: head(("RateLimit-Limit", "10"), ("RateLimit-Remaining", "3"), ("RateLimit-Reset", "7")),
        receivedAt: .zero) == ServerQuota(quota: 10, remaining: 3, resetsIn: .seconds(7)))
  }

  /// Duplicated and conflicting fields count with their most cautious value; conflicting
  /// resources say nothing.
  @Test func duplicatesCountTheMostCautiousValue() {
    let fields = ServerRateLimitFields(
      parsing: head(
        ("X-RateLimit-Limit", "100, 50"), ("X-RateLimit-Remaining", "5"), ("X-RateLimit-Remaining", "3"),
        ("X-RateLimit-Reset", "10"), ("X-RateLimit-Reset", "30, garbage"), ("X-RateLimit-Resource", "core"),
        ("X-RateLimit-Resource", "search")),
      receivedAt: .zero)
    #expect(fields.quota == ServerQuota(quota: 50, remaining: 3, resetsIn: .seconds(30)))
    #expect(fields.resource == nil)
  }

  /// The IETF fields win over `X-RateLimit-*` when both are sent.
  @Test func theIETFFieldsWin() {
    let quota = ServerQuota(
      parsing: head(("X-RateLimit-Remaining", "0"), ("RateLimit", #""a";r=5;t=1"#)), receivedAt: .zero)
    #expect(quota == ServerQuota(remaining: 5, resetsIn: .seconds(1)))
  }

  @Test(arguments: ["-1", "abc", "1.5", "", "1 2", "18446744073709551616"])
  func garbageCountsAreIgnored(value: String) {
    let quota = ServerQuota(parsing: head(("X-RateLimit-Remaining", value)), receivedAt: .zero)
    #expect(quota.remaining == (value == "18446744073709551616" ? Int.max : nil))
  }

  // MARK: The head

  @Test func fieldNamesAreCaseInsensitive() {
    let head = head(("Retry-After", "1"), ("retry-after", "2"), ("Retry-Aftex", "3"))
    #expect(head.values(of: "RETRY-AFTER") == ["1", "2"])
    #expect(head["retry-after"] == "1, 2")
    #expect(head["Missing"] == nil)
  }

  @Test func idempotentMethods() {
    #expect(["GET", "head", "Options", "TRACE", "PUT", "DELETE"].allSatisfy { PacedRequests.isIdempotent(method: $0) })
    #expect(!["POST", "PATCH", "CONNECT", "", "GETX"].contains { PacedRequests.isIdempotent(method: $0) })
  }

  @Test func originKeys() {
    #expect(PacedRequests.originKey(scheme: "HTTPS", host: "API.example.com", port: 443) == "https://api.example.com")
    #expect(PacedRequests.originKey(scheme: "http", host: "localhost", port: 8080) == "http://localhost:8080")
    #expect(PacedRequests.originKey(scheme: "http", host: "h", port: nil) == "http://h")
  }
}

/// HTTP dates without Foundation, against known Unix times.
@Suite struct HTTPDateTests {
  @Test func theRFCsExample() {
    for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
      #expect(HTTPDate.unixSeconds(parsing: text, unixNow: 1_445_412_480) == 784_111_777)
    }
  }

  @Test func calendarEdges() {
    #expect(HTTPDate.unixSeconds(parsing: "Thu, 01 Jan 1970 00:00:00 GMT", unixNow: 0) == 0)
    #expect(HTTPDate.unixSeconds(parsing: "Tue, 29 Feb 2000 23:59:59 GMT", unixNow: 0) == 951_868_799)
    #expect(HTTPDate.unixSeconds(parsing: "Mon, 29 Feb 1900 00:00:00 GMT", unixNow: 0) == nil)
    #expect(HTTPDate.unixSeconds(parsing: "Fri, 31 Dec 9999 23:59:60 GMT", unixNow: 0) == 253_402_300_799)
    #expect(HTTPDate.unixSeconds(parsing: "Wed, 31 Dec 1969 23:59:59 GMT", unixNow: 0) == -1)
  }

  /// An RFC 850 year is the one not more than 50 years ahead.
  @Test func twoDigitYears() {
    let in2026: Int64 = 1_780_000_000
    #expect(HTTPDate.unixSeconds(parsing: "Monday, 01-Jan-76 00:00:00 GMT", unixNow: in2026) == 3_345_062_400)
    #expect(HTTPDate.unixSeconds(parsing: "Thursday, 01-Jan-77 00:00:00 GMT", unixNow: in2026) == 220_924_800)
    #expect(HTTPDate.unixSeconds(parsing: "Monday, 01-Jan-76 00:00:00 GMT", unixNow: .max) != nil)
    #expect(HTTPDate.unixSeconds(parsing: "Monday, 01-Jan-76 00:00:00 GMT", unixNow: .min) != nil)
  }

  /// A two-digit year read against a clock at the end of Int64 is a year whose seconds do not fit:
  /// no date, never a trap (the fuzzer's find: a `Retry-After` parsed at `receivedAt` Int64.max).
  @Test func aYearPastInt64IsNoDate() {
    // Int64.max seconds fall in the year 292,277,026,596, on December 4th: '98 is two years later.
    #expect(HTTPDate.unixSeconds(parsing: "Sunday, 06-Nov-98 08:49:37 GMT", unixNow: .max) == nil)
    #expect(HTTPDate.unixSeconds(parsing: "Sunday, 05-Dec-96 00:00:00 GMT", unixNow: .max) == nil)
    #expect(HTTPDate.unixSeconds(parsing: "Thursday, 04-Dec-96 15:30:07 GMT", unixNow: .max) == .max)
    for twoDigits in 0...99 {
      let year = String(twoDigits / 10) + String(twoDigits % 10)
      for now in [Int64.max, .min, .max - 1, .min + 1] {
        _ = HTTPDate.unixSeconds(parsing: "Sunday, 31-Dec-\(year) 23:59:59 GMT", unixNow: now)
        _ = HTTPDate.unixSeconds(parsing: "Sunday, 01-Jan-\(year) 00:00:00 GMT", unixNow: now)
      }
    }
    let head = ResponseHead(status: 429, headerFields: [(name: "Retry-After", value: "Sunday, 06-Nov-98 08:49:37 GMT")])
    let quota = ServerQuota(parsing: head, receivedAt: .seconds(Int64.max))
    #expect(quota.retryAfter.map { $0 >= .zero && $0 <= ServerQuota.maximumDelay } ?? true)
  }
}
