#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceHTTPServer
import Testing

/// Stacked policies: once one refuses a request, the policies after it are neither asked nor
/// charged, so a request its plan refuses costs no round trip to their stores.
@Suite("A refusal ends a request's work", .timeLimit(.minutes(2)))
struct RefusalEndsTheWorkTests {
  /// A per-key plan (1 an hour) and then a per-address bucket (2 an hour), each in its own store.
  final class Stores: Sendable {
    let perKey = RecordingStore()
    let perAddress = RecordingStore()
  }

  static func server(_ stores: Stores) -> ProbeServer {
    ProbeServer(policies: [
      ProbePolicy(
        name: "per-key",
        limiter: StoreBackedRateLimiter(permits: 1, per: .seconds(3600), store: stores.perKey),
        keyField: Probe.keyField),
      ProbePolicy(
        name: "per-address",
        limiter: StoreBackedRateLimiter(permits: 2, per: .seconds(3600), store: stores.perAddress),
        keyField: Probe.clientField),
    ])
  }

  @Test func aRequestThePlanRefusesNeverReachesTheNextPolicysStore() async throws {
    var all: [Stores] = []
    func server() -> ProbeServer {
      let stores = Stores()
      all.append(stores)
      return Self.server(stores)
    }
    let answers = try await answersOnEveryFramework(
      server(), [Probe(key: "a", client: "c"), Probe(key: "a", client: "c"), Probe(key: "a", cost: "0", client: "c")])
    #expect(answers.map(\.status) == [200, 429, 429])
    #expect(answers[0].fields["RateLimit"] == "\"per-key\";r=0;t=3600, \"per-address\";r=1;t=1800")
    // The 429 reports the policies asked, up to the one that refused.
    #expect(answers[1].fields["RateLimit-Policy"] == "\"per-key\";q=1;w=3600")
    #expect(answers[1].fields["RateLimit"] == "\"per-key\";r=0;t=3600")
    #expect(answers[1].body == "Too many requests (policy \"per-key\"): retry after 3600 s\n")
    #expect(answers[2].fields["RateLimit"] == "\"per-key\";r=0;t=3600")
    for stores in all {
      // The first request: a question to each, then a charge to each; the refused ones: a
      // question to the plan alone.
      #expect(stores.perKey.asked.map(\.cost) == [0, 1, 0, 0])
      #expect(stores.perAddress.asked.map(\.cost) == [0, 1])
    }
  }

  /// A request the later policy refuses is charged by neither: the plan before it was asked, and
  /// its permit stays.
  @Test func aRequestTheLaterPolicyRefusesIsChargedByNeither() async throws {
    var all: [Stores] = []
    func server() -> ProbeServer {
      let stores = Stores()
      all.append(stores)
      return Self.server(stores)
    }
    let answers = try await answersOnEveryFramework(
      server(), [Probe(key: "a", client: "c"), Probe(key: "b", client: "c"), Probe(key: "x", client: "c")])
    #expect(answers.map(\.status) == [200, 200, 429])
    #expect(answers[2].fields["RateLimit"] == "\"per-key\";r=1;t=0, \"per-address\";r=0;t=3600")
    #expect(answers[2].body == "Too many requests (policy \"per-address\"): retry after 3600 s\n")
    for stores in all {
      #expect(stores.perKey.asked.map(\.cost) == [0, 1, 0, 1, 0])
      #expect(stores.perAddress.asked.map(\.cost) == [0, 1, 0, 1, 0])
    }
  }
}
#endif
