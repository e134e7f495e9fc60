#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

/// Each key's limit and each key's block, stored in PostgreSQL beside a rate-limit store's
/// counters, set through this API (or by hand, in SQL) and in force on every instance of a server
/// without a deploy.
///
/// The tables are mirrored into ``plans`` (a `RateLimitPlans`) and ``blocks`` (a
/// `RateLimitBlocks`), which the limiters and the middlewares read synchronously, with no round
/// trip per request. Every change to a table notifies every instance (a trigger sends a
/// PostgreSQL `NOTIFY` in the transaction that writes the row, naming the key), and each instance
/// re-reads that key's row. So a change is in force everywhere **within the notification's
/// delivery** (a round trip or two after its commit), and **within ``refreshInterval``** (30 s by
/// default) if a notification is lost: each instance re-reads both tables at that interval, and
/// at once each time it listens again after losing its connection.
///
/// ```swift
/// let plans = try PostgresRateLimitPlans(client: client, default: .fixedWindow(permits: 20, per: .seconds(60)))
/// let limiter = StoreBackedRateLimiter(plans: plans.plans, store: store)
/// // plans runs as a service beside the client and the store; once they run:
/// try await plans.migrate()
/// try await plans.setLimit(.fixedWindow(permits: 200, per: .seconds(60)), for: "pro-customer-key")
/// try await plans.block("abusive-key", for: .seconds(3600))
/// ```
///
/// A plan is checked when it is set: one that `RateLimit.validated` or the store refuses is an
/// error, and nothing is written. A row written by hand that no limiter could honour (0 permits, an
/// interval of 0, an unknown algorithm) is never loaded: it is logged (error) and counted
/// (`pace_rate_limit_plans_invalid_rows_total`), and the key keeps the plan it had (the default if
/// it had none). A notification naming a key that has neither a row nor a plan is ignored. While
/// the database is away the mirrored plans and blocks stay in force, and the fault is logged once
/// per outage.
public final class PostgresRateLimitPlans: Service, Sendable {
  /// The client the plans are read and written with; the caller runs it. ``run()`` holds one of its
  /// connections while it runs, to listen for changes.
  public let client: PostgresClient
  /// The mirror of the plans table: what limiters made with it read at each decision.
  public let plans: RateLimitPlans<String>
  /// The mirror of the blocks table: what the middlewares read before they decide.
  public let blocks: RateLimitBlocks<String>
  /// How often ``run()`` re-reads both tables whatever the notifications say: the bound on how late a
  /// change can be in force when its notification is lost.
  public let refreshInterval: Duration
  /// How long a write or a read may take, the wait for a connection included.
  public let timeout: Duration
  /// Where the plans log their changes, invalid rows and outages.
  public let logger: Logger

  /// The store's table the plans sit beside, as given.
  public var table: String { tableName.name }

  let tableName: TableName
  let plansTable: TableName
  let blocksTable: TableName
  /// The notification channel both tables' triggers send to.
  let channel: String
  let metrics: PlanMetrics
  let state = LockedState(MirrorState())
  /// The wall clock the blocks are read on.
  let unixTime: @Sendable () -> UnixTime

