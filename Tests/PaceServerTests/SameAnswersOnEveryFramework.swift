#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceHTTPServer
import Testing

/// One request of a table that runs through every framework's middleware.
struct Probe: Sendable, CustomStringConvertible {
  /// `X-API-Key`, the key; nil for a request the middleware lets through unlimited.
  var key: String?
  /// `X-Cost`, the cost; nil for 1.
  var cost: String?

  /// `X-Client`, a second key (a client's address, say); nil for none.
  var client: String?

  init(key: String?, cost: String? = nil, client: String? = nil) {
    self.key = key
    self.cost = cost
    self.client = client
  }

  var description: String { "key \(key ?? "none"), cost \(cost ?? "default"), client \(client ?? "none")" }

  /// The request's header fields.
  var headers: [(String, String)] {
    [(Self.keyField, key), (Self.costField, cost), (Self.clientField, client)].compactMap { name, value in
      value.map { (name, $0) }
    }
  }

  static let keyField = "X-API-Key"
  static let costField = "X-Cost"
  static let clientField = "X-Client"
  /// The response fields the middlewares write; the rest (`Date`, `Server`) are the framework's, and
  /// so is the `Content-Type` of the route's own response.
  static func comparedFields(status: Int) -> [String] {
    (status == 200 ? [] : ["Content-Type"]) + ["RateLimit-Policy", "RateLimit", "Retry-After"]
  }
}

/// One policy of a server that the probes run through: keyed on one request header (or on the
/// client's address, the default key), with the cost from `X-Cost`.
struct ProbePolicy: Sendable {
  var name: String
  var limiter: PolicyLimiter
  /// The request header of the key; nil for the default key, the client's address.
  var keyField: String?
  /// What makes the policy's `pk`; nil for none.
  var partitionKeys: RateLimitPartitionKeys?

  init(name: String, limiter: KeyedRateLimiter<String>, keyField: String?) {
    self.name = name
    self.limiter = .inMemory(limiter)
    self.keyField = keyField
  }

  init(name: String, limiter: StoreBackedRateLimiter<String>, keyField: String?) {
    self.name = name
    self.limiter = .storeBacked(limiter)
    self.keyField = keyField
  }
}

/// The middlewares the probes run through, alike on every framework.
struct ProbeServer: Sendable {
  /// The policies, in order.
  var policies: [ProbePolicy]
  /// One middleware with every policy, or one middleware per policy, the first outermost.
  var nested = false
  /// Whether keys over `InputRules.maximumKeyBytes` are refused rather than hashed.
  var refusesLongKeys = false

  /// One policy named "default" on `X-API-Key`.
  static func single(_ limiter: KeyedRateLimiter<String>, refusesLongKeys: Bool = false) -> ProbeServer {
    ProbeServer(
      policies: [ProbePolicy(name: "default", limiter: limiter, keyField: Probe.keyField)],
      refusesLongKeys: refusesLongKeys)
  }

  /// One policy named "default" on `X-API-Key`, decided by `limiter`'s store.
  static func single(_ limiter: StoreBackedRateLimiter<String>) -> ProbeServer {
    ProbeServer(policies: [ProbePolicy(name: "default", limiter: limiter, keyField: Probe.keyField)])
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

/// A store that decides as one shared limiter in memory would, on virtual time: what every
/// instance of a server sharing it sees, and what it was asked.
final class SharedMemoryStore: RateLimitStore {
  let scheduler = TestScheduler()
  private let asked = LockedState<[String]>([])
  private let memory: KeyedRateLimiter<String>

  init(limits: @escaping @Sendable (String) -> RateLimit) {
    memory = KeyedRateLimiter(limits: limits, clock: scheduler)
  }

  /// Every key the store was asked about, in order.
  var keys: [String] { asked.withLock { $0 } }

  func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    asked.withLock { $0.append(key) }
    #expect(limit == memory.limit(for: key), "the store is asked with the key's own limit")
    return memory.tryAcquire(key, cost: cost)
  }
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
    // And they are the answers the module says, not merely equal. The key over the length limit
    // is hashed and counted.
    #expect(vapor.map(\.status) == [200, 200, 200, 429, 400, 400, 200, 200, 200, 200, 429])
    #expect(vapor[3].fields["Retry-After"] == "1200")
    #expect(vapor[3].body == "Too many requests (policy \"default\"): retry after 1200 s\n")
    #expect(vapor[4].body == "Bad request: the cost -5 is negative\n")
    #expect(vapor[7].fields.isEmpty && vapor[7].body == "ok")
  }

