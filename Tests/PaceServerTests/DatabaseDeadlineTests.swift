#if PostgreSQL && Hummingbird
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// The bound on the database's clock that a batch's deadline is sent with: learned from answers,
/// lowered for drift, never a trap at the extremes.
@Suite struct DatabaseClockBoundTests {
  @Test func nothingIsKnownBeforeTheFirstAnswer() {
    let bound = DatabaseClockBound()
    #expect(bound.lowerBound(at: 0) == nil)
    #expect(bound.databaseInstant(of: 5_000_000, now: 0) == nil)
  }

  @Test func anAnswerBoundsTheDifferenceByWhenItArrived() {
    var bound = DatabaseClockBound()
    // Decided at 1,000,000,250 on the database's clock, arrived at 300 here.
    bound.note(decided: 1_000_000_250, received: 300)
    #expect(bound.lowerBound(at: 300) == 999_999_950)
    // A deadline at 800 here is at 1,000,000,750 on the database's clock, at the latest.
    #expect(bound.databaseInstant(of: 800, now: 300) == 1_000_000_750)
  }

  @Test func theBoundIsLoweredForDrift() {
    var bound = DatabaseClockBound()
    bound.note(decided: 1_000_000, received: 0)
    // 100 µs a second: 1 ms after 10 s, 360 ms after an hour.
    #expect(bound.lowerBound(at: 10_000_000) == 999_000)
    #expect(bound.lowerBound(at: 3_600_000_000) == 640_000)
    // Not raised for an instant before the sample.
    #expect(bound.lowerBound(at: -5_000_000) == 1_000_000)
  }

  @Test func aHigherBoundReplacesTheLoweredOneAndALowerOneNever() {
    var bound = DatabaseClockBound()
    bound.note(decided: 1_000_000, received: 0)
    // An answer that came back slower: a lower difference, kept out.
    bound.note(decided: 1_000_100, received: 500)
    #expect(bound.sample == DatabaseClockBound.Sample(difference: 1_000_000, at: 0))
    // A faster one replaces it.
    bound.note(decided: 1_000_700, received: 600)
    #expect(bound.sample == DatabaseClockBound.Sample(difference: 1_000_100, at: 600))
    // 20 s on, the bound is 2 ms lower: an answer 1 ms below the old sample is the better one.
    bound.note(decided: 20_000_600 + 999_100, received: 20_000_600)
    #expect(bound.sample == DatabaseClockBound.Sample(difference: 999_100, at: 20_000_600))
    #expect(bound.lowerBound(at: 20_000_600) == 999_100)
  }

  @Test func theExtremesSaturate() {
    var bound = DatabaseClockBound()
    bound.note(decided: .max, received: .min)
    #expect(bound.lowerBound(at: .min) == .max)
    #expect(bound.databaseInstant(of: .max, now: .min) == .max)
    #expect(bound.lowerBound(at: .max) == .max - (Int64.max / 10_000))
    bound = DatabaseClockBound()
    bound.note(decided: .min, received: .max)
    #expect(bound.lowerBound(at: .max) == .min)
    #expect(bound.databaseInstant(of: .min, now: .max) == .min)
    #expect(bound.databaseInstant(of: .max, now: .max) == -1)
  }
}

/// A batch's deadline on the database's clock, on a real PostgreSQL server: a statement that
/// arrives after it takes nothing, whatever budget it was sent with.
@Suite("Each batch's deadline on the database's clock, on a real PostgreSQL server", .databaseTestTimeLimit)
struct DatabaseDeadlineTests {
  static let hourly = RateLimit(permits: 1, per: .seconds(3600))

