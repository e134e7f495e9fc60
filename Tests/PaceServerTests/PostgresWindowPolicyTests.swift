#if PostgreSQL && Hummingbird
import Foundation
import Pace
@testable import PacePostgres
import PaceTestSupport
import PostgresNIO
import Testing

/// The store's window policies, per-key limits and cost rule, each decided at instants the test
/// chooses (``PostgresRateLimitStore/tryAcquire(_:cost:limit:databaseNow:)``), with exact answers.
@Suite("PostgresRateLimitStore's policies, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresWindowPolicyTests {
  /// Runs `body` with a migrated store on a table of its own, made with `options`.
  func withStore(
    timeout: Duration = .seconds(30), options: PostgresRateLimitStore.TableOptions = .logged,
    _ body: @Sendable (PostgresRateLimitStore, PostgresClient) async throws -> Void
  ) async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), tableOptions: options, timeout: timeout)
      try await store.migrate()
      try await body(store, clients[0])
    }
  }

  /// "At most 3 in any 10 s": a grant counts during `[g, g + 10 s)`; a denial waits for the
  /// oldest grant whose expiry frees enough, for cost 0 as for cost 1.
  @Test(arguments: PostgresRateLimitStore.TableOptions.underTest)
  func aSlidingWindowCountsEveryGrantForItsWindow(options: PostgresRateLimitStore.TableOptions) async throws {
    try await withStore(options: options) { store, _ async throws in
      let limit = RateLimit.slidingWindow(permits: 3, per: .seconds(10))
      func at(_ seconds: Double, _ cost: Int) async throws -> RateLimitDecision {
        try await store.tryAcquire(
          "k", cost: cost, limit: limit, databaseNow: TestDatabase.chosenInstant + TestDatabase.microseconds(seconds))
      }
      #expect(try await at(0, 1) == .allowed(remaining: 2))
      #expect(try await at(2, 2) == .allowed(remaining: 0))
      #expect(try await at(5, 1) == .limited(retryAfter: .seconds(5)))  // the grant at 0 leaves at 10
      #expect(try await at(5, 2) == .limited(retryAfter: .seconds(7)))  // both at 2 leave at 12
      #expect(try await at(5, 0) == .limited(retryAfter: .seconds(5)))  // cost 1's answer, nothing taken
      #expect(try await at(9.999_999, 1) == .limited(retryAfter: .microseconds(1)))
      #expect(try await at(10, 1) == .allowed(remaining: 0))
      #expect(try await at(10, 0) == .limited(retryAfter: .seconds(2)))
      #expect(try await at(12, 0) == .allowed(remaining: 2))
      #expect(try await at(12, 2) == .allowed(remaining: 0))
      #expect(try await at(20, 3) == .limited(retryAfter: .seconds(2)))  // all three of 10 and 12 must leave
      #expect(try await at(22, 3) == .allowed(remaining: 0))
    }
  }

  /// "3 per window of 10 s", the windows aligned to the Unix epoch: the count starts again at each
  /// window's start, and a denial waits for it; before the epoch too (floor division).
  @Test(arguments: PostgresRateLimitStore.TableOptions.underTest)
  func aFixedWindowCountsPerWindowAlignedToTheEpoch(options: PostgresRateLimitStore.TableOptions) async throws {
    try await withStore(options: options) { store, _ async throws in
      let limit = RateLimit.fixedWindow(permits: 3, per: .seconds(10))
      func at(_ instant: Int64, _ cost: Int, key: String = "k") async throws -> RateLimitDecision {
        try await store.tryAcquire(key, cost: cost, limit: limit, databaseNow: instant)
      }
      let base = TestDatabase.chosenInstant
      #expect(try await at(base + TestDatabase.microseconds(9.5), 2) == .allowed(remaining: 1))
      #expect(try await at(base + TestDatabase.microseconds(9.5), 2) == .limited(retryAfter: .milliseconds(500)))
      #expect(try await at(base + TestDatabase.microseconds(9.999_999), 1) == .allowed(remaining: 0))
      #expect(try await at(base + TestDatabase.microseconds(9.999_999), 0) == .limited(retryAfter: .microseconds(1)))
      #expect(try await at(base + TestDatabase.microseconds(10), 0) == .allowed(remaining: 3))
      #expect(try await at(base + TestDatabase.microseconds(10), 2) == .allowed(remaining: 1))
      #expect(try await at(base + TestDatabase.microseconds(19.75), 2) == .limited(retryAfter: .milliseconds(250)))
      #expect(try await at(base + TestDatabase.microseconds(20), 3) == .allowed(remaining: 0))
      // The window [-10 s, 0) of the epoch ends 1 µs after -1 µs.
      #expect(try await at(-1, 3, key: "early") == .allowed(remaining: 0))
      #expect(try await at(-1, 1, key: "early") == .limited(retryAfter: .microseconds(1)))
      #expect(try await at(0, 3, key: "early") == .allowed(remaining: 0))
    }
  }

  /// The cost rule, for every policy: a negative cost and one above the burst (a window's permits)
  /// throw and take nothing; a cost of 0 takes nothing and answers as cost 1 would: the permits
  /// available now, or cost 1's `retryAfter` on a key that denies cost 1.
  @Test(arguments: [
    RateLimit(permits: 2, per: .seconds(3600)), .slidingWindow(permits: 2, per: .seconds(3600)),
    .fixedWindow(permits: 2, per: .seconds(3600)),
  ])
  func theCostRuleHoldsForEveryPolicy(limit: RateLimit) async throws {
    try await withStore { store, _ async throws in
      let start = TestDatabase.chosenInstant
      await #expect(throws: InvalidInput.costAboveBurst(cost: 3, burst: 2)) {
        try await store.tryAcquire("k", cost: 3, limit: limit, databaseNow: start)
      }
      for cost in [3, Int.max] {
        await #expect(throws: InvalidInput.costAboveBurst(cost: cost, burst: 2)) {
          try await store.tryAcquire("k", cost: cost, limit: limit)
        }
      }
      for cost in [-1, Int.min] {
        await #expect(throws: InvalidInput.negativeCost(cost)) {
          try await store.tryAcquire("k", cost: cost, limit: limit)
        }
      }
      #expect(try await store.tryAcquire("k", cost: 0, limit: limit, databaseNow: start) == .allowed(remaining: 2))
      #expect(try await store.tryAcquire("k", cost: 2, limit: limit, databaseNow: start) == .allowed(remaining: 0))
      let later = start + TestDatabase.microseconds(1)
      let costOne = try await store.tryAcquire("k", cost: 1, limit: limit, databaseNow: later)
      // The token bucket gives a permit back every 1800 s; the windows free both at 3600 s.
      let wait: Duration = limit.algorithm == .tokenBucket ? .seconds(1799) : .seconds(3599)
      #expect(costOne == .limited(retryAfter: wait))
      for _ in 0..<3 {
        #expect(try await store.tryAcquire("k", cost: 0, limit: limit, databaseNow: later) == costOne)
      }
      // Nothing was taken by the queries: the key frees at the same instant as before them.
      let freed = later + wait.wholeMicroseconds!
      #expect(
        try await store.tryAcquire("k", cost: 0, limit: limit, databaseNow: freed - 1)
          == .limited(retryAfter: .microseconds(1)))
      #expect(try await store.tryAcquire("k", cost: 1, limit: limit, databaseNow: freed).isAllowed)
    }
  }

  /// "Never" has one spelling: at the end of the timeline, a request whose grant could not be
  /// recorded (a TAT, an expiry or a window's end past the largest bigint) is refused with
  /// `RateLimitDecision.never` for every algorithm, and takes nothing; so is a key whose stored
  /// TAT is there already.
  @Test(arguments: [
    RateLimit(permits: 1, per: .seconds(1)), .slidingWindow(permits: 1, per: .seconds(1)),
    .fixedWindow(permits: 1, per: .seconds(1)),
  ])
  func aRefusalAtTheEndOfTheTimelineIsNever(limit: RateLimit) async throws {
    try await withStore { store, client async throws in
      let end = Int64.max - 10
      for cost in [1, 0] {
        #expect(
          try await store.tryAcquire("k", cost: cost, limit: limit, databaseNow: end)
            == .limited(retryAfter: RateLimitDecision.never))
      }
      // Nothing was taken: the key is fresh at the chosen instant.
      #expect(
        try await store.tryAcquire("k", cost: 0, limit: limit, databaseNow: TestDatabase.chosenInstant)
          == .allowed(remaining: 1))
      guard limit.algorithm == .tokenBucket else { return }
      try await client.query(
        PostgresQuery(unsafeSQL: "INSERT INTO \(store.tableName) (key, tat) VALUES ('far', \(Int64.max - 5))"))
      #expect(
        try await store.tryAcquire("far", cost: 1, limit: limit, databaseNow: TestDatabase.chosenInstant)
          == .limited(retryAfter: RateLimitDecision.never))
      #expect(try await store.tryAcquire("far", cost: 1, limit: limit) == .limited(retryAfter: RateLimitDecision.never))
    }
  }

  /// Window limits the store cannot count are a thrown error, never a trap or a blow-up: a window
  /// too long for 64-bit microseconds, a sliding window of more permits than a row keeps.
  @Test func windowLimitsOutOfRangeAreAClearError() async throws {
    try await withStore { store, _ async throws in
      let refused: [RateLimit] = [
        .slidingWindow(permits: 1, per: .seconds(Int64.max)), .fixedWindow(permits: 1, per: .seconds(Int64.max) * 4),
        .fixedWindow(permits: 1, per: .seconds(Int64.max / 1000)), .slidingWindow(permits: Int.max, per: .seconds(1)),
        .slidingWindow(permits: StoredLimit.maximumSlidingPermits + 1, per: .seconds(1)),
      ]
      for limit in refused {
        await #expect(throws: PacePostgresError.self, "\(limit)") {
          try await store.tryAcquire("k", cost: 1, limit: limit)
        }
      }
      // In range at the edges: a nanosecond window counts a microsecond; the most permits a
      // sliding window holds, taken at once; any count in a fixed window.
      #expect(try await store.tryAcquire("k", cost: 1, limit: .fixedWindow(permits: 1, per: .nanoseconds(1))).isAllowed)
      let widest = RateLimit.slidingWindow(permits: StoredLimit.maximumSlidingPermits, per: .seconds(3600))
      // Other keys: a key's state follows its limit's policy.
      #expect(try await store.tryAcquire("k2", cost: widest.permits, limit: widest) == .allowed(remaining: 0))
      #expect(try await store.tryAcquire("k2", cost: 0, limit: widest).isAllowed == false)
      let fixed = RateLimit.fixedWindow(permits: Int.max, per: .seconds(36_000_000))
      #expect(try await store.tryAcquire("k3", cost: Int.max, limit: fixed) == .allowed(remaining: 0))
      #expect(try await !store.tryAcquire("k3", cost: 1, limit: fixed).isAllowed)
    }
  }

  /// Keys with different limits and policies, decided in one batch (one statement), each under its
  /// own limit: a plan per key needs nothing from the store but each call's limit.
  @Test func keysWithTheirOwnLimitsAreDecidedInOneBatch() async throws {
    try await withStore { store, client async throws in
      let plans: [(String, RateLimit)] = [
        ("free", RateLimit(permits: 2, per: .seconds(3600))),
        ("paid", RateLimit(permits: 5, per: .seconds(3600))),
        ("sliding", .slidingWindow(permits: 3, per: .seconds(3600))),
        ("fixed", .fixedWindow(permits: 1, per: .seconds(3600))),
      ]
      // Each key six times, interleaved as callers would come.
      let requests = try (0..<6).flatMap { _ in
        try plans.map { key, limit in
          DecisionRequest(
            key: key, limit: try StoredLimit(cost: 1, limit: limit), takes: true, deadline: .now,
            databaseNow: TestDatabase.chosenInstant)
        }
      }
      let rows = try await client.query(
        PostgresQuery(
          unsafeSQL: PostgresRateLimitStore.batchSQL(table: store.tableName),
          binds: PostgresRateLimitStore.batchBindings(requests, budget: 30_000_000)))
      var granted: [String: Int] = [:]
      var answered = 0
      for try await (index, grant, _, _, late, _, _) in rows.decode(
        (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
      {
        #expect(!late)
        answered += 1
        if grant != nil { granted[requests[index - 1].key, default: 0] += 1 }
      }
      #expect(answered == 24)
      #expect(granted == ["free": 2, "paid": 5, "sliding": 3, "fixed": 1])
      // Through the store, concurrently: the same limits, each key's answers its own.
      let decisions = try await withThrowingTaskGroup(of: (String, RateLimitDecision).self) { group in
        for _ in 0..<6 {
          for (key, limit) in plans {
            group.addTask {
              (
                key,
                try await store.tryAcquire("2-" + key, cost: 1, limit: limit, databaseNow: TestDatabase.chosenInstant)
              )
            }
          }
        }
        return try await group.reduce(into: [String: [RateLimitDecision]]()) { $0[$1.0, default: []].append($1.1) }
      }
      for (key, limit) in plans {
        let remaining = decisions[key, default: []].compactMap { decision -> Int? in
          if case .allowed(let remaining) = decision { return remaining }
          return nil
        }
        #expect(remaining.sorted() == Array(0..<limit.burst), "\(key)")
      }
    }
  }

  /// A `KeyedRateLimiter` with a plan per key, backed by the store: each key's decisions follow its
  /// own limit and policy, on the database's clock.
  @Test func aKeyedLimiterPassesEachKeysOwnLimitToTheStore() async throws {
    try await withStore { store, _ async throws in
      let plans: [String: RateLimit] = [
        "free": RateLimit(permits: 2, per: .seconds(3600)), "paid": RateLimit(permits: 5, per: .seconds(3600)),
        "sliding": .slidingWindow(permits: 3, per: .seconds(3600)),
        "fixed": .fixedWindow(permits: 1, per: .seconds(36_000_000)),
      ]
      let limiter = StoreBackedRateLimiter<String>(limits: { plans[$0]! }, store: store)
      for (key, limit) in plans {
        #expect(limiter.limit(for: key) == limit)
        var remaining: [Int] = []
        for _ in 0...limit.burst {
          if case .allowed(let left) = try await limiter.decide(key, cost: 1) { remaining.append(left) }
        }
        #expect(remaining == Array((0..<limit.burst).reversed()), "\(key)")
        await #expect(throws: InvalidInput.costAboveBurst(cost: limit.burst + 1, burst: limit.burst)) {
          try await limiter.decide(key, cost: limit.burst + 1)
        }
        #expect(try await !limiter.decide(key, cost: 0).isAllowed, "\(key): cost 0 on a key that denies cost 1")
      }
    }
  }

  /// A window key that another transaction inserts while a batch decides it: the batch waits for
  /// that transaction, then decides against the committed row (full: denied), not a row of its own.
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 2, per: .seconds(10)), .fixedWindow(permits: 2, per: .seconds(10)),
  ])
  func aWindowKeyInsertedMeanwhileIsDecidedAgainstItsRow(limit: RateLimit) async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = try TableName(TestDatabase.uniqueTable("rl"))
      let store = try PostgresRateLimitStore(client: clients[0], table: table.name)
      try await store.migrate()
      let stored = try StoredLimit(cost: 1, limit: limit)
      let windows = try table.companion(stored.algorithm)
      let now = TestDatabase.chosenInstant
      let row =
        limit.algorithm == .slidingWindow
        ? "(key, expires, grants) VALUES ('x', \(now + stored.window), '{\(now),\(now)}')"
        : "(key, window_end, used) VALUES ('x', \(now + stored.window), 2)"
      try await clients[1].withConnection { other in
        let logger = TestDatabase.quietLogger
        try await other.query("BEGIN", logger: logger)
        try await other.query(PostgresQuery(unsafeSQL: "INSERT INTO \(windows) \(row)"), logger: logger)
        async let batch: [(Int, Int64?, Int64?)] = {
          let requests = ["x", "y"].map {
            DecisionRequest(key: $0, limit: stored, takes: true, deadline: .now, databaseNow: now)
          }
          let rows = try await clients[0].query(
            PostgresQuery(
              unsafeSQL: PostgresRateLimitStore.batchSQL(table: table),
              binds: PostgresRateLimitStore.batchBindings(requests, budget: 30_000_000)))
          var answers: [(Int, Int64?, Int64?)] = []
          for try await (index, granted, _, _, _, _, wait) in rows.decode(
            (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
          {
            answers.append((index, granted, wait))
          }
          return answers
        }()
        var waiting = false
        for _ in 0..<200 where !waiting {
          let rows = try await clients[0].query(
            "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%_decide%'")
          for try await count in rows.decode(Int.self) { waiting = count > 0 }
          if !waiting { try await Task.sleep(for: .milliseconds(50)) }  // real-time: polls a real server
        }
        #expect(waiting)
        try await other.query("COMMIT", logger: logger)
        let answers = try await batch
        #expect(answers.map(\.0) == [1, 2])
        #expect(answers.first?.1 == nil && answers.first?.2 == stored.window, "x is denied by the committed row")
        #expect(answers.last?.1 != nil, "y is granted")
      }
    }
  }

  /// A table made by 0.2.0's migration keeps its keys' state after this version's `migrate()`,
  /// which adds the window policies' tables beside it and switches it to the store's table
  /// options; migrating again changes nothing.
  @Test(arguments: PostgresRateLimitStore.TableOptions.underTest)
  func aTableOfTheLastVersionKeepsWorkingAfterTheMigration(options: PostgresRateLimitStore.TableOptions)
    async throws
  {
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let table = try TableName(TestDatabase.uniqueTable("rl"))
      // 0.2.0's migration, verbatim.
      try await client.query(
        PostgresQuery(
          unsafeSQL: """
            CREATE TABLE IF NOT EXISTS \(table) (
              key text PRIMARY KEY,
              tat bigint NOT NULL
            ) WITH (fillfactor = 70)
            """))
      // A key charged by the old version: one permit per hour, its TAT an hour ahead.
      let hourly = RateLimit(permits: 1, per: .seconds(3600))
      let charged = TestDatabase.chosenInstant + TestDatabase.microseconds(3600)
      try await client.query(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (key, tat) VALUES ('old', \(charged))"))
      let store = try PostgresRateLimitStore(client: client, table: table.name, tableOptions: options)
      try await store.migrate()
      try await store.migrate()
      #expect(
        try await store.tryAcquire("old", cost: 1, limit: hourly, databaseNow: TestDatabase.chosenInstant)
          == .limited(retryAfter: .seconds(3600)))
      #expect(try await store.tryAcquire("old", cost: 1, limit: hourly, databaseNow: charged) == .allowed(remaining: 0))
      #expect(try await store.tryAcquire("new", cost: 1, limit: .slidingWindow(permits: 1, per: .seconds(1))).isAllowed)
      #expect(
        try await store.tryAcquire("newer", cost: 1, limit: .fixedWindow(permits: 1, per: .seconds(1_000_000)))
          .isAllowed)
      // The old table's columns are as they were, with the limit each row is written under, when
      // it changed and when its last grant was decided beside them (NULL in the rows written
      // before).
      let columns = try await client.query(
        PostgresQuery(
          unsafeSQL: """
            SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
            FROM information_schema.columns WHERE table_name = '\(table.name)'
            """))
      for try await text in columns.decode(String.self) {
        #expect(text == "key text, tat bigint, unit bigint, tolerance bigint, changed bigint, decided bigint")
      }
    }
  }

  /// A window decision's waits are bounded by its caller's budget as a token bucket's are: behind
  /// a table lock, a row lock held by another session and a slow trigger on the window's table,
  /// the failure policy answers and nothing is charged later.
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 3, per: .seconds(30_000)), .fixedWindow(permits: 3, per: .seconds(36_000_000)),
  ])
  func aWindowDecisionIsBoundedByItsCallersBudget(limit: RateLimit) async throws {
    try await TestDatabase.withClients(2, connections: 8) { clients in
      let table = TestDatabase.uniqueTable("bw")
      let windows = "\(table)_\(limit.algorithm == .slidingWindow ? "sliding" : "fixed")"
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .allow, timeout: .milliseconds(400),
        circuitBreaker: CircuitBreaker(failureThreshold: 1000))
      let checker = try PostgresRateLimitStore(client: clients[1], table: table, timeout: .seconds(30))
      try await store.migrate()
      let logger = TestDatabase.quietLogger
      try await clients[1].withTransaction(logger: logger) { locker in
        try await locker.query("LOCK TABLE \(unescaped: windows) IN ACCESS EXCLUSIVE MODE", logger: logger)
        let answers = try await withThrowingTaskGroup(of: RateLimitDecision.self) { group in
          for index in 0..<5 { group.addTask { try await store.tryAcquire("k\(index % 2)", cost: 1, limit: limit) } }
          return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0 == .allowed(remaining: 0) }, "\(answers)")  // the policy's answer
        // real-time: the database gave up on every statement within its budget (a bound).
        #expect(try await BoundedWaitTests.becomesIdle(clients[1], table: table, within: .seconds(10)))
      }
      #expect(try await BoundedWaitTests.becomesIdle(clients[1], table: table, within: .seconds(30)))
      #expect(try await checker.tryAcquire("k0", cost: 0, limit: limit) == .allowed(remaining: 3))
      #expect(try await checker.tryAcquire("k1", cost: 0, limit: limit) == .allowed(remaining: 3))
      // A row held by another session.
      #expect(try await checker.tryAcquire("held", cost: 1, limit: limit) == .allowed(remaining: 2))
      try await clients[1].withTransaction(logger: logger) { locker in
        try await locker.query(
          PostgresQuery(unsafeSQL: "SELECT 1 FROM \(windows) WHERE key = 'held' FOR UPDATE"), logger: logger)
        #expect(try await store.tryAcquire("held", cost: 1, limit: limit) == .allowed(remaining: 0))
      }
      #expect(try await checker.tryAcquire("held", cost: 0, limit: limit) == .allowed(remaining: 2))
      // A trigger slower than the budget: the write is undone.
      #expect(try await checker.tryAcquire("slow", cost: 1, limit: limit) == .allowed(remaining: 2))
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
            CREATE TRIGGER \(table)_sleep BEFORE INSERT OR UPDATE ON \(windows)
            FOR EACH ROW EXECUTE FUNCTION \(table)_sleep()
            """))
      #expect(try await store.tryAcquire("slow", cost: 1, limit: limit) == .allowed(remaining: 0))
      #expect(try await BoundedWaitTests.becomesIdle(clients[1], table: table, within: .seconds(30)))
      try await clients[1].query(PostgresQuery(unsafeSQL: "DROP TRIGGER \(table)_sleep ON \(windows)"))
      #expect(try await checker.tryAcquire("slow", cost: 0, limit: limit) == .allowed(remaining: 2))
    }
  }

  /// The purge deletes the rows of every policy that count nothing any more, and only those.
  @Test(arguments: PostgresRateLimitStore.TableOptions.underTest)
  func thePurgeDeletesRowsOfEveryPolicyThatCountNothing(options: PostgresRateLimitStore.TableOptions) async throws {
    try await withStore(options: options) { store, _ async throws in
      let past = TestDatabase.microseconds(1000)  // 1970: long over on the database's clock
      // A century after the tests' chosen instant.
      let future = TestDatabase.chosenInstant + TestDatabase.microseconds(100 * 365 * 86_400)
      let limits: [RateLimit] = [
        RateLimit(permits: 1, per: .seconds(60)), .slidingWindow(permits: 1, per: .seconds(60)),
        .fixedWindow(permits: 1, per: .seconds(60)),
      ]
      for (index, limit) in limits.enumerated() {
        for key in 0..<3 {
          _ = try await store.tryAcquire("past-\(index)-\(key)", cost: 1, limit: limit, databaseNow: past)
        }
        _ = try await store.tryAcquire("future-\(index)", cost: 1, limit: limit, databaseNow: future)
      }
      #expect(try await store.purgeExpired(batchSize: 4) == 4)
      #expect(try await store.purgeExpired(batchSize: 4) == 4)
      #expect(try await store.purgeExpired(batchSize: 4) == 1)
      #expect(try await store.purgeExpired() == 0)
      for (index, limit) in limits.enumerated() {
        #expect(
          try await !store.tryAcquire("future-\(index)", cost: 1, limit: limit, databaseNow: future).isAllowed,
          "\(limit)")
      }
    }
  }

  /// The denial cache stays exact for the window policies, on the database's own clock: a denied
  /// key is answered locally, never longer than the database would say, cost 0 with it; another
  /// policy or cost of the same key is the database's to decide (another policy counts what the
  /// key used under this one: its limit changed policy).
  @Test(arguments: [
    RateLimit.slidingWindow(permits: 2, per: .seconds(3600)), .fixedWindow(permits: 2, per: .seconds(36_000_000)),
  ])
  func theDenialCacheIsExactForWindows(limit: RateLimit) async throws {
    try await withStore { store, _ async throws in
      #expect(try await store.tryAcquire("k", cost: 2, limit: limit) == .allowed(remaining: 0))
      guard case .limited(let remote) = try await store.tryAcquire("k", cost: 1, limit: limit) else {
        Issue.record("a full window granted more")
        return
      }
      let before = store.batcher.batchesSent
      for cost in [1, 0, 1] {
        guard case .limited(let local) = try await store.tryAcquire("k", cost: cost, limit: limit) else {
          Issue.record("a denied key was granted at cost \(cost)")
          return
        }
        #expect(local <= remote)
      }
      #expect(store.batcher.batchesSent == before)
      #expect(try await !store.tryAcquire("k", cost: 1, limit: RateLimit(permits: 2, per: .seconds(3600))).isAllowed)
      #expect(try await !store.tryAcquire("k", cost: 2, limit: limit).isAllowed)
      #expect(store.batcher.batchesSent == before + 2)
    }
  }
}

/// The store and memory give the same decisions on seeded random timelines, for every policy: a
/// few keys, each with its own limit, random gaps and costs from 0 to the burst (and now and then
/// one outside it, which both refuse the same way). The store decides at the timeline's instants
/// (``PostgresRateLimitStore/tryAcquire(_:cost:limit:databaseNow:)``), memory reads them from a
/// ``TestScheduler`` advanced to the same instants.
///
/// Units: the store counts whole microseconds, memory nanoseconds. The instants are whole
/// microseconds, and every limit's emission interval (a window, or a token bucket's
/// `interval / permits`) is a whole number of microseconds, where the store's rounding (the
/// increment up, the tolerance down, a window up) is exact: then both compute the same integers.
@Suite("PostgresRateLimitStore against memory, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresDifferentialTests {
  /// Limits whose arithmetic is whole microseconds, one per key.
  static let limits: [RateLimit] = [
    RateLimit(permits: 4, per: .seconds(2)),
    RateLimit(permits: 10, per: .seconds(1), burst: 3),
    RateLimit(permits: 3, per: .milliseconds(300), burst: 5),
    .slidingWindow(permits: 3, per: .seconds(1)),
    .slidingWindow(permits: 5, per: .milliseconds(700)),
    .fixedWindow(permits: 4, per: .seconds(1)),
    .fixedWindow(permits: 2, per: .milliseconds(250)),
  ]

  @Test(arguments: [1, 2, 3] as [UInt64], PostgresRateLimitStore.TableOptions.underTest)
  func theStoreDecidesAsMemoryOnARandomTimeline(seed: UInt64, options: PostgresRateLimitStore.TableOptions)
    async throws
  {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), tableOptions: options, timeout: .seconds(30))
      try await store.migrate()
      var random = SeededGenerator(seed: seed)
      let keys = (0..<Self.limits.count).map { "key-\($0)" }
      let limitOf = Dictionary(uniqueKeysWithValues: zip(keys, Self.limits.shuffled(using: &random)))
      var memory = MemoryLimits(limitOf: limitOf)
      var now = TestDatabase.chosenInstant + Int64.random(in: 0..<1_000_000, using: &random)
      // Allowed, limited and refused answers, by policy: the timeline must reach all of them.
      var seen: [RateLimit.Algorithm: [String: Int]] = [:]
      for step in 0..<fuzzRuns(400) {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3: break  // at the same instant
        case 3..<5: now += Int64.random(in: 1..<1000, using: &random)
        case 5..<9: now += Int64.random(in: 1000..<300_000, using: &random)
        default: now += Int64.random(in: 300_000..<2_000_000, using: &random)
        }
        let key = keys.randomElement(using: &random)!
        let burst = limitOf[key]!.burst
        let cost =
          Int.random(in: 0..<40, using: &random) == 0
          ? [-1, burst + 1].randomElement(using: &random)! : Int.random(in: 0...burst, using: &random)
        let expected = Result { try memory.decide(key, cost: cost, at: now) }
        let actual: Result<RateLimitDecision, any Error>
        do {
          actual = .success(try await store.tryAcquire(key, cost: cost, limit: limitOf[key]!, databaseNow: now))
        } catch {
          actual = .failure(error)
        }
        switch (expected, actual) {
        case (.success(let expected), .success(let actual)):
          let step = "\(options), seed \(seed), step \(step): \(key) (\(limitOf[key]!)) cost \(cost) at \(now)"
          #expect(actual == expected.model, "\(step)")
          #expect(expected.engine == expected.model, "memory's RateLimiter, \(step)")
          #expect(expected.keyed == expected.model, "memory's KeyedRateLimiter, \(step)")
          if actual != expected.model || expected.engine != expected.model || expected.keyed != expected.model {
            return
          }
          seen[limitOf[key]!.algorithm, default: [:]][actual.isAllowed ? "allowed" : "limited", default: 0] += 1
        case (.failure(let expected as InvalidInput), .failure(let actual as InvalidInput)):
          #expect(actual == expected)
          seen[limitOf[key]!.algorithm, default: [:]]["refused", default: 0] += 1
        default:
          Issue.record("seed \(seed), step \(step): memory \(expected), store \(actual)")
          return
        }
      }
      print("seed \(seed): \(seen)")
      for algorithm in [RateLimit.Algorithm.tokenBucket, .slidingWindow, .fixedWindow] {
        #expect(seen[algorithm, default: [:]]["allowed", default: 0] >= 20, "\(algorithm): \(seen)")
        #expect(seen[algorithm, default: [:]]["limited", default: 0] >= 5, "\(algorithm): \(seen)")
      }
    }
  }
}

extension PostgresDifferentialTests {
  /// The same, with the requests of each instant sent at once, one per key: they share batches
  /// (sorted by key and policy), each key decided under its own limit, as memory decides them.
  @Test(arguments: [4, 5] as [UInt64], PostgresRateLimitStore.TableOptions.underTest)
  func theStoreDecidesAsMemoryInBatchesOfSeveralKeys(seed: UInt64, options: PostgresRateLimitStore.TableOptions)
    async throws
  {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), tableOptions: options, timeout: .seconds(30))
      try await store.migrate()
      try await TestDatabase.running(store) {
        var random = SeededGenerator(seed: seed)
        let keys = (0..<Self.limits.count).map { "key-\($0)" }
        let limitOf = Dictionary(uniqueKeysWithValues: zip(keys, Self.limits.shuffled(using: &random)))
        var memory = MemoryLimits(limitOf: limitOf)
        var now = TestDatabase.chosenInstant + Int64.random(in: 0..<1_000_000, using: &random)
        let batchesBefore = store.batcher.batchesSent
        var decisions = 0
        for round in 0..<fuzzRuns(120) {
          now += [0, 1, 999, 50_000, 250_000, 1_000_000].randomElement(using: &random)!
          let requests = keys.shuffled(using: &random).prefix(Int.random(in: 1...keys.count, using: &random))
            .map { key in (key, Int.random(in: 0...limitOf[key]!.burst, using: &random)) }
          var expected: [String: RateLimitDecision] = [:]
          for (key, cost) in requests { expected[key] = try memory.decide(key, cost: cost, at: now).model }
          let instant = now
          let actual = try await withThrowingTaskGroup(of: (String, RateLimitDecision).self) { group in
            for (key, cost) in requests {
              group.addTask {
                (key, try await store.tryAcquire(key, cost: cost, limit: limitOf[key]!, databaseNow: instant))
              }
            }
            return try await group.reduce(into: [String: RateLimitDecision]()) { $0[$1.0] = $1.1 }
          }
          decisions += requests.count
          #expect(actual == expected, "\(options), seed \(seed), round \(round) at \(now)")
          if actual != expected { return }
        }
        #expect(store.batcher.batchesSent - batchesBefore < decisions, "the requests shared batches")
      }
    }
  }
}

/// Memory's decisions, at instants in microseconds since the Unix epoch, fed as nanoseconds: the
/// reference model of each key's policy (``RateLimitReferenceModel``, written from the
/// definitions), and the in-memory engines on a ``TestScheduler`` advanced to each instant: a
/// `RateLimiter` per key, and one `KeyedRateLimiter` with each key's own limit.
struct MemoryLimits {
  let limitOf: [String: RateLimit]
  let scheduler = TestScheduler()
  var models: [String: RateLimitReferenceModel] = [:]
  var limiters: [String: RateLimiter] = [:]
  let keyed: KeyedRateLimiter<String>

  init(limitOf: [String: RateLimit]) {
    self.limitOf = limitOf
    for (key, limit) in limitOf {
      models[key] = RateLimitReferenceModel(limit: limit)
      limiters[key] = RateLimiter(limit: limit, clock: scheduler)
    }
    keyed = KeyedRateLimiter(limits: { limitOf[$0]! }, clock: scheduler)
  }

  /// The reference model's decision and the engines' (for a cost the engines refuse, the model's
  /// `decide` throws first: the store must throw the same).
  mutating func decide(_ key: String, cost: Int, at now: Int64) throws -> (
    model: RateLimitDecision, engine: RateLimitDecision, keyed: RateLimitDecision
  ) {
    let instant = PaceInstant(nanoseconds: now * 1000)
    let model = try models[key]!.decide(cost: cost, at: instant)
    scheduler.advance(to: instant)
    let engine: RateLimitDecision = limiters[key]!.tryAcquire(cost: cost)
    return (model, engine, keyed.tryAcquire(key, cost: cost))
  }
}
#endif
