#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

/// A concurrency limit shared by every instance of a server through PostgreSQL: at most
/// ``maximumInFlight`` calls of a key in flight at once across the fleet, each permit a lease row
/// that expires unless its instance renews it, so that the permits of an instance that dies
/// (`kill -9`, a lost machine) come back within ``lease``.
///
/// ```swift
/// let limiter = try PostgresConcurrencyLimiter(client: client, maximumInFlight: 8, maximumWait: .seconds(2))
/// // The client and the limiter run as services: the limiter's run() renews its leases.
/// let services = ServiceGroup(services: [client, limiter], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await limiter.migrate()  // once the client runs
/// let page = try await limiter.withPermit("render") { try await render(request) }
/// ```
///
/// The rules, exactly (<doc:SharedRateLimitsAndDebouncing> says more):
/// - **Admission.** A call of class `c` is admitted when the key's unexpired leases, of every
///   instance and class, are fewer than `c`'s share of the limit
///   (`PriorityShares.maximumInFlight(for:of:)`). One statement decides: under a lock of its
///   key (a transaction-scoped advisory lock), it deletes the key's expired leases, counts the
///   others and inserts the call's lease only if they are fewer; so concurrent calls of every
///   instance never overshoot.
/// - **Waiting.** A call that is not admitted tries again, after 10 ms, then twice as long each
///   time up to 200 ms (each delay jittered), until ``maximumWait`` has passed, then throws
///   `ConcurrencyLimiterError.maximumWaitReached(waited:)`. With a ``maximumWait`` of zero (the
///   default) it throws `ConcurrencyLimiterError.queueFull(maximumQueued:waited:)` at once, as
///   an in-memory limiter without a queue does. There is no queue and no order between waiting
///   calls: whichever asks first after a place frees up gets it. A cancelled call throws
///   `CancellationError`.
/// - **Leases.** A permit's lease expires ``lease`` after it was taken or last renewed, by the
///   database's clock. ``run()`` renews this instance's leases every third of ``lease``; a
///   release deletes the lease (in the background: the caller does not wait for the database).
///   A lease of an instance that stopped renewing (killed, frozen, cut off from the database) stops
///   counting at most ``lease`` after its last renewal, and a waiting call of another instance gets
///   the place at its next try, at most 200 ms later. A lease that expired before its renewal is
///   never renewed again: its work goes on, counted in
///   `pace_shared_concurrency_leases_lost_total`, and the database no longer counts it.
/// - **Database away.** While the database cannot decide (the SQLSTATE table in the article),
///   the ``FailureMode`` answers; after a few such failures in a row the ``CircuitBreaker`` stops
///   asking for a while. Under ``FailureMode/shareLimit(among:)`` each instance admits up to its
///   share of a class's limit, `max(1, ⌊share / n⌋)` for a fleet of `n`, counting the permits it
///   held when the database went away, so that the fleet keeps about the limit.
///
/// Every instance that shares the table should have the same ``maximumInFlight`` and
/// ``shares``: each call is checked against its own. Keys follow `InputRules` (stored in
/// Unicode NFC, always as bound parameters).
///
/// Without ``run()``, nothing renews the leases: a permit held for longer than ``lease`` stops
/// counting. Decisions, releases, failures, lost leases and the fleet's size are logged to the
/// `logger` and counted in swift-metrics; the names are in the article.
public final class PostgresConcurrencyLimiter: SharedConcurrencyLimiter, Service {
  /// How many instances share the limit, for ``FailureMode/shareLimit(among:)``: configured, or
  /// learned from a heartbeat table while the database is healthy (as the rate-limit store's).
  public typealias FleetSize = PostgresRateLimitStore.FleetSize

