#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import Metrics
import MetricsTestKit
import Pace
import PacePostgres
import PostgresNIO
import ServiceLifecycle
import Testing

/// What a fault test's handlers did: the executions, when each attempt started, how many ran at once.
actor Journal {
  private(set) var executions: [(key: String, payload: [Int])] = []
  private(set) var attempts: [String: [ContinuousClock.Instant]] = [:]
  private(set) var finished: [String] = []
  private(set) var mostAtOnce = 0
  private var running = 0

  func started(_ key: String) {
    attempts[key, default: []].append(ContinuousClock().now)
    running += 1
    mostAtOnce = max(mostAtOnce, running)
  }

  func ended(_ key: String, _ payload: [Int]) {
    running -= 1
    executions.append((key, payload))
    finished.append(key)
  }

  func failed() { running -= 1 }

  func startedCount(_ key: String) -> Int { attempts[key]?.count ?? 0 }
  func ran(_ key: String) -> [[Int]] { executions.filter { $0.key == key }.map(\.payload) }
}

struct Boom: Error, CustomStringConvertible {
  let description: String
}

/// Whether a task has returned.
actor Flag {
  private(set) var isSet = false
  func set() { isSet = true }
}

/// The logs and metrics of one debouncer.
struct Observed: Sendable {
  let logs = InMemoryLogHandler()
  let metrics = TestMetrics()

  var logger: Logger {
    let logs = logs
    var logger = Logger(label: "pace.tests.debouncer", factory: { _ in logs })
    logger.logLevel = .debug
    return logger
  }

  func entries(_ level: Logger.Level, containing text: String) -> [InMemoryLogHandler.Entry] {
    logs.entries.filter { $0.level == level && "\($0.message)".contains(text) }
  }

  func counter(_ label: String, table: String, _ more: [(String, String)] = []) -> Int64 {
    (try? metrics.expectCounter(label, [("table", table)] + more).totalValue) ?? 0
  }
}

