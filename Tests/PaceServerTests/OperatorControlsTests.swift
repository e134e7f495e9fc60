#if PostgreSQL && Hummingbird && Vapor
import InMemoryLogging
import Logging
import Metrics
import MetricsTestKit
import Pace
import PaceHTTPServer
import Testing

/// A wall clock a test moves itself, for the blocks and the middleware alike.
final class TestUnixTime: Sendable {
  private let time: LockedState<UnixTime>

  init(_ start: UnixTime) {
    time = LockedState(start)
  }

  var now: UnixTime { time.withLock { $0 } }

  func advance(by duration: Duration) {
    time.withLock { $0 = $0 + duration }
  }
}

/// A server the probes run through with the operator's controls: exemptions, blocks, the
/// near-limit hook; made afresh for each framework.
struct ControlledServer: Sendable {
  var policies: [ProbePolicy]
  /// Near-limit thresholds by policy name; the default for the others.
  var thresholds: [String: Double] = [:]
  var clientAddress: ClientAddress = .peer
  var exemptions: RateLimitExemptions?
  var blocks: RateLimitBlocks<String>?
  /// The wall clock of the blocks; the system's when nil (through the public initialiser).
  var unixTime: TestUnixTime?
  /// The limiters' clock, for probes that move it.
  var scheduler: TestScheduler?
  let signals = LockedState<[NearLimitSignal]>([])
  let logs = InMemoryLogHandler()
  let metrics = TestMetrics()
  /// Over real sockets on loopback (the client's peer is 127.0.0.1), or in the frameworks' test
  /// modes (no peer).
  var live = false

  var logger: Logger { Logger(label: "test", factory: { [logs] _ in logs }) }

  func counter(_ policy: String, _ outcome: String) -> Int64 {
    (try? metrics.expectCounter(
      "pace_http_rate_limit_responses_total", [("policy", policy), ("outcome", outcome)]))?.totalValue ?? 0
  }

  func nearLimitCount(_ policy: String) -> Int64 {
    (try? metrics.expectCounter("pace_http_rate_limit_near_limit_total", [("policy", policy)]))?.totalValue ?? 0
  }

  var blockLogLines: Int {
    logs.entries.filter { $0.level == .info && $0.message.description.contains("blocked key was refused") }.count
  }

  /// The middleware's state: through the public initialiser, or with the test's wall clock.
  func state<Input>(_ policies: [RateLimitPolicy<Input>]) -> RateLimitMiddlewareState<Input> {
    let policies = policies.map { policy in
      guard let threshold = thresholds[policy.name] else { return policy }
      return (try? policy.signallingNearLimit(at: threshold)) ?? policy
    }
    let signals = self.signals
    let hook: @Sendable (NearLimitSignal) -> Void = { signal in signals.withLock { $0.append(signal) } }
    guard let unixTime else {
      // The public initialiser, whose wiring is under test too.
      return PublicInitialiser<Input>(
        policies: policies, logger: logger, metricsFactory: metrics, clientAddress: clientAddress,
        exemptions: exemptions, blocks: blocks, onNearLimit: hook
      )._rateLimitState
    }
    return RateLimitMiddlewareState(
      policies: policies, longKeys: .hash, logger: logger, metricsFactory: metrics, clientAddress: clientAddress,
      controls: RateLimitControls(
        exemptions: exemptions, blocks: blocks, onNearLimit: hook, unixTime: { unixTime.now }))
  }
}

/// What a framework's middleware is made of by `RateLimitingMiddleware`'s public initialisers.
struct PublicInitialiser<Input>: RateLimitingMiddleware {
  let _rateLimitState: RateLimitMiddlewareState<Input>

  init(_rateLimitState: RateLimitMiddlewareState<Input>) {
    self._rateLimitState = _rateLimitState
  }
}

/// One request, and what the test does once it is answered (moves a clock, lifts a block).
struct ControlledProbe: Sendable {
  var probe: Probe
  /// `X-Forwarded-For`, read only from a trusted proxy.
  var forwardedFor: String?
  var after: (@Sendable (ControlledServer) -> Void)?

