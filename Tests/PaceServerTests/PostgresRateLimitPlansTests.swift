#if PostgreSQL && Hummingbird
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// `PostgresRateLimitPlans`: plans and blocks stored beside the counters, set through the API or
/// by hand, mirrored on every instance through notifications, checked when set and when read.
@Suite("Plans and blocks stored in PostgreSQL", .databaseTestTimeLimit)
struct PostgresRateLimitPlansTests {
  static let free = RateLimit.fixedWindow(permits: 20, per: .seconds(60))
  static let pro = RateLimit.fixedWindow(permits: 200, per: .seconds(60))
  static let bucket = RateLimit(permits: 10, per: .seconds(1), burst: 30)

  /// A wall clock the test moves itself, shared by every mirror of a test.
  final class WallClock: Sendable {
    static let start = UnixTime(nanosecondsSinceEpoch: 1_900_000_000_000_000_000)
    let time = LockedState(WallClock.start)
    var now: UnixTime { time.withLock { $0 } }
    func advance(by duration: Duration) { time.withLock { $0 = $0 + duration } }
  }

  /// An instance's mirror, with its logs and metrics.
  struct Instance {
    let plans: PostgresRateLimitPlans
    let logs = InMemoryLogHandler()
    let metrics = TestMetrics()

    init(client: PostgresClient, table: String, clock: WallClock? = nil, refreshInterval: Duration = .seconds(3600))
      throws
    {
      let logs = logs
      var unixTime: (@Sendable () -> UnixTime)?
      if let clock { unixTime = { clock.now } }
      var logger = Logger(label: "test", factory: { _ in logs })
      logger.logLevel = .debug
      plans = try PostgresRateLimitPlans(
        client: client, table: table, default: PostgresRateLimitPlansTests.free, refreshInterval: refreshInterval,
        timeout: .seconds(2), unixTime: unixTime, logger: logger, metricsFactory: metrics)
    }

    func entries(_ level: Logger.Level, containing text: String) -> [InMemoryLogHandler.Entry] {
      logs.entries.filter { $0.level == level && $0.message.description.contains(text) }
    }
  }

  /// Runs each instance's mirror while `body` runs, then stops them.
  static func running<Result: Sendable>(
    _ instances: [Instance], _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let runs = instances.map { instance in Task { try await instance.plans.run() } }
    let result: Swift.Result<Result, any Error>
    do {
      result = .success(try await body())
    } catch {
      result = .failure(error)
    }
    for run in runs { run.cancel() }
    for run in runs { try await run.value }
    return try result.get()
  }

  /// Waits until `condition` holds, checking every 2 ms (real time: a database delivers the
  /// change); how long that took. Records a failure after `timeout` (never hangs).
  ///
  /// Called as a statement, never inside `#expect`: a closure inside the macro's expansion was
  /// seen to run another call's closure.
  @discardableResult
  static func eventually(
    timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
  ) async throws -> Duration? {
    let clock = ContinuousClock()
    let start = clock.now
    while clock.now - start < timeout {
      if await condition() { return clock.now - start }
      try await Task.sleep(for: .milliseconds(2))  // real-time: polling a real database's delivery
    }
    Issue.record("the condition did not hold within \(timeout)", sourceLocation: sourceLocation)
    return nil
  }

