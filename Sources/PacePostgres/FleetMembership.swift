#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace
import PostgresNIO

/// What a store knows of its fleet: its own id in the heartbeat table, the instance count it
/// learned, and, under ``PostgresRateLimitStore/FailureMode/shareLimit(among:)``, each key's
/// share while the database is away. Shared by every copy of the store.
final class FleetMembership: Sendable {
  private struct State {
    var count: FleetCountState
    var shares = FleetShareState(capacity: FleetMembership.shareCapacity)
  }

  /// The most keys whose shares one store remembers (see ``FleetShareState``).
  static let shareCapacity = 100_000

  /// The share policy's fleet; nil under the other policies.
  let size: PostgresRateLimitStore.FleetSize?
  /// This store's row in the heartbeat table.
  let instance = UUID().uuidString.lowercased()
  private let state: LockedState<State>
  /// The Unix epoch's microseconds at `origin`: the shares' fixed windows align to the epoch, as
  /// the database's do, and their clock stays monotonic.
  private let origin = ContinuousClock.now
  private let originMicroseconds = Int64(Date().timeIntervalSince1970 * 1_000_000)
  private let instances: Gauge
  /// At most one warning per this interval about heartbeats that fail while the database answers.
  private let heartbeatReport = OccasionalReport(every: .seconds(60))

  init(_ policy: PostgresRateLimitStore.FailureMode, table: String, factory: any MetricsFactory) {
    if case .shareLimit(let size) = policy { self.size = size } else { self.size = nil }
    state = LockedState(State(count: FleetCountState(assumed: size?.assumedCount ?? 1, settling: size?.liveSpan)))
    instances = Gauge(label: "pace_rate_limit_fleet_instances", dimensions: [("table", table)], factory: factory)
    if let size { instances.record(size.assumedCount) }
  }

  /// The count the shares divide by now (see ``FleetCountState``).
  var count: Int { state.withLock { $0.count.count } }

  /// Where ``count`` comes from.
  var source: FleetCountState.Source { state.withLock { $0.count.source } }

  /// A heartbeat counted `count` live instances (this one included) at `now`.
  func learned(_ count: Int, now: ContinuousClock.Instant = .now, logger: Logger) {
    let (previous, current) = state.withLock { state in
      let previous = state.count.count
      state.count.counted(count, now: now)
      return (previous, state.count.count)
    }
    instances.record(current)
    if previous != current {
      logger.info(
        "rate-limit fleet size learned: the failure policy divides each limit by it",
        metadata: [
          "pace.instances": "\(current)", "pace.previous_instances": "\(previous)", "pace.counted": "\(count)",
        ])
    }
  }

  /// A heartbeat failed at `now`: at debug if the database is unavailable (the breaker's own lines
  /// report it), once at info if the heartbeat table does not exist yet within the startup grace
  /// (the migration runs beside the store), else a warning (at most one a minute).
  func heartbeatFailed(_ error: any Error, now: ContinuousClock.Instant = .now, table: String, logger: Logger) {
    let failure: FleetCountState.Failure
    if case .unavailable? = error as? PacePostgresError {
      failure = .unavailable
    } else if isUnavailability(error) {
      failure = .unavailable
    } else {
      failure = sqlState(of: error) == "42P01" ? .tableMissing : .other
    }
    let report = state.withLock { $0.count.failed(failure, now: now) }
    switch report {
    case .debug:
      let why = failure == .unavailable ? "PostgreSQL is unavailable" : "its table does not exist yet"
      logger.debug("fleet heartbeat failed: \(why)", metadata: errorMetadata(error))
    case .waitingForTable:
      logger.info(
        "fleet heartbeat: the table \(table)_instances does not exist yet; waiting for migrate() to make it",
        metadata: ["pace.instances": "\(count)"])
    case .warning:
      guard heartbeatReport.record() != nil else { return }
      var metadata = errorMetadata(error)
      metadata["pace.instances"] = "\(count)"
      metadata["pace.action"] =
        "run the store's migrate() (it creates the table \(table)_instances); until a heartbeat succeeds, the failure policy divides limits by pace.instances"
      logger.warning("fleet heartbeat failed: the instance count is not being learned", metadata: metadata)
    }
  }

  /// Each key's share of `limit` at `now`, for a request of `cost` (already checked against the limit).
  func decide(_ key: String, cost: Int, limit: RateLimit, now: ContinuousClock.Instant) throws -> RateLimitDecision {
    let instances = count
    let share = try ShareLimit(limit, instances: instances)
    let microseconds = originMicroseconds + (origin.duration(to: now).wholeMicroseconds ?? 0)
    return state.withLock {
      $0.shares.decide(key: key, cost: cost, share: share, limitInterval: limit.interval, now: microseconds)
    }
  }

  /// What the fallback warning says of the policy.
  var policyDescription: String {
    let (instances, source) = state.withLock { ($0.count.count, $0.count.source) }
    let said =
      switch source {
      case .configured: "configured"
      case .assumed: "assumed: no heartbeat counted yet"
      case .learned: "learned"
      case .settling(let counted):
        counted == instances ? "learned" : "the fleet is settling: a heartbeat counted \(counted)"
      }
    return "each instance allows its share, the limit / \(instances) (\(said))"
  }
}

extension PostgresRateLimitStore {
  /// The instance count ``FailureMode/shareLimit(among:)`` divides each limit by now: the
  /// configured count, or the count learned from the heartbeats (see ``heartbeat()``), the assumed
  /// one until then; while the fleet settles (one ``FleetSize/liveSpan`` after the first
  /// heartbeat, or after a failed one) a learned count never lowers it. Nil under the other
  /// policies.
  public var fleetSize: Int? { fleet.size == nil ? nil : fleet.count }