  /// Runs `probes` through both frameworks, expects the same answers, and returns them.
  func sameAnswers(_ server: @autoclosure () -> ProbeServer, _ probes: [Probe]) async throws -> [Answer] {
    let hummingbird = try await hummingbirdAnswers(server(), probes)
    let vapor = try await vaporAnswers(server(), probes)
    #expect(hummingbird.count == probes.count && vapor.count == probes.count)
    for (probe, (one, other)) in zip(probes, zip(hummingbird, vapor)) {
      #expect(one == other, "\(probe)")
    }
    return vapor
  }

  /// A request-chosen cost of 0 asks without taking, and is limited where a cost of 1 would be.
  @Test func aCostOfZeroNeverPassesAnExhaustedKey() async throws {
    let probes =
      [Probe(key: "a", cost: "0"), Probe(key: "a"), Probe(key: "a"), Probe(key: "a")]
      + Array(repeating: Probe(key: "a", cost: "0"), count: 5)
    let answers = try await sameAnswers(.single(Self.limiter()), probes)
    #expect(answers.map(\.status) == [200, 200, 200, 200, 429, 429, 429, 429, 429])
    #expect(answers[0].fields["RateLimit"] == "\"default\";r=3;t=0")
    #expect(answers[4].fields["Retry-After"] == "1200")
    #expect(answers[4].fields["RateLimit"] == "\"default\";r=0;t=1200")
  }

  /// Two policies: per client (5 an hour) and per API key (2 an hour).
  static func twoPolicies(nested: Bool) -> ProbeServer {
    ProbeServer(
      policies: [
        ProbePolicy(
          name: "per-client", limiter: KeyedRateLimiter(permits: 5, per: .seconds(3600), clock: TestScheduler()),
          keyField: Probe.clientField),
        ProbePolicy(
          name: "per-key", limiter: KeyedRateLimiter(permits: 2, per: .seconds(3600), clock: TestScheduler()),
          keyField: Probe.keyField),
      ],
      nested: nested)
  }

  static let bothPolicies = "\"per-client\";q=5;w=3600, \"per-key\";q=2;w=3600"

  /// One middleware, two policies: each is its own member of both lists; a request one denies is
  /// charged by neither, and its 429 names the one that denied it.
  @Test func stackedPoliciesInOneMiddlewareChargeNothingWhenOneDenies() async throws {
    let answers = try await sameAnswers(
      Self.twoPolicies(nested: false),
      [
        Probe(key: "a", client: "c"), Probe(key: "a", client: "c"),
        Probe(key: "a", client: "c"),  // per-key denies; per-client is not charged
        Probe(key: "b", client: "c"), Probe(key: "b", cost: "0", client: "c"), Probe(key: "a", cost: "0", client: "c"),
        Probe(key: nil, client: "c"), Probe(key: nil), Probe(key: "b", cost: "3", client: "c"),
        Probe(key: "b", cost: "2", client: "c"),  // per-client denies; per-key is not charged
        Probe(key: "b", client: "d"),
      ])
    #expect(answers.map(\.status) == [200, 200, 429, 200, 200, 429, 200, 200, 400, 429, 200])
    #expect(answers[0].fields["RateLimit-Policy"] == Self.bothPolicies)
    #expect(answers[0].fields["RateLimit"] == "\"per-client\";r=4;t=720, \"per-key\";r=1;t=1800")
    #expect(answers[1].fields["RateLimit"] == "\"per-client\";r=3;t=1440, \"per-key\";r=0;t=3600")
    #expect(answers[2].fields["RateLimit-Policy"] == Self.bothPolicies)
    #expect(answers[2].fields["RateLimit"] == "\"per-client\";r=3;t=1440, \"per-key\";r=0;t=1800")
    #expect(answers[2].fields["Retry-After"] == "1800")
    #expect(answers[2].body == "Too many requests (policy \"per-key\"): retry after 1800 s\n")
    // Three requests on client c so far, one denied: two taken, not three.
    #expect(answers[3].fields["RateLimit"] == "\"per-client\";r=2;t=2160, \"per-key\";r=1;t=1800")
    #expect(answers[4].fields["RateLimit"] == "\"per-client\";r=2;t=2160, \"per-key\";r=1;t=1800")
    #expect(answers[5].body == "Too many requests (policy \"per-key\"): retry after 1800 s\n")
    // Without an API key, the per-key policy lets the request through and is not reported.
    #expect(answers[6].fields["RateLimit-Policy"] == "\"per-client\";q=5;w=3600")
    #expect(answers[6].fields["RateLimit"] == "\"per-client\";r=1;t=2880")
    #expect(answers[7].fields.isEmpty)
    // Above one policy's burst: 400 before any limiter is asked.
    #expect(answers[8].body == "Bad request: the cost 3 is above the burst 2\n")
    // The policy that denied reports r=0 and the wait for the request's cost (one permit is left,
    // two were asked); per-key, after it, was not asked, and is not reported.
    #expect(answers[9].fields["RateLimit"] == "\"per-client\";r=0;t=720")
    #expect(answers[9].fields["Retry-After"] == "720")
    #expect(answers[9].body == "Too many requests (policy \"per-client\"): retry after 720 s\n")
    // Key b kept its permit through the denial: one taken of two.
    #expect(answers[10].fields["RateLimit"] == "\"per-client\";r=4;t=720, \"per-key\";r=0;t=3600")
  }