  /// Plans and blocks beside the rate-limit store whose table is `table`.
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client.
  ///   - table: The rate-limit store's table, `name` or `schema.name`: the plans live in
  ///     `<table>_plans` and the blocks in `<table>_blocks` beside it. `pace_rate_limits` by default.
  ///   - defaultLimit: The limit of a key with no plan of its own.
  ///   - refreshInterval: How often every row is read again, whatever the notifications say; 30
  ///     seconds by default. Positive.
  ///   - timeout: How long a write or a read may take; five seconds by default. Positive.
  ///   - unixTime: The wall clock the blocks are read on; the system's by default.
  ///   - logger: Where to log; silent by default.
  ///   - metricsFactory: Where to report metrics; the process's `MetricsSystem` by default.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier or
  ///   the tables' names would be longer than PostgreSQL's 63 bytes;
  ///   ``PacePostgresError/invalidSetting(name:value:rule:)`` if `refreshInterval` or `timeout` is
  ///   not positive, or if `defaultLimit` is one a limiter or the store cannot count exactly.
  public init(
    client: PostgresClient,
    table: String = "pace_rate_limits",
    default defaultLimit: RateLimit,
    refreshInterval: Duration = .seconds(30),
    timeout: Duration = .seconds(5),
    unixTime: (@Sendable () -> UnixTime)? = nil,
    logger: Logger = Logger(label: "pace.postgres.plans", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) throws(PacePostgresError) {
    try checkSetting("refreshInterval", refreshInterval, of: "PostgresRateLimitPlans")
    try checkSetting("timeout", timeout, of: "PostgresRateLimitPlans")
    let defaultLimit = try Self.checked(defaultLimit, setting: "PostgresRateLimitPlans.default")
    self.client = client
    tableName = try TableName(table)
    plansTable = try TableName(table + "_plans")
    blocksTable = try TableName(table + "_blocks")
    channel = String(table.map { $0 == "." ? "_" : $0 }) + "_plans"
    guard channel.utf8.count <= 63 else { throw .invalidTableName(table) }
    plans = RateLimitPlans(default: defaultLimit)
    let unixTime = unixTime ?? { UnixTime.now }
    self.unixTime = unixTime
    blocks = RateLimitBlocks(unixTime: unixTime)
    self.refreshInterval = refreshInterval
    self.timeout = timeout
    self.logger = logger.naming(table: table)
    metrics = PlanMetrics(table: table, factory: metricsFactory)
  }

  // MARK: Changing plans and blocks

  /// Gives `key` a plan of its own, stored and in force on every instance (on this one at once).
  ///
  /// - Parameters:
  ///   - limit: The key's limit.
  ///   - key: The key, as the requests send it (before any hashing of a long key).
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `limit` is one that
  ///   `RateLimit.validated` or the store refuses (nothing is written then); `InvalidInput` for a
  ///   key outside `InputRules`; ``PacePostgresError/unavailable(reason:)`` if the database does
  ///   not answer within ``timeout``, or what it reports.
  public func setLimit(_ limit: RateLimit, for key: String) async throws {
    let limit = try Self.checked(limit, setting: "PostgresRateLimitPlans.setLimit.limit")
    let key = try storedKey(key)
    let row = PlanRow(limit)
    let sql = """
      INSERT INTO \(plansTable) (key, algorithm, permits, interval_nanoseconds, burst) VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (key) DO UPDATE SET algorithm = EXCLUDED.algorithm, permits = EXCLUDED.permits,
        interval_nanoseconds = EXCLUDED.interval_nanoseconds, burst = EXCLUDED.burst, updated_at = now()
      """
    var binds = PostgresBindings(key, row.algorithm, row.permits, row.intervalNanoseconds)
    if let burst = row.burst { binds.append(burst) } else { binds.appendNull() }
    try await write("setLimit", PostgresQuery(unsafeSQL: sql, binds: binds))
    try applyOwnWrite(of: key, markedIn: \.ownPlanWrites) { () throws(RateLimitError) in
      try plans.setLimit(limit, for: key)
    }
    logger.info("plan set", metadata: ["pace.key": "\(key)", "pace.limit": "\(limit)"])
  }

  /// Takes `key`'s own plan away: it has the default on every instance (on this one at once).
  ///
  /// - Returns: Whether it had a plan of its own in the database.
  /// - Throws: `InvalidInput` for a key outside `InputRules`; what ``setLimit(_:for:)`` throws for
  ///   the database.
  @discardableResult
  public func removeLimit(for key: String) async throws -> Bool {
    let key = try storedKey(key)
    let removed = try await write(
      "removeLimit",
      PostgresQuery(unsafeSQL: "DELETE FROM \(plansTable) WHERE key = $1 RETURNING key", binds: PostgresBindings(key)))
    applyOwnWrite(of: key, markedIn: \.ownPlanWrites) { _ = plans.removeLimit(for: key) }
    logger.info("plan removed", metadata: ["pace.key": "\(key)"])
    return removed > 0
  }

  /// Refuses `key` until `end` on every instance (on this one at once), whatever its limit;
  /// replaces any block it had.
  ///
  /// The end is stored in whole microseconds (a `timestamptz`), rounded up.
  ///
  /// - Throws: `InvalidInput` for a key outside `InputRules`; what ``setLimit(_:for:)`` throws for
  ///   the database.
  public func block(_ key: String, until end: UnixTime) async throws {
    let key = try storedKey(key)
    let microseconds = Self.microseconds(roundingUp: end)
    let sql = """
      INSERT INTO \(blocksTable) (key, blocked_until) VALUES ($1, \(Self.timestampSQL("$2")))
      ON CONFLICT (key) DO UPDATE SET blocked_until = EXCLUDED.blocked_until, updated_at = now()
      """
    try await write("block", PostgresQuery(unsafeSQL: sql, binds: PostgresBindings(key, microseconds)))
    let stored = UnixTime(nanosecondsSinceEpoch: Self.nanoseconds(microseconds: microseconds))
    applyOwnWrite(of: key, markedIn: \.ownBlockWrites) { blocks.block(key, until: stored) }
    logger.info("key blocked", metadata: ["pace.key": "\(key)", "pace.until": "\(stored)"])
  }

  /// Refuses `key` for `duration` from now on this instance's wall clock, on every instance;
  /// replaces any block it had.
  ///
  /// - Throws: As ``block(_:until:)``.
  public func block(_ key: String, for duration: Duration) async throws {
    try await block(key, until: unixTime() + duration)
  }

  /// Lifts `key`'s block on every instance (on this one at once).
  ///
  /// - Returns: Whether it had a block in the database (ended or not).
  /// - Throws: As ``removeLimit(for:)``.
  @discardableResult
  public func unblock(_ key: String) async throws -> Bool {
    let key = try storedKey(key)
    let removed = try await write(
      "unblock",
      PostgresQuery(unsafeSQL: "DELETE FROM \(blocksTable) WHERE key = $1 RETURNING key", binds: PostgresBindings(key)))
    applyOwnWrite(of: key, markedIn: \.ownBlockWrites) { _ = blocks.unblock(key) }
    logger.info("key unblocked", metadata: ["pace.key": "\(key)"])
    return removed > 0
  }

  /// Runs `query` within ``timeout``; the rows it returned (a write returns the keys it changed).
  @discardableResult
  private func write(_ operation: String, _ query: PostgresQuery) async throws -> Int {
    let (client, logger) = (client, logger)
    do {
      return try await withTimeout(timeout) {
        var count = 0
        for try await _ in try await client.query(query, logger: logger) { count += 1 }
        return count
      }
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(
        reason: "PostgresRateLimitPlans.\(operation): PostgreSQL did not answer within \(timeout)")
    }
  }

  // MARK: Checks

  /// `limit` as `RateLimit.validated` makes it, if the store can also count it; the error that
  /// names `setting` otherwise.
  static func checked(_ limit: RateLimit, setting: String) throws(PacePostgresError) -> RateLimit {
    let validated: RateLimit
    do {
      validated = try RateLimit.validated(
        permits: limit.permits, per: limit.interval, burst: limit.burst, algorithm: limit.algorithm)
    } catch {
      throw .invalid(setting, limit, "must be a limit RateLimit.validated accepts: \(error)")
    }
    do {
      _ = try StoredLimit(cost: 1, limit: validated)
    } catch {
      if case .invalidSetting(_, _, let rule) = error { throw .invalid(setting, limit, rule) }
      throw error
    }
    return validated
  }

  /// `time` in whole microseconds since the Unix epoch, rounded up.
  static func microseconds(roundingUp time: UnixTime) -> Int64 {
    let (quotient, remainder) = time.nanosecondsSinceEpoch.quotientAndRemainder(dividingBy: 1000)
    return remainder > 0 ? quotient + 1 : quotient
  }

  /// `microseconds` since the Unix epoch in nanoseconds, saturating.
  static func nanoseconds(microseconds: Int64) -> Int64 {
    let (product, overflow) = microseconds.multipliedReportingOverflow(by: 1000)
    return overflow ? (microseconds > 0 ? .max : .min) : product
  }

  /// A `timestamptz` from microseconds since the Unix epoch in `parameter`, exactly (in two parts,
  /// each exact in `interval` arithmetic).
  static func timestampSQL(_ parameter: String) -> String {
    "timestamptz 'epoch' + (\(parameter)::bigint / 1000000) * interval '1 second' "
      + "+ (\(parameter)::bigint % 1000000) * interval '1 microsecond'"
  }
}
#endif