  /// What a call is answered when the database cannot decide: it is unreachable, read-only,
  /// shutting down, out of connections, or does not answer within ``timeout``. Errors about the
  /// statement itself (a missing table) are always thrown.
  public enum FailureMode: Sendable {
    /// Throw ``PacePostgresError/unavailable(reason:)``: the caller decides.
    case throwError
    /// Each instance admits up to its share of each class's limit: that share divided by the
    /// fleet's instance count `n`, rounded down, at least 1 (a class with no share admits none),
    /// counting this instance's permits of the key that the database admitted before it went
    /// away. So the fleet holds at most `n × max(1, ⌊share / n⌋)` of a key, at most the limit
    /// when `n` is no more than it. A permit admitted so is not in the database: once it answers
    /// again, it admits up to the limit beside the permits the outage admitted, until they end.
    case shareLimit(among: FleetSize)
  }

  /// The client the limiter queries; the caller runs it.
  public let client: PostgresClient
  /// The lease table, as given.
  public var table: String { tableName.name }
  /// How many calls of one key may be in flight at once across every instance.
  public let maximumInFlight: Int
  /// How much of the limit each class may fill.
  public let shares: PriorityShares
  /// How long a call may wait for a place; zero to refuse at once.
  public let maximumWait: Duration
  /// How long a lease counts after it was taken or last renewed.
  public let lease: Duration
  /// How long a statement may take, the wait for a connection included, before the database
  /// counts as unavailable.
  public let timeout: Duration
  /// What a call is answered when the database cannot decide.
  public let whenUnavailable: FailureMode
  /// When calls stop asking an unavailable database.
  public let circuitBreaker: CircuitBreaker
  /// Where the limiter logs.
  public let logger: Logger

  let tableName: TableName
  /// This instance's id in the lease rows and the heartbeat table.
  let instance = UUID().uuidString.lowercased()
  let book = LockedState(LeaseBookState())
  let breaker: LockedState<CircuitBreakerMachine>
  let fleet: LockedState<FleetCountState>
  /// The releases' deletes in flight, which ``run()`` awaits before it returns.
  let deletes = OwnedTasks()
  let metrics: SharedConcurrencyMetrics
  /// 0 before ``run()``, 1 while it runs, 2 after.
  let runState = LockedState(0)
  let fallbackReport = OccasionalReport(every: .seconds(10))
  let renewalReport = OccasionalReport(every: .seconds(60))
  let forgotten = LockedState(0)

