import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

/// Seeded fuzzing of the rate-limit fields, in the default test run (`PACE_FUZZ_SCALE` runs it
/// deeper): random bytes and mutations of valid values, under every field's name. Never a trap;
/// every quota one a limiter can act on; every delay capped.
@Suite struct HostileFieldsTests {
  static let names = [
    "RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
    "X-RateLimit-Used", "X-RateLimit-Resource", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Date",
  ]

  static let seeds = [
    #""default";q=100;w=60"#, #""default";r=50;t=30"#, #""a";q=5;w=1, b;q=7;w=2"#, "120", "1.5",
    "Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "1700003600",
    "9223372036854775807", "-9223372036854775808", "1" + String(repeating: "0", count: 40), "core", "", ",,,", "\"",
  ]

  /// Bytes that parsers trip on: digits, separators, quotes, signs, non-ASCII.
  static let alphabet = Array("0123456789;=,\" -+.:()*?abcqrtwGMTé\u{0}\t\r\n".unicodeScalars)

  func check(_ head: ResponseHead) {
    for now in [Duration.zero, .seconds(1_700_000_000), .seconds(Int64.max), .seconds(-1_000)] {
      let quota = ServerQuota(parsing: head, receivedAt: now)
      #expect(quota.quota.map { $0 > 0 } ?? true)
      #expect(quota.window.map { $0 > .zero } ?? true)
      #expect(quota.remaining.map { $0 >= 0 } ?? true)
      for delay in [quota.resetsIn, quota.retryAfter] {
        #expect(delay.map { $0 >= .zero && $0 <= ServerQuota.maximumDelay } ?? true)
      }
    }
  }

  @Test func randomTextUnderEveryName() {
    var random = SeededGenerator(seed: 34)
    for _ in 0..<fuzzRuns(2_000) {
      var fields: [(name: String, value: String)] = []
      for _ in 0..<Int.random(in: 1...4, using: &random) {
        let length = Int.random(in: 0...40, using: &random)
        let value = String(
          String.UnicodeScalarView((0..<length).map { _ in Self.alphabet.randomElement(using: &random)! }))
        fields.append((name: Self.names.randomElement(using: &random)!, value: value))
      }
      check(ResponseHead(status: 429, headerFields: fields))
    }
  }

  /// Valid values with a few bytes replaced, inserted or removed.
  @Test func mutatedValidValues() {
    var random = SeededGenerator(seed: 8941)
    for _ in 0..<fuzzRuns(2_000) {
      var scalars = Array(Self.seeds.randomElement(using: &random)!.unicodeScalars)
      for _ in 0..<Int.random(in: 1...3, using: &random) {
        let index = scalars.isEmpty ? 0 : Int.random(in: 0..<scalars.count, using: &random)
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where !scalars.isEmpty: scalars[index] = Self.alphabet.randomElement(using: &random)!
        case 1: scalars.insert(Self.alphabet.randomElement(using: &random)!, at: index)
        default: if !scalars.isEmpty { scalars.remove(at: index) }
        }
      }
      let value = String(String.UnicodeScalarView(scalars))
      let name = Self.names.randomElement(using: &random)!
      check(ResponseHead(status: 200, headerFields: [(name: name, value: value), (name: name, value: value)]))
      _ = HTTPDate.unixSeconds(parsing: value, unixNow: .max)
    }
  }

  /// A field of a megabyte, and a thousand field lines: parsed quickly, never kept whole.
  @Test func hugeFields() {
    let huge = String(repeating: #""a";q=1;w=1, "#, count: 80_000)
    check(ResponseHead(status: 200, headerFields: [(name: "RateLimit-Policy", value: huge)]))
    let many = (0..<1_000).map { (name: "Retry-After", value: String($0)) }
    #expect(
      ServerQuota(parsing: ResponseHead(status: 429, headerFields: many), receivedAt: .zero).retryAfter
        == .seconds(999))
  }
}
