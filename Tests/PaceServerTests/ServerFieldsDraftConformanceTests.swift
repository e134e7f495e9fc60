#if Hummingbird || Vapor
import Pace
import PaceHTTPClient
import PaceHTTPServer
import Testing

/// What the middlewares write is draft-ietf-httpapi-ratelimit-headers-11 as PaceHTTPClient reads
/// it with that draft's parameters alone: every policy and state, exact, with no unit (the
/// draft's default, requests) and no partition key (a key is never disclosed).
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
