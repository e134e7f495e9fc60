#if PostgreSQL && Hummingbird
import InMemoryLogging
import Logging
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// A server's first start on an empty database, as the article's example runs it: the store and
/// the debouncer run as services while the server's `beforeServerStarts` migrates their tables.
@Suite("A clean first start, on a real PostgreSQL server", .databaseTestTimeLimit)
struct CleanStartTests {
  /// Their heartbeat and claims start before the migration has made their tables: waiting for it
  /// is normal, so nothing is logged above info (no warning, no PostgreSQL error to read).
  @Test func aCleanFirstStartLogsNothingAboveInfo() async throws {
    let logs = InMemoryLogHandler()
    let logger = {
      var logger = Logger(label: "pace.tests.clean-start", factory: { _ in logs })
      logger.logLevel = .trace
      return logger
    }()
    // A cluster of its own: on the shared one, the whole suite's load could slow the migration
    // into its own waiting warning.
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    let clients = [
      PostgresClient(configuration: TestDatabase.configuration(cluster.url), backgroundLogger: TestDatabase.quietLogger)
    ]
    try await TestDatabase.running(clients) {
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("clean"),
        whenUnavailable: .shareLimit(among: .learned(assuming: 3, heartbeatInterval: .milliseconds(100))),
        logger: logger)
      let debouncer = try PostgresDebouncer<[Int]>(
        client: clients[0], table: TestDatabase.uniqueTable("clean_debounce"), quiet: .milliseconds(50),
        merge: .append, pollInterval: .milliseconds(20), logger: logger
      ) { _, _ in }
      let worker = Task { try await debouncer.run() }
      try await TestDatabase.running(store) {
        // The heartbeat and the claims have found no table before the migration runs.
        #expect(
          try await eventually {
            logs.entries.contains { "\($0.message)".contains("fleet heartbeat") }
              && logs.entries.contains { "\($0.message)".contains("tables do not exist yet") }
          })
        try await store.migrate()
        try await debouncer.migrate()
        #expect(try await store.tryAcquire("k", cost: 1, limit: RateLimit(permits: 10, per: .seconds(1))).isAllowed)
        try await debouncer.call("k", [1])
        #expect(try await eventually { store.fleet.source != .assumed }, "a heartbeat counted")
      }
      worker.cancel()
      try await worker.value
    }
    let loud = logs.entries.filter { $0.level > .info }
    #expect(loud.isEmpty, "\(loud.map { "\($0.level): \($0.message) \($0.metadata)" })")
  }

  /// A PostgreSQL error in a log line is its fields (SQLSTATE, message), not the kilobytes of the
  /// statement that PostgresNIO's debug description repeats.
  @Test func aPostgreSQLErrorIsLoggedByItsFieldsNotItsStatement() async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("absent")
      do {
        try await clients[0].query(
          PostgresQuery(unsafeSQL: "SELECT * FROM \(table) WHERE '\(String(repeating: "x", count: 2000))' <> ''"))
        Issue.record("the table does not exist")
      } catch {
        let metadata = errorMetadata(error)
        #expect(metadata["pace.sqlstate"] == "42P01")
        #expect(metadata["pace.sql_message"] == "relation \"\(table)\" does not exist")
        let size = metadata.values.map { "\($0)".utf8.count }.reduce(0, +)
        #expect(size < 500, "\(metadata)")
      }
    }
  }
}
#endif