@Suite("PostgresDebouncer's faults, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresDebouncerFaultTests {
  func debouncer(
    _ client: PostgresClient,
    table: String,
    quiet: Duration = .milliseconds(50),
    maximumWait: Duration? = nil,
    lease: Duration = .seconds(5),
    maximumAttempts: Int = 5,
    retryBackoff: Duration? = .milliseconds(50),
    shutdownGracePeriod: Duration = .seconds(10),
    timeout: Duration = .seconds(5),
    observed: Observed = Observed(),
    perform: @escaping @Sendable (String, [Int]) async throws -> Void
  ) throws -> PostgresDebouncer<[Int]> {
    try PostgresDebouncer<[Int]>(
      client: client, table: table, quiet: quiet, maximumWait: maximumWait, lease: lease, merge: .append,
      pollInterval: .milliseconds(20), timeout: timeout, maximumAttempts: maximumAttempts, retryBackoff: retryBackoff,
      shutdownGracePeriod: shutdownGracePeriod, logger: observed.logger, metricsFactory: observed.metrics,
      perform: perform)
  }

  /// Runs `debouncers`' workers while `body` runs, then cancels them and waits for them to return.
  func running<Result: Sendable>(
    _ debouncers: [PostgresDebouncer<[Int]>],
    _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let workers = debouncers.map { debouncer in Task { try await debouncer.run() } }
    defer { for worker in workers { worker.cancel() } }
    let result = try await body()
    for worker in workers {
      worker.cancel()
      try await worker.value
    }
    return result
  }

  func count(_ client: PostgresClient, _ sql: String) async throws -> Int {
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql))
    for try await count in rows.decode(Int.self) { return count }
    return 0
  }

  /// A row that an older `Payload` type wrote: it does not decode as `[Int]`.
  @Test func aPoisonedPayloadIsDeadLetteredWhileOtherKeysKeepFlowing() async throws {
    let journal = Journal()
    let observed = Observed()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let debouncer = try debouncer(client, table: table, maximumAttempts: 3, observed: observed) { key, payload in
        await journal.started(key)
        await journal.ended(key, payload)
      }
      try await debouncer.migrate()
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            INSERT INTO \(table) (key, first_call_at, due_at) VALUES ('poison', clock_timestamp(), clock_timestamp())
            """))
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            INSERT INTO \(table)_calls (key, payload) VALUES ('poison', convert_to('{"id": 7}', 'UTF8'))
            """))
      let returned = Flag()
      let worker = Task {
        try await debouncer.run()
        await returned.set()
      }
      defer { worker.cancel() }
      try await debouncer.call("good", [1])
      #expect(try await eventually { await journal.ran("good") == [[1]] })
      #expect(
        try await eventually {
          (try? await count(client, "SELECT count(*)::int FROM \(table)_dead WHERE key = 'poison'")) == 1
        })
      try await debouncer.call("good", [2])
      #expect(try await eventually { await journal.ran("good") == [[1], [2]] })
      #expect(await !returned.isSet, "run() returned after a poisoned payload")

      let rows = try await client.query(
        PostgresQuery(unsafeSQL: "SELECT convert_from(payload, 'UTF8'), attempts, last_error FROM \(table)_dead"))
      for try await (payload, attempts, lastError) in rows.decode((String, Int, String).self) {
        #expect(payload == #"{"id": 7}"#)
        #expect(attempts == 3)
        #expect(lastError.contains("does not decode"))
      }
      #expect(try await count(client, "SELECT count(*)::int FROM \(table)_calls WHERE key = 'poison'") == 0)
      #expect(try await count(client, "SELECT count(*)::int FROM \(table) WHERE key = 'poison'") == 0)
      #expect(observed.entries(.warning, containing: "does not decode").count == 3)
      let deadLetter = observed.entries(.error, containing: "dead-letter table")
      #expect(deadLetter.count == 1)
      #expect(deadLetter.first?.metadata["pace.key"] == "poison")
      #expect(deadLetter.first?.metadata["pace.table"] == "\(table)")
      #expect(deadLetter.first?.metadata["attempt"] == "3")
      #expect(observed.counter("pace_debouncer_dead_letters_total", table: table) == 1)
      #expect(observed.counter("pace_debouncer_failures_total", table: table) == 3)
      #expect(observed.counter("pace_debouncer_calls_total", table: table) == 2)
      #expect(observed.counter("pace_debouncer_executions_total", table: table, [("outcome", "succeeded")]) == 2)
      worker.cancel()
      try await worker.value
      #expect(await returned.isSet)
    }
  }

  @Test func aThrowingHandlerIsRetriedWithBackoffThenDeadLetteredWithItsError() async throws {
    let journal = Journal()
    let observed = Observed()
    let table = TestDatabase.uniqueTable("dbf")
    let failing = Flag()
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let debouncer = try debouncer(
        client, table: table, quiet: .milliseconds(300), maximumAttempts: 4, retryBackoff: .milliseconds(200),
        observed: observed
      ) { key, payload in
        await journal.started(key)
        if await !failing.isSet {
          await journal.failed()
          throw Boom(description: "boom 42")
        }
        await journal.ended(key, payload)
      }
      try await debouncer.migrate()
      try await running([debouncer]) {
        try await debouncer.call("bad", [1])
        try await debouncer.call("bad", [2])
        #expect(
          try await eventually {
            (try? await count(client, "SELECT count(*)::int FROM \(table)_dead")) == 2
          })
        await failing.set()
        try await debouncer.call("bad", [3])
        #expect(try await eventually { await journal.ran("bad") == [[3]] })
      }
      // Each retry waits at least twice as long as the one before (lower bounds only: real time).
      let starts = await journal.attempts["bad"] ?? []
      #expect(starts.count == 5)
      for (index, wait) in [200, 400, 800].enumerated() where starts.count == 5 {
        #expect(starts[index + 1] - starts[index] >= .milliseconds(wait - 20), "retry \(index + 1) came early")
      }
      let rows = try await client.query(
        PostgresQuery(
          unsafeSQL: """
            SELECT convert_from(payload, 'UTF8'), attempts, last_error, execution::text
            FROM \(table)_dead ORDER BY call_id
            """))
      var dead: [(String, Int, String, String)] = []
      for try await row in rows.decode((String, Int, String, String).self) { dead.append(row) }
      #expect(dead.map(\.0) == ["[1]", "[2]"])
      #expect(dead.allSatisfy { $0.1 == 4 && $0.2 == "boom 42" })
      #expect(Set(dead.map(\.3)).count == 1, "one execution's payloads share its id")

      let failures = observed.entries(.warning, containing: "the handler failed")
      #expect(failures.count == 4)
      #expect(failures.allSatisfy { $0.metadata["error"] == "boom 42" && $0.metadata["pace.key"] == "bad" })
      #expect(failures.map { $0.metadata["attempt"] } == ["1", "2", "3", "4"])
      #expect(observed.entries(.error, containing: "dead-letter table").count == 1)
      #expect(observed.counter("pace_debouncer_executions_total", table: table, [("outcome", "failed")]) == 4)
      #expect(observed.counter("pace_debouncer_failures_total", table: table) == 4)
      #expect(observed.counter("pace_debouncer_dead_letters_total", table: table) == 1)
      let lag = try observed.metrics.expectTimer("pace_debouncer_lag_seconds", [("table", table)])
      #expect(lag.values.count == 5)
    }
  }

  // real-time: a handler of 5 s under a lease of 2 s (renewed every 0.67 s, room for a renewal
  // that a loaded machine delays); a second instance polls the key all along.
  @Test func aRunningHandlerRenewsItsLeaseSoNoOtherInstanceRunsItsKey() async throws {
    let journal = Journal()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients(2, connections: 4) { clients in
      let debouncers = try clients.map { client in
        try debouncer(client, table: table, lease: .seconds(2)) { key, payload in
          await journal.started(key)
          try await Task.sleep(for: .milliseconds(5000))  // real-time: two and a half lease periods
          await journal.ended(key, payload)
        }
      }
      try await debouncers[0].migrate()
      try await running(debouncers) {
        try await debouncers[1].call("long", [1])
        #expect(try await eventually { await journal.ran("long") == [[1]] })
        try await Task.sleep(for: .milliseconds(300))  // real-time: room for a wrong second start
      }
      #expect(await journal.startedCount("long") == 1)
      #expect(await journal.mostAtOnce == 1)
    }
  }

  // real-time: a handler of 1.5 s is running when the service group shuts down gracefully.
  @Test func aGracefulShutdownLetsARunningHandlerFinish() async throws {
    let journal = Journal()
    let observed = Observed()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let debouncer = try debouncer(client, table: table, observed: observed) { key, payload in
        await journal.started(key)
        try await Task.sleep(for: .milliseconds(1500))  // real-time: still running at the shutdown
        await journal.ended(key, payload)
      }
      try await debouncer.migrate()
      let group = ServiceGroup(services: [debouncer], logger: TestDatabase.quietLogger)
      let running = Task { try await group.run() }
      try await debouncer.call("slow", [1])
      #expect(try await eventually { await journal.startedCount("slow") == 1 })
      await group.triggerGracefulShutdown()
      try await running.value
      #expect(await journal.ran("slow") == [[1]])
      #expect(try await count(client, "SELECT count(*)::int FROM \(table)") == 0, "the execution was acknowledged")
      #expect(observed.entries(.info, containing: "shutting down").count == 1)
      #expect(observed.entries(.info, containing: "stopped").count >= 1)
    }
  }

  // real-time: a handler of 60 s outlives a grace period of 300 ms; another instance runs its key
  // long before the lease of 30 s would have ended.
  @Test func aHandlerPastTheGracePeriodIsCancelledAndItsClaimGivenBack() async throws {
    let journal = Journal()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients(2, connections: 4) { clients in
      let stopping = try debouncer(
        clients[0], table: table, lease: .seconds(30), shutdownGracePeriod: .milliseconds(300)
      ) { key, _ in
        await journal.started(key)
        do {
          try await Task.sleep(for: .seconds(60))  // real-time: cancelled by the shutdown
        } catch {
          await journal.failed()
          throw error
        }
      }
      let taking = try debouncer(clients[1], table: table, lease: .seconds(30)) { key, payload in
        await journal.started(key)
        await journal.ended(key, payload)
      }
      try await stopping.migrate()
      let worker = Task { try await stopping.run() }
      try await stopping.call("k", [1])
      #expect(try await eventually { await journal.startedCount("k") == 1 })
      let clock = ContinuousClock()
      let stoppedAt = clock.now
      worker.cancel()
      try await worker.value
      #expect(clock.now - stoppedAt < .seconds(10))
      let rows = try await clients[0].query(
        PostgresQuery(unsafeSQL: "SELECT lease_until IS NULL, attempts FROM \(table) WHERE key = 'k'"))
      for try await (released, attempts) in rows.decode((Bool, Int).self) {
        #expect(released)
        #expect(attempts == 0, "a cancelled attempt is not counted")
      }
      let ran = try await running([taking]) {
        try await eventually(within: .seconds(10)) { await journal.ran("k") == [[1]] }
      }
      #expect(ran)
    }
  }

  // real-time: one key's handler takes 4 s; another key with a maximumWait of 300 ms runs meanwhile.
  @Test func aSlowHandlerDoesNotDelayAnotherKeyPastItsMaxWait() async throws {
    let journal = Journal()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients { clients in
      let debouncer = try debouncer(
        clients[0], table: table, quiet: .milliseconds(100), maximumWait: .milliseconds(300)
      ) { key, payload in
        await journal.started(key)
        if key == "slow" { try await Task.sleep(for: .seconds(4)) }  // real-time: outlasts the other key
        await journal.ended(key, payload)
      }
      try await debouncer.migrate()
      try await running([debouncer]) {
        try await debouncer.call("slow", [1])
        #expect(try await eventually { await journal.startedCount("slow") == 1 })
        let clock = ContinuousClock()
        let calledAt = clock.now
        try await debouncer.call("fast", [2])
        #expect(try await eventually { await journal.ran("fast") == [[2]] })
        // Generous: maximumWait is 300 ms; the old batch waited for the slow key's 4 s.
        #expect(clock.now - calledAt < .seconds(2))
        #expect(await journal.finished == ["fast"], "the slow key was still running")
        #expect(try await eventually { await journal.ran("slow") == [[1]] })
      }
    }
  }

  @Test func migrateGivesUpWithAClearErrorWhenTheDatabaseDoesNotAnswer() async throws {
    let observed = Observed()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients { clients in
      let debouncer = try debouncer(clients[0], table: table, observed: observed) { _, _ in }
      // Another session holds the migration lock.
      try await clients[0].withConnection { connection in
        try await connection.query("SELECT pg_advisory_lock(\(Int64(0x5041_4345)))", logger: TestDatabase.quietLogger)
        let clock = ContinuousClock()
        let began = clock.now
        do {
          try await debouncer.migrate(timeout: .seconds(1))
          Issue.record("migrate should have given up")
        } catch let error as PacePostgresError {
          guard case .unavailable(let reason) = error else {
            Issue.record("expected .unavailable, got \(error)")
            return
          }
          #expect(reason.contains("no answer within 1.0 seconds"))
          #expect(reason.contains("migration lock"))
        }
        #expect(clock.now - began < .seconds(10))
        try await connection.query(
          "SELECT pg_advisory_unlock(\(Int64(0x5041_4345)))", logger: TestDatabase.quietLogger)
      }
      #expect(observed.entries(.info, containing: "waiting for a connection and the migration lock").count == 1)
      try await debouncer.migrate(timeout: .seconds(10))
    }
  }

  @Test func migrateGivesUpWhenNothingListens() async throws {
    let observed = Observed()
    try await TestDatabase.withClients(port: try TestDatabase.closedPort()) { clients in
      let debouncer = try debouncer(clients[0], table: TestDatabase.uniqueTable("dbf"), observed: observed) { _, _ in }
      let error = await #expect(throws: PacePostgresError.self) { try await debouncer.migrate(timeout: .seconds(1)) }
      guard case .unavailable = error else {
        Issue.record("expected .unavailable, got \(String(describing: error))")
        return
      }
    }
  }

  // real-time: a worker polls an address where nothing listens: until its first warning (a
  // generous bound, for a loaded machine), then for 1.5 s more, several polls.
  @Test func anOutageIsLoggedOnceNotOncePerPoll() async throws {
    let observed = Observed()
    try await TestDatabase.withClients(port: try TestDatabase.closedPort()) { clients in
      let debouncer = try debouncer(
        clients[0], table: TestDatabase.uniqueTable("dbf"), timeout: .milliseconds(200), observed: observed
      ) { _, _ in }
      try await running([debouncer]) {
        let deadline = ContinuousClock.now + .seconds(60)
        while observed.entries(.warning, containing: "unavailable").isEmpty, ContinuousClock.now < deadline {
          try await Task.sleep(for: .milliseconds(50))  // real-time: waiting for the first warning
        }
        try await Task.sleep(for: .milliseconds(1500))  // real-time: several more polls
      }
      #expect(observed.entries(.warning, containing: "unavailable").count == 1)
    }
  }

  /// A worker that starts before the migration (as in a `ServiceGroup` or Vapor's lifecycle, where
  /// the migration runs beside it): one `info` line, no warning or error, and it works once the
  /// table exists. (Past the startup grace a missing table is an error: DebouncerWorkerStateTests.)
  @Test func aMissingTableIsLoggedAndRetriedNotFatal() async throws {
    let journal = Journal()
    let observed = Observed()
    try await TestDatabase.withClients { clients in
      let debouncer = try debouncer(clients[0], table: TestDatabase.uniqueTable("dbf"), observed: observed) {
        key, payload in
        await journal.started(key)
        await journal.ended(key, payload)
      }
      try await running([debouncer]) {
        // real-time: a generous bound for the first claim on a loaded machine.
        #expect(
          try await eventually(within: .seconds(60)) {
            !observed.entries(.info, containing: "waiting for migrate()").isEmpty
          })
        try await Task.sleep(for: .milliseconds(100))  // real-time: a few more polls, still quiet
        try await debouncer.migrate()
        try await debouncer.call("k", [1])
        #expect(try await eventually { await journal.ran("k") == [[1]] })
      }
      #expect(observed.entries(.info, containing: "waiting for migrate()").count == 1)
      // No error: a missing table at startup is not a fault. (A claim slower than the timeout on
      // a loaded machine is an outage, a warning, which this test does not forbid.)
      let errors = observed.logs.entries.filter { $0.level >= .error }
      #expect(errors.isEmpty, "\(errors.map(\.message))")
    }
  }

  /// Tables from the version without dead letters: their rows counted every claim in `attempts`
  /// and never reset it; the first migration with dead letters resets it.
  @Test func tablesFromThePreviousVersionKeepWorking() async throws {
    let executions = Executions()
    await executions.failNext(1)
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            CREATE TABLE \(table) (
              key text PRIMARY KEY, first_call_at timestamptz NOT NULL, due_at timestamptz NOT NULL,
              lease_until timestamptz, lease_token uuid, claimed_through bigint, attempts integer NOT NULL DEFAULT 0
            )
            """))
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            CREATE TABLE \(table)_calls (
              id bigserial PRIMARY KEY, key text NOT NULL, payload bytea NOT NULL,
              called_at timestamptz NOT NULL DEFAULT clock_timestamp()
            )
            """))
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            INSERT INTO \(table) (key, first_call_at, due_at, attempts)
            VALUES ('k', clock_timestamp(), clock_timestamp(), 7)
            """))
      try await client.query(
        PostgresQuery(unsafeSQL: "INSERT INTO \(table)_calls (key, payload) VALUES ('k', convert_to('[5]', 'UTF8'))"))
      let debouncer = try debouncer(client, table: table, maximumAttempts: 2) { key, payload in
        try await executions.record(key, payload)
      }
      try await debouncer.migrate()
      try await debouncer.migrate()  // idempotent: no second reset
      #expect(try await debouncer.runDue() == 0)  // attempt 1 of 2 fails
      #expect(try await eventually { (try? await debouncer.runDue()) == 1 })
      #expect(await executions.all.map(\.payload) == [[5]])
      #expect(try await count(client, "SELECT count(*)::int FROM \(table)_dead") == 0)
    }
  }
}
#endif