  init(_ probe: Probe, forwardedFor: String? = nil, after: (@Sendable (ControlledServer) -> Void)? = nil) {
    self.probe = probe
    self.forwardedFor = forwardedFor
    self.after = after
  }

  var headers: [(String, String)] { probe.headers + (forwardedFor.map { [("X-Forwarded-For", $0)] } ?? []) }
}

@Suite("Exemptions, blocks and the near-limit signal, alike on Hummingbird and Vapor", .timeLimit(.minutes(2)))
struct OperatorControlsTests {
  /// Runs `probes` through both frameworks, each on a server of its own, expects the same answers,
  /// and returns them with both servers.
  func sameAnswers(
    _ server: () -> ControlledServer, _ probes: [ControlledProbe]
  ) async throws -> (answers: [Answer], servers: [ControlledServer]) {
    let servers = [server(), server()]
    let hummingbird = try await hummingbirdAnswers(servers[0], probes)
    let vapor = try await vaporAnswers(servers[1], probes)
    #expect(hummingbird.count == probes.count && vapor.count == probes.count)
    for (probe, (one, other)) in zip(probes, zip(hummingbird, vapor)) {
      #expect(one == other, "\(probe.probe)")
    }
    return (vapor, servers)
  }

  static let hour = RateLimit(permits: 1, per: .seconds(3600))