  /// The heartbeat table, beside the store's table: one row per live store.
  static func heartbeatTableName(_ table: TableName) -> String { table.suffixed("instances") }

  /// Creates the heartbeat table, for ``migrate(timeout:)``.
  static func heartbeatMigrationSQL(table: TableName) -> String {
    """
    CREATE TABLE IF NOT EXISTS \(heartbeatTableName(table)) (
      instance text PRIMARY KEY,
      seen bigint NOT NULL
    )
    """
  }

  /// Registers this store as live (`$1` its id) at the database's clock, forgets rows silent for
  /// longer than `$3` microseconds, and counts the instances seen within `$2` (this one included).
  /// The count reads the statement's snapshot, where this store's new row is not yet visible.
  static func heartbeatSQL(table: TableName) -> String {
    let instances = heartbeatTableName(table)
    return """
      WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now),
      beat AS (
        INSERT INTO \(instances) AS h (instance, seen) SELECT $1, clock.now FROM clock
        ON CONFLICT (instance) DO UPDATE SET seen = EXCLUDED.seen
        RETURNING 1
      ), forgotten AS (
        DELETE FROM \(instances) AS h USING clock WHERE h.seen < clock.now - $3 AND h.instance <> $1
      )
      SELECT (1 + (SELECT count(*) FROM \(instances) AS h, clock
        WHERE h.instance <> $1 AND h.seen > clock.now - $2))::bigint
      """
  }

  /// Registers this store in the heartbeat table and counts the instances that registered within
  /// the fleet's live span (three heartbeat intervals; ``FleetSize/liveSpan``), this one included.
  /// ``run()`` calls it every ``FleetSize/heartbeatInterval`` under
  /// ``FailureMode/shareLimit(among:)`` with a learned count; call it yourself if you do not
  /// run the store as a service.
  ///
  /// - Returns: How many instances are live; the policy divides each limit by it from now on, or,
  ///   while the fleet settles, by the larger of it and the count before it (see ``fleetSize``).
  /// - Throws: ``PacePostgresError/unavailable(reason:)`` if the database does not answer within
  ///   the store's ``timeout``; what the database reports (`undefined_table` before
  ///   ``migrate(timeout:)``).
  @discardableResult
  public func heartbeat() async throws -> Int {
    let count = try await Self.sendHeartbeat(
      instance: fleet.instance, liveSpan: fleet.size?.liveSpan ?? .seconds(15), table: tableName, client: client,
      timeout: timeout, logger: logger)
    fleet.learned(count, logger: logger)
    return count
  }

  /// Registers `instance` in `table`'s heartbeat table and counts the instances live within
  /// `liveSpan`, this one included: the store's heartbeat, and the shared concurrency limit's.
  static func sendHeartbeat(
    instance: String, liveSpan span: Duration, table: TableName, client: PostgresClient, timeout: Duration,
    logger: Logger
  ) async throws -> Int {
    var binds = PostgresBindings()
    binds.append(instance)
    binds.append(span.wholeMicroseconds ?? .max / 4)
    binds.append((span * 10).wholeMicroseconds ?? .max / 4)
    let query = PostgresQuery(unsafeSQL: heartbeatSQL(table: table), binds: binds)
    do {
      return try await withTimeout(timeout) {
        var count = 1
        for try await value in try await client.query(query, logger: logger).decode(Int64.self) { count = Int(value) }
        return count
      }
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "heartbeat: PostgreSQL did not answer within \(timeout)")
    }
  }

  /// The heartbeats of ``run()``: none unless the policy learns the fleet's size.
  func startHeartbeats() -> Task<Void, Never>? {
    guard let interval = fleet.size?.heartbeatInterval else { return nil }
    let fleet = fleet
    return Task {
      while !Task.isCancelled {
        do {
          try await heartbeat()
        } catch {
          if Task.isCancelled { break }  // shutting down: not a failure to report
          fleet.heartbeatFailed(error, table: table, logger: logger)
        }
        do { try await Task.sleep(for: interval) } catch { break }
      }
      // Leaves the count at once rather than after the live span; best effort (a crash leaves it
      // after the span too).
      var binds = PostgresBindings()
      binds.append(fleet.instance)
      let leave = PostgresQuery(
        unsafeSQL: "DELETE FROM \(Self.heartbeatTableName(tableName)) WHERE instance = $1", binds: binds)
      let (client, timeout) = (client, timeout)
      do {
        try await Task.detached { try await withTimeout(timeout) { _ = try await client.query(leave) } }.value
      } catch {
        // The row leaves the count after the live span anyway: worth a line, not an alarm.
        logger.notice(
          "fleet share: could not remove this instance's heartbeat row; the others stop counting it after the live span",
          metadata: errorMetadata(error))
      }
    }
  }

  /// The decision of `.shareLimit`: this instance's share of `limit` for `key`.
  func decideShare(_ key: String, cost: Int, limit: RateLimit, now: ContinuousClock.Instant) throws
    -> RateLimitDecision
  {
    try fleet.decide(key, cost: cost, limit: limit, now: now)
  }
}

extension PostgresRateLimitStore.FailureMode {
  /// What the fallback warning says the policy does.
  func description(fleet: FleetMembership) -> String {
    switch self {
    case .throwError: "each decision throws PacePostgresError.unavailable"
    case .allow: "every request is allowed"
    case .deny: "every request is denied"
    case .fallback: "each instance decides alone with its fallback limiter"
    case .shareLimit: fleet.policyDescription
    }
  }
}
#endif
