#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Pace
@testable import PacePostgres
import PaceTestSupport
import PostgresNIO
import Testing

/// Each key's share of its limit while the database is away, driven directly: exact decisions at
/// exact instants (microseconds of the Unix epoch), no clock.
@Suite("FleetShareState", .offThePool)
struct FleetShareStateTests {
  /// Some instant well after the epoch, at the start of a 10 s window.
  let t0: Int64 = 1_800_000_000_000_000
  let ms: Int64 = 1000
  let s: Int64 = 1_000_000

  @Test func theShareDividesBurstsAndWindowsRoundingDownToAtLeastOne() throws {
    let bucket = try ShareLimit(RateLimit(permits: 30, per: .seconds(1), burst: 30), instances: 3)
    #expect(bucket.permits == 30 && bucket.interval == 3 * s && bucket.burst == 10)  // the exact rate: 10/s
    #expect(try ShareLimit(RateLimit(permits: 30, per: .seconds(1), burst: 2), instances: 3).burst == 1)
    #expect(try ShareLimit(RateLimit(permits: 30, per: .seconds(1), burst: 31), instances: 3).burst == 10)
    #expect(try ShareLimit(.slidingWindow(permits: 10, per: .seconds(1)), instances: 3).permits == 3)
    #expect(try ShareLimit(.fixedWindow(permits: 2, per: .seconds(1)), instances: 3).permits == 1)
    #expect(try ShareLimit(.fixedWindow(permits: 2, per: .seconds(1)), instances: 1).permits == 2)
    // Hostile limits: an error, never a trap.
    #expect(throws: PacePostgresError.self) {
      try ShareLimit(RateLimit(permits: 1, per: .seconds(Int64.max / 2_000_000)), instances: 1_000_000)
    }
    let huge = try ShareLimit(RateLimit(permits: .max, per: .seconds(1), burst: .max), instances: 7)
    var state = FleetShareState(capacity: 10)
    #expect(state.decide(key: "k", cost: .max / 7, share: huge, limitInterval: .seconds(1), now: t0).isAllowed)
  }

  @Test func aTokenBucketShareGrantsItsBurstThenItsRate() throws {
    let limit = RateLimit(permits: 30, per: .seconds(1))
    let share = try ShareLimit(limit, instances: 3)
    var state = FleetShareState(capacity: 10)
    func decide(_ cost: Int, at now: Int64) -> RateLimitDecision {
      state.decide(key: "hot", cost: cost, share: share, limitInterval: limit.interval, now: now)
    }
    #expect(decide(0, at: t0) == .allowed(remaining: 10))  // a fresh share is full; cost 0 takes nothing
    for remaining in (0..<10).reversed() { #expect(decide(1, at: t0) == .allowed(remaining: remaining)) }
    #expect(decide(1, at: t0) == .limited(retryAfter: .milliseconds(100)))  // 10 per second
    #expect(decide(0, at: t0) == .limited(retryAfter: .milliseconds(100)))  // cost 0 answers as cost 1
    #expect(decide(1, at: t0 + 99 * ms) == .limited(retryAfter: .milliseconds(1)))
    #expect(decide(1, at: t0 + 100 * ms) == .allowed(remaining: 0))
    #expect(decide(2, at: t0 + 300 * ms) == .allowed(remaining: 0))
    // Other keys and other limits have shares of their own.
    #expect(decide(1, at: t0 + 300 * ms) == .limited(retryAfter: .milliseconds(100)))
    #expect(
      state.decide(key: "other", cost: 1, share: share, limitInterval: limit.interval, now: t0)
        == .allowed(remaining: 9))
    let cheaper = try ShareLimit(RateLimit(permits: 3, per: .seconds(1)), instances: 3)
    #expect(
      state.decide(key: "hot", cost: 1, share: cheaper, limitInterval: .seconds(1), now: t0) == .allowed(remaining: 0))
  }

  @Test func aCostAboveTheShareButNotTheLimitIsDeniedForTheLimitsInterval() throws {
    let limit = RateLimit(permits: 5, per: .seconds(2))
    let share = try ShareLimit(limit, instances: 3)  // a burst of 1
    var state = FleetShareState(capacity: 10)
    #expect(
      state.decide(key: "k", cost: 2, share: share, limitInterval: limit.interval, now: t0)
        == .limited(retryAfter: .seconds(2)))
    #expect(
      state.decide(key: "k", cost: 1, share: share, limitInterval: limit.interval, now: t0) == .allowed(remaining: 0))
  }

  @Test func aSlidingWindowShareCountsEachGrantForAWindow() throws {
    let limit = RateLimit.slidingWindow(permits: 6, per: .seconds(10))
    let share = try ShareLimit(limit, instances: 3)  // 2 in any 10 s
    var state = FleetShareState(capacity: 10)
    func decide(_ cost: Int, at now: Int64) -> RateLimitDecision {
      state.decide(key: "k", cost: cost, share: share, limitInterval: limit.interval, now: now)
    }
    #expect(decide(1, at: t0) == .allowed(remaining: 1))
    #expect(decide(1, at: t0 + 4 * s) == .allowed(remaining: 0))
    #expect(decide(1, at: t0 + 5 * s) == .limited(retryAfter: .seconds(5)))  // the first grant expires at 10 s
    #expect(decide(0, at: t0 + 5 * s) == .limited(retryAfter: .seconds(5)))
    #expect(decide(2, at: t0 + 10 * s) == .limited(retryAfter: .seconds(4)))  // the second still counts
    #expect(decide(0, at: t0 + 10 * s) == .allowed(remaining: 1))
    #expect(decide(1, at: t0 + 10 * s) == .allowed(remaining: 0))
    #expect(decide(2, at: t0 + 20 * s) == .allowed(remaining: 0))
  }

  /// Many grants expiring at once: dropped in bulk, and the window still counts the live ones.
  @Test func aSlidingWindowShareDropsExpiredGrantsInBulk() throws {
    let limit = RateLimit.slidingWindow(permits: 200, per: .seconds(10))
    let share = try ShareLimit(limit, instances: 1)
    var state = FleetShareState(capacity: 10)
    func decide(_ cost: Int, at now: Int64) -> RateLimitDecision {
      state.decide(key: "k", cost: cost, share: share, limitInterval: limit.interval, now: now)
    }
    for index in 0..<100 { #expect(decide(1, at: t0 + Int64(index) * ms).isAllowed) }
    for index in 0..<100 { #expect(decide(1, at: t0 + 5 * s + Int64(index) * ms).isAllowed) }
    #expect(decide(1, at: t0 + 5 * s + 100 * ms) == .limited(retryAfter: .milliseconds(4900)))
    #expect(decide(0, at: t0 + 10 * s + 99 * ms) == .allowed(remaining: 100))  // the first 100 expired
    #expect(decide(100, at: t0 + 10 * s + 99 * ms) == .allowed(remaining: 0))
    #expect(decide(1, at: t0 + 10 * s + 99 * ms) == .limited(retryAfter: .seconds(5) - .milliseconds(99)))
    #expect(decide(0, at: t0 + 20 * s + 99 * ms) == .allowed(remaining: 200))
  }

  @Test func aFixedWindowShareStartsAgainAtEachWindowOfTheEpoch() throws {
    let limit = RateLimit.fixedWindow(permits: 6, per: .seconds(10))
    let share = try ShareLimit(limit, instances: 2)  // 3 per window
    var state = FleetShareState(capacity: 10)
    func decide(_ cost: Int, at now: Int64) -> RateLimitDecision {
      state.decide(key: "k", cost: cost, share: share, limitInterval: limit.interval, now: now)
    }
    let late = t0 + 7 * s  // 7 s into a window: t0 is a multiple of 10 s
    #expect(decide(2, at: late) == .allowed(remaining: 1))
    #expect(decide(1, at: late) == .allowed(remaining: 0))
    #expect(decide(1, at: late + 1 * s) == .limited(retryAfter: .seconds(2)))
    #expect(decide(0, at: t0 + 10 * s) == .allowed(remaining: 3))
    #expect(decide(3, at: t0 + 10 * s) == .allowed(remaining: 0))
  }

  @Test func idleTalliesAreForgottenAndAFullTableStartsAgain() throws {
    let share = try ShareLimit(RateLimit(permits: 10, per: .seconds(1)), instances: 1)
    var state = FleetShareState(capacity: 4)
    for key in 0..<4 { _ = state.decide(key: "k\(key)", cost: 1, share: share, limitInterval: .seconds(1), now: t0) }
    #expect(state.tallies.count == 4)
    // A key whose bucket is full again decides as a fresh one: it is forgotten.
    _ = state.decide(key: "k0", cost: 0, share: share, limitInterval: .seconds(1), now: t0 + s)
    #expect(state.tallies.count == 3)
    _ = state.decide(key: "k4", cost: 1, share: share, limitInterval: .seconds(1), now: t0)
    _ = state.decide(key: "k5", cost: 1, share: share, limitInterval: .seconds(1), now: t0)
    #expect(state.tallies.count == 1)  // full, none idle: all forgotten, then k5
  }

  /// Limits whose shares' arithmetic is whole microseconds for every fleet of 1 to 5 (a token
  /// bucket's `interval × n / permits`, a window's length), where the shares' microseconds and the
  /// reference model's nanoseconds compute the same integers.
  static let differentialLimits: [RateLimit] = [
    RateLimit(permits: 4, per: .seconds(2)),
    RateLimit(permits: 10, per: .seconds(1), burst: 7),
    RateLimit(permits: 3, per: .milliseconds(300), burst: 9),
    .slidingWindow(permits: 12, per: .seconds(1)),
    .slidingWindow(permits: 5, per: .milliseconds(700)),
    .fixedWindow(permits: 8, per: .seconds(1)),
    .fixedWindow(permits: 2, per: .milliseconds(250)),
  ]

  /// The share the article states for one of `n` instances: a token bucket of `r` per `T` with a
  /// burst of `b` is `r` per `n × T` with a burst of `max(1, ⌊b / n⌋)`; a window of `N` per `T`
  /// is `max(1, ⌊N / n⌋)` per `T`, aligned as the limit's.
  static func statedShare(of limit: RateLimit, among n: Int) -> RateLimit {
    switch limit.algorithm {
    case .tokenBucket: RateLimit(permits: limit.permits, per: limit.interval * n, burst: max(1, limit.burst / n))
    case .slidingWindow: .slidingWindow(permits: max(1, limit.permits / n), per: limit.interval)
    case .fixedWindow: .fixedWindow(permits: max(1, limit.permits / n), per: limit.interval)
    }
  }

  /// The fleet share's arithmetic (``ShareLimit`` and ``FleetShareState``, the fourth copy of
  /// each algorithm's arithmetic, beside memory's, the SQL's and the reference model's) against
  /// the reference model, on seeded random timelines: `n` instances (1 to 5), each deciding its
  /// own requests for a few keys, each key with its own limit, at random instants with random
  /// costs from 0 to the limit's burst. Every decision of every instance is the reference model's
  /// decision of the stated share (``statedShare(of:among:)``) of that key on that instance,
  /// exactly: `remaining` and `retryAfter` to the microsecond. A cost above the share's burst but
  /// not the limit's is denied for the limit's interval and takes nothing.
  @Test(arguments: [1, 2, 3] as [UInt64])
  func eachInstancesShareDecidesAsTheReferenceModelOfItsStatedShare(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed)
    // Allowed, limited and over-the-share answers, by algorithm: the timelines must reach them all.
    var seen: [RateLimit.Algorithm: [String: Int]] = [:]
    for n in 1...5 {
      let keys = (0..<Self.differentialLimits.count).map { "key-\($0)" }
      let limitOf = Dictionary(uniqueKeysWithValues: zip(keys, Self.differentialLimits.shuffled(using: &random)))
      var instances = (0..<n).map { _ in FleetShareState(capacity: 1000) }
      var models: [Int: [String: RateLimitReferenceModel]] = [:]
      var now = t0 + Int64.random(in: 0..<1_000_000, using: &random)
      for step in 0..<fuzzRuns(3000) {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3: break  // at the same instant
        case 3..<5: now += Int64.random(in: 1..<1000, using: &random)
        case 5..<9: now += Int64.random(in: 1000..<300_000, using: &random)
        default: now += Int64.random(in: 300_000..<(2_000_000 * Int64(n)), using: &random)
        }
        let instance = Int.random(in: 0..<n, using: &random)
        let key = keys.randomElement(using: &random)!
        let limit = limitOf[key]!
        let cost = Int.random(in: 0...limit.burst, using: &random)
        let share = try ShareLimit(limit, instances: n)
        let actual = instances[instance].decide(
          key: key, cost: cost, share: share, limitInterval: limit.interval, now: now)
        let stated = Self.statedShare(of: limit, among: n)
        let expected: RateLimitDecision
        if cost > stated.burst {
          expected = .limited(retryAfter: limit.interval)
          seen[limit.algorithm, default: [:]]["above the share", default: 0] += 1
        } else {
          var model = models[instance]?[key] ?? RateLimitReferenceModel(limit: stated)
          expected = model.tryAcquire(cost: cost, at: PaceInstant(nanoseconds: now * 1000))
          models[instance, default: [:]][key] = model
          seen[limit.algorithm, default: [:]][expected.isAllowed ? "allowed" : "limited", default: 0] += 1
        }
        #expect(
          actual == expected,
          "seed \(seed), \(n) instances, step \(step): instance \(instance), \(key) (\(limit), share \(stated)) cost \(cost) at \(now)"
        )
        if actual != expected { return }
      }
    }
    for algorithm in [RateLimit.Algorithm.tokenBucket, .slidingWindow, .fixedWindow] {
      for answer in ["allowed", "limited", "above the share"] {
        #expect(seen[algorithm, default: [:]][answer, default: 0] >= 20, "\(algorithm) \(answer): \(seen)")
      }
    }
  }

  /// Three instances' shares on a seeded random timeline: in every span from the start, the fleet
  /// grants at most `n × ⌊b / n⌋ + r × span / T`, the bound the article states.
  @Test func threeSharesKeepTheFleetsTokenBucketBound() throws {
    let limit = RateLimit(permits: 30, per: .seconds(1), burst: 30)
    let share = try ShareLimit(limit, instances: 3)
    var states = (0..<3).map { _ in FleetShareState(capacity: 100) }
    var random: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next(_ bound: Int64) -> Int64 {
      random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Int64((random >> 33) % UInt64(bound))
    }
    var now = t0
    var granted: Int64 = 0
    for _ in 0..<20_000 {
      now += next(2 * ms)
      let cost = Int(next(3))
      let instance = Int(next(3))
      if states[instance].decide(key: "hot", cost: cost, share: share, limitInterval: limit.interval, now: now)
        .isAllowed
      {
        granted += Int64(cost)
      }
      // b + r × span / T, with the span in microseconds.
      #expect(granted * s <= 30 * s + 30 * (now - t0), "at \(now - t0) µs")
    }
    #expect(granted > 30 * (now - t0) / s * 9 / 10)  // and it grants about the rate, not far less
  }
}

