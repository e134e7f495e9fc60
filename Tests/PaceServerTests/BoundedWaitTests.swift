#if PostgreSQL && Hummingbird
import Foundation
import Logging
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// Whatever PostgreSQL waits on (a table lock, a row lock, a slow trigger), a caller answered by
/// the failure policy or a timeout is never charged later, and the database gives up within the
/// caller's budget: issue 31's first point.
@Suite("Every wait bounded by the caller's budget, on a real PostgreSQL server", .databaseTestTimeLimit)
struct BoundedWaitTests {
  /// One permit back every 10,000 s: no refill during a test.
  let slow = RateLimit(permits: 3, per: .seconds(30_000))

  /// How many statements naming `table` are running or waiting in the database, but this one.
  static func active(_ client: PostgresClient, table: String) async throws -> Int {
    let rows = try await client.query(
      PostgresQuery(
        unsafeSQL: """
          SELECT count(*)::int FROM pg_stat_activity
          WHERE pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%\(table)%'
          """))
    for try await count in rows.decode(Int.self) { return count }
    return 0
  }

  /// Polls until no statement on `table` runs any more; false if one still does after `bound`.
  static func becomesIdle(_ client: PostgresClient, table: String, within bound: Duration) async throws -> Bool {
    let deadline = ContinuousClock.now.advanced(by: bound)
    while ContinuousClock.now < deadline {
      if try await active(client, table: table) == 0 { return true }
      try await Task.sleep(for: .milliseconds(20))  // real-time: polling the database, bounded
    }
    return try await active(client, table: table) == 0
  }

  /// The table locked before the store's first decision, as a migration on a fresh deployment
  /// would: the statements' preparation must not wait for it past the budget, and nothing is
  /// charged once the lock goes.
  @Test func aTableLockedBeforeTheFirstDecisionChargesNothingAndHoldsNoStatement() async throws {
    try await TestDatabase.withClients(2, connections: 8) { clients in
      let table = TestDatabase.uniqueTable("bw")
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .allow, timeout: .milliseconds(400),
        circuitBreaker: CircuitBreaker(failureThreshold: 1000))
      // The state is read through a store with a long timeout: on a loaded machine, a read
      // through the 400 ms store could be the policy's answer.
      let checker = try PostgresRateLimitStore(client: clients[1], table: table, timeout: .seconds(30))
      try await store.migrate()
      try await clients[1].withTransaction(logger: TestDatabase.quietLogger) { locker in
        try await locker.query(
          "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.quietLogger)
        let answers = try await withThrowingTaskGroup(of: RateLimitDecision.self) { group in
          for index in 0..<5 { group.addTask { try await store.tryAcquire("k\(index % 2)", cost: 1, limit: slow) } }
          return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0 == .allowed(remaining: 0) }, "\(answers)")  // the policy's answer
        // real-time: the lock is still held; the database gave up on every statement within
        // its budget (a bound of 10 s, never reached when it holds).
        #expect(try await Self.becomesIdle(clients[1], table: table, within: .seconds(10)))
      }
      #expect(try await Self.becomesIdle(clients[1], table: table, within: .seconds(30)))
      #expect(try await checker.tryAcquire("k0", cost: 0, limit: slow) == .allowed(remaining: 3))
      #expect(try await checker.tryAcquire("k1", cost: 0, limit: slow) == .allowed(remaining: 3))
    }
  }

  /// A trigger that takes longer than the budget: the decision answered by the policy is undone,
  /// not committed after its caller left.
  @Test func aSlowTriggerNeverChargesADecisionItsCallerGaveUpOn() async throws {
    try await TestDatabase.withClients(2, connections: 8) { clients in
      let table = TestDatabase.uniqueTable("bw")
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .allow, timeout: .milliseconds(400),
        circuitBreaker: CircuitBreaker(failureThreshold: 1000))
      let checker = try PostgresRateLimitStore(client: clients[1], table: table, timeout: .seconds(30))
      try await store.migrate()
      #expect(try await checker.tryAcquire("slow", cost: 1, limit: slow) == .allowed(remaining: 2))
      try await clients[1].query(
        PostgresQuery(
          unsafeSQL: """
            CREATE FUNCTION \(table)_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.key = 'slow' THEN PERFORM pg_sleep(1.5); END IF;
              RETURN NEW;
            END $$
            """))
      try await clients[1].query(
        PostgresQuery(
          unsafeSQL: """
            CREATE TRIGGER \(table)_sleep BEFORE INSERT OR UPDATE ON \(table)
            FOR EACH ROW EXECUTE FUNCTION \(table)_sleep()
            """))
      #expect(try await store.tryAcquire("slow", cost: 1, limit: slow) == .allowed(remaining: 0))
      // real-time: the trigger ends 1.5 s after it began; then the batch is undone.
      #expect(try await Self.becomesIdle(clients[1], table: table, within: .seconds(30)))
      try await clients[1].query(PostgresQuery(unsafeSQL: "DROP TRIGGER \(table)_sleep ON \(table)"))
      #expect(try await checker.tryAcquire("slow", cost: 0, limit: slow) == .allowed(remaining: 2))
      #expect(try await checker.tryAcquire("fast", cost: 1, limit: slow) == .allowed(remaining: 2))
    }
  }

  func debouncer(_ client: PostgresClient, table: String) throws -> PostgresDebouncer<[Int]> {
    try PostgresDebouncer<[Int]>(
      client: client, table: table, quiet: .milliseconds(1), lease: .seconds(30), merge: .append,
      pollInterval: .milliseconds(20), timeout: .seconds(2)
    ) { _, _ in }
  }

  /// A claim and a settle behind a table lock give up within the debouncer's timeout, the
  /// database's wait included, and change nothing.
  @Test func aClaimAndASettleBehindALockedTableGiveUpAndChangeNothing() async throws {
    try await TestDatabase.withClients(2, connections: 8) { clients in
      let table = TestDatabase.uniqueTable("bwd")
      let debouncer = try debouncer(clients[0], table: table)
      try await debouncer.migrate()
      try await debouncer.call("k", [1])
      try await Task.sleep(for: .milliseconds(20))  // real-time: past the 1 ms quiet period
      try await clients[1].withTransaction(logger: TestDatabase.quietLogger) { locker in
        try await locker.query(
          "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.quietLogger)
        await #expect(throws: PacePostgresError.self) { try await debouncer.claim(limit: 16) }
        #expect(try await Self.becomesIdle(clients[1], table: table, within: .seconds(10)))
      }
      // The failed claim took no lease and counted no attempt.
      let claims = try await debouncer.claim(limit: 16)
      #expect(claims.map(\.key) == ["k"])
      #expect(claims.first?.attempt == 1)
      guard let claim = claims.first else { return }
      try await clients[1].withTransaction(logger: TestDatabase.quietLogger) { locker in
        try await locker.query(
          "LOCK TABLE \(unescaped: table)_calls IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.quietLogger)
        await #expect(throws: PacePostgresError.self) { try await debouncer.settle(claim, deadLetter: nil) }
        #expect(try await Self.becomesIdle(clients[1], table: table, within: .seconds(10)))
      }
      // The failed settle was rolled back: the lease is still held, the payload still there.
      #expect(try await debouncer.settle(claim, deadLetter: nil))
    }
  }
}

#endif
