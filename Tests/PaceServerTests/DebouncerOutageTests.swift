#if PostgreSQL && Hummingbird
import Foundation
import Logging
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// The debouncer's failure policy: a breaker like the store's, and the calls made during an
/// outage kept in a bounded local outbox, or rejected at once, as chosen.
@Suite("PostgresDebouncer during an outage", .databaseTestTimeLimit)
struct DebouncerOutageTests {
  let start = ContinuousClock().now

  func call(_ key: String) -> PendingCall { PendingCall(key: key, json: Data(key.utf8)) }

  @Test func theOutboxKeepsCallsInOrderUpToItsCapacityAndRejectsBeyond() {
    var machine = DebouncerOutboxMachine(CircuitBreaker(failureThreshold: 1, coolDown: .seconds(1)), capacity: 2)
    #expect(machine.call(call("a"), now: start).0 == .send(.ask))
    #expect(machine.ended(.ask, unavailable: true, now: start) == .opened)
    let answer1 = machine.keep(call("a"))
    #expect(answer1)
    #expect(machine.call(call("b"), now: start).0 == .kept)
    #expect(machine.call(call("c"), now: start).0 == .rejected(outboxFull: true))
    #expect(machine.outbox == [call("a"), call("b")])
    // After the cool-down, a call probes by delivering the outbox first, its own call last.
    var full = machine
    #expect(full.call(call("c"), now: start + .seconds(1)) == (.rejected(outboxFull: true), .halfOpened))
    full.delivered()
    #expect(full.call(call("c"), now: start + .seconds(1)).0 == .keptDeliver(.probe))  // the probe given back
    #expect(full.nextToDeliver() == call("b"))
    full.delivered()
    #expect(full.nextToDeliver() == call("c"))
    full.delivered()
    #expect(full.nextToDeliver() == nil)
    #expect(!full.delivering)
    // A delivery that fails keeps the calls, in order.
    let answer2 = machine.startDelivery()
    #expect(answer2)
    let answer3 = machine.startDelivery()
    #expect(!answer3)  // one delivery at a time
    #expect(machine.nextToDeliver() == call("a"))
    machine.deliveryFailed()
    #expect(machine.outbox == [call("a"), call("b")])
  }

  @Test func withoutAnOutboxAnOpenBreakerRejectsAtOnce() {
    var machine = DebouncerOutboxMachine(CircuitBreaker(failureThreshold: 2, coolDown: .seconds(1)), capacity: 0)
    for _ in 0..<2 {
      #expect(machine.call(call("a"), now: start).0 == .send(.ask))
      _ = machine.ended(.ask, unavailable: true, now: start)
    }
    #expect(machine.call(call("a"), now: start).0 == .rejected(outboxFull: false))
    let answer4 = machine.keep(call("a"))
    #expect(!answer4)
    #expect(machine.call(call("a"), now: start + .seconds(1)) == (.send(.probe), .halfOpened))
  }

  func debouncer(
    _ client: PostgresClient, journal: Journal, policy: PostgresDebouncer<[Int]>.FailureMode,
    table: String = "pace_debounce"
  ) throws -> PostgresDebouncer<[Int]> {
    try PostgresDebouncer<[Int]>(
      client: client, table: table, quiet: .milliseconds(50), merge: .append, pollInterval: .milliseconds(50),
      timeout: .seconds(1), circuitBreaker: CircuitBreaker(failureThreshold: 2, coolDown: .milliseconds(200)),
      whenUnavailable: policy
    ) { key, payload in
      await journal.started(key)
      await journal.ended(key, payload)
    }
  }