  /// One middleware per policy: the outer one's members come first and the inner one's stay; the
  /// outer one charged before the inner one denied.
  @Test func nestedMiddlewaresKeepEachOthersMembers() async throws {
    let answers = try await sameAnswers(
      Self.twoPolicies(nested: true),
      [
        Probe(key: "a", client: "c"), Probe(key: "a", client: "c"), Probe(key: "a", client: "c"),
        Probe(key: "b", client: "c"),
      ])
    #expect(answers.map(\.status) == [200, 200, 429, 200])
    #expect(answers[0].fields["RateLimit-Policy"] == Self.bothPolicies)
    #expect(answers[0].fields["RateLimit"] == "\"per-client\";r=4;t=720, \"per-key\";r=1;t=1800")
    #expect(answers[2].fields["RateLimit-Policy"] == Self.bothPolicies)
    #expect(answers[2].fields["RateLimit"] == "\"per-client\";r=2;t=2160, \"per-key\";r=0;t=1800")
    #expect(answers[2].fields["Retry-After"] == "1800")
    #expect(answers[2].body == "Too many requests (policy \"per-key\"): retry after 1800 s\n")
    #expect(answers[3].fields["RateLimit"] == "\"per-client\";r=1;t=2880, \"per-key\";r=1;t=1800")
  }

  /// Limits per key (a plan looked up from the key): the fields report each key's own `q` and
  /// `w`, and a cost is checked against each key's own burst.
  @Test func plansReportEachKeysOwnPolicy() async throws {
    func server() -> ProbeServer {
      .single(
        KeyedRateLimiter<String>(
          limits: { key in
            key.hasPrefix("paid-")
              ? RateLimit(permits: 10, per: .seconds(60)) : RateLimit(permits: 2, per: .seconds(3600))
          }, clock: TestScheduler()))
    }
    let answers = try await sameAnswers(
      server(),
      [
        Probe(key: "paid-1"), Probe(key: "free-1"), Probe(key: "free-1", cost: "3"), Probe(key: "paid-1", cost: "3"),
        Probe(key: "free-1"), Probe(key: "free-1"),
      ])
    #expect(answers.map(\.status) == [200, 200, 400, 200, 200, 429])
    #expect(answers[0].fields["RateLimit-Policy"] == "\"default\";q=10;w=60")
    #expect(answers[0].fields["RateLimit"] == "\"default\";r=9;t=6")
    #expect(answers[1].fields["RateLimit-Policy"] == "\"default\";q=2;w=3600")
    #expect(answers[1].fields["RateLimit"] == "\"default\";r=1;t=1800")
    #expect(answers[2].body == "Bad request: the cost 3 is above the burst 2\n")
    #expect(answers[3].fields["RateLimit"] == "\"default\";r=6;t=24")
    #expect(answers[5].fields["RateLimit-Policy"] == "\"default\";q=2;w=3600")
    #expect(answers[5].fields["Retry-After"] == "1800")
  }

