#if PostgreSQL
import Pace

/// The instance count of ``PostgresRateLimitStore/FailureMode/shareLimit(among:)``, apart from any
/// clock or lock: the heartbeats' counts and failures come in with `now`, the count to divide by
/// and what to log come out.
///
/// A count is provisional for one live span (three heartbeat intervals) after the store's first
/// heartbeat, and after any heartbeat that failed: instances that started with this one, or that
/// could not write their row while the database was away, may not be in it yet. A provisional
/// count never lowers the count in force before it (the assumed one, or the last settled one), so
/// that an outage soon after a start or after another outage divides by no fewer instances than
/// it would have without the heartbeats; it may raise it, which only allows less.
struct FleetCountState: Sendable, Equatable {
  /// Why a heartbeat failed.
  enum Failure: Sendable, Equatable {
    /// The database is unavailable: the breaker's lines report it.
    case unavailable
    /// The heartbeat table does not exist (SQLSTATE 42P01).
    case tableMissing
    /// Anything else: a permission, a configuration error.
    case other
  }

  /// How a heartbeat's failure is logged.
  enum Report: Sendable, Equatable {
    /// At debug: nothing for an operator to do.
    case debug
    /// Once, at info: the table does not exist yet, within the startup grace (the migration that
    /// makes it runs beside the store).
    case waitingForTable
    /// A warning: the count is not being learned.
    case warning
  }

  /// Where ``count`` comes from.
  enum Source: Sendable, Equatable {
    /// Configured: `.instances(n)`.
    case configured
    /// No heartbeat has counted yet.
    case assumed
    /// The last heartbeat counted `counted`, provisionally: ``count`` is the larger of it and the
    /// count before it.
    case settling(counted: Int)
    /// The last heartbeat counted ``count``, with the fleet settled.
    case learned
  }

  /// The configured or assumed count.
  let assumed: Int
  /// How long after a first heartbeat (at start, or after a failed one) a count stays provisional:
  /// the heartbeats' live span; nil for a configured count, which never changes.
  let settling: Duration?
  /// How long after its first heartbeat a missing table is waited for quietly.
  let startupGrace: Duration

  /// The count the last heartbeat returned; nil until one did.
  private(set) var counted: Int?
  /// What the count was when the last heartbeat counted, if that count was provisional.
  private var floor: Int?
  /// When the current run of successful heartbeats began; nil before the first and after a failure.
  private var streakStart: ContinuousClock.Instant?
  /// The last count that settled, the floor of the provisional ones after it.
  private var settledCount: Int?
  /// When the first heartbeat answered or failed.
  private var firstHeartbeat: ContinuousClock.Instant?
  private var loggedWaitForTable = false

  /// A count that `settling` after the first heartbeat (or after a failed one) replaces the
  /// assumed one; a configured one (`settling` nil) stays.
  init(assumed: Int, settling: Duration?, startupGrace: Duration = .seconds(30)) {
    precondition(assumed > 0, "FleetCountState: assumed must be positive (got \(assumed))")
    self.assumed = assumed
    self.settling = settling
    self.startupGrace = startupGrace
  }

  /// The count the shares divide by now.
  var count: Int {
    guard settling != nil, let counted else { return assumed }
    return floor.map { max($0, counted) } ?? counted
  }

  var source: Source {
    guard settling != nil else { return .configured }
    guard let counted else { return .assumed }
    return floor == nil ? .learned : .settling(counted: counted)
  }

  /// A heartbeat counted `live` instances at `now`.
  mutating func counted(_ live: Int, now: ContinuousClock.Instant) {
    if firstHeartbeat == nil { firstHeartbeat = now }
    guard let settling else { return }
    let start = streakStart ?? now
    streakStart = start
    counted = live
    if now - start >= settling {
      floor = nil
      settledCount = live
    } else {
      floor = settledCount ?? assumed
    }
  }

  /// A heartbeat failed at `now`: the next count is provisional again; what to log.
  mutating func failed(_ failure: Failure, now: ContinuousClock.Instant) -> Report {
    if firstHeartbeat == nil { firstHeartbeat = now }
    streakStart = nil
    switch failure {
    case .unavailable:
      return .debug
    case .tableMissing:
      guard let first = firstHeartbeat, now - first < startupGrace else { return .warning }
      if loggedWaitForTable { return .debug }
      loggedWaitForTable = true
      return .waitingForTable
    case .other:
      return .warning
    }
  }
}
#endif