  /// Exempt keys pass every policy with no decision (the store is never asked) and no fields; a key
  /// exempt in one policy passes that one alone; an exemption changed at run time applies to the
  /// next request.
  @Test func exemptKeysPassWithoutADecision() async throws {
    let stores = LockedState<[SharedMemoryStore]>([])
    func server() -> ControlledServer {
      let perClient = SharedMemoryStore { _ in Self.hour }
      let perKey = SharedMemoryStore { _ in Self.hour }
      stores.withLock { $0 += [perClient, perKey] }
      let exemptions = RateLimitExemptions(keys: ["partner"])
      exemptions.exempt(key: "health", inPolicy: "per-key")
      return ControlledServer(
        policies: [
          ProbePolicy(
            name: "per-client", limiter: StoreBackedRateLimiter(limit: Self.hour, store: perClient),
            keyField: Probe.clientField),
          ProbePolicy(
            name: "per-key", limiter: StoreBackedRateLimiter(limit: Self.hour, store: perKey),
            keyField: Probe.keyField),
        ], exemptions: exemptions)
    }
    let (answers, servers) = try await sameAnswers(
      server,
      [
        ControlledProbe(Probe(key: "partner", client: "c")), ControlledProbe(Probe(key: "partner", client: "c")),
        // The partner's key exempts the whole request, whatever its client.
        ControlledProbe(Probe(key: "a", client: "partner")),
        ControlledProbe(Probe(key: "health", client: "d")), ControlledProbe(Probe(key: "health", client: "d")),
        ControlledProbe(Probe(key: "health", client: "e")),
        ControlledProbe(Probe(key: "partner", client: "f"), after: { $0.exemptions?.removeExemption(key: "partner") }),
        ControlledProbe(Probe(key: "partner", client: "g")), ControlledProbe(Probe(key: "partner", client: "h")),
      ])
    #expect(answers.map(\.status) == [200, 200, 200, 200, 429, 200, 200, 200, 429])
    #expect(answers[0].fields.isEmpty && answers[1].fields.isEmpty && answers[2].fields.isEmpty)
    // Exempt in per-key only: per-client decides and reports alone.
    #expect(answers[3].fields["RateLimit-Policy"] == "\"per-client\";q=1;w=3600")
    #expect(answers[3].fields["RateLimit"] == "\"per-client\";r=0;t=3600")
    #expect(answers[4].body == "Too many requests (policy \"per-client\"): retry after 3600 s\n")
    #expect(answers[5].fields["RateLimit"] == "\"per-client\";r=0;t=3600")
    #expect(answers[6].fields.isEmpty)
    // The exemption lifted: the partner is limited as anyone.
    #expect(answers[7].fields["RateLimit"] == "\"per-client\";r=0;t=3600, \"per-key\";r=0;t=3600")
    #expect(answers[8].body == "Too many requests (policy \"per-key\"): retry after 3600 s\n")
    // No exempt request reached a store: per-client was asked for d, d, e alone, then for g (its
    // question and its charge) and h (its question); per-key for the partner once exempt no more.
    let all = stores.withLock { $0 }
    for index in [0, 2] { #expect(all[index].keys == ["d", "d", "e", "g", "g", "h"]) }
    for index in [1, 3] { #expect(all[index].keys == ["partner", "partner", "partner"]) }
    for server in servers {
      #expect(server.counter("per-client", "exempted") == 4)
      #expect(server.counter("per-key", "exempted") == 7)
    }
  }
  static let start = UnixTime(nanosecondsSinceEpoch: 1_800_000_000_000_000_000)  // 2027-01-15T08:00:00Z

  /// A blocked key is refused with a 429 before any decision (its store is never asked): its
  /// policy's members with `r=0` and `t` the seconds until the block ends, `Retry-After` the same,
  /// and the end in the body; logged once per block, counted per request. A block wins over an
  /// exemption; the client address's key (`ip:unknown` in the test modes) can be blocked too.
  @Test func aBlockedKeyIsRefusedUntilItsBlockEnds() async throws {
    let stores = LockedState<[SharedMemoryStore]>([])
    func server() -> ControlledServer {
      let store = SharedMemoryStore { _ in RateLimit(permits: 5, per: .seconds(3600)) }
      stores.withLock { $0.append(store) }
      let clock = TestUnixTime(Self.start)
      let blocks = RateLimitBlocks<String>(unixTime: { clock.now })
      blocks.block("abuser", until: Self.start + .milliseconds(3_599_200))
      blocks.block("partner", for: .seconds(7200))
      return ControlledServer(
        policies: [
          ProbePolicy(
            name: "per-key",
            limiter: StoreBackedRateLimiter(limit: RateLimit(permits: 5, per: .seconds(3600)), store: store),
            keyField: Probe.keyField)
        ], exemptions: RateLimitExemptions(keys: ["partner"]), blocks: blocks, unixTime: clock)
    }
    let (answers, servers) = try await sameAnswers(
      server,
      [
        ControlledProbe(Probe(key: "abuser")),
        ControlledProbe(Probe(key: "abuser"), after: { $0.unixTime?.advance(by: .seconds(1800)) }),
        ControlledProbe(Probe(key: "abuser")),
        ControlledProbe(Probe(key: "partner"), after: { $0.unixTime?.advance(by: .milliseconds(1_799_200)) }),
        // The block ends at that instant exactly: the key is free, and its store is asked.
        ControlledProbe(Probe(key: "abuser"), after: { $0.blocks?.block("ip:unknown", for: .seconds(10)) }),
        // The client's address is blocked, whatever the policies count.
        ControlledProbe(Probe(key: "someone"), after: { $0.blocks?.unblock("ip:unknown") }),
        ControlledProbe(Probe(key: "someone")),
      ])
    #expect(answers.map(\.status) == [429, 429, 429, 429, 200, 429, 200])
    #expect(answers[0].fields["RateLimit-Policy"] == "\"per-key\";q=5;w=3600")
    #expect(answers[0].fields["RateLimit"] == "\"per-key\";r=0;t=3600")
    #expect(answers[0].fields["Retry-After"] == "3600")
    #expect(answers[0].body == "Blocked (policy \"per-key\") until 2027-01-15T09:00:00Z: retry after 3600 s\n")
    #expect(answers[2].fields["Retry-After"] == "1800")
    #expect(answers[2].fields["RateLimit"] == "\"per-key\";r=0;t=1800")
    // A block wins over the partner's exemption.
    #expect(answers[3].body == "Blocked (policy \"per-key\") until 2027-01-15T10:00:00Z: retry after 5400 s\n")
    #expect(answers[4].fields["RateLimit"] == "\"per-key\";r=4;t=720")
    #expect(answers[5].fields["Retry-After"] == "10")
    #expect(answers[5].body == "Blocked (policy \"per-key\") until 2027-01-15T09:00:10Z: retry after 10 s\n")
    for store in stores.withLock({ $0 }) { #expect(store.keys == ["abuser", "someone"]) }
    for server in servers {
      #expect(server.counter("per-key", "blocked") == 5)
      #expect(server.counter("per-key", "exempted") == 0)
      // Three blocks met: the abuser's (three requests), the partner's, the address's.
      #expect(server.blockLogLines == 3)
    }
  }

  /// The near-limit signal: once per key per window when a decision takes the key past its
  /// policy's threshold (80 % by default), counted per policy, never once per request, even for a
  /// bucket that hovers around the threshold; the hook gets the policy, the key (a long key's
  /// digest) and the share used.
  @Test func aKeyNearItsLimitIsSignalledOncePerWindow() async throws {
    func server() -> ControlledServer {
      let scheduler = TestScheduler()
      var server = ControlledServer(
        policies: [
          ProbePolicy(
            name: "window",
            limiter: KeyedRateLimiter(limit: .fixedWindow(permits: 10, per: .seconds(60)), clock: scheduler),
            keyField: Probe.keyField),
          ProbePolicy(
            name: "bucket", limiter: KeyedRateLimiter(permits: 10, per: .seconds(10), clock: scheduler),
            keyField: Probe.clientField),
        ])
      server.thresholds = ["bucket": 0.7]
      server.scheduler = scheduler
      return server
    }
    let long = String(repeating: "k", count: 1025)
    var probes: [ControlledProbe] = []
    // Window: 10 requests of key a, signalled at the 8th; then the next window, signalled again.
    probes += (1...10).map { _ in ControlledProbe(Probe(key: "a")) }
    probes.append(ControlledProbe(Probe(key: nil), after: { $0.scheduler?.advance(by: .seconds(60)) }))
    probes += (1...8).map { _ in ControlledProbe(Probe(key: "a")) }
    // A cost past the threshold at once, on a long key.
    probes.append(ControlledProbe(Probe(key: long, cost: "9")))
    // Bucket (70 %, a permit a second): 7 at once signals; then 2 every 2 s crosses from 5 used to
    // 7 at each request, 20 times: no more signals.
    let twoSeconds: @Sendable (ControlledServer) -> Void = { $0.scheduler?.advance(by: .seconds(2)) }
    probes.append(ControlledProbe(Probe(key: nil, cost: "7", client: "c"), after: twoSeconds))
    probes += (1...20).map { _ in ControlledProbe(Probe(key: nil, cost: "2", client: "c"), after: twoSeconds) }
    // Full again after 10 s idle: the key is seen whole, and signalled at its next crossing.
    probes.append(ControlledProbe(Probe(key: nil), after: { $0.scheduler?.advance(by: .seconds(10)) }))
    probes.append(ControlledProbe(Probe(key: nil, client: "c")))
    probes.append(ControlledProbe(Probe(key: nil, cost: "6", client: "c")))
    let (answers, servers) = try await sameAnswers(server, probes)
    #expect(answers.allSatisfy { $0.status == 200 }, "\(answers.map(\.status))")
    for server in servers {
      let signals = server.signals.withLock { $0 }
      #expect(
        signals.map { "\($0.policy) \($0.key.prefix(8)) \($0.shareUsed) \($0.remaining)" } == [
          "window a 0.8 2", "window a 0.8 2", "window sha256:0 0.9 1", "bucket c 0.7 3", "bucket c 0.7 3",
        ])
      #expect(signals.count == 5 && signals[2].key == "sha256:" + SHA256.hex(long))
      #expect(server.nearLimitCount("window") == 3)
      #expect(server.nearLimitCount("bucket") == 2)
    }
  }

  /// Over real sockets: a client address in an exempt range passes without a decision; a range
  /// changed at run time applies to the next request; an address's key can be blocked.
  @Test func exemptRangesAndBlockedAddressesOverTheNetwork() async throws {
    func server() -> ControlledServer {
      var server = ControlledServer(
        policies: [
          ProbePolicy(
            name: "per-address", limiter: KeyedRateLimiter(permits: 1, per: .seconds(3600), clock: TestScheduler()),
            keyField: nil)
        ])
      server.clientAddress = ClientAddress(trustedProxies: ["127.0.0.1", "::1"])
      server.exemptions = try? RateLimitExemptions(ranges: ["198.51.100.0/24", "2001:db8::/32"])
      // A wall clock of the test's: both frameworks, run one after the other in real time,
      // answer the same `Retry-After`.
      let clock = TestUnixTime(Self.start)
      server.unixTime = clock
      server.blocks = RateLimitBlocks(unixTime: { clock.now })
      server.blocks?.block("ip:203.0.113.66", for: .seconds(600))
      server.live = true
      return server
    }
    let (answers, servers) = try await sameAnswers(
      server,
      [
        ControlledProbe(Probe(key: nil), forwardedFor: "198.51.100.7"),
        ControlledProbe(Probe(key: nil), forwardedFor: "198.51.100.7"),
        ControlledProbe(Probe(key: nil), forwardedFor: "2001:db8:1::1"),
        ControlledProbe(Probe(key: nil), forwardedFor: "203.0.113.9"),
        ControlledProbe(Probe(key: nil), forwardedFor: "203.0.113.9"),
        ControlledProbe(
          Probe(key: nil), forwardedFor: "203.0.113.66",
          after: { _ = try? $0.exemptions?.removeExemption(range: "198.51.100.99/24") }),
        ControlledProbe(Probe(key: nil), forwardedFor: "198.51.100.7"),
        ControlledProbe(Probe(key: nil), forwardedFor: "198.51.100.7"),
      ])
    #expect(answers.map(\.status) == [200, 200, 200, 200, 429, 429, 200, 429])
    #expect(answers[0].fields.isEmpty && answers[2].fields.isEmpty)
    #expect(answers[3].fields["RateLimit"] == "\"per-address\";r=0;t=3600")
    #expect(answers[5].fields["RateLimit"] == "\"per-address\";r=0;t=600")
    #expect(answers[5].body.hasPrefix("Blocked (policy \"per-address\") until "))
    for server in servers {
      #expect(server.counter("per-address", "exempted") == 3)
      #expect(server.counter("per-address", "blocked") == 1)
    }
  }
}

/// The exemptions, the thresholds and the dates, directly.
@Suite("RateLimitExemptions, NearLimitThreshold and the blocks' dates")
struct OperatorControlsSettingsTests {
  @Test func aRangeThatDoesNotParseIsAClearErrorAndChangesNothing() throws {
    let exemptions = try RateLimitExemptions(keys: ["a"], ranges: ["10.0.0.0/8"])
    #expect(throws: RateLimitMiddlewareError.self) { try exemptions.exempt(range: "10.0.0/8") }
    do {
      try exemptions.exempt(range: "10.0.0/8")
    } catch {
      #expect(
        error.description
          == "RateLimitExemptions: range must be an IP address or a CIDR range, such as 10.0.0.0/8 or "
          + "2001:db8::/32 (got \"10.0.0/8\")")
    }
    #expect(throws: RateLimitMiddlewareError.self) { try RateLimitExemptions(ranges: ["fe80::/129"]) }
    #expect(throws: RateLimitMiddlewareError.self) {
      try exemptions.replace(keys: [], ranges: ["192.0.2.0/24", "nonsense"])
    }
    #expect(exemptions.keys == ["a"] && exemptions.ranges == ["10.0.0.0/8"])
    // A range is one range however it is written.
    try exemptions.exempt(range: "10.1.2.3/8")
    try exemptions.exempt(range: "::ffff:192.0.2.1")
    #expect(exemptions.ranges == ["10.0.0.0/8", "192.0.2.1"])
    #expect(try exemptions.removeExemption(range: "10.9.9.9/8"))
    #expect(try !exemptions.removeExemption(range: "10.0.0.0/8"))
    exemptions.exempt(key: "b", inPolicy: "p")
    #expect(exemptions.keys(inPolicy: "p") == ["b"])
    #expect(exemptions.removeExemption(key: "b", inPolicy: "p") && exemptions.keys(inPolicy: "p").isEmpty)
    let snapshot = exemptions.snapshot
    #expect(snapshot.exempts(address: IPAddress("192.0.2.1")!) && !snapshot.exempts(address: IPAddress("10.0.0.1")!))
  }

