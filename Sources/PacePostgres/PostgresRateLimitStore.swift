#if PostgreSQL
import Pace
import PostgresNIO

/// A ``Pace/RateLimitStore`` on PostgreSQL: every instance of a server that shares the database
/// shares each key's limit.
///
/// Each decision is one SQL statement, GCRA (the generic cell rate algorithm) as an
/// `INSERT … ON CONFLICT (key) DO UPDATE … WHERE … RETURNING`: the row for a key holds its
/// theoretical arrival time (TAT), the database's clock is the only clock, so instances whose
/// clocks disagree still agree on the limit, and a denied request writes nothing.
///
/// ```swift
/// let store = PostgresRateLimitStore(client: client, whenUnavailable: .allow)
/// try await store.migrate()
/// let decision = try await store.tryAcquire("api-key-42", cost: 1, limit: RateLimit(permits: 100, per: .seconds(60)))
/// ```
///
/// Rows whose TAT has passed are equivalent to absent rows; ``purgeExpired(batchSize:)`` deletes
/// them in small batches without blocking decisions. See <doc:SharedRateLimitsAndDebouncing>.
public struct PostgresRateLimitStore: RateLimitStore {
  public typealias Key = String

  /// What ``tryAcquire(_:cost:limit:)`` answers when the database cannot be reached or does not
  /// answer within the store's timeout. Errors the database itself reports (a missing table, say)
  /// are always thrown: they are bugs, not outages.
  public enum UnavailablePolicy: Sendable {
    /// Throw ``PacePostgresError/unavailable(reason:)``: the caller decides. The default.
    case throwError
    /// Fail open: allow every request (remaining is reported as 0).
    case allow
    /// Fail closed: deny every request, asking to retry after the given duration.
    case deny(retryAfter: Duration)
    /// Decide with another limiter, typically an in-memory `KeyedRateLimiter<String>`, so that
    /// each instance still enforces a limit on its own while the database is down. The fallback's
    /// own `KeyedRateLimiter.limit` applies: the same limit lets N instances allow up to N
    /// times it; a limit divided by N keeps the total.
    case fallback(KeyedRateLimiter<String>)
  }

  /// The client the store queries; the caller runs it (`client.run()`).
  public let client: PostgresClient
  /// The store's table.
  public var table: String { tableName.description }
  /// What happens when the database is unavailable.
  public let whenUnavailable: UnavailablePolicy
  /// How long a decision may wait for the database before it counts as unavailable.
  public let timeout: Duration

  let tableName: TableName

  /// A store on `client`, in `table`.
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client.
  ///   - table: The table's name, `name` or `schema.name`; `pace_rate_limits` by default.
  ///   - whenUnavailable: The failure policy; `.throwError` by default.
  ///   - timeout: How long a decision may wait for the database; one second by default. Positive.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier.
  public init(
    client: PostgresClient,
    table: String = "pace_rate_limits",
    whenUnavailable: UnavailablePolicy = .throwError,
    timeout: Duration = .seconds(1)
  ) throws(PacePostgresError) {
    precondition(timeout > .zero, "PostgresRateLimitStore: timeout must be positive (got \(timeout))")
    self.client = client
    self.tableName = try TableName(table)
    self.whenUnavailable = whenUnavailable
    self.timeout = timeout
  }

  /// Creates the table if it does not exist. Idempotent; call it at startup or from your migrations.
  public func migrate() async throws {
    try await client.query(PostgresQuery(unsafeSQL: Self.migrationSQL(table: tableName)))
  }

  /// The table: one row per key, its TAT in microseconds of the database's clock. No index on
  /// `tat`, so that every decision is a HOT update (the purge scans instead; see the article).
  static func migrationSQL(table: TableName) -> String {
    """
    CREATE TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      tat bigint NOT NULL
    ) WITH (fillfactor = 70)
    """
  }

  /// The decision. `$1` key, `$2` the cost's increment of the TAT, `$3` the burst tolerance, both
  /// in microseconds.
  ///
  /// The clock that decides is read after the row is locked: `locked` is a materialized CTE, read
  /// when the `ON CONFLICT` clause first asks for it, once the row is locked, so decisions on one
  /// key see non-decreasing clocks in the order they hold the row (read before the lock, a
  /// statement that waited would decide, and report `remaining`, with an older clock than the
  /// statement before it). `proposed` is the clock of a new row, which no other statement holds.
  /// `granted` holds the new TAT and the clock it was computed with if the permits were taken
  /// (a TAT of `proposed + $2` is the new row's, or a locked clock equal to `proposed`);
  /// otherwise `denied` reads the row's current TAT (`FOR SHARE` reads the latest committed
  /// version, not the statement's snapshot), to say when the request would be allowed.
  static func decisionSQL(table: TableName) -> String {
    """
    WITH proposed AS (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
    ), locked AS MATERIALIZED (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
    ), granted AS (
      INSERT INTO \(table) AS r (key, tat)
      SELECT $1, proposed.now + $2 FROM proposed
      ON CONFLICT (key) DO UPDATE
        SET tat = GREATEST(r.tat, (SELECT now FROM locked)) + $2
        WHERE GREATEST(r.tat, (SELECT now FROM locked)) + $2 - (SELECT now FROM locked) <= $3
      RETURNING r.tat, CASE WHEN r.tat = (SELECT now FROM proposed) + $2
        THEN (SELECT now FROM proposed) ELSE (SELECT now FROM locked) END AS now
    ), denied AS (
      SELECT r.tat FROM \(table) AS r
      WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM granted)
      FOR SHARE
    )
    SELECT (SELECT tat FROM granted), (SELECT tat FROM denied),
      COALESCE((SELECT now FROM granted), (SELECT now FROM locked))
    """
  }