  /// The statement arrives a second after its callers' deadline, with a budget of 30 s (it was
  /// sent in time, and reached the server late): every decision answers late and nothing is
  /// taken, by the batch function and by its overload for one decision; the same statement with
  /// no deadline, or one still ahead, takes.
  @Test(arguments: [RateLimit(permits: 1, per: .seconds(3600)), .slidingWindow(permits: 1, per: .seconds(3600))])
  func aStatementThatArrivesAfterItsDeadlineTakesNothing(limit: RateLimit) async throws {
    try await TestDatabase.withMigratedStore("dl") { client, store, table in
      let stored = try StoredLimit(cost: 1, limit: limit)
      func request(_ key: String) -> DecisionRequest {
        DecisionRequest(key: key, limit: stored, takes: true, deadline: .now)
      }
      let passed = try await databaseNow(client) - 1_000_000
      let batch = try await PostgresSingleDecisionTests.answers(
        client, PostgresRateLimitStore.batchSQL(table: table),
        PostgresRateLimitStore.batchBindings([request("a"), request("b")], budget: 30_000_000, deadline: passed))
      #expect(batch.count == 2 && batch.allSatisfy { $0.late && $0.granted == nil }, "\(batch)")
      let single = try await PostgresSingleDecisionTests.answers(
        client, PostgresRateLimitStore.singleSQL(table: table),
        PostgresRateLimitStore.singleBindings(request("c"), budget: 30_000_000, deadline: passed))
      #expect(single.count == 1 && single[0].late && single[0].granted == nil, "\(single)")
      // Nothing was taken: each key's permit is still there.
      for key in ["a", "b", "c"] {
        #expect(try await store.tryAcquire(key, cost: 0, limit: limit) == .allowed(remaining: 1), "\(key)")
      }
      // A deadline ahead, or none: decided as before.
      let ahead = try await databaseNow(client) + 30_000_000
      let taken = try await PostgresSingleDecisionTests.answers(
        client, PostgresRateLimitStore.batchSQL(table: table),
        PostgresRateLimitStore.batchBindings([request("a")], budget: 30_000_000, deadline: ahead))
      #expect(taken.count == 1 && !taken[0].late && taken[0].granted != nil, "\(taken)")
      let alone = try await PostgresSingleDecisionTests.answers(
        client, PostgresRateLimitStore.singleSQL(table: table),
        PostgresRateLimitStore.singleBindings(request("b"), budget: 30_000_000))
      #expect(alone.count == 1 && !alone[0].late && alone[0].granted != nil, "\(alone)")
      #expect(try await !store.tryAcquire("a", cost: 0, limit: limit).isAllowed)
    }
  }

  /// Instances not yet upgraded call the function under the signatures of earlier versions
  /// (without a deadline; the oldest without the emission intervals too): after `migrate()`
  /// those decide as before.
  @Test func theSignaturesOfEarlierVersionsStillDecide() async throws {
    try await TestDatabase.withMigratedStore("dl") { client, store, table in
      let name = PostgresRateLimitStore.functionName(table: table)
      let stored = try StoredLimit(cost: 1, limit: Self.hourly)
      let calls = [
        // 0.3.0's: no emission intervals.
        """
        SELECT o_granted IS NOT NULL FROM \(name)(ARRAY['old'], ARRAY[\(stored.algorithm.rawValue)]::smallint[],
          ARRAY[\(stored.amount)]::bigint[], ARRAY[\(stored.capacity)]::bigint[], ARRAY[\(stored.window)]::bigint[],
          ARRAY[true], 30000000, '{}'::bigint[])
        """,
        // 0.4.0's batch function and its overload for one decision: no deadline.
        """
        SELECT o_granted IS NOT NULL FROM \(name)(ARRAY['batch'], ARRAY[\(stored.algorithm.rawValue)]::smallint[],
          ARRAY[\(stored.amount)]::bigint[], ARRAY[\(stored.capacity)]::bigint[], ARRAY[\(stored.window)]::bigint[],
          ARRAY[true], 30000000, '{}'::bigint[], ARRAY[\(stored.unit)]::bigint[])
        """,
        """
        SELECT o_granted IS NOT NULL FROM \(name)('one'::text, \(stored.algorithm.rawValue)::smallint,
          \(stored.amount)::bigint, \(stored.capacity)::bigint, \(stored.window)::bigint, true, 30000000::bigint,
          NULL::bigint, \(stored.unit)::bigint)
        """,
      ]
      for call in calls {
        var granted: [Bool] = []
        for try await value in try await client.query(PostgresQuery(unsafeSQL: call)).decode(Bool.self) {
          granted.append(value)
        }
        #expect(granted == [true], "\(call)")
      }
      for key in ["old", "batch", "one"] {
        #expect(try await !store.tryAcquire(key, cost: 0, limit: Self.hourly).isAllowed, "\(key)")
      }
    }
  }