  @Test func aThresholdIsAShareHeldExactly() throws {
    let seven = try NearLimitThreshold(0.7)
    #expect(!seven.isReached(6, of: 10) && seven.isReached(7, of: 10))
    #expect(try NearLimitThreshold(1).isReached(Int.max, of: Int.max))
    #expect(!NearLimitThreshold.default.isReached(0, of: 1))
    for bad in [0, -0.5, 1.000_001, .nan, .infinity, 1e-9] {
      #expect(throws: RateLimitMiddlewareError.self) { try NearLimitThreshold(bad) }
    }
    let policy = PaceHTTPServer.RateLimitPolicy<Int>("p", limit: RateLimit(permits: 1, per: .seconds(1)))
    #expect(policy.nearLimitThreshold == 0.8)
    #expect(try policy.signallingNearLimit(at: 0.95).nearLimitThreshold == 0.95)
    #expect(throws: RateLimitMiddlewareError.self) { try policy.signallingNearLimit(at: 2) }
  }

  /// The memory of signalled keys is bounded: past it, the oldest are forgotten and may be
  /// signalled again at their next crossing.
  @Test func theSignalledKeysAreBounded() {
    let tracker = NearLimitTracker(
      policy: "p", threshold: .default, metricsFactory: TestMetrics(), maximumRememberedKeys: 4)
    let limit = RateLimit(permits: 10, per: .seconds(60))
    func crossing(_ key: String) -> Bool { tracker.signal(key: key, limit: limit, cost: 1, remaining: 2) != nil }
    #expect(crossing("a") && !crossing("a"))
    #expect(crossing("b") && crossing("c") && crossing("d"))
    #expect(!crossing("c") && !crossing("d"))
    #expect(crossing("a"), "forgotten with the oldest generation")
    // Seen whole again: signalled at its next crossing.
    #expect(tracker.signal(key: "d", limit: limit, cost: 1, remaining: 9) == nil)
    #expect(crossing("d"))
  }

  @Test func blocksEndsAreWrittenInUTC() {
    let seconds: [(Int64, String)] = [
      (1_800_000_000, "2027-01-15T08:00:00Z"), (0, "1970-01-01T00:00:00Z"), (-1, "1969-12-31T23:59:59Z"),
      (951_782_400, "2000-02-29T00:00:00Z"), (4_107_542_400, "2100-03-01T00:00:00Z"),
    ]
    for (second, text) in seconds {
      #expect(RateLimitGate.rfc3339(UnixTime(nanosecondsSinceEpoch: second * 1_000_000_000)) == text)
    }
    // Rounded up to the second: a client that comes back then is let through.
    #expect(RateLimitGate.rfc3339(UnixTime(nanosecondsSinceEpoch: 1)) == "1970-01-01T00:00:01Z")
    #expect(RateLimitGate.rfc3339(UnixTime(nanosecondsSinceEpoch: .max)) == "2262-04-11T23:47:17Z")
  }
}
#endif
