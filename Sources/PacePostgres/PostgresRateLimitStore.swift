#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

/// A ``Pace/RateLimitStore`` on PostgreSQL: every instance of a server that shares the database
/// shares each key's limit.
///
/// Every policy of `RateLimit` is decided in the database, each call under the limit it is given,
/// with the same answers as in memory: a token bucket as GCRA (the generic cell rate algorithm,
/// one number per key, its theoretical arrival time), an exact sliding window (the grant times
/// that still count, per key), a fixed window aligned to the Unix epoch (a count per key). The
/// database's clock is the only clock, so instances whose clocks disagree still agree on the
/// limit, and a denied request writes nothing. Concurrent decisions of one store go to the
/// database in batches, one statement each, that decide every key's requests in call order; a
/// denial is remembered and answered locally until it expires, which is exact (see
/// <doc:SharedRateLimitsAndDebouncing>, which also gives each policy's cost per key).
///
/// ```swift
/// let store = try PostgresRateLimitStore(
///   client: client, whenUnavailable: .allow, directConnection: connection, logger: logger)
/// // The client and the store run as services: the store's run() owns its lanes and its purge.
/// let services = ServiceGroup(services: [client, store], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await store.migrate()  // once the client runs
/// let decision = try await store.tryAcquire("api-key-42", cost: 1, limit: RateLimit(permits: 100, per: .seconds(60)))
/// ```
///
/// Everything long-lived is owned by ``run()`` (the store as a swift-service-lifecycle `Service`):
/// the lanes that send the batches (and hold their connections), the watchdog that answers a
/// decision at its timeout, the purge of expired rows and the fleet's heartbeats start when it
/// starts and stop before it returns. A decision never starts any of them. Before ``run()`` has
/// started, a decision is sent alone: it leases a connection from `client`'s pool for its one
/// statement, within its ``timeout``, and leaves nothing running behind it (no batching, no
/// `directConnection`); the answers are the same, each a round trip of its own, two to three
/// times slower than through the lanes (a lease and a timer per decision): a store never run
/// says so once, at notice, at its thousandth decision sent alone. After ``run()`` has returned
/// (or after ``shutdown()``), decisions follow the failure mode.
///
/// Rows that count nothing any more are equivalent to absent rows; ``purgeAllExpired()`` deletes
/// them a bounded range of pages at a time without blocking decisions, and ``run()`` calls it
/// periodically. ``tableOptions`` make the tables
/// unlogged (no write-ahead log: lighter on the primary, emptied by a crash) or change their fill
/// factor (see ``TableOptions``).
///
/// While the database cannot decide, the ``FailureMode`` answers; after a few such failures
/// in a row the ``CircuitBreaker`` stops asking the database for a while, so that decisions are
/// answered at once rather than after the whole ``timeout``. Outages, breaker changes and fallback
/// decisions are logged to the `logger` and counted in swift-metrics; the names are in
/// <doc:SharedRateLimitsAndDebouncing>.
public struct PostgresRateLimitStore: RateLimitStore, Service {
  public typealias Key = String

