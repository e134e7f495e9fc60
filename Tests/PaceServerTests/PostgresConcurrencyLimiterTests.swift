#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// The permits one instance holds, driven directly.
@Suite("LeaseBookState")
struct LeaseBookStateTests {
  @Test func releasesCountOnceAndOnlyDatabaseLeasesAreRenewed() {
    var book = LeaseBookState()
    book.admitted("a", key: "k", priority: .default)
    let second = book.admitLocally("b", key: "k", priority: .default, bound: 2)
    let third = book.admitLocally("c", key: "k", priority: .default, bound: 2)  // a and b count
    let otherKey = book.admitLocally("c", key: "other", priority: .critical, bound: 1)
    #expect(second && !third && otherKey)
    #expect(book.count == 3 && book.inFlight == ["k": 2, "other": 1])
    #expect(book.renewable == ["a"])
    let releases = [book.released("a"), book.released("a"), book.released("b")]
    #expect(releases.map { $0?.inDatabase } == [true, nil, false])  // a second release does nothing
    #expect(book.inFlight == ["other": 1])
  }

  @Test func aLeaseTheRenewalDidNotKeepIsLostOnce() {
    var book = LeaseBookState()
    book.admitted("a", key: "k", priority: .default)
    book.admitted("b", key: "k", priority: .default)
    let lost = book.renewed(asked: ["a", "b"], kept: ["a"])
    #expect(lost == 1 && book.renewable == ["a"])
    let lostAgain = book.renewed(asked: ["a", "b"], kept: ["a"])
    #expect(lostAgain == 0)  // counted once
    #expect(book.inFlight == ["k": 2])  // its work goes on, counted here
  }
}