  /// A policy that discloses partition keys writes each key's keyed hash as `pk`, allowed or
  /// limited, the same on every framework.
  @Test func aDisclosedPartitionKeyIsTheKeyedHashOfTheKey() async throws {
    let keys = RateLimitPartitionKeys.hmacSHA256(secret: Array("sixteen bytes or more".utf8))
    func server() -> ProbeServer {
      var server = ProbeServer.single(Self.limiter())
      server.policies[0].partitionKeys = keys
      return server
    }
    let answers = try await sameAnswers(
      server(), [Probe(key: "alice"), Probe(key: "bob")] + Array(repeating: Probe(key: "alice"), count: 3))
    #expect(answers.map(\.status) == [200, 200, 200, 200, 429])
    for (answer, key) in zip(answers, ["alice", "bob", "alice", "alice", "alice"]) {
      #expect(answer.fields["RateLimit"]?.hasSuffix(";pk=\(keys.fieldValue(for: key))") == true, "\(answer)")
    }
    let plain = try await sameAnswers(.single(Self.limiter()), [Probe(key: "alice")])
    #expect(plain[0].fields["RateLimit"]?.contains("pk=") == false)
  }

  /// A key over the length limit is counted under its SHA-256 by default, or refused.
  @Test func longKeysAreHashedOrRefused() async throws {
    let long = String(repeating: "x", count: 1025)
    let hashed = "sha256:c6d8e9905300876046729949cc95c2385221270d389176f7234fe7ac00c4e430"
    let probes = [Probe(key: long), Probe(key: long), Probe(key: hashed), Probe(key: long)]
    let answers = try await sameAnswers(.single(Self.limiter()), probes)
    #expect(answers.map(\.status) == [200, 200, 200, 200])
    #expect(
      answers.map { $0.fields["RateLimit"] ?? "" }.map { $0.prefix(16) } == [
        "\"default\";r=2;t=", "\"default\";r=1;t=", "\"default\";r=2;t=", "\"default\";r=0;t=",
      ])
    let refused = try await sameAnswers(.single(Self.limiter(), refusesLongKeys: true), [Probe(key: long)])
    #expect(refused.first?.status == 400)
    #expect(refused.first?.body == "Bad request: the key is 1025 bytes long; at most 1024\n")
  }

  /// A store whose queries see permits that are gone by the charge: another instance took them
  /// in between.
  struct RacingStore: RateLimitStore {
    func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
      cost == 0 ? .allowed(remaining: 5) : .limited(retryAfter: .seconds(10))
    }
  }

  /// A race between the query and the charge: the policy that loses it denies, and the policies
  /// charged before it keep their charge, as documented; the request never passes.
  @Test func aRaceLostAtTheChargeIsDeniedAndKeepsTheEarlierCharges() async throws {
    func server() -> ProbeServer {
      ProbeServer(policies: [
        ProbePolicy(
          name: "per-client", limiter: KeyedRateLimiter(permits: 5, per: .seconds(3600), clock: TestScheduler()),
          keyField: Probe.clientField),
        ProbePolicy(
          name: "shared", limiter: StoreBackedRateLimiter(permits: 5, per: .seconds(60), store: RacingStore()),
          keyField: Probe.keyField),
      ])
    }
    let answers = try await sameAnswers(
      server(), [Probe(key: "a", client: "c"), Probe(key: nil, client: "c")])
    #expect(answers.map(\.status) == [429, 200])
    #expect(answers[0].fields["RateLimit"] == "\"per-client\";r=4;t=720, \"shared\";r=0;t=10")
    #expect(answers[0].body == "Too many requests (policy \"shared\"): retry after 10 s\n")
    #expect(answers[1].fields["RateLimit"] == "\"per-client\";r=3;t=1440")
  }

  /// A policy whose limiter cannot decide answers 503 before any policy is charged.
  @Test func aFailingPolicyAmongSeveralChargesNone() async throws {
    func server() -> ProbeServer {
      ProbeServer(policies: [
        ProbePolicy(
          name: "per-client", limiter: KeyedRateLimiter(permits: 5, per: .seconds(3600), clock: TestScheduler()),
          keyField: Probe.clientField),
        ProbePolicy(
          name: "shared", limiter: StoreBackedRateLimiter(permits: 5, per: .seconds(60), store: FailingStore()),
          keyField: Probe.keyField),
      ])
    }
    let answers = try await sameAnswers(
      server(), [Probe(key: "a", client: "c"), Probe(key: nil, client: "c")])
    #expect(answers.map(\.status) == [503, 200])
    #expect(answers[1].fields["RateLimit"] == "\"per-client\";r=4;t=720")
  }

  @Test func aLimiterThatCannotDecideGetsTheSame503() async throws {
    let answers = try await sameAnswers(
      .single(StoreBackedRateLimiter(permits: 3, per: .seconds(60), store: FailingStore())), [Probe(key: "a")])
    #expect(answers.first?.status == 503 && answers.first?.fields["Retry-After"] == "1")
  }

  /// A store-backed limiter: every decision is the store's (the table's answers, a cost above
  /// the burst refused before the store is asked), the same on both frameworks.
  @Test func aStoreBackedLimiterAnswersFromItsStore() async throws {
    var stores: [SharedMemoryStore] = []
    func server() -> ProbeServer {
      let store = SharedMemoryStore { _ in RateLimit(permits: 3, per: .seconds(3600)) }
      stores.append(store)
      return .single(StoreBackedRateLimiter(limit: RateLimit(permits: 3, per: .seconds(3600)), store: store))
    }
    let answers = try await sameAnswers(server(), Self.probes)
    #expect(answers.map(\.status) == [200, 200, 200, 429, 400, 400, 200, 200, 200, 200, 429])
    #expect(answers[3].fields["Retry-After"] == "1200")
    #expect(answers[3].body == "Too many requests (policy \"default\"): retry after 1200 s\n")
    // Neither the negative cost nor the cost above the burst reached the store; the request
    // without a key did not either.
    let long = "sha256:" + SHA256.hex(String(repeating: "x", count: 1025))
    for store in stores { #expect(store.keys == ["a", "a", "a", "a", long, "b", "b", "b"]) }
  }

  /// A store-backed limiter with a plan per key: each key's limit goes to the store, and the
  /// fields report it.
  @Test func aStoreBackedPlanReportsEachKeysOwnLimit() async throws {
    let plan: @Sendable (String) -> RateLimit = { key in
      key.hasPrefix("paid-") ? RateLimit(permits: 10, per: .seconds(60)) : RateLimit(permits: 2, per: .seconds(3600))
    }
    let answers = try await sameAnswers(
      .single(StoreBackedRateLimiter(limits: plan, store: SharedMemoryStore(limits: plan))),
      [Probe(key: "paid-1"), Probe(key: "free-1"), Probe(key: "free-1", cost: "3"), Probe(key: "free-1")])
    #expect(answers.map(\.status) == [200, 200, 400, 200])
    #expect(answers[0].fields["RateLimit-Policy"] == "\"default\";q=10;w=60")
    #expect(answers[1].fields["RateLimit-Policy"] == "\"default\";q=2;w=3600")
    #expect(answers[2].body == "Bad request: the cost 3 is above the burst 2\n")
    #expect(answers[3].fields["RateLimit"] == "\"default\";r=0;t=3600")
  }

  /// A policy without a key counts a request against its client's address: in the frameworks'
  /// test modes a request has none, so every one is `ip:unknown`, on both alike.
  @Test func aPolicyWithoutAKeyCountsTheClientsAddress() async throws {
    var stores: [SharedMemoryStore] = []
    func server() -> ProbeServer {
      let store = SharedMemoryStore { _ in RateLimit(permits: 2, per: .seconds(60)) }
      stores.append(store)
      return ProbeServer(policies: [
        ProbePolicy(
          name: "per-address", limiter: StoreBackedRateLimiter(permits: 2, per: .seconds(60), store: store),
          keyField: nil)
      ])
    }
    let answers = try await sameAnswers(server(), [Probe(key: "a"), Probe(key: "b"), Probe(key: nil)])
    #expect(answers.map(\.status) == [200, 200, 429])
    #expect(answers[2].fields["RateLimit"] == "\"per-address\";r=0;t=30")
    for store in stores { #expect(store.keys == ["ip:unknown", "ip:unknown", "ip:unknown"]) }
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
            body: "Too many requests (policy \"api\"): retry after 2 s\n",
            problem: ProblemDetails(
              .quotaExceeded, status: 429, detail: "Too many requests (policy \"api\"): retry after 2 s",
              violatedPolicies: ["api"]))))
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

  /// Window policies: `w` is the window; `t` is the window for a key with permits taken (every
  /// one has left a sliding window by then; a fixed window ends sooner), and `retryAfter` when
  /// limited.
  @Test func windowPoliciesReportTheirWindow() {
    for limit in [
      RateLimit.slidingWindow(permits: 3, per: .seconds(10)), RateLimit.fixedWindow(permits: 3, per: .seconds(10)),
    ] {
      let window = RateLimitFields(limit: limit, policyName: "uploads")
      #expect(window.policyValue == "\"uploads\";q=3;w=10")
      #expect(window.stateValue(remaining: 2) == "\"uploads\";r=2;t=10")
      #expect(window.stateValue(remaining: 3) == "\"uploads\";r=3;t=0")
      #expect(window.stateValue(retryAfter: .milliseconds(3_500)) == "\"uploads\";r=0;t=4")
    }
  }

  /// A fixed window whose end the limiter knows: `t` of a key with permits taken is that end,
  /// never beyond the window.
  @Test func aFixedWindowReportsItsEnd() {
    let limit = RateLimit.fixedWindow(permits: 3, per: .seconds(10))
    let fields = { RateLimitFields(limit: limit, policyName: "uploads", windowEndsIn: $0) }
    #expect(fields(.milliseconds(3_200)).stateValue(remaining: 2) == "\"uploads\";r=2;t=4")
    #expect(fields(.milliseconds(3_200)).stateValue(remaining: 3) == "\"uploads\";r=3;t=0")
    #expect(fields(.seconds(Int64.max)).stateValue(remaining: 1) == "\"uploads\";r=1;t=10")
    #expect(fields(nil).stateValue(remaining: 1) == "\"uploads\";r=1;t=10")
  }

  /// Several policies: one member each, in order, and `Retry-After` from the one that denied.
  @Test func severalPoliciesAreOneListEach() {
    let perIP = RateLimitFields(limit: RateLimit(permits: 100, per: .seconds(60)), policyName: "per-ip")
    let perKey = RateLimitFields(
      limit: RateLimit.fixedWindow(permits: 5_000, per: .seconds(3600)), policyName: "per-key")
    let states: [(RateLimitFields, RateLimitDecision)] = [
      (perIP, .allowed(remaining: 40)), (perKey, .limited(retryAfter: .seconds(1234))),
    ]
    let response = RateLimitFields.tooManyRequests(states: states, deniedBy: 1)
    #expect(
      response.fields == [
        HeaderField("Content-Type", "text/plain; charset=utf-8"),
        HeaderField("RateLimit-Policy", "\"per-ip\";q=100;w=60, \"per-key\";q=5000;w=3600"),
        HeaderField("RateLimit", "\"per-ip\";r=40;t=36, \"per-key\";r=0;t=1234"),
        HeaderField("Retry-After", "1234"),
      ])
    #expect(response.body == "Too many requests (policy \"per-key\"): retry after 1234 s\n")
  }

  /// Members an inner middleware wrote stay, after the outer one's.
  @Test func mergingKeepsTheInnerMembers() {
    let ours = [HeaderField("RateLimit-Policy", "\"outer\";q=1;w=1"), HeaderField("RateLimit", "\"outer\";r=0;t=1")]
    let existing = ["RateLimit-Policy": "\"inner\";q=2;w=2", "RateLimit": "\"inner\";r=1;t=1"]
    #expect(
      RateLimitFields.merged(ours) { existing[$0] } == [
        HeaderField("RateLimit-Policy", "\"outer\";q=1;w=1, \"inner\";q=2;w=2"),
        HeaderField("RateLimit", "\"outer\";r=0;t=1, \"inner\";r=1;t=1"),
      ])
    #expect(RateLimitFields.merged(ours) { _ in nil } == ours)
  }

  @Test func namesAreQuotedAsStructuredFieldsStrings() {
    let fields = RateLimitFields(limit: RateLimit(permits: 1, per: .seconds(1)), policyName: #"a"b\c"#)
    #expect(fields.policyValue == #""a\"b\\c";q=1;w=1"#)
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