  /// The failure mode: what ``tryAcquire(_:cost:limit:)`` answers when the database cannot decide:
  /// it is unreachable, read-only, shutting down, out of connections, or does not answer within the
  /// store's timeout (the SQLSTATE table in <doc:SharedRateLimitsAndDebouncing>). Errors about the
  /// query itself (a missing table, say) are always thrown: they are bugs, not outages.
  ///
  /// Each policy bounds what a fleet of `n` instances allows a key during an outage of length `D`
  /// differently (a limit of `r` per `T` with a burst of `b`): `.deny` nothing, `.allow` everything,
  /// `.fallback` up to `n` times its limiter's limit (`n × (b + r × D / T)` with the same limit),
  /// `.shareLimit` about the limit itself (`n × ⌊b / n⌋ + r × D / T`). A key denied just before the
  /// outage stays denied until its denial expires (the store remembers it) under every policy.
  ///
  /// The database never learns what the instances granted while it was away: when it decides
  /// again, each key's state is what it was before the outage. So a span that contains the outage
  /// gets the outage's grants on top of what the limit gives it in the database: a window of `N`
  /// that spans the outage's start or end grants up to `N` there and the outage's grants beside
  /// them (under `.shareLimit`, up to `N + n × max(1, ⌊N / n⌋)`, about `2N`), and a token bucket,
  /// which refilled in the database during the outage, grants its burst again when it is back.
  public enum FailureMode: Sendable {
    /// Throw ``PacePostgresError/unavailable(reason:)``: the caller decides. The default.
    case throwError
    /// Fail open: allow every request (remaining is reported as 0). No bound.
    case allow
    /// Fail closed: deny every request, asking to retry after the given duration. Allows nothing.
    case deny(retryAfter: Duration)
    /// Decide with another limiter, typically an in-memory `KeyedRateLimiter<String>`, so that
    /// each instance still enforces a limit on its own while the database is down. The fallback's
    /// own `KeyedRateLimiter.limit` applies, whatever limit each call passes: the same limit lets
    /// `n` instances allow up to `n` times it, each starting with a full burst; a limit divided by
    /// `n` keeps the total. ``shareLimit(among:)`` divides each call's limit for you.
    case fallback(KeyedRateLimiter<String>)
    /// Each instance allows its share of the limit each call passes, the limit divided by the
    /// fleet's instance count `n` (configured, or learned from a heartbeat table while the
    /// database is healthy; see ``FleetSize``), so that the fleet as a whole keeps about its limit.
    ///
    /// A token bucket of `r` per `T` with a burst of `b` keeps its exact rate (`r` per `n × T` on
    /// each instance) and gets a burst of `⌊b / n⌋`, at least 1; a window of `N` gets `⌊N / n⌋` per
    /// window, at least 1. Each instance's share starts full when the outage starts (an instance
    /// cannot know what the others took), so during an outage of length `D` the fleet allows a key
    /// at most `n × max(1, ⌊b / n⌋) + r × D / T` (a token bucket: at most one limit's burst plus its
    /// rate, when `n ≤ b`), and at most `n × max(1, ⌊N / n⌋)` in any window (at most `N` when
    /// `n ≤ N`) beside what the database grants in the same window before or after the outage: up
    /// to `N + n × max(1, ⌊N / n⌋)` in a window that spans the outage's start or end, since the
    /// database does not learn the outage's grants. Over a span of length `S` that contains the
    /// outage, a token bucket grants at most `b + n × max(1, ⌊b / n⌋) + r × (S + D) / T`. A limit smaller
    /// than the fleet (`b < n` or `N < n`) still allows one per instance: up to `n` where it says
    /// fewer. A cost above the share's burst (possible only when it is more than `b / n`) is denied
    /// for the limit's interval during the outage.
    case shareLimit(among: FleetSize)
  }

  /// What ``tryAcquire(_:cost:limit:)`` answers when the database cannot decide: ``FailureMode``.
  @available(*, deprecated, renamed: "FailureMode")
  public typealias UnavailablePolicy = FailureMode

  /// The client the store queries: the caller runs it (`client.run()`, or as a `Service`), or,
  /// for a store made with ``init(configuration:table:tableOptions:whenUnavailable:timeout:circuitBreaker:purgeInterval:directConnection:logger:metricsFactory:)``,
  /// the store's ``run()`` does.
  public let client: PostgresClient
  /// Whether ``run()`` runs ``client`` too: the store made it from a configuration.
  var runsClient = false
  /// The store's table, as given.
  public var table: String { tableName.name }
  /// How ``migrate(timeout:)`` makes the store's tables: logged or not, and their fill factor.
  public let tableOptions: TableOptions
  /// What happens when the database is unavailable.
  public let whenUnavailable: FailureMode
  /// How long a decision may take, the wait for a connection included, before it counts as
  /// unavailable. The database gives up on the statement within the same time, so a decision the
  /// caller no longer waits for never takes permits later.
  public let timeout: Duration
  /// When decisions stop going to an unavailable database.
  public let circuitBreaker: CircuitBreaker
  /// How often ``run()`` deletes expired rows.
  public let purgeInterval: Duration
  /// Where the store logs outages, breaker changes, fallback decisions and unexpected errors.
  public let logger: Logger

