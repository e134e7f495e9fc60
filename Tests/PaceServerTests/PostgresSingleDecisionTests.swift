#if PostgreSQL && Hummingbird
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

@Suite("PostgresRateLimitStore's overload for a lone decision, on a real PostgreSQL server", .timeLimit(.minutes(2)))
struct PostgresSingleDecisionTests {
  /// One decision's row: granted, current, now, late, used, wait.
  struct Answer: Equatable, CustomStringConvertible {
    let granted: Int64?
    let current: Int64?
    let now: Int64
    let late: Bool
    let used: Int64?
    let wait: Int64?
    var description: String { "\(granted as Any) \(current as Any) \(now) \(late) \(used as Any) \(wait as Any)" }
  }

  /// The overload that decides a batch of one answers every decision as the batch function does,
  /// on a chosen timeline, from a row of a version before limits were recorded, through every
  /// policy and a change of plan from each to each (the state another policy left, carried over):
  /// one body decides both, and the overload's own path for a token bucket's common case (a new
  /// key, the same limit, none recorded) decides as that body.
  @Test func aLoneDecisionIsDecidedAsInABatch() async throws {
    try await TestDatabase.withMigratedStore("rl") { client, store, table in
      // Rows written before limits were recorded (no unit, no tolerance), with a permit owed.
      var owing = PostgresBindings()
      owing.append(Int64(1_800_000_030_000_000))
      try await client.query(
        PostgresQuery(unsafeSQL: "INSERT INTO \(table) (key, tat) VALUES ('key', $1), ('key-alone', $1)", binds: owing))
      let limits = [
        RateLimit(permits: 3, per: .seconds(60), burst: 4),
        .slidingWindow(permits: 3, per: .seconds(60)),
        .fixedWindow(permits: 2, per: .seconds(60)),
        RateLimit(permits: 2, per: .seconds(30)),
        .slidingWindow(permits: 5, per: .seconds(120)),
        .fixedWindow(permits: 4, per: .seconds(90)),
      ]
      var instant: Int64 = 1_800_000_000_000_000
      var compared = 0
      // New keys: a full bucket, taken in part, then whole; then the whole one again (refused).
      for (cost, key) in [(1, "new-1"), (4, "new-4"), (1, "new-4")] {
        let stored = try StoredLimit(cost: cost, limit: limits[0])
        func request(_ key: String) -> DecisionRequest {
          DecisionRequest(key: key, limit: stored, takes: true, deadline: .now, databaseNow: instant)
        }
        let batch = try await Self.answers(
          client, PostgresRateLimitStore.batchSQL(table: table),
          PostgresRateLimitStore.batchBindings([request(key)], budget: 30_000_000))
        let single = try await Self.answers(
          client, PostgresRateLimitStore.singleSQL(table: table),
          PostgresRateLimitStore.singleBindings(request("\(key)-alone"), budget: 30_000_000))
        #expect(batch.count == 1 && (batch[0].granted != nil) == (compared < 2))
        #expect(single == batch, "\(key), cost \(cost)")
        compared += 1
      }
      for (step, limit) in (limits + limits.reversed() + limits).enumerated() {
        for cost in [1, 0, 2, 1] {
          instant += Int64(step % 3 + 1) * 7_000_000
          let stored = try StoredLimit(cost: cost, limit: limit)
          func request(_ key: String) -> DecisionRequest {
            DecisionRequest(key: key, limit: stored, takes: cost > 0, deadline: .now, databaseNow: instant)
          }
          let batch = try await Self.answers(
            client, PostgresRateLimitStore.batchSQL(table: table),
            PostgresRateLimitStore.batchBindings([request("key")], budget: 30_000_000))
          let single = try await Self.answers(
            client, PostgresRateLimitStore.singleSQL(table: table),
            PostgresRateLimitStore.singleBindings(request("key-alone"), budget: 30_000_000))
          #expect(batch.count == 1)
          #expect(single == batch, "step \(step), \(limit), cost \(cost)")
          compared += 1
        }
      }
      #expect(compared == 75)
    }
  }

  /// A lone decision of the store on the database's clock (no instant chosen: `$8` NULL) is
  /// decided by the overload, and a second one on its key sees the first one's grant.
  @Test func aLoneDecisionOnTheDatabasesClock() async throws {
    try await TestDatabase.withMigratedStore("rl") { client, store, table in
      let stored = try StoredLimit(cost: 1, limit: RateLimit(permits: 1, per: .seconds(3600)))
      let request = DecisionRequest(key: "k", limit: stored, takes: true, deadline: .now)
      let sql = PostgresRateLimitStore.singleSQL(table: table)
      let first = try await Self.answers(
        client, sql, PostgresRateLimitStore.singleBindings(request, budget: 30_000_000))
      let second = try await Self.answers(
        client, sql, PostgresRateLimitStore.singleBindings(request, budget: 30_000_000))
      #expect(first.count == 1 && first[0].granted != nil && !first[0].late)
      #expect(second.count == 1 && second[0].granted == nil && second[0].current == first[0].granted)
    }
  }

  /// The rows `sql` answers with `binds`, in order; each decision's index (1-based) checked.
  static func answers(_ client: PostgresClient, _ sql: String, _ binds: PostgresBindings) async throws -> [Answer] {
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
    var answers: [Answer] = []
    for try await (index, granted, current, now, late, used, wait) in rows.decode(
      (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
    {
      #expect(index == answers.count + 1)
      answers.append(Answer(granted: granted, current: current, now: now, late: late, used: used, wait: wait))
    }
    return answers
  }
}
#endif
