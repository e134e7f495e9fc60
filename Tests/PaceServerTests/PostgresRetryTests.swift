#if PostgreSQL && Hummingbird
import Foundation
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// Conflicts with other transactions, induced for real: a trigger on the limiter's table raises
/// 40001 or 40P01 for the first `n` statements that write to it (a sequence counts them, since a
/// sequence's `nextval` survives the rollback the error causes).
@Suite("PostgresRateLimitStore retries conflicts once, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresRetryTests {
  let slow = RateLimit(permits: 3, per: .seconds(30_000))

  /// Makes the next `failures` writes to `table` fail with `state`.
  static func induce(_ state: String, failures: Int, on table: String, _ client: PostgresClient) async throws {
    let counter = table + "_conflicts"
    for sql in [
      "CREATE SEQUENCE \(counter)",
      """
      CREATE FUNCTION \(counter)() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('\(counter)') <= \(failures) THEN
          RAISE EXCEPTION 'induced conflict' USING ERRCODE = '\(state)';
        END IF;
        RETURN NULL;
      END $$
      """,
      "CREATE TRIGGER \(counter) BEFORE INSERT ON \(table) FOR EACH STATEMENT EXECUTE FUNCTION \(counter)()",
    ] {
      try await client.query(PostgresQuery(unsafeSQL: sql))
    }
  }

  /// One conflict: the decision is retried and charged exactly once.
  @Test(arguments: ["40001", "40P01"])
  func oneConflictIsRetriedAndChargedOnce(state: String) async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("rl")
      let store = try PostgresRateLimitStore(client: clients[0], table: table, timeout: .seconds(30))
      try await store.migrate()
      try await Self.induce(state, failures: 1, on: table, clients[0])
      #expect(try await store.tryAcquire("k", cost: 1, limit: slow) == .allowed(remaining: 2))
      // A query (cost 0) writes too: the trigger has spent its one failure, so this is the state.
      #expect(try await store.tryAcquire("k", cost: 0, limit: slow) == .allowed(remaining: 2))
    }
  }

  /// Two conflicts in a row: the one retry fails too, so the failure policy answers (the fallback,
  /// or an `unavailable` error naming the state), and nothing is charged in the database.
  @Test(arguments: ["40001", "40P01"])
  func twoConflictsInARowFollowThePolicy(state: String) async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("rl")
      let fallback = KeyedRateLimiter<String>(permits: 1, per: .seconds(3600))
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .fallback(fallback), timeout: .seconds(30))
      try await store.migrate()
      try await Self.induce(state, failures: 2, on: table, clients[0])
      // The fallback's own limit (1 per hour) answers.
      #expect(try await store.tryAcquire("k", cost: 1, limit: slow) == .allowed(remaining: 0))
      // Two more failures, for a store that throws instead.
      try await clients[0].query(PostgresQuery(unsafeSQL: "ALTER SEQUENCE \(table)_conflicts RESTART"))
      let throwing = try PostgresRateLimitStore(client: clients[0], table: table, timeout: .seconds(30))
      await #expect {
        try await throwing.tryAcquire("k", cost: 1, limit: slow)
      } throws: { error in
        guard case .unavailable(let reason) = error as? PacePostgresError else { return false }
        return reason.contains(state)
      }
      // Every failure has been spent: the database decides, and has charged nothing so far.
      #expect(try await store.tryAcquire("k", cost: 0, limit: slow) == .allowed(remaining: 3))
    }
  }
}

extension PostgresDebouncerFaultTests {
  /// A worker that is shutting down when a claim's payloads come back gives the claim back
  /// untouched: its handler never starts, no attempt is counted, the lease is released, and
  /// another instance runs the key at once, long before the lease would have ended.
  @Test func aClaimWhoseHandlerHadNotStartedIsGivenBack() async throws {
    let journal = Journal()
    let observed = Observed()
    let table = TestDatabase.uniqueTable("dbf")
    try await TestDatabase.withClients(2, connections: 4) { clients in
      let stopping = try debouncer(clients[0], table: table, lease: .seconds(30), observed: observed) { key, payload in
        await journal.started(key)
        await journal.ended(key, payload)
      }
      let taking = try debouncer(clients[1], table: table, lease: .seconds(30)) { key, payload in
        await journal.started(key)
        await journal.ended(key, payload)
      }
      try await stopping.migrate()
      try await stopping.call("k", [1])
      var claims: [PostgresDebouncer<[Int]>.Claim] = []
      #expect(
        try await eventually {
          claims = (try? await stopping.claim(limit: 1)) ?? []
          return claims.count == 1
        })
      let claim = try #require(claims.first)
      // What the worker does when a shutdown began while the payloads were read.
      #expect(await stopping.execute(claim, mayStart: { false }) == false)
      #expect(await journal.startedCount("k") == 0)
      let rows = try await clients[0].query(
        PostgresQuery(unsafeSQL: "SELECT lease_until IS NULL, attempts FROM \(table) WHERE key = 'k'"))
      var released: [(Bool, Int)] = []
      for try await row in rows.decode((Bool, Int).self) { released.append(row) }
      #expect(released.count == 1 && released[0].0 && released[0].1 == 0, "\(released)")
      #expect(observed.entries(.debug, containing: "had not started").count == 1)
      let ran = try await running([taking]) {
        try await eventually(within: .seconds(10)) { await journal.ran("k") == [[1]] }
      }
      #expect(ran)
    }
  }
}
#endif