  let tableName: TableName
  let health: StoreHealth
  let batcher: DecisionBatcher
  let denials: LockedState<DenialCacheState>
  /// The heartbeat's id and count, and the shares of ``FailureMode/shareLimit(among:)``.
  let fleet: FleetMembership
  /// The busy keys' leases, when ``leasingHotKeys(_:metricsFactory:)`` made the store.
  var hotKeys: HotKeyLeases? = nil
  /// The circuit breaker's probes in flight, which ``shutdown()`` awaits.
  let probes = OwnedTasks()

  /// A store on `client`, in `table`.
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client. The store's decisions hold up to two of its
  ///     connections while they keep coming, each given back after half a second idle.
  ///   - table: The table's name, `name` or `schema.name`; `pace_rate_limits` by default.
  ///   - tableOptions: How ``migrate(timeout:)`` makes the tables: logged or not, and their fill
  ///     factor; logged, with a fill factor of 70, by default (see ``TableOptions``).
  ///   - whenUnavailable: The failure policy; `.throwError` by default.
  ///   - timeout: How long a decision may take; one second by default. Positive.
  ///   - circuitBreaker: When to stop asking an unavailable database; see ``CircuitBreaker``.
  ///   - purgeInterval: How often ``run()`` deletes expired rows; one minute by default. Positive.
  ///   - directConnection: Where decisions connect on their own, up to two connections that the
  ///     store keeps open until ``shutdown()``, instead of through `client`'s pool; nil (the pool)
  ///     by default. Give it the same
  ///     server as `client`: then decisions reconnect as soon as the database is back, where a
  ///     pool waits out its reconnection backoff, which grows with the outage.
  ///   - logger: Where to log; silent by default, as PostgresNIO's own logging is.
  ///   - metricsFactory: Where to report metrics; the process's `MetricsSystem` by default.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier,
  ///   or is longer than 55 bytes (the window policies' tables add `_sliding` to it);
  ///   ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the setting if `timeout` or
  ///   `purgeInterval` is not positive or is `Int64.max` nanoseconds (about 292 years) or more, or
  ///   the circuit breaker's threshold is not positive.
  public init(
    client: PostgresClient,
    table: String = "pace_rate_limits",
    tableOptions: TableOptions = .logged,
    whenUnavailable: FailureMode = .throwError,
    timeout: Duration = .seconds(1),
    circuitBreaker: CircuitBreaker = CircuitBreaker(),
    purgeInterval: Duration = .seconds(60),
    directConnection: PostgresConnection.Configuration? = nil,
    logger: Logger = Logger(label: "pace.postgres.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) throws(PacePostgresError) {
    try checkSetting("timeout", timeout, of: "PostgresRateLimitStore")
    try checkSetting("purgeInterval", purgeInterval, of: "PostgresRateLimitStore")
    try circuitBreaker.check(of: "PostgresRateLimitStore")
    let logger = logger.naming(table: table)
    self.client = client
    self.tableName = try TableName(table)
    self.tableOptions = tableOptions
    // The window policies' tables are named after it: checked here, not at the first decision.
    _ = try tableName.companion(.slidingWindow)
    _ = try tableName.companion(.fixedWindow)
    self.whenUnavailable = whenUnavailable
    self.timeout = timeout
    self.circuitBreaker = circuitBreaker
    self.purgeInterval = purgeInterval
    self.logger = logger
    self.health = StoreHealth(circuitBreaker, table: table, factory: metricsFactory)
    self.batcher = DecisionBatcher(
      client: client, direct: directConnection, table: tableName, batchSQL: Self.batchSQL(table: tableName),
      margin: min(timeout / 5, .milliseconds(100)), maximumBatch: Self.maximumBatch, lanes: Self.lanes,
      roundTrips: health.roundTrips, logger: logger)
    self.denials = LockedState(DenialCacheState(capacity: Self.denialCapacity))
    self.fleet = FleetMembership(whenUnavailable, table: table, factory: metricsFactory)
  }

  /// A store with a PostgreSQL client of its own, made from `configuration` (the one the app
  /// already has for its own database) and run by the store's ``run()``: the app runs the store
  /// as a service (in a `ServiceGroup`, Hummingbird's `addServices(_:)` or PaceVapor's
  /// `ServiceLifecycleHandler`) and no client of its own for it.
  ///
  /// Queries wait until ``run()`` has started the client: call ``migrate(timeout:)`` once the
  /// services run (PaceVapor's `beforeServerStarts`, Hummingbird's `beforeServerStarts`). The
  /// client keeps its own pool; to share one pool with other components, make a
  /// `PostgresClient`, run it, and pass it to ``init(client:table:tableOptions:whenUnavailable:timeout:circuitBreaker:purgeInterval:directConnection:logger:metricsFactory:)``.
  ///
  /// - Parameters:
  ///   - configuration: Where the database is and how to connect.
  ///   - table: The table's name, `name` or `schema.name`; `pace_rate_limits` by default.
  ///   - tableOptions: How ``migrate(timeout:)`` makes the tables: logged or not, and their fill
  ///     factor; logged, with a fill factor of 70, by default (see ``TableOptions``).
  ///   - whenUnavailable: The failure policy; `.throwError` by default.
  ///   - timeout: How long a decision may take; one second by default. Positive.
  ///   - circuitBreaker: When to stop asking an unavailable database; see ``CircuitBreaker``.
  ///   - purgeInterval: How often ``run()`` deletes expired rows; one minute by default. Positive.
  ///   - directConnection: Where decisions connect on their own; see the other initialiser.
  ///   - logger: Where to log, the client's background events included; silent by default.
  ///   - metricsFactory: Where to report metrics; the process's `MetricsSystem` by default.
  /// - Throws: As the other initialiser.
  public init(
    configuration: PostgresClient.Configuration,
    table: String = "pace_rate_limits",
    tableOptions: TableOptions = .logged,
    whenUnavailable: FailureMode = .throwError,
    timeout: Duration = .seconds(1),
    circuitBreaker: CircuitBreaker = CircuitBreaker(),
    purgeInterval: Duration = .seconds(60),
    directConnection: PostgresConnection.Configuration? = nil,
    logger: Logger = Logger(label: "pace.postgres.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) throws(PacePostgresError) {
    try self.init(
      client: PostgresClient(configuration: configuration, backgroundLogger: logger), table: table,
      tableOptions: tableOptions, whenUnavailable: whenUnavailable, timeout: timeout, circuitBreaker: circuitBreaker,
      purgeInterval: purgeInterval, directConnection: directConnection, logger: logger, metricsFactory: metricsFactory)
    runsClient = true
  }

  /// The most decisions sent in one statement: enough to amortise a round trip, few enough that a
  /// batch holds its rows' locks briefly.
  static let maximumBatch = 64
  /// The most connections the store's decisions use at once: each sends one batch at a time, so
  /// that concurrent decisions gather into batches rather than spread over the pool. Two: while
  /// one batch is decided, the next gathers; more lanes make more, smaller batches, which cost
  /// the client and the database more per decision.
  static let lanes = 2
  /// The most denials remembered (see ``DenialCacheState``).
  static let denialCapacity = 10_000
}
#endif
