#if PostgreSQL && Hummingbird
import Foundation
import Pace
import PaceTestSupport
@testable import PacePostgres
import PostgresNIO
import Testing

@Suite("PostgresRateLimitStore's overload for a lone decision, on a real PostgreSQL server", .databaseTestTimeLimit)
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

  /// The overload that decides a batch of one, and the batch function, answer every decision as
  /// the general body alone does (the functions without their path for a token bucket's common
  /// case), on a chosen timeline, from a row of a version before limits were recorded, through
  /// every policy and a change of plan from each to each (the state another policy left, carried
  /// over), and for new keys.
  @Test func aLoneDecisionIsDecidedAsInABatch() async throws {
    try await TestDatabase.withMigratedStore("rl") { client, store, table in
      try await Self.installGeneralBody(client, table)
      // Rows written before limits were recorded (no unit, no tolerance), with a permit owed.
      var owing = PostgresBindings()
      owing.append(Int64(1_800_000_030_000_000))
      try await client.query(
        PostgresQuery(
          unsafeSQL: "INSERT INTO \(table) (key, tat) VALUES ('key', $1), ('key-alone', $1), ('key-general', $1)",
          binds: owing))
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
      /// The three answers to one decision on `key` (each function on a key of its own).
      func decide(_ key: String, _ stored: StoredLimit, takes: Bool) async throws -> (
        batch: [Answer], single: [Answer], general: [Answer]
      ) {
        func request(_ key: String) -> DecisionRequest {
          DecisionRequest(key: key, limit: stored, takes: takes, deadline: .now, databaseNow: instant)
        }
        let batch = try await Self.answers(
          client, PostgresRateLimitStore.batchSQL(table: table),
          PostgresRateLimitStore.batchBindings([request(key)], budget: 30_000_000))
        let single = try await Self.answers(
          client, PostgresRateLimitStore.singleSQL(table: table),
          PostgresRateLimitStore.singleBindings(request("\(key)-alone"), budget: 30_000_000))
        let general = try await Self.answers(
          client, Self.generalSQL(table),
          PostgresRateLimitStore.batchBindings([request("\(key)-general")], budget: 30_000_000))
        return (batch, single, general)
      }
      // New keys: a full bucket, taken in part, then whole; then the whole one again (refused).
      for (cost, key) in [(1, "new-1"), (4, "new-4"), (1, "new-4")] {
        let answers = try await decide(key, try StoredLimit(cost: cost, limit: limits[0]), takes: true)
        #expect(answers.general.count == 1 && (answers.general[0].granted != nil) == (compared < 2))
        #expect(answers.single == answers.general && answers.batch == answers.general, "\(key), cost \(cost)")
        compared += 1
      }
      for (step, limit) in (limits + limits.reversed() + limits).enumerated() {
        for cost in [1, 0, 2, 1] {
          instant += Int64(step % 3 + 1) * 7_000_000
          let answers = try await decide("key", try StoredLimit(cost: cost, limit: limit), takes: cost > 0)
          #expect(answers.general.count == 1)
          #expect(
            answers.single == answers.general && answers.batch == answers.general,
            "step \(step), \(limit), cost \(cost)")
          compared += 1
        }
      }
      #expect(compared == 75)
    }
  }

  /// Batches of several decisions, a key twice in one among them, on seeded random timelines over
  /// a few keys whose limits change (each policy, two rates): the batch function answers each
  /// batch as the general body alone does, row for row.
  @Test(arguments: [11, 12, 13] as [UInt64])
  func batchesAreDecidedAsByTheGeneralBody(seed: UInt64) async throws {
    try await TestDatabase.withMigratedStore("rl") { client, store, table in
      try await Self.installGeneralBody(client, table)
      let limits = [
        RateLimit(permits: 3, per: .seconds(60), burst: 4),
        RateLimit(permits: 2, per: .seconds(30)),
        .slidingWindow(permits: 3, per: .seconds(60)),
        .fixedWindow(permits: 2, per: .seconds(60)),
      ]
      var random = SeededGenerator(seed: seed)
      var instant: Int64 = 1_800_000_000_000_000
      var limitOf: [String: RateLimit] = [:]
      var granted = 0
      for step in 0..<60 {
        instant += Int64.random(in: 0...20_000_000, using: &random)
        // A key's limit changes now and then; most decisions are under the limit it had.
        for key in ["a", "b", "c"] where limitOf[key] == nil || Int.random(in: 0..<8, using: &random) == 0 {
          limitOf[key] = Self.pick(limits, weights: [6, 2, 1, 1], using: &random)
        }
        let requests = try (0..<Int.random(in: 1...5, using: &random)).map { _ in
          let key = ["a", "b", "c", "new-\(step)"].randomElement(using: &random)!
          let cost = [1, 1, 1, 2, 0].randomElement(using: &random)!
          return (key, try StoredLimit(cost: cost, limit: limitOf[key] ?? limits[0]), cost > 0)
        }
        func batch(_ prefix: String) -> PostgresBindings {
          PostgresRateLimitStore.batchBindings(
            requests.map {
              DecisionRequest(key: prefix + $0.0, limit: $0.1, takes: $0.2, deadline: .now, databaseNow: instant)
            },
            budget: 30_000_000)
        }
        let answers = try await Self.answers(client, PostgresRateLimitStore.batchSQL(table: table), batch("c-"))
        let general = try await Self.answers(client, Self.generalSQL(table), batch("g-"))
        #expect(general.count == requests.count)
        #expect(answers == general, "seed \(seed), step \(step): \(requests.map { "\($0.0) \($0.1)" })")
        granted += general.filter { $0.granted != nil }.count
      }
      // The timeline grants and refuses both.
      #expect(granted > 20 && granted < 150)
    }
  }

  /// A decision whose key is locked by another transaction waits for it, then decides on the row
  /// that transaction wrote, never on the row it first found: the common case's one `UPDATE`
  /// checks its conditions again on the row committed meanwhile. A write that leaves one permit
  /// lets the decision take it after the committed TAT; a write that leaves none denies it. Through
  /// the overload for a lone decision and through the batch function.
  @Test(arguments: [(true, true), (true, false), (false, true), (false, false)])
  func aDecisionThatWaitsForItsKeysLockDecidesOnTheRowWrittenMeanwhile(single: Bool, roomLeft: Bool) async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = try TableName(TestDatabase.uniqueTable("rl"))
      let store = try PostgresRateLimitStore(client: clients[0], table: table.name)
      try await store.migrate()
      // Two permits an hour, as a bucket of two: each permit moves the TAT by 1,800 s.
      let stored = try StoredLimit(cost: 1, limit: RateLimit(permits: 2, per: .seconds(3600)))
      let instant: Int64 = 1_800_000_000_000_000
      var row = PostgresBindings()
      row.append(instant)
      row.append(stored.unit)
      row.append(stored.capacity)
      // A full bucket under this limit: the decision alone would be granted at `instant + amount`.
      try await clients[0].query(
        PostgresQuery(
          unsafeSQL: "INSERT INTO \(table) (key, tat, unit, tolerance) VALUES ('k', $1, $2, $3)", binds: row))
      let written = instant + (roomLeft ? 1 : 2) * stored.amount
      let request = DecisionRequest(key: "k", limit: stored, takes: true, deadline: .now, databaseNow: instant)
      let (sql, binds) =
        single
        ? (
          PostgresRateLimitStore.singleSQL(table: table),
          PostgresRateLimitStore.singleBindings(request, budget: 30_000_000)
        )
        : (
          PostgresRateLimitStore.batchSQL(table: table),
          PostgresRateLimitStore.batchBindings([request], budget: 30_000_000)
        )
      let answers = try await clients[1].withConnection { holder in
        let logger = TestDatabase.quietLogger
        try await holder.query("BEGIN", logger: logger)
        try await holder.query(
          PostgresQuery(unsafeSQL: "UPDATE \(table) SET tat = \(written) WHERE key = 'k'"), logger: logger)
        async let decided = Self.answers(clients[0], sql, binds)
        // The decision waits for the row's lock; then the write is committed.
        var waiting = false
        for _ in 0..<200 where !waiting {
          let rows = try await clients[1].query(
            PostgresQuery(
              unsafeSQL: """
                SELECT count(*)::int FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE '%\(PostgresRateLimitStore.functionName(table: table))%'
                """))
          for try await count in rows.decode(Int.self) { waiting = count > 0 }
          if !waiting { try await Task.sleep(for: .milliseconds(20)) }  // real-time: polls a real server
        }
        #expect(waiting)
        try await holder.query("COMMIT", logger: logger)
        return try await decided
      }
      #expect(answers.count == 1 && !(answers.first?.late ?? true))
      if roomLeft {
        #expect(answers.first?.granted == written + stored.amount, "the last permit, after the committed TAT")
      } else {
        #expect(answers.first?.granted == nil && answers.first?.current == written, "denied by the committed row")
      }
    }
  }

  /// The batch function without its common case's path, beside it under another name.
  static func installGeneralBody(_ client: PostgresClient, _ table: TableName) async throws {
    try await client.query(
      PostgresQuery(
        unsafeSQL: try PostgresRateLimitStore.decisionFunctionSQL(
          table: table, single: false, commonCase: false, suffix: "_general")))
  }

  /// The general body's batch statement (see ``installGeneralBody(_:_:)``).
  static func generalSQL(_ table: TableName) -> String {
    PostgresRateLimitStore.batchSQL(table: table).replacingOccurrences(
      of: PostgresRateLimitStore.functionName(table: table),
      with: PostgresRateLimitStore.functionName(table: table, suffix: "_general"))
  }

  /// One of `choices`, drawn with `weights`.
  static func pick<T>(_ choices: [T], weights: [Int], using random: inout SeededGenerator) -> T {
    var draw = Int.random(in: 0..<weights.reduce(0, +), using: &random)
    for (choice, weight) in zip(choices, weights) {
      if draw < weight { return choice }
      draw -= weight
    }
    return choices[choices.count - 1]
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