/// The shared concurrency limit on a real PostgreSQL server: exact across instances, leases that
/// expire, and each instance's share while the database is away.
@Suite("PostgresConcurrencyLimiter, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresConcurrencyLimiterTests {
  /// The most calls in flight at once, as the calls themselves count them.
  final class InFlight: Sendable {
    private let state = LockedState((now: 0, maximum: 0, total: 0))
    func enter() {
      state.withLock {
        $0.now += 1
        $0.maximum = max($0.maximum, $0.now)
        $0.total += 1
      }
    }
    func leave() { state.withLock { $0.now -= 1 } }
    var maximum: Int { state.withLock { $0.maximum } }
    var total: Int { state.withLock { $0.total } }
    var now: Int { state.withLock { $0.now } }
  }

  /// Runs `limiters` while `body` runs, then stops them.
  static func running<Result: Sendable>(
    _ limiters: [PostgresConcurrencyLimiter], _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    try await TestDatabase.running(services: limiters.map { limiter in { try await limiter.run() } }, body)
  }

  /// The key's leases in the database that have not expired.
  static func leases(_ client: PostgresClient, table: String, key: String) async throws -> Int {
    var binds = PostgresBindings()
    binds.append(key)
    let rows = try await client.query(
      PostgresQuery(
        unsafeSQL: "SELECT count(*) FROM \(table) WHERE key = $1 AND expires_at > clock_timestamp()", binds: binds))
    for try await count in rows.decode(Int64.self) { return Int(count) }
    return 0
  }

  /// Three instances (three clients, three limiters) on one table, a limit of 8, 48 tasks that
  /// each take a permit 15 times and hold it for a few milliseconds, counting themselves in flight:
  /// never more than 8 at once, and every permit back at the end, in memory and in the database.
  @Test func theLimitIsExactAcrossThreeInstances() async throws {
    try await TestDatabase.withClients(3) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let limiters = try clients.map { client in
        try PostgresConcurrencyLimiter(
          client: client, table: table, maximumInFlight: 8, maximumWait: .seconds(60), timeout: .seconds(30))
      }
      try await limiters[0].migrate()
      try await limiters[1].migrate()  // idempotent
      let inFlight = InFlight()
      try await Self.running(limiters) {
        try await withThrowingTaskGroup(of: Void.self) { group in
          for task in 0..<48 {
            let limiter = limiters[task % 3]
            group.addTask {
              for _ in 0..<15 {
                try await limiter.withPermit("hot") {
                  inFlight.enter()
                  defer { inFlight.leave() }
                  try await Task.sleep(for: .milliseconds(Int.random(in: 1...8)))  // real-time: work that takes a while
                }
              }
            }
          }
          try await group.waitForAll()
        }
      }
      #expect(inFlight.total == 48 * 15)
      #expect(inFlight.maximum <= 8, "at most 8 in flight across the instances")
      #expect(inFlight.maximum >= 4, "the instances run calls concurrently: \(inFlight.maximum)")
      #expect(limiters.map(\.inFlightCount) == [0, 0, 0])
      #expect(limiters.map(\.forgottenPermitCount) == [0, 0, 0])
      // run() returned once its releases' deletes ended: no lease is left.
      #expect(try await Self.leases(clients[0], table: table, key: "hot") == 0)
      print("shared concurrency limit of 8 over 3 instances: at most \(inFlight.maximum) in flight")
    }
  }

  /// 60 calls of each of 5 keys at once, 20 from each of three instances, none waiting and none
  /// releasing: exactly 8 of each key's are admitted (never more, and none refused while a place
  /// was free), and the database holds exactly 8 leases of each.
  @Test func concurrentCallsOfThreeInstancesAdmitExactlyTheLimit() async throws {
    try await TestDatabase.withClients(3) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let limiters = try clients.map { client in
        try PostgresConcurrencyLimiter(client: client, table: table, maximumInFlight: 8, timeout: .seconds(30))
      }
      try await limiters[0].migrate()
      let keys = (0..<5).map { "key-\($0)" }
      let permits = try await withThrowingTaskGroup(of: PostgresConcurrencyLimiter.Permit?.self) { group in
        for key in keys {
          for call in 0..<60 {
            group.addTask {
              do {
                return try await limiters[call % 3].acquire(key)
              } catch is ConcurrencyLimiterError {
                return nil
              }
            }
          }
        }
        return try await group.compactMap { $0 }.reduce(into: []) { $0.append($1) }
      }
      for key in keys {
        #expect(permits.filter { $0.key == key }.count == 8, "\(key)")
        #expect(try await Self.leases(clients[0], table: table, key: key) == 8, "\(key)")
      }
      for permit in permits { permit.release() }
    }
  }

  /// A limiter that takes 8 permits and never renews them (never run: as a process killed with
  /// its permits) holds them for its lease of 3 s (room to take all 8 on a loaded machine), by the
  /// database's clock, and no longer: another
  /// instance waiting for a place gets one no sooner than the lease after the first was taken,
  /// and within a generous bound of it, then all 8.
  @Test func aDeadInstancesPermitsComeBackWhenTheirLeasesExpire() async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let dead = try PostgresConcurrencyLimiter(
        client: clients[0], table: table, maximumInFlight: 8, lease: .seconds(3), timeout: .seconds(30))
      let alive = try PostgresConcurrencyLimiter(
        client: clients[1], table: table, maximumInFlight: 8, maximumWait: .seconds(60), lease: .seconds(3),
        timeout: .seconds(30))
      try await dead.migrate()
      let clock = ContinuousClock()
      let start = clock.now
      var held: [PostgresConcurrencyLimiter.Permit] = []
      for _ in 0..<8 { held.append(try await dead.acquire("k")) }
      await #expect(throws: ConcurrencyLimiterError.queueFull(maximumQueued: 0, waited: .zero)) {
        _ = try await dead.acquire("k")
      }
      try await Self.running([alive]) {
        let first = try await alive.acquire("k")
        let waited = start.duration(to: clock.now)
        #expect(waited >= .seconds(3), "not before the lease: \(waited)")
        #expect(waited < .seconds(10), "within the lease and a retry, with room for a loaded machine: \(waited)")
        var taken = [first]
        for _ in 0..<7 { taken.append(try await alive.acquire("k")) }
        #expect(try await Self.leases(clients[1], table: table, key: "k") == 8)
        for permit in taken { permit.release() }
        print("a dead instance's 8 permits came back after \(waited) (lease 3 s)")
      }
      for permit in held { permit.release() }  // long gone from the database: nothing to give back
      #expect(dead.inFlightCount == 0)
    }
  }

  /// A running limiter renews its leases: permits held for a lease and a half stay taken (another
  /// instance waits for one all that time and is refused), and a release gives its place back.
  @Test func aRunningInstanceKeepsItsPermitsBeyondTheLease() async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let holder = try PostgresConcurrencyLimiter(
        client: clients[0], table: table, maximumInFlight: 2, lease: .seconds(2), timeout: .seconds(30))
      // Waits past the lease: only renewals keep the holder's rows. (A lease of a few hundred
      // milliseconds lapsed under a loaded machine, whose renewals came late.)
      let other = try PostgresConcurrencyLimiter(
        client: clients[1], table: table, maximumInFlight: 2, maximumWait: .seconds(3),
        lease: .seconds(2), timeout: .seconds(30))
      try await holder.migrate()
      try await Self.running([holder]) {
        let permits = [try await holder.acquire("k"), try await holder.acquire("k")]
        do {
          _ = try await other.withPermit("k", priority: .critical) {}
          Issue.record("admitted while the holder renews its leases")
        } catch let refusal as ConcurrencyLimiterError {
          guard case .maximumWaitReached(let waited) = refusal else {
            Issue.record("\(refusal)")
            return
          }
          #expect(waited >= .seconds(3))
        }
        #expect(try await Self.leases(clients[0], table: table, key: "k") == 2)
        permits[0].release()
        let permit = try await other.acquire("k")
        permit.release()
        permits[1].release()
      }
    }
  }

  /// A class fills at most its share of the limit, counted over every instance.
  @Test func eachClassFillsItsShareAcrossInstances() async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let shares = PriorityShares(defaultPercent: 50, sheddablePercent: 25)
      let limiters = try clients.map { client in
        try PostgresConcurrencyLimiter(
          client: client, table: table, maximumInFlight: 4, shares: shares, timeout: .seconds(30))
      }
      try await limiters[0].migrate()
      var held = [try await limiters[0].acquire("k", priority: .sheddable)]
      await #expect(throws: ConcurrencyLimiterError.self) {
        _ = try await limiters[1].acquire("k", priority: .sheddable)
      }
      held.append(try await limiters[1].acquire("k", priority: .default))
      await #expect(throws: ConcurrencyLimiterError.self) { _ = try await limiters[0].acquire("k", priority: .default) }
      held.append(try await limiters[0].acquire("k", priority: .critical))
      held.append(try await limiters[1].acquire("k", priority: .critical))
      await #expect(throws: ConcurrencyLimiterError.self) {
        _ = try await limiters[1].acquire("k", priority: .critical)
      }
      for permit in held { permit.release() }
    }
  }

  /// Keys are bound parameters: quotes, SQL, `$1`, any Unicode are keys like any other, and
  /// canonically equivalent spellings share a count; a key outside `InputRules` is `InvalidInput`.
  /// Settings out of range are errors that name them.
  @Test func hostileKeysAndSettings() async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("leases")
      let limiter = try PostgresConcurrencyLimiter(
        client: clients[0], table: table, maximumInFlight: 1, timeout: .seconds(30))
      try await limiter.migrate()
      for key in [
        "'; DROP TABLE \(table); --", "$1", "\\", "🦆", String(repeating: "x", count: InputRules.maximumKeyBytes),
      ] {
        let permit = try await limiter.acquire(key)
        await #expect(throws: ConcurrencyLimiterError.self) { _ = try await limiter.acquire(key) }
        permit.release()
      }
      let composed = try await limiter.acquire("caf\u{E9}")
      await #expect(throws: ConcurrencyLimiterError.self) { _ = try await limiter.acquire("cafe\u{301}") }
      composed.release()
      for key in ["", "a\0b", String(repeating: "x", count: InputRules.maximumKeyBytes + 1)] {
        await #expect(throws: InvalidInput.self) { _ = try await limiter.acquire(key) }
      }
      for maximum in [0, -1, Int.min] {
        #expect(throws: PacePostgresError.self) {
          try PostgresConcurrencyLimiter(client: clients[0], maximumInFlight: maximum)
        }
      }
      #expect(throws: PacePostgresError.self) {
        try PostgresConcurrencyLimiter(client: clients[0], maximumInFlight: 1, lease: .milliseconds(50))
      }
      #expect(throws: PacePostgresError.self) {
        try PostgresConcurrencyLimiter(client: clients[0], maximumInFlight: 1, maximumWait: .seconds(-1))
      }
      #expect(throws: PacePostgresError.self) {
        try PostgresConcurrencyLimiter(client: clients[0], table: "x; DROP", maximumInFlight: 1)
      }
    }
  }

  /// The database stops: each of three instances admits its share of a limit of 8, 8 / 3 = 2,
  /// counting the permit it held from the database; under `.throwError` a call throws.
  @Test func whileTheDatabaseIsAwayEachInstanceAdmitsItsShare() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    var configuration = TestDatabase.configuration(cluster.url, connections: 4)
    configuration.options.connectTimeout = .milliseconds(500)
    let clients = (0..<3).map { _ in
      PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    }
    let logs = InMemoryLogHandler()
    let metrics = TestMetrics()
    let table = TestDatabase.uniqueTable("leases")
    try await TestDatabase.running(clients) {
      let limiters = try clients.map { client in
        try PostgresConcurrencyLimiter(
          client: client, table: table, maximumInFlight: 8, timeout: .milliseconds(500),
          whenUnavailable: .shareLimit(among: .instances(3)), logger: Logger(label: "leases", factory: { _ in logs }),
          metricsFactory: metrics)
      }
      let throwing = try PostgresConcurrencyLimiter(
        client: clients[0], table: table, maximumInFlight: 8, timeout: .milliseconds(500), whenUnavailable: .throwError)
      try await limiters[0].migrate()
      let fromTheDatabase = try await limiters[0].acquire("k")
      try await cluster.stop()
      var admitted = [0, 0, 0]
      var permits: [PostgresConcurrencyLimiter.Permit] = []
      for (index, limiter) in limiters.enumerated() {
        for _ in 0..<5 {
          do {
            permits.append(try await limiter.acquire("k"))
            admitted[index] += 1
          } catch let refusal as ConcurrencyLimiterError {
            #expect(refusal == .queueFull(maximumQueued: 0, waited: .zero))
          }
        }
      }
      #expect(admitted == [1, 2, 2], "each instance its share of 2, the first holding one already")
      #expect(limiters.map(\.inFlightCount) == [2, 2, 2])
      await #expect(throws: PacePostgresError.self) { _ = try await throwing.acquire("k") }
      let fallbacks = try metrics.expectCounter(
        "pace_shared_concurrency_decisions_total", [("table", table), ("outcome", "fallback_admitted")])
      #expect(fallbacks.totalValue == 5)
      #expect(logs.entries.contains { $0.level == .warning && $0.message.description.contains("failure mode") })
      for permit in permits { permit.release() }
      fromTheDatabase.release()
      #expect(limiters.map(\.inFlightCount) == [0, 0, 0])
    }
  }
}
#endif