  /// The store learns the database's clock from its answers: after a decision, its bound is
  /// below the difference read afterwards, and within the round trips' time of it.
  @Test func theStoreLearnsTheDatabasesClockFromItsAnswers() async throws {
    try await TestDatabase.withClients { clients in
      let client = clients[0]
      let store = try PostgresRateLimitStore(client: client, table: TestDatabase.uniqueTable("dl"))
      try await store.migrate()
      #expect(store.batcher.state.withLock { $0.clockBound.sample } == nil)
      #expect(try await store.tryAcquire("k", cost: 1, limit: Self.hourly).isAllowed)
      let before = store.batcher.micros(.now, roundingUp: false)
      let databaseNow = try await databaseNow(client)
      let after = store.batcher.micros(.now, roundingUp: true)
      let bound = try #require(store.batcher.state.withLock { $0.clockBound.lowerBound(at: after) })
      #expect(bound <= databaseNow - before)
      // real-time: a bound (the round trips on a loaded machine), never reached when it holds.
      #expect(bound > databaseNow - after - 5_000_000)
    }
  }

  /// A store's first statement carries its callers' deadline too: before it, the store reads the
  /// database's clock, which no answer has taught it yet. Here that statement waits for a table
  /// locked past the timeout and is answered by the policy, so no answer arrives; the bound is
  /// known all the same, and nothing is taken when the lock goes. Without the read, the first
  /// statements went with their budget alone, counted from their arrival, and one that reached
  /// the database late (its preparation on a loaded machine) could take after its caller was
  /// answered. Alone (the store never run) and through the lanes.
  @Test(arguments: [false, true])
  func aStoresFirstStatementKnowsTheDatabasesClock(run: Bool) async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = TestDatabase.uniqueTable("dl")
      let store = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .allow, timeout: .milliseconds(400),
        circuitBreaker: CircuitBreaker(failureThreshold: 1000))
      let checker = try PostgresRateLimitStore(client: clients[1], table: table, timeout: .seconds(30))
      try await store.migrate()
      #expect(store.batcher.state.withLock { $0.clockBound.sample } == nil)
      try await clients[1].withTransaction(logger: TestDatabase.quietLogger) { locker in
        try await locker.query(
          "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.quietLogger)
        let decide: @Sendable () async throws -> RateLimitDecision = {
          try await store.tryAcquire("k", cost: 1, limit: Self.hourly)
        }
        let answer = run ? try await TestDatabase.running(store, decide) : try await decide()
        #expect(answer == .allowed(remaining: 0), "the policy's answer")
        #expect(store.batcher.state.withLock { $0.clockBound.sample } != nil)
      }
      try await PostgresFaultTests.waitUntilIdle(clients[1], table: table)
      #expect(try await checker.tryAcquire("k", cost: 0, limit: Self.hourly) == .allowed(remaining: 1))
    }
  }

  /// The database's clock, in microseconds since the Unix epoch.
  private func databaseNow(_ client: PostgresClient) async throws -> Int64 {
    let rows = try await client.query(
      PostgresQuery(unsafeSQL: "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"))
    for try await now in rows.decode(Int64.self) { return now }
    throw PacePostgresError.unavailable(reason: "no clock")
  }
}
#endif