  /// A limiter on `client`, in `table`.
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client.
  ///   - table: The lease table's name, `name` or `schema.name`; `pace_concurrency_leases` by default.
  ///   - maximumInFlight: How many calls of one key may be in flight at once across every
  ///     instance. Positive.
  ///   - shares: How much of the limit each class may fill; all of it by default.
  ///   - maximumWait: How long a call may wait for a place, trying again as the rules say; zero
  ///     (refuse at once) by default. Not negative.
  ///   - lease: How long a lease counts unless renewed: the longest a dead instance's permits
  ///     stay taken; 10 seconds by default. At least 100 ms.
  ///   - timeout: How long a statement may take; one second by default. Positive.
  ///   - whenUnavailable: The failure mode; each instance its share, among a fleet learned from
  ///     heartbeats (1 until one is counted), by default.
  ///   - circuitBreaker: When to stop asking an unavailable database.
  ///   - logger: Where to log; silent by default.
  ///   - metricsFactory: Where to report metrics; the process's `MetricsSystem` by default.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier;
  ///   ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the setting that is out of
  ///   its range.
  public init(
    client: PostgresClient,
    table: String = "pace_concurrency_leases",
    maximumInFlight: Int,
    shares: PriorityShares = .unreserved,
    maximumWait: Duration = .zero,
    lease: Duration = .seconds(10),
    timeout: Duration = .seconds(1),
    whenUnavailable: FailureMode = .shareLimit(among: .learned(assuming: 1)),
    circuitBreaker: CircuitBreaker = CircuitBreaker(),
    logger: Logger = Logger(label: "pace.postgres.concurrency", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) throws(PacePostgresError) {
    let owner = "PostgresConcurrencyLimiter"
    guard maximumInFlight > 0 else {
      throw .invalid("\(owner).maximumInFlight", maximumInFlight, "must be positive")
    }
    try checkSetting("maximumWait", maximumWait, of: owner, zeroAllowed: true)
    try checkSetting("lease", lease, of: owner)
    guard lease >= .milliseconds(100) else {
      throw .invalid("\(owner).lease", lease, "must be at least 100 ms (it is renewed every third of it)")
    }
    try checkSetting("timeout", timeout, of: owner)
    try circuitBreaker.check(of: owner)
    self.client = client
    self.tableName = try TableName(table)
    _ = try tableName.companion(.slidingWindow)  // the index and function names fit as the store's do
    self.maximumInFlight = maximumInFlight
    self.shares = shares
    self.maximumWait = maximumWait
    self.lease = lease
    self.timeout = timeout
    self.whenUnavailable = whenUnavailable
    self.circuitBreaker = circuitBreaker
    self.logger = logger.naming(table: table)
    breaker = LockedState(CircuitBreakerMachine(circuitBreaker))
    let size: FleetSize? = if case .shareLimit(let size) = whenUnavailable { size } else { nil }
    fleet = LockedState(FleetCountState(assumed: size?.assumedCount ?? 1, settling: size?.liveSpan))
    metrics = SharedConcurrencyMetrics(table: table, factory: metricsFactory)
    if let size { metrics.instances.record(size.assumedCount) }
  }

  /// How many of this instance's permits are held now, over every key.
  public var inFlightCount: Int { book.withLock { $0.count } }

  /// How many of this instance's permits of `key` are held now.
  public func inFlightCount(for key: String) -> Int {
    let stored = (try? storedKey(key)) ?? key
    return book.withLock { $0.inFlight[stored] ?? 0 }
  }

  /// How many permits were released by their deinit rather than by `release()`: each a place
  /// held longer than its work, a bug in the caller. A test expects 0.
  public var forgottenPermitCount: Int { forgotten.withLock { $0 } }

  /// The instance count ``FailureMode/shareLimit(among:)`` divides by now; nil under
  /// ``FailureMode/throwError``.
  public var fleetSize: Int? {
    guard case .shareLimit = whenUnavailable else { return nil }
    return fleet.withLock { $0.count }
  }

  /// Takes one of `key`'s places across every instance, waiting for one as the rules say.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for, checked by `InputRules`.
  ///   - priority: The call's class; `.default` by default.
  /// - Returns: The permit; release it on every path, or use `withPermit(_:priority:_:)`.
  /// - Throws: `ConcurrencyLimiterError` when refused (`queueFull` at once with no
  ///   ``maximumWait``, `maximumWaitReached` after it), `CancellationError` when cancelled while
  ///   it waits, `InvalidInput` for a key outside `InputRules`,
  ///   ``PacePostgresError/unavailable(reason:)`` under ``FailureMode/throwError``, or what the
  ///   database reports about the statement itself.
  public func acquire(_ key: String, priority: AdmissionPriority = .default) async throws -> Permit {
    let stored: String
    do {
      stored = try storedKey(key)
    } catch {
      metrics.count(.invalid)
      throw error
    }
    let bound = shares.maximumInFlight(for: priority, of: maximumInFlight)
    let clock = ContinuousClock()
    let started = clock.now
    var delay = Self.firstRetry
    while true {
      let (answer, fellBack) = try await tryOnce(stored, priority: priority, bound: bound)
      if let permit = answer {
        metrics.count(fellBack ? .fallbackAdmitted : .admitted)
        return permit
      }
      let waited = started.duration(to: clock.now)
      guard maximumWait > .zero else {
        metrics.count(fellBack ? .fallbackRefused : .refused)
        throw ConcurrencyLimiterError.queueFull(maximumQueued: 0, waited: .zero)
      }
      guard waited < maximumWait else {
        metrics.count(fellBack ? .fallbackRefused : .refused)
        throw ConcurrencyLimiterError.maximumWaitReached(waited: waited)
      }
      let jittered = delay * Double.random(in: 0.5...1)
      try await Task.sleep(for: min(jittered, maximumWait - waited))
      delay = min(delay * 2, Self.longestRetry)
    }
  }

  /// The first wait before a refused call tries again, and the longest.
  static let firstRetry = Duration.milliseconds(10)
  static let longestRetry = Duration.milliseconds(200)

  /// One try: the database's answer, or the failure mode's; `fellBack` when it was the latter.
  private func tryOnce(
    _ key: String, priority: AdmissionPriority, bound: Int
  ) async throws -> (Permit?, fellBack: Bool) {
    let (admission, transition) = breaker.withLock { $0.admit(now: .now) }
    if let transition { report(transition, error: nil) }
    if admission == .reject {
      return (try fallback(key, priority: priority, bound: bound, reason: "the circuit breaker is open"), true)
    }
    let id = UUID().uuidString.lowercased()
    let query = PostgresQuery(
      unsafeSQL: Self.acquireSQL(table: tableName),
      binds: PostgresBindings(key, id, instance, Int64(bound), lease.wholeMicroseconds ?? .max / 4))
    let (client, logger) = (client, logger)
    var retried = false
    while true {
      do {
        let held = try await withTimeout(timeout) {
          var held = Int64.max
          for try await value in try await client.query(query, logger: logger).decode(Int64.self) { held = value }
          return held
        }
        ended(admission, unavailable: false, error: nil)
        guard held < Int64(bound) else { return (nil, false) }
        book.withLock { $0.admitted(id, key: key, priority: priority) }
        metrics.inFlight.record(inFlightCount)
        return (Permit(limiter: self, id: id, key: key, priority: priority), false)
      } catch {
        if error is CancellationError || Task.isCancelled {
          ended(admission, unavailable: nil, error: nil)
          deleteLater(id)  // the statement may have inserted it as the caller left
          throw CancellationError()
        }
        let kind = failureKind(of: error)
        if kind == .retryOnce && !retried {
          retried = true  // a serialization failure under a serializable default: the statement again
          continue
        }
        ended(admission, unavailable: kind != .fatal, error: error)
        guard kind != .fatal else {
          metrics.count(.error)
          logger.error("shared concurrency limit: the database refused the statement", metadata: errorMetadata(error))
          throw error
        }
        deleteLater(id)  // a timed-out statement may still insert it: it goes, or expires unrenewed
        return (try fallback(key, priority: priority, bound: bound, reason: "\(error)"), true)
      }
    }
  }

  /// The failure mode's answer for a call of `key` whose class may fill `bound` places.
  private func fallback(_ key: String, priority: AdmissionPriority, bound: Int, reason: String) throws -> Permit? {
    switch whenUnavailable {
    case .throwError:
      metrics.count(.error)
      throw PacePostgresError.unavailable(reason: "shared concurrency limit: \(reason)")
    case .shareLimit:
      let instances = fleet.withLock { $0.count }
      let share = bound == 0 ? 0 : max(1, bound / instances)
      if let calls = fallbackReport.record() {
        logger.warning(
          "shared concurrency limit follows the failure mode: PostgreSQL cannot decide",
          metadata: [
            "pace.reason": "\(reason)", "pace.decisions": "\(calls)",
            "pace.policy": "each instance admits its share of a key's places, \(bound) / \(instances) = \(share)",
            "pace.action": "\(StoreHealth.outageAction)",
          ])
      }
      let id = UUID().uuidString.lowercased()
      guard book.withLock({ $0.admitLocally(id, key: key, priority: priority, bound: share) }) else { return nil }
      metrics.inFlight.record(inFlightCount)
      return Permit(limiter: self, id: id, key: key, priority: priority)
    }
  }

  /// A statement admitted with `admission` ended.
  private func ended(_ admission: CircuitBreakerMachine.Admission, unavailable: Bool?, error: (any Error)?) {
    let now = ContinuousClock.now
    let transition: CircuitBreakerMachine.Transition? = breaker.withLock { breaker in
      switch admission {
      case .ask: unavailable.flatMap { breaker.asked(unavailable: $0, now: now) }
      case .probe: breaker.probeEnded(succeeded: unavailable.map { !$0 }, now: now)
      case .reject: nil
      }
    }
    if let transition { report(transition, error: error) }
  }

  private func report(_ transition: CircuitBreakerMachine.Transition, error: (any Error)?) {
    var metadata = error.map(errorMetadata) ?? [:]
    switch transition {
    case .opened:
      metrics.breakerState.record(2)
      metadata["pace.action"] = "\(StoreHealth.outageAction)"
      logger.error(
        "PostgreSQL unavailable: the shared concurrency limit's circuit breaker opened; calls follow the failure mode",
        metadata: metadata)
    case .halfOpened:
      metrics.breakerState.record(1)
      logger.info("shared concurrency limit: circuit breaker half-open, one call probes PostgreSQL")
    case .closed:
      metrics.breakerState.record(0)
      logger.notice("PostgreSQL answers again: the shared concurrency limit's circuit breaker closed")
    }
  }

  /// Gives a permit's place back: its lease is deleted in the background.
  func release(_ id: String, forgotten wasForgotten: Bool) {
    guard let lease = book.withLock({ $0.released(id) }) else { return }
    if wasForgotten { forgotten.withLock { $0 += 1 } }
    metrics.inFlight.record(inFlightCount)
    if lease.inDatabase { deleteLater(id) }
  }

  /// Deletes the lease `id` in the background, best effort: a lease that is not deleted expires,
  /// since nothing renews it.
  private func deleteLater(_ id: String) {
    let (client, logger, timeout) = (client, logger, timeout)
    let query = PostgresQuery(unsafeSQL: "DELETE FROM \(tableName) WHERE lease = $1", binds: PostgresBindings(id))
    deletes.spawn {
      do {
        try await withTimeout(timeout) { _ = try await client.query(query, logger: logger) }
      } catch {
        logger.debug(
          "shared concurrency limit: a released lease could not be deleted; it expires unrenewed",
          metadata: errorMetadata(error))
      }
    }
  }

  /// A place held by this instance, until ``release()``.
  public final class Permit: SharedConcurrencyPermit {
    /// The class the permit was admitted as.
    public let priority: AdmissionPriority
    /// The key it counts for, as stored.
    public let key: String
    let limiter: PostgresConcurrencyLimiter
    let id: String

    init(limiter: PostgresConcurrencyLimiter, id: String, key: String, priority: AdmissionPriority) {
      self.limiter = limiter
      self.id = id
      self.key = key
      self.priority = priority
    }

    /// Gives the place back: the lease is deleted in the background. Idempotent.
    public func release() { limiter.release(id, forgotten: false) }

    deinit { limiter.release(id, forgotten: true) }
  }
}

/// What a ``PostgresConcurrencyLimiter`` reports to swift-metrics.
final class SharedConcurrencyMetrics: Sendable {
  enum Outcome: Int, CaseIterable, Sendable {
    case admitted, refused, fallbackAdmitted, fallbackRefused, invalid, error

