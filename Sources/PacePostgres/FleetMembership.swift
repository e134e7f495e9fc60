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
    /// The count the last heartbeat returned; nil until one did.
    var learned: Int?
    var shares = FleetShareState(capacity: FleetMembership.shareCapacity)
  }

  /// The most keys whose shares one store remembers (see ``FleetShareState``).
  static let shareCapacity = 100_000

  /// The share policy's fleet; nil under the other policies.
  let size: PostgresRateLimitStore.FleetSize?
  /// This store's row in the heartbeat table.
  let instance = UUID().uuidString.lowercased()
  private let state = LockedState(State())
  /// The Unix epoch's microseconds at `origin`: the shares' fixed windows align to the epoch, as
  /// the database's do, and their clock stays monotonic.
  private let origin = ContinuousClock.now
  private let originMicroseconds = Int64(Date().timeIntervalSince1970 * 1_000_000)
  private let instances: Gauge
  /// At most one warning per this interval about heartbeats that fail while the database answers.
  private let heartbeatReport = OccasionalReport(every: .seconds(60))

  init(_ policy: PostgresRateLimitStore.FailureMode, table: String, factory: any MetricsFactory) {
    if case .shareLimit(let size) = policy { self.size = size } else { self.size = nil }
    instances = Gauge(label: "pace_rate_limit_fleet_instances", dimensions: [("table", table)], factory: factory)
    if let size { instances.record(size.assumedCount) }
  }

  /// The count the shares divide by now: the learned one, else the assumed one.
  var count: Int { state.withLock { $0.learned } ?? size?.assumedCount ?? 1 }

  /// Whether ``count`` was learned from the heartbeat table.
  var isLearned: Bool { state.withLock { $0.learned != nil } }

  /// A heartbeat counted `count` live instances (this one included).
  func learned(_ count: Int, logger: Logger) {
    let previous = state.withLock { state in
      defer { state.learned = count }
      return state.learned
    }
    instances.record(count)
    if previous != count {
      logger.info(
        "rate-limit fleet size learned: the failure policy divides each limit by it",
        metadata: ["pace.instances": "\(count)", "pace.previous_instances": "\(previous.map { "\($0)" } ?? "none")"])
    }
  }

  /// A heartbeat failed: a warning (at most one a minute) unless the database is unavailable,
  /// which the breaker's own lines report.
  func heartbeatFailed(_ error: any Error, table: String, logger: Logger) {
    let unavailable: Bool
    if case .unavailable? = error as? PacePostgresError {
      unavailable = true
    } else {
      unavailable = isUnavailability(error)
    }
    guard !unavailable else {
      logger.debug("fleet heartbeat failed: PostgreSQL is unavailable", metadata: errorMetadata(error))
      return
    }
    guard heartbeatReport.record() != nil else { return }
    var metadata = errorMetadata(error)
    metadata["pace.instances"] = "\(count)"
    metadata["pace.action"] =
      "run the store's migrate() (it creates the table \(table)_instances); until a heartbeat succeeds, the failure policy divides limits by pace.instances"
    logger.warning("fleet heartbeat failed: the instance count is not being learned", metadata: metadata)
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
    let instances = count
    let source =
      size?.heartbeatInterval == nil ? "configured" : isLearned ? "learned" : "assumed: no heartbeat counted yet"
    return "each instance allows its share, the limit / \(instances) (\(source))"
  }
}

extension PostgresRateLimitStore {
  /// The instance count ``FailureMode/shareLimit(among:)`` divides each limit by now: the
  /// count learned from the heartbeats (see ``heartbeat()``), or the configured one until then;
  /// nil under the other policies.
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
  /// - Returns: How many instances are live; the policy divides each limit by it from now on.
  /// - Throws: ``PacePostgresError/unavailable(reason:)`` if the database does not answer within
  ///   the store's ``timeout``; what the database reports (`undefined_table` before
  ///   ``migrate(timeout:)``).
  @discardableResult
  public func heartbeat() async throws -> Int {
    let span = fleet.size?.liveSpan ?? .seconds(15)
    let instance = fleet.instance
    var binds = PostgresBindings()
    binds.append(instance)
    binds.append(span.wholeMicroseconds ?? .max / 4)
    binds.append((span * 10).wholeMicroseconds ?? .max / 4)
    let query = PostgresQuery(unsafeSQL: Self.heartbeatSQL(table: tableName), binds: binds)
    let (client, logger) = (client, logger)
    let count: Int
    do {
      count = try await withTimeout(timeout) {
        var count = 1
        for try await value in try await client.query(query, logger: logger).decode(Int64.self) { count = Int(value) }
        return count
      }
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "heartbeat: PostgreSQL did not answer within \(timeout)")
    }
    fleet.learned(count, logger: logger)
    return count
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
