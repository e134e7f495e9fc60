#if Hummingbird || Vapor
import Pace
import PaceHTTPClient
import PaceHTTPServer
import Testing

/// What the middlewares write is draft-ietf-httpapi-ratelimit-headers-11 as PaceHTTPClient reads
/// it with that draft's parameters alone: every policy and state, exact, with no unit (the
/// draft's default, requests) and no partition key unless the policy discloses one, a keyed hash
/// that never reveals the key.
@Suite struct ServerFieldsDraftConformanceTests {
  static func read(_ fields: [HeaderField]) -> ServerRateLimitFields {
    let head = ResponseHead(status: 200, headerFields: fields.map { (name: $0.name, value: $0.value) })
    return ServerRateLimitFields(parsing: head, receivedAt: .seconds(1_800_000_000), reading: [.draft11])
  }

  @Test(arguments: [
    RateLimit(permits: 100, per: .seconds(60), burst: 100),
    .slidingWindow(permits: 3, per: .seconds(10)),
    .fixedWindow(permits: 5_000, per: .seconds(3600)),
  ])
  func oneAllowedPolicyReadsBackExactly(_ limit: RateLimit) {
    let fields = RateLimitFields(limit: limit, policyName: "api", windowEndsIn: .seconds(35))
    let read = Self.read(fields.fields(remaining: limit.permits - 1))
    #expect(read.policies == [.init(name: "api", quota: limit.permits, window: limit.interval)])
    #expect(read.policies.first?.quotaUnit == nil)
    #expect(read.policies.first?.partitionKey == nil)
    #expect(read.states.map(\.name) == ["api"])
    #expect(read.states.first?.remaining == limit.permits - 1)
    #expect(read.states.first?.partitionKey == nil)
    #expect(read.retryAfter == nil)
  }

  /// RFC 4231's test case 2 with a key of 20 bytes (0x0b): HMAC-SHA256 of "Hi There", its first
  /// 16 bytes; and a secret longer than SHA-256's block is hashed first (RFC 4231 test case 6).
  @Test func partitionKeysAreTheFirst16BytesOfHMACSHA256() {
    let keys = RateLimitPartitionKeys.hmacSHA256(secret: [UInt8](repeating: 0x0B, count: 20))
    #expect(hex(keys.partitionKey(for: "Hi There")) == "b0344c61d8db38535ca8afceaf0bf12b")
    let long = RateLimitPartitionKeys.hmacSHA256(secret: [UInt8](repeating: 0xAA, count: 131))
    #expect(
      hex(long.partitionKey(for: "Test Using Larger Than Block-Size Key - Hash Key First"))
        == "60e431591ee0b67f0d8a26aacbf5b77f")
  }

  func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }

  /// A policy that discloses partition keys writes `pk` on its state, the keyed hash of the key,
  /// which a -11 client reads back as those bytes; the key itself appears nowhere in the fields,
  /// and two keys have two partition keys.
  @Test func aDisclosedPartitionKeyReadsBackAndNeverRevealsTheKey() {
    let keys = RateLimitPartitionKeys.hmacSHA256(secret: Array("the server's secret, 16+ bytes".utf8))
    var fields = RateLimitFields(limit: RateLimit(permits: 10, per: .seconds(1)), policyName: "per-key")
    fields.partitionKey = keys.fieldValue(for: "key-of-alice")
    for written in [fields.fields(remaining: 9), fields.fields(retryAfter: .seconds(1))] {
      let read = Self.read(written)
      #expect(read.states.first?.partitionKey == keys.partitionKey(for: "key-of-alice"))
      #expect(!written.contains { $0.value.contains("alice") })
    }
    #expect(keys.partitionKey(for: "key-of-alice") != keys.partitionKey(for: "key-of-bob"))
    #expect(keys.partitionKey(for: "key-of-alice").count == 16)
  }

  @Test func stackedPoliciesWithARefusalReadBackInOrderWithRetryAfter() {
    let plan = RateLimitFields(
      limit: .fixedWindow(permits: 20, per: .seconds(60)), policyName: "plan", windowEndsIn: .seconds(12))
    let address = RateLimitFields(limit: RateLimit(permits: 10, per: .seconds(1)), policyName: "per \"address\"")
    let fields = RateLimitFields.fields(
      states: [(plan, .allowed(remaining: 7)), (address, .limited(retryAfter: .milliseconds(1500)))], deniedBy: 1)
    let read = Self.read(fields)
    #expect(read.policies.map(\.name) == ["plan", "per \"address\""])
    #expect(read.policies.map(\.quota) == [20, 10])
    #expect(read.policies.map(\.window) == [.seconds(60), .seconds(1)])
    #expect(read.states.map(\.remaining) == [7, 0])
    #expect(read.states.map(\.resetsIn) == [.seconds(12), .seconds(2)])
    #expect(read.retryAfter == .seconds(2))
  }
}
#endif
