#if PostgreSQL && Hummingbird
import Logging
import MetricsTestKit
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// The instance count that `.shareLimit(among: .learned(…))` divides by, before and after the
/// fleet has settled: a count learned while the fleet is still starting never lowers the assumed one.
@Suite("Fleet count")
struct FleetCountTests {
  let quiet = Logger(label: "pace.tests.fleet-count", factory: { _ in SwiftLogNoOpLogHandler() })

  /// Three instances started together count 1, 2 and 3 at their first heartbeats: none of them
  /// may divide by fewer than the three it assumed while the database is away.
  @Test func aCountLearnedAtStartDoesNotLowerTheAssumedOne() {
    let fleet = FleetMembership(
      .shareLimit(among: .learned(assuming: 3, heartbeatInterval: .seconds(5))), table: "t", factory: TestMetrics())
    fleet.learned(1, logger: quiet)
    #expect(fleet.count == 3)
  }

  let t0 = ContinuousClock.now
  /// The live span of a five-second heartbeat.
  let span = Duration.seconds(15)

  @Test func countsWhileTheFleetSettlesRaiseTheAssumedCountButNeverLowerIt() {
    var fleet = FleetCountState(assumed: 3, settling: span)
    #expect(fleet.count == 3 && fleet.source == .assumed)
    fleet.counted(1, now: t0)
    #expect(fleet.count == 3 && fleet.source == .settling(counted: 1))
    fleet.counted(4, now: t0 + .seconds(5))
    #expect(fleet.count == 4 && fleet.source == .settling(counted: 4))
    fleet.counted(2, now: t0 + .seconds(10))
    #expect(fleet.count == 3)
    // One live span after the first heartbeat every live instance has written its row: the count stands.
    fleet.counted(2, now: t0 + span - .nanoseconds(1))
    #expect(fleet.count == 3)
    fleet.counted(2, now: t0 + span)
    #expect(fleet.count == 2 && fleet.source == .learned)
    fleet.counted(1, now: t0 + span + .seconds(5))
    #expect(fleet.count == 1 && fleet.source == .learned)
  }

  /// After a failed heartbeat (an outage), the others' rows may have aged out of the live span:
  /// the first counts after it settle again, above the count settled before.
  @Test func afterAFailedHeartbeatTheCountSettlesAgainAboveTheOneBefore() {
    var fleet = FleetCountState(assumed: 2, settling: span)
    fleet.counted(5, now: t0)
    fleet.counted(5, now: t0 + span)
    #expect(fleet.count == 5 && fleet.source == .learned)
    let outage = t0 + .seconds(20)
    #expect(fleet.failed(.unavailable, now: outage) == .debug)
    #expect(fleet.count == 5, "the count in force when the outage started is the outage's")
    let back = outage + .seconds(60)
    fleet.counted(1, now: back)  // the first to write its row again
    #expect(fleet.count == 5 && fleet.source == .settling(counted: 1))
    fleet.counted(6, now: back + .seconds(5))
    #expect(fleet.count == 6)
    fleet.counted(4, now: back + span)
    #expect(fleet.count == 4 && fleet.source == .learned)
  }

  @Test func aConfiguredCountNeverChanges() {
    var fleet = FleetCountState(assumed: 3, settling: nil)
    fleet.counted(1, now: t0)
    fleet.counted(7, now: t0 + .seconds(60))
    #expect(fleet.count == 3 && fleet.source == .configured)
  }

  /// The heartbeats start with the store, beside the migration that makes their table: a missing
  /// table is said once at info within the startup grace, a warning after it.
  @Test func aMissingTableIsWaitedForQuietlyWithinTheStartupGrace() {
    var fleet = FleetCountState(assumed: 3, settling: span, startupGrace: .seconds(30))
    #expect(fleet.failed(.tableMissing, now: t0) == .waitingForTable)
    #expect(fleet.failed(.tableMissing, now: t0 + .seconds(5)) == .debug)
    #expect(fleet.failed(.unavailable, now: t0 + .seconds(10)) == .debug)
    #expect(fleet.failed(.tableMissing, now: t0 + .seconds(30)) == .warning)
    #expect(fleet.failed(.other, now: t0 + .seconds(31)) == .warning)
    var other = FleetCountState(assumed: 3, settling: span)
    #expect(other.failed(.other, now: t0) == .warning)
    #expect(other.failed(.tableMissing, now: t0 + .seconds(1)) == .waitingForTable)
  }

  /// The finding's numbers: three instances assuming 3, started together, count 1, 2 and 3 at
  /// their first heartbeats; an outage a second later. Each divides a fixed window of 447 per
  /// minute by 3 and grants 149, the fleet 447: the limit, not 447 + 223 + 149.
  @Test func threeInstancesStartedTogetherShareTheLimitInAnOutageRightAfter() throws {
    let limit = RateLimit.fixedWindow(permits: 447, per: .seconds(60))
    var granted = 0
    for first in [1, 2, 3] {
      var fleet = FleetCountState(assumed: 3, settling: span)
      fleet.counted(first, now: t0)
      let share = try ShareLimit(limit, instances: fleet.count)
      var state = FleetShareState(capacity: 10)
      let now: Int64 = 1_800_000_000_000_000 + 1_000_000  // one second into a window
      for _ in 0..<1000
      where state.decide(key: "k", cost: 1, share: share, limitInterval: limit.interval, now: now)
        .isAllowed
      {
        granted += 1
      }
    }
    #expect(granted == 447)
  }
}

/// The learned count on a real PostgreSQL server: three stores that heartbeat in turn.
@Suite("Fleet count on a real PostgreSQL server", .databaseTestTimeLimit)
struct FleetCountOnPostgresTests {
  @Test func storesStartedTogetherKeepTheAssumedCountUntilTheFleetSettles() async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("fleet_count")
      let size = PostgresRateLimitStore.FleetSize.learned(assuming: 3)
      let stores = try (0..<3).map { _ in
        try PostgresRateLimitStore(client: clients[0], table: table, whenUnavailable: .shareLimit(among: size))
      }
      try await stores[0].migrate()
      var counts: [Int] = []
      for store in stores { counts.append(try await store.heartbeat()) }
      #expect(counts == [1, 2, 3])
      #expect(stores.map(\.fleetSize) == [3, 3, 3])
      let configured = try PostgresRateLimitStore(
        client: clients[0], table: table, whenUnavailable: .shareLimit(among: .instances(2)))
      #expect(try await configured.heartbeat() == 4)
      #expect(configured.fleetSize == 2, "a configured count is the count")
    }
  }
}
#endif