/// The share policy on a real PostgreSQL: the heartbeat table, the learned count, and three
/// instances through a stopped server.
@Suite("Fleet share on a real PostgreSQL server", .databaseTestTimeLimit)
struct FleetShareTests {
  static func store(
    _ client: PostgresClient, table: String, _ size: PostgresRateLimitStore.FleetSize
  ) throws -> PostgresRateLimitStore {
    try PostgresRateLimitStore(
      client: client, table: table, whenUnavailable: .shareLimit(among: size), timeout: .seconds(30))
  }

  @Test func heartbeatsCountTheLiveInstances() async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("fleet")
      let size = PostgresRateLimitStore.FleetSize.learned(assuming: 2, heartbeatInterval: .milliseconds(300))
      let stores = try (0..<3).map { _ in try Self.store(clients[0], table: table, size) }
      try await stores[0].migrate()
      try await stores[1].migrate()  // idempotent
      #expect(stores.map(\.fleetSize) == [2, 2, 2])  // assumed until a heartbeat counts
      #expect(try await stores[0].heartbeat() == 1)
      #expect(try await stores[1].heartbeat() == 2)
      #expect(try await stores[2].heartbeat() == 3)
      #expect(try await stores[0].heartbeat() == 3)  // again: still one row for it
      #expect(stores.map(\.fleetSize) == [3, 2, 3])
      #expect(try Self.store(clients[0], table: table, .instances(4)).fleetSize == 4)
      #expect(try PostgresRateLimitStore(client: clients[0], table: table, whenUnavailable: .allow).fleetSize == nil)
      // Silent for longer than the live span (900 ms): the others drop out of the count.
      try await Task.sleep(for: .milliseconds(1000))  // real-time: the database's clock measures the span
      #expect(try await stores[0].heartbeat() == 1)
      #expect(stores[0].fleetSize == 1)
      // A store's run() sends its heartbeats, and its row goes when it stops.
      let running = Task { try await stores[1].run() }
      var counted = 1
      for _ in 0..<100 where counted < 2 {
        try await Task.sleep(for: .milliseconds(50))  // real-time: the heartbeats run on the real clock
        counted = try await stores[0].heartbeat()
      }
      #expect(counted == 2)
      #expect(stores[1].fleetSize == 2)
      running.cancel()
      try await running.value
      #expect(try await stores[0].heartbeat() == 1)
    }
  }

  /// Three instances, each its own client and store on one table, learn that they are three; the
  /// server stops; each hammers one hot key from two tasks for five seconds. Each instance allows
  /// at most its share's bound, `10 + 10 × D` for the `D` seconds it hammered (a share of 30 per
  /// second with a burst of 30 is 10 per second with a burst of 10), and the fleet at most
  /// `30 + 30 × D`, the limit's own bound over the outage. Three stores with `.fallback` and the
  /// same limit, hammered alongside, show what that policy gives (printed).
  @Test func threeInstancesKeepTheFleetsLimitThroughAnOutage() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    var configuration = TestDatabase.configuration(cluster.url, connections: 4)
    configuration.options.connectTimeout = .milliseconds(500)
    let clients = (0..<3).map { _ in
      PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    }
    let logs = InMemoryLogHandler()
    let metrics = TestMetrics()
    let table = TestDatabase.uniqueTable("fleet")
    let limit = RateLimit(permits: 30, per: .seconds(1))
    try await TestDatabase.running(clients) {
      let stores = try clients.map { client in
        try PostgresRateLimitStore(
          client: client, table: table,
          whenUnavailable: .shareLimit(among: .learned(assuming: 1, heartbeatInterval: .milliseconds(200))),
          timeout: .milliseconds(500), logger: Logger(label: "fleet", factory: { _ in logs }), metricsFactory: metrics)
      }
      let fallbackTable = TestDatabase.uniqueTable("fleet_fallback")
      let fallbacks = try clients.map { client in
        try PostgresRateLimitStore(
          client: client, table: fallbackTable,
          whenUnavailable: .fallback(KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval)),
          timeout: .milliseconds(500))
      }
      try await stores[0].migrate()
      try await fallbacks[0].migrate()
      let runs = stores.map { store in Task { try await store.run() } }
      let clock = ContinuousClock()
      let learning = clock.now
      while clock.now - learning < .seconds(20), !stores.allSatisfy({ $0.fleetSize == 3 }) {
        try await Task.sleep(for: .milliseconds(50))  // real-time: the heartbeats run on the real clock
      }
      #expect(stores.map(\.fleetSize) == [3, 3, 3], "learned before the stop")
      #expect(try await stores[0].tryAcquire("hot", cost: 1, limit: limit).isAllowed)  // the database decides
      #expect(try await fallbacks[0].tryAcquire("hot", cost: 1, limit: limit).isAllowed)
      try await cluster.stop()
      let stopped = clock.now

      struct Hammered: Sendable {
        var allowed = 0
        var fallbackAllowed = 0
        /// When the share policy's decisions began and ended.
        var first: ContinuousClock.Instant?
        var last: ContinuousClock.Instant?
        /// Of the share policy's decisions after the first two seconds, when every breaker is open.
        var lateLatencies: [Duration] = []

        mutating func merge(_ other: Hammered) {
          allowed += other.allowed
          fallbackAllowed += other.fallbackAllowed
          first = [first, other.first].compactMap { $0 }.min()
          last = [last, other.last].compactMap { $0 }.max()
          lateLatencies += other.lateLatencies
        }
      }
      // Per instance, two tasks on the share policy's store and two on the `.fallback` one, so that
      // neither waits for the other's timeouts before its breaker opens.
      let results = try await withThrowingTaskGroup(of: (Int, Hammered).self) { group in
        for instance in 0..<3 {
          for task in 0..<4 {
            let sharing = task < 2
            group.addTask {
              var result = Hammered()
              if sharing { result.first = clock.now }
              while clock.now - stopped < .seconds(5) {
                let started = clock.now
                if sharing {
                  if try await stores[instance].tryAcquire("hot", cost: 1, limit: limit).isAllowed {
                    result.allowed += 1
                  }
                  if started - stopped >= .seconds(2) { result.lateLatencies.append(clock.now - started) }
                  result.last = clock.now
                } else if try await fallbacks[instance].tryAcquire("hot", cost: 1, limit: limit).isAllowed {
                  result.fallbackAllowed += 1
                }
                try await Task.sleep(for: .milliseconds(2))  // real-time: a few hundred decisions per second per task
              }
              return (instance, result)
            }
          }
        }
        var byInstance = [Hammered](repeating: Hammered(), count: 3)
        for try await (instance, result) in group { byInstance[instance].merge(result) }
        return byInstance
      }
      #expect(stores.map(\.fleetSize) == [3, 3, 3], "the count learned before the outage stands")
      var total = 0
      var span = Duration.zero
      for (instance, result) in results.enumerated() {
        let hammered = try #require(result.first).duration(to: try #require(result.last))
        let seconds = Double(hammered / .milliseconds(1)) / 1000
        let bound = Int((10 + 10 * seconds).rounded(.down))
        #expect(result.allowed <= bound, "instance \(instance): \(result.allowed) allowed in \(seconds) s")
        total += result.allowed
        span = max(span, hammered)
      }
      let seconds = Double(span / .milliseconds(1)) / 1000
      let fleetBound = Int((30 + 30 * seconds).rounded(.down))
      let fallbackTotal = results.reduce(0) { $0 + $1.fallbackAllowed }
      let latencies = results.flatMap(\.lateLatencies).sorted()
      let p99 = latencies.isEmpty ? Duration.zero : latencies[latencies.count * 99 / 100]
      print(
        "outage of \(seconds) s, a limit of 30/s with a burst of 30 on three instances:"
          + " .shareLimit allowed \(total) (bound \(fleetBound); per instance \(results.map(\.allowed))),"
          + " .fallback allowed \(fallbackTotal); p99 of \(latencies.count) decisions with the breaker open \(p99)")
      #expect(total <= fleetBound, "\(total) allowed in \(seconds) s")
      // The shares still grant: half the rate at least (the first decisions, before the breakers
      // open, each wait for the timeout while the full buckets waste their refill).
      #expect(total >= 15 * Int(seconds), "the shares still grant")
      #expect(fallbackTotal > total)
      #expect(!latencies.isEmpty && p99 < .milliseconds(50), "p99 \(p99) with the breaker open")

      // Logged and counted as the other policies are: the fault, the policy, what to do.
      let warning = logs.entries.first {
        $0.level == .warning && $0.message.description.contains("follow the failure policy")
      }
      #expect(
        warning?.metadata["pace.policy"]?.description.contains("the limit / 3 (learned)") == true,
        "\(String(describing: warning))")
      #expect(warning?.metadata["pace.action"]?.description.contains("PostgreSQL is running") == true)
      #expect(logs.entries.contains { $0.level == .error && $0.message.description.contains("circuit breaker opened") })
      #expect(logs.entries.contains { $0.message.description.contains("fleet size learned") })
      let fallbackDecisions = try metrics.expectCounter(
        "pace_rate_limit_decisions_total", [("table", table), ("outcome", "fallback")])
      #expect(fallbackDecisions.totalValue >= Int64(latencies.count))
      let instances = try metrics.expectGauge("pace_rate_limit_fleet_instances", [("table", table)])
      #expect(instances.lastValue == 3)

      try await cluster.start()
      for run in runs { run.cancel() }
      for run in runs { _ = try? await run.value }
    }
  }
}
#endif
