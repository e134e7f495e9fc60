#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

extension PostgresRateLimitStore.TableOptions {
  /// Every kind of table the store's decisions are tested on: logged (the default), unlogged, and
  /// pages filled whole.
  static let underTest: [Self] = [.logged, .unlogged, try! Self(durability: .logged, fillfactor: 100)]
}

/// The store's table options: what `migrate()` makes, what it switches, and that a grant on a key
/// that has a row is a HOT update whatever the options.
@Suite("PostgresRateLimitStore's table options, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresTableOptionsTests {
  typealias TableOptions = PostgresRateLimitStore.TableOptions

  /// The store's three tables: the token bucket's and the windows'.
  static func tables(_ name: String) throws -> [TableName] {
    let table = try TableName(name)
    return [table, try table.companion(.slidingWindow), try table.companion(.fixedWindow)]
  }

  /// Each table's `relpersistence` (`p` logged, `u` unlogged), fill factor, file node and
  /// indexed columns, by name.
  static func catalog(_ tables: [TableName], client: PostgresClient) async throws -> [String: TableState] {
    var states: [String: TableState] = [:]
    for table in tables {
      let rows = try await client.query(
        PostgresQuery(
          unsafeSQL: """
            SELECT c.relpersistence::text, coalesce(array_to_string(c.reloptions, ','), ''), c.relfilenode::bigint,
              (SELECT coalesce(string_agg(a.attname, ',' ORDER BY a.attname), '')
               FROM pg_index AS i JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
               WHERE i.indrelid = c.oid)
            FROM pg_class AS c WHERE c.oid = '\(table)'::regclass
            """))
      for try await (persistence, options, fileNode, indexed) in rows.decode((String, String, Int64, String).self) {
        states[table.name] = TableState(
          persistence: persistence, options: options, fileNode: fileNode, indexedColumns: indexed)
      }
    }
    return states
  }

  struct TableState: Equatable {
    let persistence: String
    let options: String
    let fileNode: Int64
    let indexedColumns: String
  }

  @Test(arguments: TableOptions.underTest + [try! TableOptions(durability: .unlogged, fillfactor: 10)])
  func migrateMakesTablesWithTheOptions(options: TableOptions) async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("rl")
      let store = try PostgresRateLimitStore(client: clients[0], table: table, tableOptions: options)
      #expect(store.tableOptions == options)
      try await store.migrate()
      let states = try await Self.catalog(try Self.tables(table), client: clients[0])
      #expect(states.count == 3)
      for (name, state) in states {
        #expect(state.persistence == (options.durability == .logged ? "p" : "u"), "\(name)")
        #expect(state.options == "fillfactor=\(options.fillfactor)", "\(name)")
        // No index on a column that a grant writes: every grant can be a HOT update.
        #expect(state.indexedColumns == "key", "\(name)")
      }
    }
  }

  /// An index on a column that decisions write is named in a warning by `migrate()`: it makes
  /// every grant a full update. The primary key is not.
  @Test func migrateWarnsOfAnIndexThatKeepsGrantsFromBeingHOTUpdates() async throws {
    try await TestDatabase.withClients { clients in
      let logs = InMemoryLogHandler()
      let table = TestDatabase.uniqueTable("rl")
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, logger: Logger(label: "test", factory: { _ in logs }))
      try await store.migrate()
      let warnings = {
        logs.entries.filter { $0.level == .warning }.compactMap { $0.metadata["pace.index"] }.map { "\($0)" }
      }
      #expect(warnings() == [])
      let fixed = try TableName(table).companion(.fixedWindow)
      try await clients[0].query(PostgresQuery(unsafeSQL: "CREATE INDEX \(table)_tat ON \(try TableName(table)) (tat)"))
      try await clients[0].query(PostgresQuery(unsafeSQL: "CREATE INDEX \(table)_w ON \(fixed) (key, window_end)"))
      try await store.migrate()
      #expect(warnings() == ["\(table)_tat", "\(table)_w"])
    }
  }

  /// A store made without options makes the tables every earlier version made.
  @Test func theDefaultOptionsAreLoggedWithAFillFactorOf70() throws {
    let store = try PostgresRateLimitStore(client: SettingsValidationTests.client(), table: "rl")
    #expect(store.tableOptions == .logged)
    #expect(store.tableOptions.durability == .logged && store.tableOptions.fillfactor == 70)
    #expect(TableOptions.unlogged.durability == .unlogged && TableOptions.unlogged.fillfactor == 70)
    #expect(try TableOptions() == .logged)
    #expect("\(TableOptions.unlogged)" == "unlogged, fillfactor 70")
  }

  @Test(arguments: [Int.min, -1, 0, 9, 101, 1000, Int.max])
  func aFillFactorOutsideItsRangeIsAClearError(fillfactor: Int) {
    #expect(
      throws: PacePostgresError.invalidSetting(
        name: "PostgresRateLimitStore.TableOptions.fillfactor", value: "\(fillfactor)",
        rule: "must be in 10...100 (a percentage of each page)")
    ) {
      try TableOptions(durability: .unlogged, fillfactor: fillfactor)
    }
  }

  @Test(arguments: [10, 50, 100])
  func aFillFactorInItsRangeIsKept(fillfactor: Int) throws {
    #expect(try TableOptions(fillfactor: fillfactor).fillfactor == fillfactor)
  }

  /// `migrate()` switches tables made with other options to the store's, keeping every key's
  /// state; migrating again with the same options leaves the tables as they are (no rewrite).
  @Test func migratingSwitchesAnExistingTablesOptionsAndKeepsItsRows() async throws {
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let table = TestDatabase.uniqueTable("rl")
      let tables = try Self.tables(table)
      let base = TestDatabase.chosenInstant
      let limits: [RateLimit] = [
        RateLimit(permits: 2, per: .seconds(3600)), .slidingWindow(permits: 2, per: .seconds(3600)),
        .fixedWindow(permits: 2, per: .seconds(3600)),
      ]
      // Each policy's key (one key per policy: a key's state follows its limit's policy) charged
      // once, under logged tables.
      let first = try PostgresRateLimitStore(client: client, table: table)
      try await first.migrate()
      for limit in limits {
        #expect(
          try await first.tryAcquire("k-\(limit.algorithm)", cost: 1, limit: limit, databaseNow: base)
            == .allowed(remaining: 1))
      }
      let switches = [
        try TableOptions(durability: .unlogged, fillfactor: 50),
        try TableOptions(durability: .unlogged, fillfactor: 90),
        try TableOptions(durability: .logged, fillfactor: 90), .logged,
      ]
      var charged = 1
      for options in switches {
        let store = try PostgresRateLimitStore(client: client, table: table, tableOptions: options)
        try await store.migrate()
        let switched = try await Self.catalog(tables, client: client)
        for (name, state) in switched {
          #expect(state.persistence == (options.durability == .logged ? "p" : "u"), "\(options): \(name)")
          #expect(state.options == "fillfactor=\(options.fillfactor)", "\(options): \(name)")
        }
        try await store.migrate()
        #expect(try await Self.catalog(tables, client: client) == switched, "\(options): migrated again, untouched")
        // Every key's state came along: one permit of two left, then none.
        for limit in limits {
          let decision = try await store.tryAcquire("k-\(limit.algorithm)", cost: 1, limit: limit, databaseNow: base)
          if charged == 1 {
            #expect(decision == .allowed(remaining: 0), "\(options): \(limit)")
          } else {
            #expect(!decision.isAllowed, "\(options): \(limit)")
          }
        }
        charged += 1
      }
    }
  }

  /// A grant on a key that has a row is a heap-only-tuple (HOT) update, whatever the options: no
  /// index covers a column that a decision writes. Few keys, so that their page has room for every
  /// new version even when no old one can be pruned (other tests' transactions may hold them).
  @Test(arguments: TableOptions.underTest)
  func grantsOnKeysThatHaveRowsAreHOTUpdates(options: TableOptions) async throws {
    let table = TestDatabase.uniqueTable("rl")
    let limits: [RateLimit] = [
      RateLimit(permits: 1_000_000, per: .seconds(1)), .slidingWindow(permits: 1000, per: .seconds(1)),
      .fixedWindow(permits: 1_000_000, per: .seconds(3600)),
    ]
    let (keys, rounds) = (10, 4)
    // The decisions' connections close with their client, which sends their statistics.
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: table, tableOptions: options)
      try await store.migrate()
      // Keys of their own per algorithm: a key whose limit changed algorithm would count the use
      // the old one could have let through (PostgresPlanChangeTests), not what this test is about.
      for limit in limits {
        for _ in 0...rounds {
          for key in 0..<keys {
            #expect(try await store.tryAcquire("\(limit.algorithm)-k\(key)", cost: 1, limit: limit).isAllowed)
          }
        }
      }
    }
    try await TestDatabase.withClients { clients in
      let tables = try Self.tables(table)
      let clock = ContinuousClock()
      let deadline = clock.now + .seconds(30)  // a bound on the statistics' arrival, never waited in a passing run
      var counts: [String: (updates: Int64, hot: Int64)] = [:]
      while clock.now < deadline {
        counts = [:]
        for table in tables {
          let rows = try await clients[0].query(
            PostgresQuery(
              unsafeSQL: """
                SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '\(table)'::regclass
                """))
          for try await (updates, hot) in rows.decode((Int64, Int64).self) { counts[table.name] = (updates, hot) }
        }
        if counts.values.allSatisfy({ $0.updates >= Int64(keys * rounds) }) { break }
        // real-time: PostgreSQL's statistics arrive when the closed connections flush them; poll.
        try await Task.sleep(for: .milliseconds(100))
      }
      for table in tables {
        let (updates, hot) = counts[table.name] ?? (0, 0)
        #expect(updates == Int64(keys * rounds), "\(options): \(table.name)")
        #expect(hot == updates, "\(options): \(table.name), \(hot) HOT of \(updates)")
      }
    }
  }

  /// The purge by pages deletes what the purge by rows does, range by range, and only that, on
  /// every kind of table.
  @Test(arguments: TableOptions.underTest)
  func thePurgeByPagesDeletesEveryRowThatCountsNothing(options: TableOptions) async throws {
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let table = TestDatabase.uniqueTable("rl")
      let store = try PostgresRateLimitStore(client: client, table: table, tableOptions: options)
      try await store.migrate()
      let tables = try Self.tables(table)
      // 1970 (long over) and a century ahead, many pages of each, interleaved.
      let (past, future) = (Int64(1_000_000), TestDatabase.chosenInstant + 3_153_600_000_000_000)
      let rows = [
        "(key, tat) SELECT 'k' || i, CASE WHEN i % 3 = 0 THEN \(future) ELSE \(past) END",
        "(key, expires, grants) SELECT 'k' || i, CASE WHEN i % 3 = 0 THEN \(future) ELSE \(past) END, '{1}'",
        "(key, window_end, used) SELECT 'k' || i, CASE WHEN i % 3 = 0 THEN \(future) ELSE \(past) END, 1",
      ]
      for (table, row) in zip(tables, rows) {
        try await client.query(
          PostgresQuery(unsafeSQL: "INSERT INTO \(table) \(row) FROM generate_series(1, 3000) AS i"))
      }
      #expect(try await store.purgeAllExpired(pagesPerStatement: 3) == 3 * 2000)
      #expect(try await store.purgeAllExpired() == 0)
      for table in tables {
        let left = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM \(table)"))
        for try await count in left.decode(Int64.self) { #expect(count == 1000, "\(table.name)") }
      }
    }
  }
}
#endif