  /// Runs `sql` on `client`.
  static func execute(_ sql: String, on client: PostgresClient) async throws {
    _ = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.quietLogger).collect()
  }

  /// A read that began before this instance wrote a key (its snapshot taken before the write
  /// committed) does not undo in the mirror what the write applied at once, whole or for one key,
  /// plans and blocks alike; a read that began after the write is mirrored as it found the rows.
  /// (Seen once in `aPlanSetOnOneInstanceIsInForceOnTheOther`: the writer's mirror lost the plan
  /// it had just set to the full read its listener had started, until the notification came.)
  @Test func aReadThatBeganBeforeThisInstancesWriteDoesNotUndoIt() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(1) { clients in
      let a = try Instance(client: clients[0], table: table)
      try await a.plans.migrate()
      let blockEnd = UnixTime.now + .seconds(3600)
      let before = a.plans.state.withLock { $0.ownWrites }
      try await a.plans.setLimit(Self.pro, for: "customer")
      try await a.plans.block("abuser", until: blockEnd)
      // Reads that began before the writes, which found neither row.
      try a.plans.mirror(plans: [], blocks: [], readBegan: before)
      try a.plans.mirrorPlan(of: "customer", row: nil, readBegan: before)
      a.plans.mirrorBlock(of: "abuser", end: nil, readBegan: before)
      #expect(a.plans.plans.limit(for: "customer") == Self.pro)
      #expect(a.plans.blocks.blockedUntil(for: "abuser") != nil)
      // A stale row of another plan, from before the write, is not mirrored either.
      try a.plans.mirrorPlan(of: "customer", row: PlanRow(Self.bucket), readBegan: before)
      #expect(a.plans.plans.limit(for: "customer") == Self.pro)
      // Reads that began after the writes are the table as it is: here, both rows deleted by hand.
      let after = a.plans.state.withLock { $0.ownWrites }
      #expect(after == before + 2)
      try a.plans.mirror(plans: [], blocks: [], readBegan: after)
      #expect(a.plans.plans.ownLimit(for: "customer") == nil)
      #expect(a.plans.blocks.blockedUntil(for: "abuser") == nil)
      // Each write's mark went with the read that began after it.
      #expect(a.plans.state.withLock { $0.ownPlanWrites.isEmpty && $0.ownBlockWrites.isEmpty })
      try a.plans.mirrorPlan(of: "customer", row: PlanRow(Self.bucket), readBegan: after)
      #expect(a.plans.plans.limit(for: "customer") == Self.bucket)
      a.plans.mirrorBlock(of: "abuser", end: blockEnd, readBegan: after)
      #expect(a.plans.blocks.blockedUntil(for: "abuser") != nil)
    }
  }

  /// A plan set on one instance is in force on the other within the notification's delivery: the
  /// poll is an hour away, so only the notification can bring it. Its removal too.
  @Test func aPlanSetOnOneInstanceIsInForceOnTheOther() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(2) { clients in
      let (a, b) = (try Instance(client: clients[0], table: table), try Instance(client: clients[1], table: table))
      try await a.plans.migrate()
      try await a.plans.setLimit(Self.bucket, for: "ready")
      try await Self.running([a, b]) {
        // B has read the table once it listens: from here on, only notifications reach it.
        try await Self.eventually { b.plans.plans.limit(for: "ready") == Self.bucket }
        try await a.plans.setLimit(Self.pro, for: "customer")
        #expect(a.plans.plans.limit(for: "customer") == Self.pro)  // the writer at once
        let delivered = try await Self.eventually { b.plans.plans.limit(for: "customer") == Self.pro }
        print("a plan set on one instance was in force on the other after \(delivered ?? .zero)")
        // A limiter made with the mirror decides under it at its next request.
        let limiter = KeyedRateLimiter(plans: b.plans.plans)
        #expect(limiter.tryAcquire("customer") == .allowed(remaining: 199))
        #expect(try await a.plans.removeLimit(for: "customer"))
        try await Self.eventually { b.plans.plans.ownLimit(for: "customer") == nil }
        #expect(limiter.limit(for: "customer") == Self.free)
        #expect(try await !a.plans.removeLimit(for: "customer"))
        // Set on B this time, and read by A.
        try await b.plans.setLimit(Self.bucket, for: "customer")
        try await Self.eventually { a.plans.plans.limit(for: "customer") == Self.bucket }
      }
      // Neither logged anything above info, but a migration's wait for the migration lock that
      // the suite's other tests hold at the same time (CleanStartTests checks a start alone).
      let fromThisTest = { (entry: InMemoryLogHandler.Entry) in
        entry.level > .info && entry.message != "migration waits for PostgreSQL"
      }
      #expect(a.logs.entries.filter(fromThisTest).isEmpty, "\(a.logs.entries)")
      #expect(b.logs.entries.filter(fromThisTest).isEmpty, "\(b.logs.entries)")
    }
  }

  /// A change whose notification never comes (the trigger disabled, as a lost notification) is
  /// in force within `refreshInterval`, by the poll.
  @Test func aLostNotificationIsMadeUpForByThePoll() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(2) { clients in
      let a = try Instance(client: clients[0], table: table)
      let b = try Instance(client: clients[1], table: table, refreshInterval: .milliseconds(500))
      try await a.plans.migrate()
      try await a.plans.setLimit(Self.bucket, for: "ready")
      try await Self.running([b]) {
        try await Self.eventually { b.plans.plans.limit(for: "ready") == Self.bucket }
        try await Self.execute("ALTER TABLE \(a.plans.plansTable) DISABLE TRIGGER pace_notify", on: clients[0])
        try await a.plans.setLimit(Self.pro, for: "customer")
        let polled = try await Self.eventually(timeout: .seconds(5)) {
          b.plans.plans.limit(for: "customer") == Self.pro
        }
        print("a change without its notification was in force after \(polled ?? .zero) (refreshInterval 500 ms)")
        #expect((polled ?? .seconds(5)) <= .milliseconds(500) + .milliseconds(250))  // a poll's read, generously
      }
    }
  }

  /// A plan no limiter or store can honour is refused when set, and nothing is written.
  @Test func anInvalidPlanIsRefusedWhenSet() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(1) { clients in
      let a = try Instance(client: clients[0], table: table)
      try await a.plans.migrate()
      let refused: [(RateLimit, String)] = [
        (RateLimit(permits: 1, per: .seconds(1), burst: .max), "RateLimit.validated"),
        (.slidingWindow(permits: 20_000, per: .seconds(1)), "at most 10000 permits"),
        (.fixedWindow(permits: 1, per: .seconds(Int64.max)), "RateLimit.validated"),
      ]
      for (limit, rule) in refused {
        do {
          try await a.plans.setLimit(limit, for: "k")
          Issue.record("\(limit) was accepted")
        } catch let error as PacePostgresError {
          guard case .invalidSetting(let name, _, let text) = error else {
            Issue.record("\(error)")
            continue
          }
          #expect(name == "PostgresRateLimitPlans.setLimit.limit")
          #expect(text.contains(rule), "\(error)")
        }
      }
      await #expect(throws: InvalidInput.self) { try await a.plans.setLimit(Self.pro, for: "") }
      await #expect(throws: InvalidInput.self) { try await a.plans.block("", for: .seconds(1)) }
      let rows = try await clients[0].query(
        PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(a.plans.plansTable)"), logger: TestDatabase.quietLogger
      ).collect()
      #expect(try rows.first?.decode(Int64.self) == 0)
      #expect(a.plans.plans.ownLimits.isEmpty)
      #expect(throws: PacePostgresError.self) {
        try PostgresRateLimitPlans(
          client: clients[0], table: table, default: .slidingWindow(permits: 20_000, per: .seconds(1)))
      }
      #expect(throws: PacePostgresError.self) {
        try PostgresRateLimitPlans(client: clients[0], table: table, default: Self.free, refreshInterval: .zero)
      }
    }
  }

  /// Rows written by hand that no limiter can honour are never loaded, whether they arrive by a
  /// notification or by a whole read: each is logged once (error) and counted, and the key keeps
  /// its previous plan, or the default if it had none. Fixed, a row is loaded.
  @Test func anInvalidRowIsNeverLoaded() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(2) { clients in
      let (a, b) = (try Instance(client: clients[0], table: table), try Instance(client: clients[1], table: table))
      try await a.plans.migrate()
      try await a.plans.setLimit(Self.pro, for: "keeps")
      try await Self.running([b]) {
        try await Self.eventually { b.plans.plans.limit(for: "keeps") == Self.pro }
        let plans = a.plans.plansTable
        try await Self.execute("UPDATE \(plans) SET permits = 0 WHERE key = 'keeps'", on: clients[0])
        try await Self.execute(
          """
          INSERT INTO \(plans) (key, algorithm, permits, interval_nanoseconds, burst) VALUES
            ('unknown', 'leaky_bucket', 5, 1000000000, NULL),
            ('no-window', 'fixed_window', 5, 0, NULL),
            ('below-1-ns', 'sliding_window', 5, -1, NULL),
            ('good', 'token_bucket', 10, 1000000000, 30)
          """, on: clients[0])
        try await Self.eventually { b.plans.plans.limit(for: "good") == Self.bucket }
        try await Self.eventually { b.entries(.error, containing: "invalid").count == 4 }
        #expect(b.plans.plans.limit(for: "keeps") == Self.pro)
        for key in ["unknown", "no-window", "below-1-ns"] {
          #expect(b.plans.plans.limit(for: key) == Self.free)
          #expect(b.plans.plans.ownLimit(for: key) == nil)
        }
        // A whole read finds them again: not logged again, the key still keeps its plan.
        try await b.plans.refresh()
        #expect(b.entries(.error, containing: "invalid").count == 4)
        #expect(b.plans.plans.limit(for: "keeps") == Self.pro)
        let counted = try b.metrics.expectCounter("pace_rate_limit_plans_invalid_rows_total", [("table", table)])
        #expect(counted.totalValue == 4)
        let reasons = b.entries(.error, containing: "invalid").map { "\($0.metadata["pace.reason"] ?? "")" }
        #expect(reasons.contains { $0.contains("algorithm") && $0.contains("leaky_bucket") })
        #expect(reasons.contains { $0.contains("shorter than 1 ns") })
        // Fixed by hand: loaded.
        try await Self.execute("UPDATE \(plans) SET permits = 50 WHERE key = 'keeps'", on: clients[0])
        let fixed = RateLimit.fixedWindow(permits: 50, per: .seconds(60))
        try await Self.eventually { b.plans.plans.limit(for: "keeps") == fixed }
      }
    }
  }

  /// A notification that names a key with no row and no plan, or that Pace's trigger did not
  /// send, changes nothing; the next real change still arrives.
  @Test func aNotificationNamingAnUnknownKeyIsIgnored() async throws {
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.withClients(2) { clients in
      let (a, b) = (try Instance(client: clients[0], table: table), try Instance(client: clients[1], table: table))
      try await a.plans.migrate()
      try await a.plans.setLimit(Self.pro, for: "ready")
      try await Self.running([b]) {
        try await Self.eventually { b.plans.plans.limit(for: "ready") == Self.pro }
        // The first read may come before the `LISTEN` is in force (on a loaded machine, well
        // before): a notification sent before it would be lost, not ignored.
        try await Self.eventually { !b.entries(.debug, containing: "listening").isEmpty }
        let channel = b.plans.channel
        for payload in ["p:ghost", "b:ghost", "x:garbage", "p", ""] {
          try await Self.execute("SELECT pg_notify('\(channel)', '\(payload)')", on: clients[0])
        }
        try await a.plans.setLimit(Self.bucket, for: "after")
        try await Self.eventually { b.plans.plans.limit(for: "after") == Self.bucket }
        // A ghost's notification is ignored once a read finds no row for it, which may end after
        // the real change's (on a loaded machine): wait for all of them, then count.
        try await Self.eventually {
          !b.entries(.debug, containing: "names a key with no plan: ignored").isEmpty
            && !b.entries(.debug, containing: "names a key with no block: ignored").isEmpty
            && b.entries(.debug, containing: "not from Pace's trigger").count >= 2
        }
        #expect(b.entries(.debug, containing: "names a key with no plan: ignored").count == 1)
        #expect(b.entries(.debug, containing: "names a key with no block: ignored").count == 1)
        #expect(b.entries(.debug, containing: "not from Pace's trigger").count == 2)
        #expect(b.plans.plans.ownLimits == ["ready": Self.pro, "after": Self.bucket])
        #expect(b.plans.blocks.blocks().isEmpty)
        #expect(b.logs.entries.filter { $0.level > .info }.isEmpty)
      }
    }
  }

  /// A block set on one instance refuses the key on both, until its instant exactly, on the wall
  /// clock; lifted on one, lifted on both.
  @Test func aBlockIsSharedByEveryInstanceAndEnds() async throws {
    let table = TestDatabase.uniqueTable("plans")
    let clock = WallClock()
    try await TestDatabase.withClients(2) { clients in
      let a = try Instance(client: clients[0], table: table, clock: clock)
      let b = try Instance(client: clients[1], table: table, clock: clock)
      try await a.plans.migrate()
      try await Self.running([a, b]) {
        let end = WallClock.start + .seconds(3600)
        try await a.plans.block("abuser", for: .seconds(3600))
        #expect(a.plans.blocks.blockedUntil(for: "abuser") == end)
        try await Self.eventually { b.plans.blocks.blockedUntil(for: "abuser") == end }
        clock.advance(by: .seconds(3600) - .nanoseconds(1))
        #expect(b.plans.blocks.blockedUntil(for: "abuser") == end)
        clock.advance(by: .nanoseconds(1))
        #expect(a.plans.blocks.blockedUntil(for: "abuser") == nil)
        #expect(b.plans.blocks.blockedUntil(for: "abuser") == nil)
        // A block to an instant that is not a whole microsecond ends at the next one.
        try await b.plans.block("abuser", until: clock.now + .nanoseconds(1500))
        let rounded = clock.now + .microseconds(2)
        try await Self.eventually { a.plans.blocks.blockedUntil(for: "abuser") == rounded }
        #expect(try await b.plans.unblock("abuser"))
        try await Self.eventually { a.plans.blocks.blockedUntil(for: "abuser") == nil }
        // Blocked for good, by hand.
        try await Self.execute(
          "INSERT INTO \(a.plans.blocksTable) (key, blocked_until) VALUES ('banned', 'infinity')", on: clients[0])
        let forever = UnixTime(nanosecondsSinceEpoch: .max)
        try await Self.eventually { b.plans.blocks.blockedUntil(for: "banned") == forever }
      }
    }
  }

  /// The database stops and starts again: the mirror keeps the plans in force meanwhile, logs the
  /// outage once, listens again when the database is back and reads what changed while it could
  /// not listen (the poll is an hour away).
  @Test func theMirrorCatchesUpAfterTheDatabaseRestarts() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    var configuration = TestDatabase.configuration(cluster.url, connections: 4)
    configuration.options.connectTimeout = .milliseconds(500)
    let clients = (0..<2).map { _ in
      PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    }
    let table = TestDatabase.uniqueTable("plans")
    try await TestDatabase.running(clients) {
      let (a, b) = (try Instance(client: clients[0], table: table), try Instance(client: clients[1], table: table))
      try await a.plans.migrate()
      try await a.plans.setLimit(Self.pro, for: "customer")
      try await Self.running([b]) {
        try await Self.eventually { b.plans.plans.limit(for: "customer") == Self.pro }
        try await cluster.stop()
        try await Self.eventually { !b.entries(.error, containing: "PostgreSQL unavailable").isEmpty }
        await #expect(throws: (any Error).self) { try await a.plans.setLimit(Self.bucket, for: "customer") }
        #expect(b.plans.plans.limit(for: "customer") == Self.pro)
        try await cluster.start()
        // Written as soon as the database takes it, whether B listens again yet or not.
        try await Self.eventually { (try? await a.plans.setLimit(Self.bucket, for: "customer")) != nil }
        let caughtUp = try await Self.eventually { b.plans.plans.limit(for: "customer") == Self.bucket }
        print("after the restart, the change was in force on the other instance after \(caughtUp ?? .zero)")
        try await Self.eventually { !b.entries(.info, containing: "read from PostgreSQL again").isEmpty }
        #expect(b.entries(.error, containing: "PostgreSQL unavailable").count == 1)
        // Listening again: a later change arrives by its notification.
        try await a.plans.setLimit(Self.free, for: "customer")
        try await Self.eventually { b.plans.plans.ownLimit(for: "customer") == Self.free }
      }
    }
  }
}
#endif