    var label: String {
      switch self {
      case .admitted: "admitted"
      case .refused: "refused"
      case .fallbackAdmitted: "fallback_admitted"
      case .fallbackRefused: "fallback_refused"
      case .invalid: "invalid"
      case .error: "error"
      }
    }
  }

  private let decisions: [Counter]
  let inFlight: Gauge
  let leasesLost: Counter
  let renewalFailures: Counter
  let instances: Gauge
  let breakerState: Gauge

  init(table: String, factory: any MetricsFactory) {
    let dimensions = [("table", table)]
    decisions = Outcome.allCases.map { outcome in
      Counter(
        label: "pace_shared_concurrency_decisions_total", dimensions: dimensions + [("outcome", outcome.label)],
        factory: factory)
    }
    inFlight = Gauge(label: "pace_shared_concurrency_in_flight", dimensions: dimensions, factory: factory)
    leasesLost = Counter(label: "pace_shared_concurrency_leases_lost_total", dimensions: dimensions, factory: factory)
    renewalFailures = Counter(
      label: "pace_shared_concurrency_renewal_failures_total", dimensions: dimensions, factory: factory)
    instances = Gauge(label: "pace_shared_concurrency_fleet_instances", dimensions: dimensions, factory: factory)
    breakerState = Gauge(label: "pace_shared_concurrency_breaker_state", dimensions: dimensions, factory: factory)
    breakerState.record(0)
    inFlight.record(0)
  }

  func count(_ outcome: Outcome) { decisions[outcome.rawValue].increment() }
}
#endif