  /// Deletes up to `batchSize` rows whose TAT has passed (they mean the same as no row), skipping
  /// rows that a decision holds locked, so it never blocks one. Call it periodically.
  ///
  /// - Returns: How many rows were deleted; call again while it returns `batchSize`.
  @discardableResult
  public func purgeExpired(batchSize: Int = 1000) async throws -> Int {
    precondition(batchSize > 0, "PostgresRateLimitStore.purgeExpired: batchSize must be positive (got \(batchSize))")
    let sql = """
      WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now)
      DELETE FROM \(tableName) AS r USING clock
      WHERE r.ctid IN (
        SELECT e.ctid FROM \(tableName) AS e, clock WHERE e.tat < clock.now LIMIT $1 FOR UPDATE OF e SKIP LOCKED
      ) AND r.tat < clock.now
      """
    var binds = PostgresBindings()
    binds.append(batchSize)
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql + " RETURNING 1", binds: binds))
    var count = 0
    for try await _ in rows { count += 1 }
    return count
  }

  public func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    try KeyPolicy.check(cost: cost, limit: limit)
    let key = try storedKey(key)
    let arithmetic = try GCRA(cost: cost, limit: limit)
    var binds = PostgresBindings()
    binds.append(key)
    binds.append(arithmetic.increment)
    binds.append(arithmetic.tolerance)
    let query = PostgresQuery(unsafeSQL: Self.decisionSQL(table: tableName), binds: binds)
    let client = self.client
    let row: (Int64?, Int64?, Int64)
    do {
      row = try await withTimeout(timeout) {
        var answer: (Int64?, Int64?, Int64)?
        for try await row in try await client.query(query).decode((Int64?, Int64?, Int64).self) { answer = row }
        guard let answer else { throw PacePostgresError.unavailable(reason: "the decision returned no row") }
        return answer
      }
    } catch where isUnavailability(error) {
      return try await decideUnavailable(key, cost: cost, error: error)
    }
    return arithmetic.decision(grantedTAT: row.0, currentTAT: row.1, now: row.2)
  }

  private func decideUnavailable(
    _ key: String,
    cost: Int,
    error: any Error
  ) async throws -> RateLimitDecision {
    switch whenUnavailable {
    case .throwError:
      let reason = error is DatabaseTimeout ? "no answer within \(timeout)" : String(describing: error)
      throw PacePostgresError.unavailable(reason: reason)
    case .allow:
      return .allowed(remaining: 0)
    case .deny(let retryAfter):
      return .limited(retryAfter: retryAfter)
    case .fallback(let limiter):
      return try await limiter.decide(key, cost: cost)
    }
  }
}

/// GCRA's arithmetic for one request, in whole microseconds.
///
/// Each permit advances the key's TAT by the emission interval `interval / permits`; a request is
/// allowed if the TAT it leads to is at most `burst` emission intervals ahead of now. The increment
/// rounds up and the tolerance down, so rounding never allows more than the rate.
struct GCRA: Equatable {
  /// How far `cost` permits advance the TAT.
  let increment: Int64
  /// How far ahead of now the TAT may be.
  let tolerance: Int64
  /// The rate's interval, in microseconds.
  let interval: Int64
  let permits: Int64

  init(cost: Int, limit: RateLimit) throws(PacePostgresError) {
    precondition(cost >= 0 && cost <= limit.burst, "GCRA: the cost is checked against KeyPolicy first")
    guard let interval = limit.interval.wholeMicroseconds, interval > 0 else {
      throw .rateOutOfRange("interval \(limit.interval) is not a positive number of microseconds below Int64.max")
    }
    let permits = Int64(limit.permits)
    let (costTimesInterval, overflow) = Int64(cost).multipliedReportingOverflow(by: interval)
    let (burstTimesInterval, overflow2) = Int64(limit.burst).multipliedReportingOverflow(by: interval)
    guard !overflow, !overflow2 else { throw .rateOutOfRange("\(limit) overflows 64-bit microseconds") }
    self.increment = (costTimesInterval + permits - 1) / permits
    self.tolerance = burstTimesInterval / permits
    self.interval = interval
    self.permits = permits
    guard increment <= tolerance, tolerance < Int64.max / 4 else {
      throw .rateOutOfRange("\(limit) has an emission interval below a microsecond or above Int64.max / 4")
    }
  }

  /// The decision from the statement's answer.
  func decision(grantedTAT: Int64?, currentTAT: Int64?, now: Int64) -> RateLimitDecision {
    if let grantedTAT {
      // Whole permits left in the slack between the new TAT and the tolerance.
      let slack = max(0, tolerance - (grantedTAT - now))
      let remaining = interval.dividingFullWidth(slack.multipliedFullWidth(by: permits)).quotient
      return .allowed(remaining: Int(remaining))
    }
    // Allowed once now has reached TAT + increment - tolerance. A row that appeared after the
    // statement's snapshot is invisible to it; then the increment is a safe upper bound.
    let wait = currentTAT.map { max($0, now) + increment - tolerance - now } ?? increment
    return .limited(retryAfter: .microseconds(max(1, wait)))
  }
}
#endif
