#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceHTTPServer
import Testing

/// A store that counts each key's permits under the limit each decision brings (a window that
/// never ends), and records what it was asked: the key, the cost and the limit.
final class RecordingStore: RateLimitStore {
  struct Asked: Equatable, Sendable {
    var key: String
    var cost: Int
    var limit: RateLimit
  }

  private let state = LockedState<(asked: [Asked], used: [String: Int])>(([], [:]))

  /// Every decision the store was asked for, in order.
  var asked: [Asked] { state.withLock { $0.asked } }

  func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    state.withLock { state in
      state.asked.append(Asked(key: key, cost: cost, limit: limit))
      let used = state.used[key, default: 0]
      guard used + max(cost, 1) <= limit.burst else { return .limited(retryAfter: limit.interval) }
      state.used[key] = used + cost
      return .allowed(remaining: limit.burst - used - cost)
    }
  }
}

/// The answers of both frameworks' middlewares to `probes`, checked to be the same.
func answersOnEveryFramework(
  _ server: @autoclosure () -> ProbeServer, _ probes: [Probe], sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Answer] {
  let hummingbird = try await hummingbirdAnswers(server(), probes)
  let vapor = try await vaporAnswers(server(), probes)
  #expect(hummingbird.count == probes.count && vapor.count == probes.count, sourceLocation: sourceLocation)
  for (probe, (one, other)) in zip(probes, zip(hummingbird, vapor)) {
    #expect(one == other, "\(probe)", sourceLocation: sourceLocation)
  }
  return vapor
}

/// A key over `InputRules.maximumKeyBytes` is counted under its digest, but its plan is the
/// key's own: the limit is looked up by the key the request sent.
@Suite("A long key keeps its plan", .timeLimit(.minutes(2)))
struct LongKeyPlanTests {
  /// A pro key gets 10 a minute, any other 2 an hour.
  static let plan: @Sendable (String) -> RateLimit = { key in
    key.hasPrefix("pro-") ? RateLimit(permits: 10, per: .seconds(60)) : RateLimit(permits: 2, per: .seconds(3600))
  }
  static let pro = RateLimit(permits: 10, per: .seconds(60))
  static let free = RateLimit(permits: 2, per: .seconds(3600))
  /// A 1.5 kB API key on each plan.
  static let longPro = "pro-" + String(repeating: "k", count: 1500)
  static let longFree = "free-" + String(repeating: "k", count: 1500)

  static let probes = [
    Probe(key: longPro), Probe(key: longPro), Probe(key: longPro),
    Probe(key: longFree), Probe(key: longFree), Probe(key: longFree),
  ]

  @Test func anInMemoryPlanIsLookedUpByTheRequestsKey() async throws {
    let answers = try await answersOnEveryFramework(
      .single(KeyedRateLimiter<String>(limits: Self.plan, clock: TestScheduler())), Self.probes)
    #expect(answers.map(\.status) == [200, 200, 200, 200, 200, 429])
    #expect(answers[0].fields["RateLimit-Policy"] == "\"default\";q=10;w=60")
    #expect(answers[2].fields["RateLimit"] == "\"default\";r=7;t=18")
    #expect(answers[3].fields["RateLimit-Policy"] == "\"default\";q=2;w=3600")
    #expect(answers[5].fields["Retry-After"] == "1800")
  }

  @Test func aStoreBackedPlanIsLookedUpByTheRequestsKeyAndCountedUnderItsDigest() async throws {
    var stores: [RecordingStore] = []
    func server() -> ProbeServer {
      let store = RecordingStore()
      stores.append(store)
      return .single(StoreBackedRateLimiter(limits: Self.plan, store: store))
    }
    let answers = try await answersOnEveryFramework(server(), Self.probes)
    #expect(answers.map(\.status) == [200, 200, 200, 200, 200, 429])
    #expect(answers[0].fields["RateLimit-Policy"] == "\"default\";q=10;w=60")
    #expect(answers[2].fields["RateLimit"] == "\"default\";r=7;t=18")
    #expect(answers[3].fields["RateLimit-Policy"] == "\"default\";q=2;w=3600")
    let proDigest = LongKeyHandling.hashedPrefix + SHA256.hex(Self.longPro)
    let freeDigest = LongKeyHandling.hashedPrefix + SHA256.hex(Self.longFree)
    for store in stores {
      #expect(
        store.asked
          == Array(repeating: RecordingStore.Asked(key: proDigest, cost: 1, limit: Self.pro), count: 3)
          + Array(repeating: RecordingStore.Asked(key: freeDigest, cost: 1, limit: Self.free), count: 3))
    }
  }

  /// A fixed window's `t` is its end under the key's own limit, not under the digest's.
  @Test func aLongKeysFixedWindowReportsItsEnd() async throws {
    let scheduler = TestScheduler()
    let plan: @Sendable (String) -> RateLimit = { key in
      key.hasPrefix("pro-") ? .fixedWindow(permits: 10, per: .seconds(10)) : RateLimit(permits: 2, per: .seconds(3600))
    }
    scheduler.advance(by: .milliseconds(3_500))
    let answers = try await answersOnEveryFramework(
      .single(KeyedRateLimiter<String>(limits: plan, clock: scheduler)), [Probe(key: Self.longPro)])
    #expect(answers.map(\.status) == [200])
    #expect(answers[0].fields["RateLimit"] == "\"default\";r=9;t=7")
  }
}
#endif
