#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

@Suite("PostgresRateLimitStore, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresRateLimitStoreTests {
  let hour = RateLimit(permits: 100, per: .seconds(3600))

  @Test func grantsUpToTheBurstThenSaysWhenToRetry() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      try await store.migrate()  // idempotent
      // One permit back every 1000 s: a slow machine cannot refill the bucket during the test.
      let limit = RateLimit(permits: 3, per: .seconds(3000))
      #expect(try await store.tryAcquire("k", cost: 1, limit: limit) == .allowed(remaining: 2))
      #expect(try await store.tryAcquire("k", cost: 2, limit: limit) == .allowed(remaining: 0))
      guard case .limited(let retryAfter) = try await store.tryAcquire("k", cost: 1, limit: limit) else {
        Issue.record("the fourth permit of a burst of 3 was granted")
        return
      }
      // Allowed again when the first permit comes back: 1000 s after it was taken, less the time since.
      #expect(retryAfter > .seconds(900) && retryAfter <= .seconds(1000))
      #expect(try await store.tryAcquire("other", cost: 3, limit: limit) == .allowed(remaining: 0))
    }
  }

  /// A store never run sends each decision alone, on a leased connection, two to three times
  /// slower than its lanes: it says so once, at its thousandth decision (not at its first, which
  /// may come just before its run() starts), at notice.
  @Test func aStoreNeverRunSaysOnceThatItsDecisionsGoOneAtATime() async throws {
    try await TestDatabase.withClients { clients in
      let logs = InMemoryLogHandler()
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"),
        logger: Logger(label: "test", factory: { _ in logs }))
      try await store.migrate()
      let told = { logs.entries.filter { $0.level == .notice && "\($0.message)".contains("one at a time") }.count }
      // Every decision allowed: a denied key is answered by the denial cache, without the database.
      let plenty = RateLimit(permits: 1_000_000, per: .seconds(3600))
      for _ in 0..<999 { _ = try await store.tryAcquire("k", cost: 1, limit: plenty) }
      #expect(told() == 0)
      for _ in 0..<200 { _ = try await store.tryAcquire("k", cost: 1, limit: plenty) }
      #expect(told() == 1)
    }
  }

  /// 100 permits per 100 hours: one permit comes back every hour, far longer than a test takes.
  let slow = RateLimit(permits: 100, per: .seconds(360_000))

  /// Four instances, each with its own pool, ask 300 times at once for a key allowed 100: exactly
  /// 100 are granted, and they report 99, 98, … 0 remaining, once each. (A decision never decides
  /// at an instant earlier than the key's last grant, so grants in lock order decide at
  /// non-decreasing instants; with one permit back per hour, each leaves exactly one permit fewer.)
  @Test func fourInstancesNeverShareOutMoreThanTheLimit() async throws {
    try await TestDatabase.withClients(4, connections: 10) { clients in
      let table = TestDatabase.uniqueTable("rl")
      // A long timeout: 300 requests queue for 80 connections on a busy 2-core machine.
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table, timeout: .seconds(60)) }
      try await stores[0].migrate()
      let limit = slow
      let decisions = try await withThrowingTaskGroup(of: RateLimitDecision.self) { group in
        for attempt in 0..<300 {
          let store = stores[attempt % 4]
          group.addTask { try await store.tryAcquire("api-key", cost: 1, limit: limit) }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      let remaining = decisions.compactMap { decision -> Int? in
        if case .allowed(let remaining) = decision { return remaining }
        return nil
      }
      #expect(remaining.sorted() == Array(0..<100))
    }
  }

  /// A decision whose instant is earlier than the key's last grant (it began before that grant,
  /// then waited behind it for the row) decides at the grant's instant, as `KeyedRateLimiter`
  /// does with a `now` older than a bucket's: it never takes back the refill the row already
  /// counted. Decided at its own instant, its grant reported one permit fewer than it left
  /// whenever the bucket had been full (99, then 97: the four-process test below saw it).
  @Test func aDecisionAtAnEarlierInstantThanTheLastGrantDecidesAtTheGrants() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      let limit = slow
      // `microseconds` after an instant of the database's clock.
      func decide(_ key: String, cost: Int = 1, at microseconds: Int64) async throws -> RateLimitDecision {
        try await store.tryAcquire(
          key, cost: cost, limit: limit, databaseNow: TestDatabase.chosenInstant + microseconds)
      }
      // Both paths: the common case's one `UPDATE` (no limit change), and the general path (a
      // cost of 0 asks without taking, which the common case leaves to it).
      #expect(try await decide("k", at: 2_000) == .allowed(remaining: 99))
      #expect(try await decide("k", at: 1_000) == .allowed(remaining: 98))
      #expect(try await decide("k", cost: 0, at: 0) == .allowed(remaining: 98))
      #expect(try await decide("k", at: 3_000) == .allowed(remaining: 97))
      // A new key's first grant records its instant too.
      #expect(try await decide("n", at: 5_000) == .allowed(remaining: 99))
      #expect(try await decide("n", at: 0) == .allowed(remaining: 98))
    }
  }

  /// The same in four separate processes (`pace-postgres-test-instance hammer`).
  @Test func fourProcessesNeverShareOutMoreThanTheLimit() async throws {
    let url = try TestDatabase.url()
    let table = TestDatabase.uniqueTable("rl")
    try await TestDatabase.withClients { clients in
      try await PostgresRateLimitStore(client: clients[0], table: table).migrate()
    }
    let instances = try (0..<4).map { _ in
      try TestInstance(["hammer", url.absoluteString, table, "api-key", "75", "100", "360000"])
    }
    var granted: [Int] = []
    for instance in instances {
      let result = await instance.finish()
      #expect(result.status == 0, "pace-postgres-test-instance failed: \(result.errors)")
      granted += result.output.split(separator: "\n").compactMap { Int($0) }
    }
    #expect(granted.sorted() == Array(0..<100))
  }

  // real-time: four instances hammer a key allowed 50 a second (burst 10) for about 1.5 s; the
  // grants never exceed the burst plus the rate times the elapsed time, measured generously wide.
  @Test func grantsFollowTheRateOverTime() async throws {
    try await TestDatabase.withClients(4, connections: 4) { clients in
      let table = TestDatabase.uniqueTable("rl")
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table, timeout: .seconds(60)) }
      try await stores[0].migrate()
      let limit = RateLimit(permits: 50, per: .seconds(1), burst: 10)
      let clock = ContinuousClock()
      let start = clock.now
      let granted = try await withThrowingTaskGroup(of: Int.self) { group in
        for store in stores {
          for _ in 0..<4 {
            group.addTask {
              var granted = 0
              while clock.now - start < .milliseconds(1500) {
                if try await store.tryAcquire("k", cost: 1, limit: limit).isAllowed { granted += 1 }
              }
              return granted
            }
          }
        }
        return try await group.reduce(0, +)
      }
      let elapsed = clock.now - start
      let ceiling = 10 + Int((elapsed / .seconds(1)) * 50) + 1
      #expect(granted <= ceiling, "\(granted) grants in \(elapsed); at most \(ceiling)")
      #expect(granted >= 10, "\(granted) grants in \(elapsed); not even the burst was granted")
    }
  }

  /// One limit in the table (so a row full under it counts nothing under any limit the store
  /// knows): the rows whose bucket is full again are purged, in batches; a row still owed (its
  /// grant an hour ahead, by the database's clock) is kept.
  @Test func purgeDeletesOnlyRowsWhoseBucketIsFull() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      let short = RateLimit(permits: 1000, per: .milliseconds(10))
      for key in 0..<5 { _ = try await store.tryAcquire("short-\(key)", cost: 1, limit: short) }
      let anHourAhead = Int64(Date().timeIntervalSince1970 * 1_000_000) + 3_600_000_000
      _ = try await store.tryAcquire("owed", cost: 1, limit: short, databaseNow: anHourAhead)
      try await Task.sleep(for: .milliseconds(50))  // real-time: the short buckets fill up again
      #expect(try await store.purgeExpired(batchSize: 3) == 3)
      #expect(try await store.purgeExpired(batchSize: 3) == 2)
      #expect(try await store.purgeExpired() == 0)
      #expect(
        try await store.tryAcquire("owed", cost: 1, limit: short, databaseNow: anHourAhead) == .allowed(remaining: 998))
    }
  }

  /// A table with a bucket of another rate (an hour's): a row full under its own limit is kept
  /// while that limit, which looks back an hour, would still count its grant, should its key's
  /// limit change to it (see "What a key keeps when its plan changes").
  @Test func purgeKeepsRowsALongerLimitOfTheTableWouldStillCount() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      let short = RateLimit(permits: 1000, per: .milliseconds(10))
      for key in 0..<5 { _ = try await store.tryAcquire("short-\(key)", cost: 1, limit: short) }
      _ = try await store.tryAcquire("long", cost: 1, limit: hour)
      try await Task.sleep(for: .milliseconds(50))  // real-time: the short buckets fill up again
      #expect(try await store.purgeExpired() == 0)
      #expect(try await store.purgeAllExpired() == 0)
    }
  }

  @Test func badInputIsAClearErrorAndTakesNothing() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      await #expect(throws: InvalidInput.emptyKey) { try await store.tryAcquire("", cost: 1, limit: hour) }
      let long = String(repeating: "k", count: 1025)
      await #expect(throws: InvalidInput.keyTooLong(bytes: 1025)) {
        try await store.tryAcquire(long, cost: 1, limit: hour)
      }
      for cost in [-1, Int.min] {
        await #expect(throws: InvalidInput.negativeCost(cost)) {
          try await store.tryAcquire("k", cost: cost, limit: hour)
        }
      }
      for cost in [101, Int.max] {
        await #expect(throws: InvalidInput.costAboveBurst(cost: cost, burst: 100)) {
          try await store.tryAcquire("k", cost: cost, limit: hour)
        }
      }
      let huge = RateLimit(permits: 1, per: .seconds(Int64.max))
      await #expect(throws: PacePostgresError.self) { try await store.tryAcquire("k", cost: 1, limit: huge) }
      let tiny = RateLimit(permits: Int.max, per: .nanoseconds(1))
      await #expect(throws: PacePostgresError.self) { try await store.tryAcquire("k", cost: 1, limit: tiny) }
      #expect(throws: PacePostgresError.invalidTableName("x; DROP TABLE y")) {
        try PostgresRateLimitStore(client: clients[0], table: "x; DROP TABLE y")
      }
      // Nothing was taken by the refused calls.
      #expect(try await store.tryAcquire("k", cost: 1, limit: hour) == .allowed(remaining: 99))
    }
  }

  @Test func aMissingTableIsThrownWhateverThePolicy() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: "pace_never_migrated", whenUnavailable: .allow, timeout: .seconds(30))
      await #expect(throws: PSQLError.self) { try await store.tryAcquire("k", cost: 1, limit: hour) }
    }
  }

  /// A stopped server (nothing listens on the port): each policy answers as documented, fast.
  /// A store used before its table exists: each decision is refused (42P01), its statement's name
  /// changes a bounded number of times however many are refused, and once `migrate()` made the
  /// table the store decides, on every pool connection.
  @Test func aStoreUsedBeforeItsMigrationPreparesBoundedNamesAndWorksOnceMigrated() async throws {
    try await TestDatabase.withClients(connections: 4) { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), whenUnavailable: .allow, timeout: .seconds(30))
      for _ in 0..<40 {
        await #expect(throws: PSQLError.self) { try await store.tryAcquire("k", cost: 1, limit: hour) }
      }
      #expect(store.batcher.names.generation <= StatementNamesMachine.maximumRenames)
      try await store.migrate()
      let answers = try await withThrowingTaskGroup(of: RateLimitDecision.self) { group in
        for index in 0..<16 { group.addTask { try await store.tryAcquire("k\(index)", cost: 1, limit: hour) } }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(answers.allSatisfy { $0 == .allowed(remaining: 99) }, "\(answers)")
    }
  }

  @Test func anUnreachableDatabaseFollowsTheChosenPolicy() async throws {
    let port = try TestDatabase.closedPort()
    try await TestDatabase.withClients(port: port) { clients in
      let client = clients[0]
      let limit = hour
      let timeout = Duration.milliseconds(300)
      let throwing = try PostgresRateLimitStore(client: client, timeout: timeout)
      await #expect {
        try await throwing.tryAcquire("k", cost: 1, limit: limit)
      } throws: { error in
        guard case .unavailable = error as? PacePostgresError else { return false }
        return true
      }
      let open = try PostgresRateLimitStore(client: client, whenUnavailable: .allow, timeout: timeout)
      #expect(try await open.tryAcquire("k", cost: 1, limit: limit) == .allowed(remaining: 0))
      let closed = try PostgresRateLimitStore(
        client: client, whenUnavailable: .deny(retryAfter: .seconds(5)), timeout: timeout)
      #expect(try await closed.tryAcquire("k", cost: 1, limit: limit) == .limited(retryAfter: .seconds(5)))
      // The fallback's own limit applies (here a smaller one, as for one of several instances).
      let fallback = KeyedRateLimiter<String>(permits: 2, per: .seconds(3600))
      let local = try PostgresRateLimitStore(client: client, whenUnavailable: .fallback(fallback), timeout: timeout)
      let shared = StoreBackedRateLimiter(permits: 100, per: .seconds(3600), store: local)
      #expect(try await shared.decide("k") == .allowed(remaining: 1))
      #expect(try await shared.decide("k") == .allowed(remaining: 0))
      #expect(try await shared.decide("k").isAllowed == false)
    }
  }
}
#endif
