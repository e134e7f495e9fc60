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
/// let store = try PostgresRateLimitStore(client: client, whenUnavailable: .allow, logger: logger)
/// try await store.migrate()
/// let decision = try await store.tryAcquire("api-key-42", cost: 1, limit: RateLimit(permits: 100, per: .seconds(60)))
/// ```
///
/// Rows that count nothing any more are equivalent to absent rows; ``purgeAllExpired()`` deletes
/// them a bounded range of pages at a time without blocking decisions, and ``run()`` (the store as
/// a swift-service-lifecycle `Service`) calls it periodically. ``tableOptions`` make the tables
/// unlogged (no write-ahead log: lighter on the primary, emptied by a crash) or change their fill
/// factor (see ``TableOptions``).
///
/// While the database cannot decide, the ``UnavailablePolicy`` answers; after a few such failures
/// in a row the ``CircuitBreaker`` stops asking the database for a while, so that decisions are
/// answered at once rather than after the whole ``timeout``. Outages, breaker changes and fallback
/// decisions are logged to the `logger` and counted in swift-metrics; the names are in
/// <doc:SharedRateLimitsAndDebouncing>.
public struct PostgresRateLimitStore: RateLimitStore, Service {
  public typealias Key = String

  /// What ``tryAcquire(_:cost:limit:)`` answers when the database cannot decide: it is
  /// unreachable, read-only, shutting down, out of connections, or does not answer within the
  /// store's timeout (the SQLSTATE table in <doc:SharedRateLimitsAndDebouncing>). Errors about the
  /// query itself (a missing table, say) are always thrown: they are bugs, not outages.
  ///
  /// Each policy bounds what a fleet of `n` instances allows a key during an outage of length `D`
  /// differently (a limit of `r` per `T` with a burst of `b`): `.deny` nothing, `.allow` everything,
  /// `.fallback` up to `n` times its limiter's limit (`n × (b + r × D / T)` with the same limit),
  /// `.shareLimit` about the limit itself (`n × ⌊b / n⌋ + r × D / T`). A key denied just before the
  /// outage stays denied until its denial expires (the store remembers it) under every policy.
  public enum UnavailablePolicy: Sendable {
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
    /// `n ≤ N`) beside what the database granted in the window before the outage. A limit smaller
    /// than the fleet (`b < n` or `N < n`) still allows one per instance: up to `n` where it says
    /// fewer. A cost above the share's burst (possible only when it is more than `b / n`) is denied
    /// for the limit's interval during the outage.
    case shareLimit(among: FleetSize)
  }

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
  public let whenUnavailable: UnavailablePolicy
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
  /// The heartbeat's id and count, and the shares of ``UnavailablePolicy/shareLimit(among:)``.
  let fleet: FleetMembership
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
  ///   ``PacePostgresError/rateOutOfRange(_:)`` if `timeout` or `purgeInterval` is not positive or
  ///   is `Int64.max` nanoseconds (about 292 years) or more.
  public init(
    client: PostgresClient,
    table: String = "pace_rate_limits",
    tableOptions: TableOptions = .logged,
    whenUnavailable: UnavailablePolicy = .throwError,
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
    var logger = logger
    logger[metadataKey: "pace.table"] = "\(table)"
    self.logger = logger
    self.health = StoreHealth(circuitBreaker, table: table, factory: metricsFactory)
    self.batcher = DecisionBatcher(
      client: client, direct: directConnection, table: tableName, batchSQL: Self.batchSQL(table: tableName),
      margin: min(timeout / 5, .milliseconds(100)), maxBatch: Self.maxBatch, maxLanes: Self.lanes,
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
    whenUnavailable: UnavailablePolicy = .throwError,
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
  static let maxBatch = 64
  /// The most connections the store's decisions use at once: each sends one batch at a time, so
  /// that concurrent decisions gather into batches rather than spread over the pool. Two: while
  /// one batch is decided, the next gathers; more lanes make more, smaller batches, which cost
  /// the client and the database more per decision.
  static let lanes = 2
  /// The most denials remembered (see ``DenialCacheState``).
  static let denialCapacity = 10_000

  // MARK: Schema

  /// Creates the tables if they do not exist (the token bucket's, and the window policies' beside
  /// it, `…_sliding` and `…_fixed`), with the store's ``tableOptions``, and creates or replaces
  /// the function that decides a batch. Idempotent, and safe to run from several instances at
  /// once; call it at startup or from your migrations (after upgrading Pace too: a table of a
  /// previous version is kept, with its keys' state, and the window policies' tables are added
  /// beside it).
  ///
  /// A table whose options differ from ``tableOptions`` is switched to them, its rows kept: a new
  /// fill factor is a change to the catalog (pages written from then on follow it), a new
  /// durability rewrites the table (`ALTER TABLE … SET LOGGED` or `SET UNLOGGED`) under an
  /// exclusive lock, during which decisions wait, up to their timeout, and a switch to logged
  /// writes the whole table to the write-ahead log. A table that has the options is not touched.
  /// An index on a column that decisions write, which would make every grant a full update instead
  /// of a heap-only (HOT) one, is logged as a warning (`pace.index`).
  ///
  /// - Parameter timeout: How long to wait for the database; 30 seconds by default. Positive.
  /// - Throws: ``PacePostgresError/rateOutOfRange(_:)`` if `timeout` is not positive or is
  ///   `Int64.max` nanoseconds or more; ``PacePostgresError/unavailable(reason:)`` if the database does not answer in time
  ///   (the store logs what it is waiting for meanwhile), or what the database reports.
  public func migrate(timeout: Duration = .seconds(30)) async throws {
    let (client, logger) = (client, logger)
    let statements = [
      // Concurrent migrations would race on the catalog ("tuple concurrently updated"): one at a time.
      "SELECT pg_advisory_xact_lock(\(Self.migrationLock))",
      Self.migrationSQL(table: tableName, options: tableOptions),
      Self.slidingWindowSQL(table: try tableName.companion(.slidingWindow), options: tableOptions),
      Self.fixedWindowSQL(table: try tableName.companion(.fixedWindow), options: tableOptions),
      // A table made with other options (or by an earlier version, before it had any) gets these.
      tableOptions.alterSQL(table: tableName),
      tableOptions.alterSQL(table: try tableName.companion(.slidingWindow)),
      tableOptions.alterSQL(table: try tableName.companion(.fixedWindow)),
      try Self.functionSQL(table: tableName),
      Self.heartbeatMigrationSQL(table: tableName),
    ]
    try await migrating(client: client, timeout: timeout, logger: logger) {
      try await client.withTransaction(logger: logger) { connection in
        for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
      }
    }
    // A statement refused before the migration may be remembered refused on its connection.
    batcher.names.migrated()
    // Advice, after the migration succeeded: a failure to give it does not fail the migration.
    do {
      let indexes = try await client.query(
        PostgresQuery(unsafeSQL: try Self.writtenColumnIndexesSQL(table: tableName)), logger: logger)
      for try await index in indexes.decode(String.self) {
        logger.warning(
          "an index on a column that decisions write makes every grant a full update (no HOT update): drop it",
          metadata: ["pace.index": "\(index)"])
      }
    } catch {
      logger.debug("could not look for indexes on the columns that decisions write", metadata: errorMetadata(error))
    }
  }

  /// The names of the indexes on the store's tables other than on `key` alone: an index on a
  /// column that a grant writes (or an expression or partial index, which may read one) keeps
  /// the grant from being a HOT update.
  static func writtenColumnIndexesSQL(table: TableName) throws(PacePostgresError) -> String {
    let tables = [table, try table.companion(.slidingWindow), try table.companion(.fixedWindow)]
    return """
      SELECT i.indexrelid::regclass::text FROM pg_index AS i
      WHERE i.indrelid IN (\(tables.map { "'\($0)'::regclass" }.joined(separator: ", ")))
        AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL OR EXISTS (
          SELECT 1 FROM pg_attribute AS a
          WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) AND a.attname <> 'key'))
      ORDER BY 1
      """
  }

  /// The token bucket's table: one row per key, its TAT in microseconds of the database's clock.
  /// No index on `tat`, nor on any column a decision writes, so that every grant can be a HOT
  /// update (the purge scans instead; see the article). The same table as in 0.2.0, so an
  /// upgraded store keeps its keys' state.
  static func migrationSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      tat bigint NOT NULL
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// The sliding window's table: one row per key, the grant time of every permit that may still
  /// count (one entry per permit, oldest first, at most the window's permits once trimmed), and
  /// when the last of them stops counting (`expires`, which the purge reads).
  static func slidingWindowSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      expires bigint NOT NULL,
      grants bigint[] NOT NULL
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// The fixed window's table: one row per key, the end of the window it counts (windows are
  /// aligned to the Unix epoch, so the end names the window) and the permits granted in it.
  static func fixedWindowSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      window_end bigint NOT NULL,
      used bigint NOT NULL
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// The statement that makes one token-bucket decision on `table`: for benchmarks and for reading
  /// (the batch function, which the store calls for every batch, one decision too, makes each
  /// token-bucket decision with the same arithmetic; the window policies are decided there only). `$1` key, `$2` `cost × T` and `$3` `τ` in
  /// microseconds (see <doc:SharedRateLimitsAndDebouncing>), `$4` the budget in microseconds,
  /// `$5` the same budget as a `lock_timeout` setting (`"250ms"`).
  ///
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier.
  public static func decisionStatement(table: String) throws(PacePostgresError) -> String {
    decisionSQL(table: try TableName(table))
  }

  /// The advisory lock that serialises migrations of the store's tables.
  static let migrationLock: Int64 = 0x7061_6365_726c_0001

  /// The function that decides a batch, in the table's schema.
  static func functionName(table: TableName) -> String {
    let parts = table.name.split(separator: ".")
    let function = "\"\(parts.last!)_decide\""
    return parts.count == 2 ? "\"\(parts[0])\".\(function)" : function
  }

  /// One batch: `$1` keys, `$2` policies (``StoredLimit/Policy``), `$3` checked amounts, `$4`
  /// capacities, `$5` windows, `$6` whether each takes its permits, `$7` the batch's budget in
  /// microseconds, `$8` the instants to decide at (empty: the database's clock; tests only); a row
  /// per decision, by its 1-based index in the arrays.
  static func batchSQL(table: TableName) -> String {
    """
    SELECT * FROM \(functionName(table: table))($1::text[], $2::smallint[], $3::bigint[], $4::bigint[], \
    $5::bigint[], $6::boolean[], $7::bigint, $8::bigint[])
    """
  }

  /// The binds of ``batchSQL(table:)`` for `requests`, in order, with `budget` in microseconds.
  static func batchBindings(_ requests: [DecisionRequest], budget: Int64) -> PostgresBindings {
    var binds = PostgresBindings()
    binds.append(requests.map(\.key))
    binds.append(requests.map(\.limit.policy.rawValue))
    binds.append(requests.map(\.limit.amount))
    binds.append(requests.map(\.limit.capacity))
    binds.append(requests.map(\.limit.window))
    binds.append(requests.map(\.takes))
    binds.append(budget)
    // The database's clock decides, unless a test chose the instants: `Int64.min` stands for the
    // database's clock among chosen ones.
    let chosen = requests.contains { $0.databaseNow != nil }
    binds.append(chosen ? requests.map { $0.databaseNow ?? .min } : [Int64]())
    return binds
  }

  /// The function that decides a batch: in array order, each decision by its policy, in one
  /// transaction. The token bucket's decisions are those of ``decisionSQL(table:)``.
  ///
  /// A loop rather than one statement over `unnest`, because one `INSERT … ON CONFLICT` cannot
  /// touch a row twice, and a key may come twice in a batch. Each decision locks its row with
  /// `SELECT … FOR UPDATE` (or inserts it if there is none), reads the clock once the row is held,
  /// and writes only when it grants: the single statement's arithmetic and order, in plain
  /// statements whose plans PL/pgSQL keeps, which cost the database less than running the
  /// five-CTE statement once per element. A key inserted by another transaction between the look
  /// and the insert is looked at again, locked this time. A decision that takes nothing (a cost of
  /// 0, answered as cost 1 would be) writes nothing.
  ///
  /// - Token bucket, in the store's table: granted if `max(tat, now) + amount - now <= capacity`,
  ///   the new TAT `max(tat, now) + amount`.
  /// - Sliding window, in the `_sliding` table: a log of grant times in order, one entry per permit;
  ///   the entries younger than the window (`g > now - window`) are a suffix, found by binary search
  ///   (`width_bucket`), `used` is their number; granted if `used + amount <= capacity`, which
  ///   keeps them and appends `amount` entries of `now`; denied, the wait is until the entry whose
  ///   expiry frees enough: the `(used + amount - capacity)`-th oldest, plus the window, less now.
  /// - Fixed window, in the `_fixed` table: the window ends at the next multiple of its length
  ///   after now (floor division from the Unix epoch); `used` is the row's count if the row names
  ///   that window, else 0; granted if `used + amount <= capacity`; denied, the wait is until the
  ///   window ends.
  ///
  /// Each decision gets what is left of the batch's budget as its `lock_timeout` (set again only
  /// when that value, in milliseconds, changes), and one that holds its row after the budget takes
  /// nothing and answers `late`, as the single statement does: a batch whose callers stopped
  /// waiting takes nothing. A lock timeout fails the whole batch (its transaction takes nothing),
  /// and its callers follow the failure policy. A batch that took something and ends after its
  /// budget (a slow trigger, say) raises `query_canceled`, which undoes it: whatever PostgreSQL
  /// waited on, nothing is taken for a caller who was answered by the policy. The budget is always
  /// measured on the database's clock, also when a test chose the instants the policies decide at.
  ///
  /// The store calls it for every batch, one decision too: its statement names no table, so the
  /// statement's preparation (a transaction of its own, before the budget's clock starts) never
  /// waits for the table's lock; every wait for the table comes after the `lock_timeout` is set.
  static func functionSQL(table: TableName) throws(PacePostgresError) -> String {
    let clock = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
    let sliding = try table.companion(StoredLimit.Policy.slidingWindow)
    let fixed = try table.companion(StoredLimit.Policy.fixedWindow)
    return """
      CREATE OR REPLACE FUNCTION \(functionName(table: table))(
        keys text[], policies smallint[], amounts bigint[], capacities bigint[], windows bigint[],
        takes boolean[], budget bigint, nows bigint[]
      ) RETURNS TABLE (
        o_index int, o_granted bigint, o_current bigint, o_now bigint, o_late boolean, o_used bigint, o_wait bigint
      )
      LANGUAGE plpgsql AS $pace$
      #variable_conflict use_column
      DECLARE
        started bigint := (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint;
        elapsed bigint;
        timeout bigint := -1;
        held bigint;
        held_used bigint;
        held_grants bigint[];
        live bigint[];
        row_found boolean;
        real_clock bigint;
        clock bigint;
        window_ends bigint;
        counted bigint;
        charged boolean := false;
      BEGIN
        FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
          o_index := i;
          o_granted := NULL;
          o_current := NULL;
          o_used := NULL;
          o_wait := NULL;
          elapsed := \(clock) - started;
          IF elapsed > budget THEN
            o_now := started + elapsed;
            o_late := true;
          ELSE
            IF greatest(1, (budget - elapsed) / 1000) <> timeout THEN
              timeout := greatest(1, (budget - elapsed) / 1000);
              PERFORM set_config('lock_timeout', timeout::text || 'ms', true);
            END IF;
            LOOP
              -- Again from the start when a key was inserted meanwhile: nothing of the last look stays.
              o_granted := NULL;
              o_current := NULL;
              o_used := NULL;
              o_wait := NULL;
              IF policies[i] = 0 THEN
                SELECT r.tat INTO held FROM \(table) AS r WHERE r.key = keys[i] FOR UPDATE;
              ELSIF policies[i] = 1 THEN
                SELECT r.grants INTO held_grants FROM \(sliding) AS r WHERE r.key = keys[i] FOR UPDATE;
              ELSE
                SELECT r.window_end, r.used INTO held, held_used FROM \(fixed) AS r WHERE r.key = keys[i] FOR UPDATE;
              END IF;
              row_found := FOUND;
              real_clock := \(clock);
              clock := coalesce(nullif(nows[i], -9223372036854775808), real_clock);
              o_now := clock;
              o_late := real_clock - started > budget;
              EXIT WHEN o_late;
              IF policies[i] = 0 THEN
                IF NOT row_found THEN
                  held := clock;
                END IF;
                IF GREATEST(held, clock) + amounts[i] - clock > capacities[i] THEN
                  o_current := held;
                  EXIT;
                END IF;
                o_granted := GREATEST(held, clock) + CASE WHEN takes[i] THEN amounts[i] ELSE 0 END;
                EXIT WHEN NOT takes[i];
                IF row_found THEN
                  UPDATE \(table) AS r SET tat = o_granted WHERE r.key = keys[i];
                ELSE
                  INSERT INTO \(table) AS r (key, tat) VALUES (keys[i], o_granted) ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              ELSIF policies[i] = 1 THEN
                -- The log is in order (see below): the entries that left the window are a prefix,
                -- found by binary search.
                held_grants := coalesce(held_grants, '{}');
                live := held_grants[width_bucket(clock - windows[i], held_grants) + 1:];
                counted := cardinality(live);
                o_used := counted;
                IF counted + amounts[i] > capacities[i] THEN
                  o_wait := live[counted + amounts[i] - capacities[i]] + windows[i] - clock;
                  EXIT;
                END IF;
                o_granted := clock;
                EXIT WHEN NOT takes[i];
                live := live || array_fill(clock, ARRAY[amounts[i]::int]);
                IF counted > 0 AND live[counted] > clock THEN
                  -- The clock went back: the log is kept in order all the same.
                  live := ARRAY(SELECT g FROM unnest(live) AS g ORDER BY g);
                END IF;
                IF row_found THEN
                  UPDATE \(sliding) AS r SET grants = live, expires = greatest(r.expires, clock + windows[i])
                  WHERE r.key = keys[i];
                ELSE
                  INSERT INTO \(sliding) AS r (key, expires, grants)
                  VALUES (keys[i], clock + windows[i], live)
                  ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              ELSE
                -- Floor division, so that instants before the epoch fall in their own window too.
                window_ends := clock - ((clock % windows[i]) + windows[i]) % windows[i] + windows[i];
                counted := CASE WHEN row_found AND held = window_ends THEN held_used ELSE 0 END;
                o_used := counted;
                -- Not `counted + amounts[i]`, which overflows for a window of `Int64.max` permits.
                IF amounts[i] > capacities[i] - counted THEN
                  o_wait := window_ends - clock;
                  EXIT;
                END IF;
                o_granted := window_ends;
                EXIT WHEN NOT takes[i];
                IF row_found THEN
                  UPDATE \(fixed) AS r SET window_end = window_ends, used = counted + amounts[i] WHERE r.key = keys[i];
                ELSE
                  INSERT INTO \(fixed) AS r (key, window_end, used) VALUES (keys[i], window_ends, amounts[i])
                  ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              END IF;
              charged := true;
              EXIT;
            END LOOP;
          END IF;
          RETURN NEXT;
        END LOOP;
        -- A write that took longer than the budget (a slow trigger, a slow plan, a wait on
        -- anything but a lock) is undone: the callers stopped waiting, so the batch takes nothing.
        IF charged AND \(clock) - started > budget THEN
          RAISE EXCEPTION 'pace: the batch ran past its budget of % microseconds', budget
            USING ERRCODE = 'query_canceled';
        END IF;
      END
      $pace$
      """
  }

  /// The decision. `$1` key, `$2` the cost's increment of the TAT, `$3` the burst tolerance, `$4`
  /// the statement's budget, all in microseconds; `$5` the budget as a `lock_timeout` setting.
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
  ///
  /// `started` is the transaction's start, when the statement's first message arrived: a wait for
  /// the table's lock comes after it (`statement_timestamp()` would be read after that wait, when
  /// the statement's last message is processed).
  ///
  /// The statement gives up when its caller does: `proposed` sets this transaction's
  /// `lock_timeout` before the row is locked, and a statement that starts deciding after its
  /// budget (it waited for the row, or for the table's lock before it could run at all) takes
  /// nothing and answers `late`, so a decision nobody waits for any more never takes permits.
  static func decisionSQL(table: TableName) -> String {
    """
    WITH proposed AS MATERIALIZED (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now,
        (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint AS started,
        set_config('lock_timeout', $5, true) AS lock_timeout
    ), locked AS MATERIALIZED (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
    ), granted AS (
      INSERT INTO \(table) AS r (key, tat)
      SELECT $1, proposed.now + $2 FROM proposed WHERE proposed.now - proposed.started <= $4
      ON CONFLICT (key) DO UPDATE
        SET tat = GREATEST(r.tat, (SELECT now FROM locked)) + $2
        WHERE GREATEST(r.tat, (SELECT now FROM locked)) + $2 - (SELECT now FROM locked) <= $3
          AND (SELECT now FROM locked) - (SELECT started FROM proposed) <= $4
      RETURNING r.tat, CASE WHEN r.tat = (SELECT now FROM proposed) + $2
        THEN (SELECT now FROM proposed) ELSE (SELECT now FROM locked) END AS now
    ), denied AS (
      SELECT r.tat FROM \(table) AS r
      WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM granted)
      FOR SHARE
    )
    SELECT (SELECT tat FROM granted), (SELECT tat FROM denied),
      COALESCE((SELECT now FROM granted), (SELECT now FROM locked)),
      (SELECT now FROM locked) - (SELECT started FROM proposed) > $4
    """
  }

  /// Deletes up to `batchSize` rows that count nothing any more, as if absent: token buckets whose
  /// TAT has passed, sliding windows whose last grant has left the window, fixed windows whose
  /// window has ended. It skips rows that a decision holds locked, so it never blocks one.
  /// Call it, or ``purgeAllExpired()``, yourself if you do not run the store as a service.
  ///
  /// - Parameter batchSize: The most rows deleted by one statement. Positive.
  /// - Returns: How many rows were deleted; call again while it returns `batchSize`.
  /// - Throws: ``PacePostgresError/rateOutOfRange(_:)`` if `batchSize` is not positive; what the
  ///   database reports.
  @discardableResult
  public func purgeExpired(batchSize: Int = 1000) async throws -> Int {
    guard batchSize > 0 else {
      throw PacePostgresError.rateOutOfRange(
        "PostgresRateLimitStore.purgeExpired: batchSize must be positive; got \(batchSize)")
    }
    var count = 0
    // Each table's column that says until when its row counts.
    let tables = [
      (tableName, "tat"), (try tableName.companion(.slidingWindow), "expires"),
      (try tableName.companion(.fixedWindow), "window_end"),
    ]
    for (table, expiry) in tables where count < batchSize {
      let sql = """
        WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now)
        DELETE FROM \(table) AS r USING clock
        WHERE r.ctid IN (
          SELECT e.ctid FROM \(table) AS e, clock WHERE e.\(expiry) < clock.now LIMIT $1 FOR UPDATE OF e SKIP LOCKED
        ) AND r.\(expiry) < clock.now
        RETURNING 1
        """
      var binds = PostgresBindings()
      binds.append(batchSize - count)
      let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
      for try await _ in rows { count += 1 }
    }
    return count
  }

  /// Deletes every row that counts nothing any more, as ``purgeExpired(batchSize:)`` does, in one
  /// walk over each table: a statement per range of 256 pages (2 MB), read by a TID range scan, so
  /// that each statement's work is bounded by pages rather than by the rows it finds, and no page
  /// is read twice (a purge by row count starts each batch from the table's first page again,
  /// through the rows the batches before it deleted). It needs no index, so every grant stays a
  /// HOT update. Rows written past the end of the walk meanwhile wait for the next walk. ``run()``
  /// calls it every ``purgeInterval``.
  ///
  /// - Returns: How many rows were deleted.
  /// - Throws: What the database reports.
  @discardableResult
  public func purgeAllExpired() async throws -> Int {
    try await purgeAllExpired(pagesPerStatement: 256)
  }

  /// ``purgeAllExpired()`` with `pagesPerStatement` pages per statement.
  func purgeAllExpired(pagesPerStatement: Int64) async throws -> Int {
    let tables = [
      (tableName, "tat"), (try tableName.companion(.slidingWindow), "expires"),
      (try tableName.companion(.fixedWindow), "window_end"),
    ]
    var count = 0
    for (table, expiry) in tables {
      var (pages, step): (Int64, Int64) = (0, pagesPerStatement)
      let size = try await client.query(
        PostgresQuery(
          unsafeSQL: """
            SELECT pg_relation_size('\(table)') / current_setting('block_size')::bigint,
              current_setting('server_version_num')::int >= 140000
            """))
      for try await (value, rangeScans) in size.decode((Int64, Bool).self) {
        // Before PostgreSQL 14 (no TID range scan) every statement would read the whole table: one does.
        (pages, step) = (value, rangeScans ? pagesPerStatement : max(value, 1))
      }
      let sql = """
        WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now),
        deleted AS (
          DELETE FROM \(table) AS r USING clock
          WHERE r.ctid IN (
            SELECT e.ctid FROM \(table) AS e, clock
            WHERE e.ctid >= format('(%s,0)', $1::bigint)::tid AND e.ctid < format('(%s,0)', $2::bigint)::tid
              AND e.\(expiry) < clock.now
            FOR UPDATE OF e SKIP LOCKED
          ) AND r.\(expiry) < clock.now
          RETURNING 1
        )
        SELECT count(*) FROM deleted
        """
      for first in stride(from: Int64(0), to: pages, by: Int(step)) {
        var binds = PostgresBindings()
        binds.append(first)
        binds.append(first + step)
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
        for try await deleted in rows.decode(Int64.self) { count += Int(deleted) }
      }
    }
    return count
  }

  /// Deletes expired rows every ``purgeInterval`` until the task is cancelled or the service group
  /// shuts down gracefully; a purge that fails is logged and tried again at the next interval.
  /// Then it shuts the store down (``shutdown()``): its decisions' connections are closed.
  ///
  /// The client is a service of its own: run both in one `ServiceGroup`, the client first, so that
  /// the group shuts the store down before the client. A store made from a configuration runs its
  /// own client here, until the store has shut down.
  public func run() async throws {
    try await runningOwnedClient(client, owned: runsClient) { await purgeUntilShutdown() }
  }

  private func purgeUntilShutdown() async {
    logger.info("PostgreSQL rate-limit store running", metadata: ["pace.purge_interval": "\(purgeInterval)"])
    let heartbeats = startHeartbeats()
    while !Task.isCancelled && !Task.isShuttingDownGracefully {
      do {
        try await cancelWhenGracefulShutdown { try await Task.sleep(for: purgeInterval) }
      } catch {
        break
      }
      do {
        let purged = try await purgeAllExpired()
        if purged > 0 { logger.debug("purged expired rows", metadata: ["pace.rows": "\(purged)"]) }
      } catch {
        logger.warning("purging expired rows failed", metadata: errorMetadata(error))
      }
    }
    heartbeats?.cancel()
    await heartbeats?.value
    await shutdown()
  }

  /// Stops deciding and closes the connections the store's decisions hold (those it opened itself
  /// with `directConnection`; pool connections go back to the pool), once the decisions in flight
  /// are answered. Idempotent; ``run()`` calls it when it ends.
  ///
  /// Decisions after it follow the failure policy, as if the database were unavailable.
  public func shutdown() async {
    await batcher.shutdown()
    // A probe after the batcher's shutdown is answered at once (``StoreShutDown``).
    await probes.waitForAll()
    logger.info("PostgreSQL rate-limit store stopped")
  }

  // MARK: Decisions

  /// Takes `cost` permits for `key` under `limit` if they are available now, atomically across
  /// every instance that shares the table, with `limit`'s policy: a token bucket, a sliding window
  /// or a fixed window aligned to the Unix epoch, each decided by the database's clock exactly as
  /// in memory (see <doc:SharedRateLimitsAndDebouncing>). Each call's `limit` applies to that
  /// call: keys with different limits (plans) share one store.
  ///
  /// The key and the cost follow `KeyPolicy`: the key is stored in Unicode NFC; a cost of 0 takes
  /// nothing and gets the answer a cost of 1 would get (the permits available now, or cost 1's
  /// `retryAfter`), so it never passes a key that would deny cost 1.
  ///
  /// - Throws: `InvalidInput` for a key or cost outside `KeyPolicy` (a negative cost, or one above
  ///   the limit's burst, a window's permits);
  ///   ``PacePostgresError/rateOutOfRange(_:)`` for a limit whose arithmetic overflows 64-bit
  ///   microseconds, or a sliding window of more than 10,000 permits (its row keeps every grant);
  ///   ``PacePostgresError/unavailable(reason:)`` under `.throwError` when the database cannot
  ///   decide; what the database reports about the statement itself.
  public func tryAcquire(_ requestedKey: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    // Synchronous up to the denial cache, in a small async frame: a cached denial costs no task
    // allocation beyond this call's, and one clock read.
    let started = ContinuousClock.now
    let (key, stored) = try checked(requestedKey, cost: cost, limit: limit)
    // A denial this instance was given is answered again until it expires, at memory speed.
    let entry = DenialCacheState.Entry(key: key, limit: stored)
    if let retryAfter = denials.withLock({ $0.retryAfter(entry, now: started) }) {
      health.count(.denied)
      return .limited(retryAfter: retryAfter)
    }
    return try await decide(entry, cost: cost, limit: limit, started: started, databaseNow: nil)
  }

  /// ``tryAcquire(_:cost:limit:)`` decided at `databaseNow` microseconds since the Unix epoch
  /// instead of the database's clock, for tests that drive the store on a chosen timeline: the
  /// denial cache, which counts real time, is neither read nor written. Production never calls it.
  func tryAcquire(
    _ requestedKey: String, cost: Int, limit: RateLimit, databaseNow: Int64
  ) async throws -> RateLimitDecision {
    let started = ContinuousClock.now
    let (key, stored) = try checked(requestedKey, cost: cost, limit: limit)
    let entry = DenialCacheState.Entry(key: key, limit: stored)
    return try await decide(entry, cost: cost, limit: limit, started: started, databaseNow: databaseNow)
  }

  /// The stored key and the stored form of a request, or the error that rejects it (counted).
  private func checked(_ requestedKey: String, cost: Int, limit: RateLimit) throws -> (String, StoredLimit) {
    do {
      try KeyPolicy.check(cost: cost, limit: limit)
      return (try storedKey(requestedKey), try StoredLimit(cost: cost, limit: limit))
    } catch {
      health.count(error is InvalidInput ? .invalid : .error)
      throw error
    }
  }

  /// The decision of a request the denial cache does not answer: the database's, or the policy's.
  private func decide(
    _ entry: DenialCacheState.Entry, cost: Int, limit: RateLimit, started: ContinuousClock.Instant,
    databaseNow: Int64?
  ) async throws -> RateLimitDecision {
    let key = entry.key
    let admission = health.admit(now: started, logger: logger)
    switch admission {
    case .ask:
      break
    case .reject:
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "the circuit breaker is open", started: started)
    case .probe:
      // No request waits for a probe: it asks in the background, taking nothing (cost 0), while
      // this request follows the failure policy like the others of the outage.
      let query = DecisionRequest(
        key: key, limit: entry.limit, takes: false, deadline: started.advanced(by: timeout), databaseNow: nil)
      probes.spawn { await probe(query) }
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "the circuit breaker is probing", started: started)
    }
    let answer: DecisionAnswer
    do {
      answer = try await batcher.decide(
        DecisionRequest(
          key: key, limit: entry.limit, takes: cost > 0, deadline: started.advanced(by: timeout),
          databaseNow: databaseNow))
    } catch {
      let kind = error is CancellationError ? nil : failureKind(of: error)
      health.ended(admission, unavailable: kind.map { $0 == .unavailable }, now: .now, error: error, logger: logger)
      guard kind == .unavailable || kind == .retryOnce else {
        if kind != nil {
          health.count(.error)
          logger.error(
            "rate-limit decision failed", metadata: errorMetadata(error).merging(["pace.key": "\(key)"]) { $1 })
        }
        throw error
      }
      let reason = error is DatabaseTimeout ? "no answer within \(timeout)" : String(reflecting: error)
      return try await decideUnavailable(key, cost: cost, limit: limit, reason: reason, started: started)
    }
    let now = ContinuousClock.now
    if answer.late {
      // The lock came after the caller's budget: nothing was taken; the database was too slow.
      health.ended(admission, unavailable: true, now: now, error: DatabaseTimeout(), logger: logger)
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "no answer within \(timeout)", started: started)
    }
    health.ended(admission, unavailable: false, now: now, error: nil, logger: logger)
    let decision = try StoredDecision.decision(cost: cost, limit: limit, answer: answer)
    if case .limited(let retryAfter) = decision, answer.current != nil || answer.wait != nil, databaseNow == nil {
      // Anchored at the instant the batch was sent, before the database decided: the local
      // deadline is never later than the database's (see DenialCacheState for why it is exact).
      denials.withLock { $0.denied(entry, retryAfter: retryAfter, sent: answer.sent, now: now) }
    }
    health.count(decision.isAllowed ? .allowed : .denied, duration: started.duration(to: now))
    return decision
  }

  /// Asks the database whether it decides again, with a decision that takes nothing, and tells
  /// the breaker.
  private func probe(_ query: DecisionRequest) async {
    do {
      let answer = try await batcher.decide(query)
      health.ended(
        .probe, unavailable: answer.late, now: .now, error: answer.late ? DatabaseTimeout() : nil, logger: logger)
    } catch {
      let kind = error is CancellationError ? nil : failureKind(of: error)
      health.ended(.probe, unavailable: kind.map { $0 != .fatal }, now: .now, error: error, logger: logger)
    }
  }

  private func decideUnavailable(
    _ key: String,
    cost: Int,
    limit: RateLimit,
    reason: String,
    started: ContinuousClock.Instant
  ) async throws -> RateLimitDecision {
    let decision: RateLimitDecision
    switch whenUnavailable {
    case .throwError:
      health.count(.error, duration: started.duration(to: .now))
      throw PacePostgresError.unavailable(reason: reason)
    case .allow:
      decision = .allowed(remaining: 0)
    case .deny(let retryAfter):
      decision = .limited(retryAfter: retryAfter)
    case .fallback(let limiter):
      decision = try await limiter.decide(key, cost: cost)
    case .shareLimit:
      decision = try decideShare(key, cost: cost, limit: limit, now: started)
    }
    health.count(.fallback, duration: started.duration(to: .now))
    health.fellBack(reason: reason, policy: whenUnavailable.description(fleet: fleet), logger: logger)
    return decision
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
    // KeyPolicy checks the cost first; here it is checked again, as a thrown error, never a trap.
    guard cost >= 0, cost <= limit.burst else {
      throw .rateOutOfRange("cost \(cost) is outside 0...\(limit.burst), the burst of \(limit)")
    }
    // Through Pace's saturating conversion: `Duration.components` traps beyond `Int64.max` seconds.
    guard let interval = limit.interval.wholeMicroseconds, interval > 0 else {
      throw .rateOutOfRange("interval \(limit.interval) is not a positive number of microseconds below Int64.max")
    }
    let permits = Int64(limit.permits)
    let (costTimesInterval, overflow) = Int64(cost).multipliedReportingOverflow(by: interval)
    let (burstTimesInterval, overflow2) = Int64(limit.burst).multipliedReportingOverflow(by: interval)
    guard !overflow, !overflow2 else { throw .rateOutOfRange("\(limit) overflows 64-bit microseconds") }
    // Rounded up without `+ permits - 1`, which overflows for `Int.max` permits.
    let (quotient, remainder) = costTimesInterval.quotientAndRemainder(dividingBy: permits)
    self.increment = quotient + (remainder == 0 ? 0 : 1)
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