  /// The server stopped (one cluster for both policies: a cluster costs an `initdb`): with an
  /// outbox, calls are kept, then recorded in call order and run once it is back; without one,
  /// the breaker opens after its threshold and calls are rejected at once.
  @Test func callsDuringAStoppedDatabaseAreKeptAndDeliveredInOrderOrRejectedAtOnce() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    var configuration = TestDatabase.configuration(cluster.url, connections: 4)
    configuration.options.connectTimeout = .milliseconds(500)
    let client = PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    let journal = Journal()
    try await TestDatabase.running([client]) {
      let keeping = try debouncer(client, journal: journal, policy: .keepLocally(capacity: 100))
      let throwing = try debouncer(client, journal: Journal(), policy: .throwError, table: "pace_throwing")
      try await keeping.migrate()
      try await throwing.migrate()
      let worker = Task { try await keeping.run() }
      defer { worker.cancel() }
      try await cluster.stop()
      for index in 0..<10 { try await keeping.call("k", [index]) }  // kept, none thrown
      #expect(keeping.outbox.count == 10)
      var reasons: [String] = []
      for index in 0..<4 {
        do {
          try await throwing.call("k", [index])
        } catch PacePostgresError.unavailable(let reason) {
          reasons.append(reason)
        }
      }
      #expect(reasons.count == 4)
      #expect(reasons.dropFirst(2).allSatisfy { $0.contains("circuit breaker is open") }, "\(reasons)")
      try await cluster.start()
      // real-time: the worker's next successful claim delivers them; then the handler runs.
      #expect(try await eventually(within: .seconds(60)) { await journal.ran("k").flatMap { $0 } == Array(0..<10) })
      #expect(keeping.outbox.count == 0)
      worker.cancel()
      try await worker.value
    }
  }

  // real-time: the answers' latency is what is checked, with a bound far above a refused connect.
  /// With `directConnection`, the first call of an outage is answered at once under either
  /// failure mode (a stopped server refuses the connection), where the pool keeps it waiting its
  /// whole `timeout` (5 s here, printed beside it, not asserted); once the server is back, the
  /// next call reconnects and is recorded.
  @Test func theFirstCallOfAnOutageIsAnsweredAtOnceWithADirectConnection() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    let client = PostgresClient(
      configuration: TestDatabase.configuration(cluster.url, connections: 4), backgroundLogger: TestDatabase.quietLogger
    )
    var direct = PostgresConnection.Configuration(
      host: "127.0.0.1", port: cluster.port, username: cluster.owner, password: nil, database: "postgres", tls: .disable
    )
    direct.options.connectTimeout = .seconds(5)
    let directConfiguration = direct
    let journal = Journal()
    try await TestDatabase.running([client]) {
      func make(_ table: String, _ policy: PostgresDebouncer<[Int]>.FailureMode, direct: Bool) throws
        -> PostgresDebouncer<[Int]>
      {
        try PostgresDebouncer<[Int]>(
          client: client, table: table, quiet: .milliseconds(50), merge: .append, pollInterval: .milliseconds(50),
          whenUnavailable: policy, directConnection: direct ? directConfiguration : nil
        ) { key, payload in
          await journal.started(key)
          await journal.ended(key, payload)
        }
      }
      let throwing = try make("pace_direct_throw", .throwError, direct: true)
      let keeping = try make("pace_direct_keep", .keepLocally(capacity: 10), direct: true)
      let pooled = try make("pace_pooled_throw", .throwError, direct: false)
      for debouncer in [throwing, keeping, pooled] { try await debouncer.migrate() }
      try await throwing.call("warm", [0])  // the direct connection is open when the server stops
      try await cluster.stop()
      let clock = ContinuousClock()
      var started = clock.now
      await #expect(throws: PacePostgresError.self) { try await throwing.call("k", [1]) }
      let thrown = clock.now - started
      started = clock.now
      try await keeping.call("k", [2])
      let kept = clock.now - started
      #expect(keeping.outbox.count == 1)
      #expect(thrown < .seconds(1) && kept < .seconds(1), "thrown after \(thrown), kept after \(kept)")
      started = clock.now
      _ = try? await pooled.call("k", [3])
      print(
        "the first call of an outage: \(thrown) (direct, thrown), \(kept) (direct, kept), \(clock.now - started) (pool)"
      )
      try await cluster.start()
      // real-time: the breaker's cool-down (500 ms by default) passes before the next call probes.
      #expect(
        try await eventually(within: .seconds(30)) {
          (try? await throwing.call("k", [4])) != nil
        })
    }
  }

  /// A read-only database: calls are kept; once it is writable again they are delivered.
  @Test func callsDuringAReadOnlyDatabaseAreKeptAndDelivered() async throws {
    let url = try TestDatabase.url()
    let database = "pace_rod_\(UInt32.random(in: 0...UInt32.max))"
    var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
    components.path = "/\(database)"
    let client = PostgresClient(
      configuration: TestDatabase.configuration(components.url!, connections: 4),
      backgroundLogger: TestDatabase.quietLogger)
    let journal = Journal()
    try await TestDatabase.withClients { admin in
      try await admin[0].query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
      @Sendable func readOnly(_ on: Bool) async throws {
        try await admin[0].query(
          PostgresQuery(
            unsafeSQL: "ALTER DATABASE \(database) SET default_transaction_read_only = \(on ? "on" : "off")"))
        try await admin[0].query(
          PostgresQuery(
            unsafeSQL: "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '\(database)'"))
      }
      try await TestDatabase.running([client]) {
        let debouncer = try debouncer(client, journal: journal, policy: .keepLocally(capacity: 100))
        try await debouncer.migrate()
        try await readOnly(true)
        for index in 0..<5 { try await debouncer.call("k", [index]) }  // kept, none thrown
        #expect(debouncer.outbox.count == 5)
        try await readOnly(false)
        let worker = Task { try await debouncer.run() }
        defer { worker.cancel() }
        // real-time: the worker's claims reach the writable database, then deliver.
        #expect(try await eventually(within: .seconds(60)) { await journal.ran("k").flatMap { $0 } == Array(0..<5) })
        worker.cancel()
        try await worker.value
      }
      try await admin[0].query(PostgresQuery(unsafeSQL: "DROP DATABASE \(database) WITH (FORCE)"))
    }
  }
}
#endif
