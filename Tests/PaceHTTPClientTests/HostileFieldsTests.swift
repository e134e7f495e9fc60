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
    "Age",
  ]

  static let seeds = [
    #""default";q=100;w=60"#, #""default";r=50;t=30"#, #""a";q=5;w=1, b;q=7;w=2"#, "120", "1.5",
    "Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "1700003600",
    "9223372036854775807", "-9223372036854775808", "1" + String(repeating: "0", count: 40), "core", "", ",,,", "\"",
    // Draft -11's quota units and partition keys, and the editor's copy's `a` and `w`.
    #""peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:"#, #""default";r=999;pk=:dHJpYWwxMjEzMjM=:"#,
    #"c;q=7;w=1;qu="concurrent-requests", d;q=1;qu=acme"#, "default;a=50;w=30", #""x";r=5;t=10;a=3;w=20;pk=::"#,
    #""api";a=99;w=60;pk=:R0VUH2FsaWNl:"#, "120, 0",
  ]

  /// Bytes that parsers trip on: digits, separators, quotes, signs, non-ASCII.
  static let alphabet = Array("0123456789;=,\" -+.:()*?/abcqrtwukpGMTé\u{0}\t\r\n".unicodeScalars)

  /// Every set of draft versions the parser may be told to read.
  static let draftSets: [Set<ServerRateLimitFields.DraftVersion>] = [
    [], [.draft11], [.editorsCopy], [.draft11, .editorsCopy],
  ]

  func check(_ head: ResponseHead) {
    let fieldBytes = head.headerFields.reduce(0) { $0 + $1.value.utf8.count }
    for now in [Duration.zero, .seconds(1_700_000_000), .seconds(Int64.max), .seconds(-1_000)] {
      let quota = ServerQuota(parsing: head, receivedAt: now)
      #expect(quota.quota.map { $0 > 0 } ?? true)
      #expect(quota.window.map { $0 > .zero } ?? true)
      #expect(quota.remaining.map { $0 >= 0 } ?? true)
      for delay in [quota.resetsIn, quota.retryAfter] {
        #expect(delay.map { $0 >= .zero && $0 <= ServerQuota.maximumDelay } ?? true)
      }
    }
    for drafts in Self.draftSets {
      let fields = ServerRateLimitFields(parsing: head, receivedAt: .seconds(1_700_000_000), reading: drafts)
      #expect(fields.policies.allSatisfy { $0.quota > 0 && ($0.window.map { $0 > .zero } ?? true) })
      #expect(fields.states.allSatisfy { $0.remaining >= 0 })
      // What is kept is no larger than what was sent: a key is at most 3/4 of its base64.
      let kept =
        (fields.policies.map { $0.partitionKey?.count ?? 0 } + fields.states.map { $0.partitionKey?.count ?? 0 })
        .reduce(0, +)
      #expect(kept <= fieldBytes)
      let units = fields.policies.compactMap { $0.quotaUnit?.rawValue.utf8.count }.reduce(0, +)
      #expect(units <= fieldBytes)
    }
    _ = head.isFromCache
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

  /// Items of draft -11 and the editor's copy with random partition keys (over the base64 alphabet
  /// and `=`), quota units and both spellings of the `RateLimit` parameters, under every set of
  /// draft versions. A key decodes to at most 3 bytes for every 4 characters.
  @Test func randomDraftParameters() {
    var random = SeededGenerator(seed: 9651)
    let base64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/====".unicodeScalars)
    let parameters = ["q", "qu", "w", "pk", "r", "t", "a", "c"]
    let values = [
      "0", "1", "60", "-1", "999999999999999", "1.5", "?1", #""requests""#, #""content-bytes""#, #""""#, "tok", "@1",
    ]
    for _ in 0..<fuzzRuns(2_000) {
      var items: [String] = []
      for _ in 0..<Int.random(in: 1...3, using: &random) {
        var item = Bool.random(using: &random) ? #""p""# : "p"
        for _ in 0..<Int.random(in: 0...5, using: &random) {
          let name = parameters.randomElement(using: &random)!
          if name == "pk" || Int.random(in: 0..<4, using: &random) == 0 {
            let length = Int.random(in: 0...24, using: &random)
            let key = String(String.UnicodeScalarView((0..<length).map { _ in base64.randomElement(using: &random)! }))
            item += ";\(name)=:\(key):"
          } else {
            item += ";\(name)=\(values.randomElement(using: &random)!)"
          }
        }
        items.append(item)
      }
      let value = items.joined(separator: ", ")
      let name = Bool.random(using: &random) ? "RateLimit" : "RateLimit-Policy"
      let head = ResponseHead(status: 200, headerFields: [(name: name, value: value)])
      check(head)
      for drafts in Self.draftSets {
        let fields = ServerRateLimitFields(parsing: head, receivedAt: .zero, reading: drafts)
        let keys = fields.policies.compactMap(\.partitionKey) + fields.states.compactMap(\.partitionKey)
        #expect(keys.allSatisfy { $0.count <= 18 }, "run \(value)")
      }
    }
  }

  /// A field of a megabyte, and a thousand field lines: parsed quickly, never kept whole.
  @Test func hugeFields() {
    let huge = String(repeating: #""a";q=1;w=1, "#, count: 80_000)
    check(ResponseHead(status: 200, headerFields: [(name: "RateLimit-Policy", value: huge)]))
    // A partition key of a megabyte is not decoded at all; one just under the bound is, once.
    let hugeKey = #""a";r=1;pk=:"# + String(repeating: "QUFB", count: 300_000) + ":"
    check(ResponseHead(status: 200, headerFields: [(name: "RateLimit", value: hugeKey)]))
    let largeKey = #""a";r=1;pk=:"# + String(repeating: "QUFB", count: 4_000) + ":"
    let large = ServerRateLimitFields(
      parsing: ResponseHead(status: 200, headerFields: [(name: "RateLimit", value: largeKey)]), receivedAt: .zero)
    #expect(large.states.first?.partitionKey == Array(repeating: UInt8(ascii: "A"), count: 12_000))
    let ages = (0..<1_000).map { (name: "Age", value: String(repeating: "9", count: $0)) }
    #expect(ResponseHead(status: 200, headerFields: ages).isFromCache == false)
    let many = (0..<1_000).map { (name: "Retry-After", value: String($0)) }
    #expect(
      ServerQuota(parsing: ResponseHead(status: 429, headerFields: many), receivedAt: .zero).retryAfter
        == .seconds(999))
  }
}
