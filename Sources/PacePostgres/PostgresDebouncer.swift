#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

/// A debouncer shared by every instance of a server: calls for a key from any instance within the
/// quiet period lead to one execution of the handler, with all their payloads merged.
///
/// lodash's `debounce(wait, { maxWait })` moved into tables: a call records its payload and
/// pushes the key's due time to `quiet` after it, but never past `maximumWait` after the period's
/// first call. Workers (``run()`` on each instance, or the debouncer as a `Service` in a `ServiceGroup`)
/// claim due keys with `FOR UPDATE SKIP LOCKED` and a lease that a running handler renews, merge
/// the payloads in call order with ``merge``, run the handler, then delete exactly the payloads
/// they merged.
///
/// ```swift
/// let reindex = try PostgresDebouncer<[Int]>(client: client, quiet: .seconds(2), maximumWait: .seconds(30), merge: .append) {
///   key, documentIDs in try await search.reindex(documentIDs)
/// }
/// // On every instance, the client and the worker run in one ServiceGroup, or in the framework's
/// // lifecycle (Hummingbird's `addServices(_:)`, PaceVapor's `ServiceLifecycleHandler`), which
/// // runs `migrate()` before the server takes requests:
/// let services = ServiceGroup(services: [client, reindex], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await reindex.call("catalog", [42])  // from any instance, in a request
/// ```
///
/// Guarantees: every recorded payload reaches a handler that completes, or the dead-letter table
/// `<table>_dead` after ``maximumAttempts`` failed attempts (none is lost while the database keeps
/// it), merged in call order, and is acknowledged exactly once. Execution is at least once: an
/// instance that dies mid-execution (or cannot renew its lease) leaves the key to another
/// instance after the lease, which runs the handler again with the same payloads (and any newer
/// ones). Make the handler idempotent. See <doc:SharedRateLimitsAndDebouncing>.
public struct PostgresDebouncer<Payload: Codable & Sendable>: Sendable {
  /// The client the debouncer queries: the caller runs it (`client.run()`), or, for a debouncer
  /// made from a configuration, the debouncer's ``run()`` does.
  public let client: PostgresClient
  /// Whether ``run()`` runs ``client`` too: the debouncer made it from a configuration.
  var runsClient = false
  /// Where calls are recorded instead of `client`'s pool, if the debouncer was given
  /// `directConnection`.
  let direct: DirectConnection?
  /// How long after a key's last call its execution is due.
  public let quiet: Duration
  /// The longest an execution waits after its period's first call; nil for no limit.
  public let maximumWait: Duration?
  /// The longest an execution waits after its period's first call: ``maximumWait``.
  @available(*, deprecated, renamed: "maximumWait")
  public var maxWait: Duration? { maximumWait }
  /// How long a claimed execution is reserved to its instance; a running handler renews it
  /// every third of it.
  public let lease: Duration
  /// How the payloads of one period combine.
  public let merge: Merge<Payload>
  /// The largest payload accepted, in bytes of JSON.
  public let maximumPayloadBytes: Int
  /// How often ``run()`` looks for due keys when none was due.
  public let pollInterval: Duration
  /// How long one of the debouncer's statements (or transactions) may wait for the database
  /// before it counts as unavailable.
  public let timeout: Duration
  /// How many attempts an execution gets before its payloads go to the dead-letter table.
  public let maximumAttempts: Int
  /// The wait before the first retry of a failed execution; each further retry waits twice as
  /// long as the one before, up to ``maximumRetryBackoff``.
  public let retryBackoff: Duration
  /// The longest wait before a retry.
  public let maximumRetryBackoff: Duration
  /// The most executions one instance runs at once.
  public let maximumConcurrentExecutions: Int
  /// How long a shutdown lets running handlers finish before it cancels them.
  public let shutdownGracePeriod: Duration
  /// When calls stop going to an unavailable database.
  public let circuitBreaker: CircuitBreaker
  /// What a call does while the database is unavailable.
  public let whenUnavailable: FailureMode

  /// The failure mode: what ``call(_:_:)`` does while the database cannot record it: it is
  /// unreachable, read-only, out of connections, or does not answer within ``timeout``.
  public enum FailureMode: Sendable, Hashable {
    /// Throw ``PacePostgresError/unavailable(reason:)``, at once while the breaker is open: the
    /// caller decides. The default.
    case throwError
    /// Keep up to `capacity` calls in this instance's memory and record them, in call order, once
    /// the database answers; a call beyond `capacity` throws. Positive.
    case keepLocally(capacity: Int)
  }

  /// What a call does while the database is unavailable: ``FailureMode``.
  @available(*, deprecated, renamed: "FailureMode")
  public typealias UnavailablePolicy = FailureMode

  let keys: TableName
  let calls: TableName
  let deadLetters: TableName
  let perform: @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  let logger: Logger
  let metrics: DebouncerMetrics
  /// The names of this debouncer's prepared statements.
  let statementNames: StatementNames
  /// The breaker and the calls kept while the database is away.
  let outbox: DebouncerOutbox
  let retryPolicy: DebouncerRetryPolicy
  let quietMicroseconds: Int64
  let maximumWaitMicroseconds: Int64?
  let leaseMicroseconds: Int64

  /// A debouncer with a PostgreSQL client of its own, made from `configuration` (the one the app
  /// already has for its own database) and run by the debouncer's ``run()``: the app runs the
  /// debouncer as a service (in a `ServiceGroup`, Hummingbird's `addServices(_:)` or PaceVapor's
  /// `ServiceLifecycleHandler`) and no client of its own for it.
  ///
  /// Statements wait until ``run()`` has started the client: call ``migrate(timeout:)`` once the
  /// services run (PaceVapor's `beforeServerStarts`, Hummingbird's `beforeServerStarts`). The
  /// client stops after the worker has drained. To share one pool with other components, make a
  /// `PostgresClient`, run it, and pass it as `client:` instead.
  ///
  /// - Parameter configuration: Where the database is and how to connect. The other parameters
  ///   are those of the initialiser that takes a `client`, with the same defaults; the `logger`
  ///   also gets the client's background events.
  /// - Throws: As the initialiser that takes a `client`.
  public init(
    configuration: PostgresClient.Configuration,
    table: String = "pace_debounce",
    quiet: Duration,
    maximumWait: Duration? = nil,
    lease: Duration = .seconds(30),
    merge: Merge<Payload> = .latest,
    maximumPayloadBytes: Int = 64 * 1024,
    pollInterval: Duration = .milliseconds(100),
    timeout: Duration = .seconds(5),
    maximumAttempts: Int = 5,
    retryBackoff: Duration? = nil,
    maximumRetryBackoff: Duration = .seconds(300),
    maximumConcurrentExecutions: Int = 16,
    shutdownGracePeriod: Duration = .seconds(10),
    circuitBreaker: CircuitBreaker = CircuitBreaker(),
    whenUnavailable: FailureMode = .throwError,
    directConnection: PostgresConnection.Configuration? = nil,
    logger: Logger = Logger(label: "pace.postgres.debouncer", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    perform: @escaping @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  ) throws(PacePostgresError) {
    try self.init(
      client: PostgresClient(configuration: configuration, backgroundLogger: logger), table: table, quiet: quiet,
      maximumWait: maximumWait, lease: lease, merge: merge, maximumPayloadBytes: maximumPayloadBytes,
      pollInterval: pollInterval, timeout: timeout, maximumAttempts: maximumAttempts, retryBackoff: retryBackoff,
      maximumRetryBackoff: maximumRetryBackoff, maximumConcurrentExecutions: maximumConcurrentExecutions,
      shutdownGracePeriod: shutdownGracePeriod, circuitBreaker: circuitBreaker, whenUnavailable: whenUnavailable,
      directConnection: directConnection, logger: logger, metricsFactory: metricsFactory, perform: perform)
    runsClient = true
  }

  /// A debouncer on `client` in the tables `table` (keys), `table_calls` (payloads) and
  /// `table_dead` (payloads whose executions failed every attempt).
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client.
  ///   - table: The keys' table, `name` or `schema.name`; the payloads go in `<table>_calls`, the
  ///     dead letters in `<table>_dead`.
  ///   - quiet: The quiet period. Not negative.
  ///   - maximumWait: The longest wait after a period's first call; nil (the default) for none. Not
  ///     shorter than `quiet`.
  ///   - lease: How long an instance holds a claimed execution without renewing it; 30 seconds by
  ///     default. Positive.
  ///   - merge: How the payloads combine; `.latest` by default, `.append` loses nothing.
  ///   - maximumPayloadBytes: The largest payload accepted, in bytes of JSON; 64 KiB by default.
  ///   - pollInterval: How often ``run()`` looks for due keys; 100 ms by default. Positive.
  ///   - timeout: How long a statement may wait for the database; 5 seconds by default. Positive.
  ///   - maximumAttempts: The attempts an execution gets before its payloads are dead-lettered;
  ///     5 by default. Positive.
  ///   - retryBackoff: The wait before the first retry; nil (the default) for `quiet`, but at
  ///     least `pollInterval`. Not negative.
  ///   - maximumRetryBackoff: The longest wait before a retry; 5 minutes by default (never shorter
  ///     than the first wait).
  ///   - maximumConcurrentExecutions: The most executions one instance runs at once; 16 by
  ///     default. Positive.
  ///   - shutdownGracePeriod: How long a shutdown lets running handlers finish; 10 seconds by
  ///     default. Not negative.
  ///   - circuitBreaker: When calls stop going to an unavailable database; see ``CircuitBreaker``.
  ///   - whenUnavailable: What a call does while the database is unavailable; `.throwError` by
  ///     default, `.keepLocally(capacity:)` keeps calls in memory until it answers.
  ///   - directConnection: Where ``call(_:_:)`` records calls, on a connection of the debouncer's
  ///     own that it opens when a call needs it and none is open; nil (the default) for `client`'s
  ///     pool. Give it (the same server's `PostgresConnection.Configuration`) for a fast answer to
  ///     an outage: a stopped server refuses the connection at once, where a pool keeps the first
  ///     calls of an outage waiting their whole `timeout` while it backs off its reconnections;
  ///     and the first call after the server is back reconnects at once. The worker's statements
  ///     use the pool either way.
  ///   - logger: Where the worker logs failures, dead letters, outages and shutdown; silent by
  ///     default.
  ///   - metricsFactory: Where the metrics go; `MetricsSystem.factory` by default.
  ///   - perform: The handler: the key and its merged payload.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier;
  ///   ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the setting if a duration is
  ///   out of its range (every one must also be below `Int64.max` nanoseconds, about 292 years),
  ///   `maximumWait` is shorter than `quiet`, or a count is not positive.
  public init(
    client: PostgresClient,
    table: String = "pace_debounce",
    quiet: Duration,
    maximumWait: Duration? = nil,
    lease: Duration = .seconds(30),
    merge: Merge<Payload> = .latest,
    maximumPayloadBytes: Int = 64 * 1024,
    pollInterval: Duration = .milliseconds(100),
    timeout: Duration = .seconds(5),
    maximumAttempts: Int = 5,
    retryBackoff: Duration? = nil,
    maximumRetryBackoff: Duration = .seconds(300),
    maximumConcurrentExecutions: Int = 16,
    shutdownGracePeriod: Duration = .seconds(10),
    circuitBreaker: CircuitBreaker = CircuitBreaker(),
    whenUnavailable: FailureMode = .throwError,
    directConnection: PostgresConnection.Configuration? = nil,
    logger: Logger = Logger(label: "pace.postgres.debouncer", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    perform: @escaping @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  ) throws(PacePostgresError) {
    // Every setting is checked with a thrown error, never a trap (`Duration.components`, which a
    // conversion of a duration beyond `Int64.max` seconds would call, traps).
    let owner = "PostgresDebouncer"
    try checkSetting("quiet", quiet, of: owner, zeroAllowed: true)
    if let maximumWait {
      try checkSetting("maximumWait", maximumWait, of: owner, zeroAllowed: true)
      guard maximumWait >= quiet else {
        throw .invalid("\(owner).maximumWait", maximumWait, "must not be shorter than quiet (\(quiet))")
      }
    }
    try checkSetting("lease", lease, of: owner)
    try checkSetting("pollInterval", pollInterval, of: owner)
    try checkSetting("timeout", timeout, of: owner)
    try checkSetting("shutdownGracePeriod", shutdownGracePeriod, of: owner, zeroAllowed: true)
    try checkSetting("maximumRetryBackoff", maximumRetryBackoff, of: owner, zeroAllowed: true)
    try circuitBreaker.check(of: owner)
    if let retryBackoff { try checkSetting("retryBackoff", retryBackoff, of: owner, zeroAllowed: true) }
    if case .keepLocally(let capacity) = whenUnavailable, capacity <= 0 {
      throw .invalid("\(owner).whenUnavailable.keepLocally.capacity", capacity, "must be positive")
    }
    for (name, count) in [
      ("maximumPayloadBytes", maximumPayloadBytes), ("maximumAttempts", maximumAttempts),
      ("maximumConcurrentExecutions", maximumConcurrentExecutions),
    ] where count <= 0 {
      throw .invalid("\(owner).\(name)", count, "must be positive")
    }
    // A zero quiet period would retry a failing key at every poll.
    let firstRetry = retryBackoff ?? max(quiet, pollInterval)
    let longestRetry = max(maximumRetryBackoff, firstRetry)
    guard let quietMicroseconds = quiet.wholeMicroseconds, let leaseMicroseconds = lease.wholeMicroseconds,
      maximumWait.map({ $0.wholeMicroseconds != nil }) ?? true, longestRetry.wholeMicroseconds != nil
    else {
      throw .invalid(
        "\(owner).retryBackoff", longestRetry, "with quiet, maximumWait and lease, must fit in 64-bit microseconds")
    }
    let logger = logger.naming(table: table)
    self.client = client
    self.direct = directConnection.map { DirectConnection($0, logger: logger) }
    self.keys = try TableName(table)
    self.calls = try TableName(table + "_calls")
    self.deadLetters = try TableName(table + "_dead")
    self.quiet = quiet
    self.maximumWait = maximumWait
    self.lease = lease
    self.merge = merge
    self.maximumPayloadBytes = maximumPayloadBytes
    self.pollInterval = pollInterval
    self.timeout = timeout
    self.maximumAttempts = maximumAttempts
    self.retryBackoff = firstRetry
    self.maximumRetryBackoff = longestRetry
    self.maximumConcurrentExecutions = maximumConcurrentExecutions
    self.shutdownGracePeriod = shutdownGracePeriod
    self.perform = perform
    self.logger = logger
    self.metrics = DebouncerMetrics(table: table, factory: metricsFactory)
    self.statementNames = StatementNames(logger: logger)
    self.circuitBreaker = circuitBreaker
    self.whenUnavailable = whenUnavailable
    var capacity = 0
    if case .keepLocally(let kept) = whenUnavailable { capacity = kept }
    self.outbox = DebouncerOutbox(
      circuitBreaker, capacity: capacity, table: table, logger: logger, factory: metricsFactory)
    self.retryPolicy = DebouncerRetryPolicy(
      maximumAttempts: maximumAttempts, backoff: Backoff(base: firstRetry, cap: longestRetry))
    self.quietMicroseconds = quietMicroseconds
    self.maximumWaitMicroseconds = maximumWait?.wholeMicroseconds
    self.leaseMicroseconds = leaseMicroseconds
  }

  // MARK: Schema

  /// Creates the tables and indexes if they do not exist. Idempotent, and safe to call from every
  /// instance at once (an advisory lock serialises it); tables made by earlier versions keep
  /// working.
  ///
  /// - Parameter timeout: How long to wait for a connection and the migration lock; 30 seconds by
  ///   default. Positive.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `timeout` is not positive
  ///   or is `Int64.max` nanoseconds or more; ``PacePostgresError/unavailable(reason:)`` if the database
  ///   did not answer within `timeout` or could not be reached; the database's own error if it
  ///   refused a statement.
  public func migrate(timeout: Duration = .seconds(30)) async throws {
    try checkSetting("timeout", timeout, of: "PostgresDebouncer.migrate")
    let tables = "\(keys), \(calls), \(deadLetters)"
    logger.info(
      "PostgresDebouncer: migrating; waiting for a connection and the migration lock",
      metadata: ["pace.tables": "\(tables)", "timeout": "\(timeout)"])
    let (client, logger, statements) = (client, logger, migrationSQL)
    // 0x5041_4345 is the lock every debouncer's migration took up to 0.4.
    let locks = migrationLockSQL(family: 0x7064_6201, table: keys, legacyLock: 0x5041_4345)
    let (keys, deadLetters) = (keys.description, deadLetters.description)
    do {
      try await withTimeout(timeout) {
        try await client.withTransaction(logger: logger) { connection in
          for lock in locks { try await connection.query(PostgresQuery(unsafeSQL: lock), logger: logger) }
          // Rows claimed by a version without dead letters counted every claim, never reset.
          let rows = try await connection.query("SELECT to_regclass(\(deadLetters)) IS NULL", logger: logger)
          var isUpgrade = false
          for try await isMissing in rows.decode(Bool.self) { isUpgrade = isMissing }
          for statement in statements {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
          }
          if isUpgrade {
            try await connection.query("UPDATE \(unescaped: keys) SET attempts = 0", logger: logger)
          }
        }
      }
    } catch is DatabaseTimeout {
      let reason =
        "PostgresDebouncer.migrate: no answer within \(timeout) while creating \(tables) "
        + "(no connection to the database, or another session holds the migration lock)"
      logger.error("\(reason)")
      throw PacePostgresError.unavailable(reason: reason)
    } catch  where isUnavailability(error) {
      logger.error("PostgresDebouncer.migrate: the database is unavailable", metadata: errorMetadata(error))
      throw PacePostgresError.unavailable(reason: "PostgresDebouncer.migrate: \(String(reflecting: error))")
    }
    statementNames.migrated()
    logger.info("PostgresDebouncer: migrated", metadata: ["pace.tables": "\(tables)"])
  }

  /// One row per key with pending calls; one row per call with its payload; one row per
  /// dead-lettered payload.
  var migrationSQL: [String] {
    [
      """
      CREATE TABLE IF NOT EXISTS \(keys) (
        key text PRIMARY KEY,
        first_call_at timestamptz NOT NULL,
        due_at timestamptz NOT NULL,
        lease_until timestamptz,
        lease_token uuid,
        claimed_through bigint,
        attempts integer NOT NULL DEFAULT 0
      )
      """,
      "CREATE INDEX IF NOT EXISTS \(keys.suffixed("due")) ON \(keys) (due_at)",
      """
      CREATE TABLE IF NOT EXISTS \(calls) (
        id bigserial PRIMARY KEY,
        key text NOT NULL,
        payload bytea NOT NULL,
        called_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )
      """,
      "CREATE INDEX IF NOT EXISTS \(calls.suffixed("key")) ON \(calls) (key, id)",
      """
      CREATE TABLE IF NOT EXISTS \(deadLetters) (
        id bigserial PRIMARY KEY,
        execution uuid NOT NULL,
        key text NOT NULL,
        call_id bigint NOT NULL,
        payload bytea NOT NULL,
        called_at timestamptz NOT NULL,
        attempts integer NOT NULL,
        last_error text NOT NULL,
        dead_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )
      """,
      "CREATE INDEX IF NOT EXISTS \(deadLetters.suffixed("key")) ON \(deadLetters) (key, id)",
    ]
  }

  // MARK: Calls

  /// Records a call for `key` with `payload`, from any instance: one statement.
  ///
  /// While the database is unavailable, ``whenUnavailable`` says what happens: with
  /// ``FailureMode/throwError`` the call throws, at once while the ``circuitBreaker`` is
  /// open; with ``FailureMode/keepLocally(capacity:)`` it is kept in this instance's outbox
  /// and returns, and the kept calls are recorded in call order once the database answers (by the
  /// next call that reaches it, or by the worker, ``run()``); a call that finds the outbox full
  /// throws. Kept calls live in this process's memory: a process that exits loses them.
  ///
  /// - Throws: `InvalidInput` for a key outside `InputRules` (the key is stored in Unicode NFC) or
  ///   ``PacePostgresError/payloadTooLarge(bytes:limit:)`` before anything is recorded;
  ///   ``PacePostgresError/unavailable(reason:)`` if the database could not be reached and the
  ///   call was not kept (the reason says whether the breaker is open or the outbox full). After
  ///   that error the call may or may not have been recorded (the connection can drop after the
  ///   commit): retrying never loses the payload but can deliver it twice.
  public func call(_ key: String, _ payload: Payload) async throws {
    let key = try storedKey(key)
    let json = try JSONEncoder().encode(payload)
    guard json.count <= maximumPayloadBytes else {
      throw PacePostgresError.payloadTooLarge(bytes: json.count, limit: maximumPayloadBytes)
    }
    let pending = PendingCall(key: key, json: json)
    switch outbox.call(pending, now: .now) {
    case .rejected(let full):
      throw PacePostgresError.unavailable(
        reason: full
          ? "the debouncer's local outbox is full (\(outbox.count) calls kept while the database is away)"
          : "the circuit breaker is open: the database was unavailable")
    case .kept:
      return
    case .keptDeliver(let admission):
      // In a task of its own, awaited: a caller's cancellation must not drop a kept call.
      await Task { await self.deliverOutbox(admission) }.value
    case .send(let admission):
      do {
        try await record(pending)
        outbox.ended(admission, unavailable: false, error: nil)
      } catch  where isUnavailableError(error) {
        outbox.ended(admission, unavailable: true, error: error)
        if case .keepLocally = whenUnavailable, outbox.keep(pending) { return }
        throw error
      } catch {
        // The database answered (it refused the statement), or the caller was cancelled before
        // anyone knew: either way a probe ends.
        outbox.ended(admission, unavailable: error is CancellationError ? nil : false, error: nil)
        throw error
      }
    }
  }

  /// Records `call` in the database.
  private func record(_ call: PendingCall) async throws {
    var binds = PostgresBindings()
    binds.append(call.key)
    binds.append(quietMicroseconds)
    binds.append(maximumWaitMicroseconds)
    binds.append(ByteBuffer(bytes: call.json))
    let (client, direct, logger, statement) = (
      client, direct, logger, PreparedSQL("call", table: keys, names: statementNames, sql: callSQL)
    )
    try await unavailableAsError { [binds] in
      if let direct {
        let connection = try await direct.connection()
        for try await _ in try await statement.execute(binds, on: connection, logger: logger) {}
      } else {
        for try await _ in try await statement.execute(binds, on: client, logger: logger) {}
      }
    }
    metrics.calls.increment()
  }

  /// Records the kept calls in call order while the database answers; `admission` is what the
  /// breaker admitted the first one as. A kept call the database refuses (not an outage: a missing
  /// table, say) is logged and dropped, so that it does not hold the others back.
  func deliverOutbox(_ admission: CircuitBreakerMachine.Admission) async {
    var admission = admission
    while let next = outbox.nextToDeliver() {
      do {
        try await record(next)
        outbox.delivered()
        outbox.ended(admission, unavailable: false, error: nil)
        admission = .ask
      } catch {
        let unavailable = isUnavailableError(error)
        outbox.ended(admission, unavailable: unavailable, error: error)
        guard unavailable else {
          outbox.delivered()
          logger.error(
            "PostgresDebouncer: the database refused a call kept during an outage; it is dropped",
            metadata: errorMetadata(error).merging(["pace.key": "\(next.key)"]) { $1 })
          admission = .ask
          continue
        }
        outbox.deliveryFailed()
        return
      }
    }
  }

  /// `$1` key, `$2` quiet and `$3` maximumWait in microseconds (NULL: none), `$4` the payload. The key's
  /// row lock orders the calls of one key, so their ids are committed in order.
  var callSQL: String {
    """
    WITH job AS (
      INSERT INTO \(keys) AS j (key, first_call_at, due_at)
      VALUES ($1, clock_timestamp(), clock_timestamp() + $2 * interval '1 microsecond')
      ON CONFLICT (key) DO UPDATE
        SET due_at = LEAST(clock_timestamp() + $2 * interval '1 microsecond',
                           j.first_call_at + $3 * interval '1 microsecond')
      RETURNING j.key
    )
    INSERT INTO \(calls) (key, payload) SELECT key, $4 FROM job
    """
  }

  // MARK: Executions

  /// Runs the due executions until the task is cancelled or the service group shuts down: call it
  /// once on every instance, or add the debouncer to a `ServiceGroup`.
  ///
  /// Up to ``maximumConcurrentExecutions`` run at once, and a slot that frees up is refilled at
  /// the next poll, so a slow handler delays no other key. A handler that throws, or a payload
  /// that does not decode, is retried after a backoff, then dead-lettered after
  /// ``maximumAttempts``. While the database is unavailable it keeps polling; when the database
  /// refuses the claim (a missing table, a permission) it logs an error and retries after a
  /// backoff of up to 30 seconds. Neither ends the worker.
  ///
  /// On graceful shutdown or cancellation it stops claiming, gives back claims whose handler has
  /// not started, and lets running handlers finish within ``shutdownGracePeriod``; then it cancels
  /// them and gives their claims back too, so that another instance runs them at once.
  public func run() async throws {
    try await runningOwnedClient(client, owned: runsClient) { await runWorker() }
    await direct?.close()
  }

  private func runWorker() async {
    let worker = DebouncerWorker(
      DebouncerWorkerState(
        maximumConcurrentExecutions: maximumConcurrentExecutions, pollInterval: pollInterval,
        refusalBackoff: Backoff(base: pollInterval, cap: max(.seconds(30), pollInterval))))
    logger.debug("PostgresDebouncer: worker started")
    let claimer = Task { await claimLoop(worker) }
    await withTaskCancellationOrGracefulShutdownHandler {
      await claimer.value
    } onCancelOrGracefulShutdown: {
      worker.shutDown()
    }
    logger.info(
      "PostgresDebouncer: shutting down; stopped claiming, waiting for running handlers",
      metadata: ["pace.executions": "\(worker.running)", "grace": "\(shutdownGracePeriod)"])
    if await !worker.drain(within: shutdownGracePeriod) {
      let cancelled = worker.cancelExecutions()
      logger.warning(
        "PostgresDebouncer: the grace period ended; cancelled the handlers still running",
        metadata: ["pace.executions": "\(cancelled)"])
      // Long enough for a cancelled execution to give its claim back.
      _ = await worker.drain(within: timeout)
    }
    logger.info("PostgresDebouncer: stopped")
  }

  /// Claims due keys into the worker's free slots until the worker shuts down.
  private func claimLoop(_ worker: DebouncerWorker) async {
    let clock = ContinuousClock()
    var next = worker.withMachine { $0.next() }
    while true {
      switch next {
      case .stop:
        return
      case .sleep(let duration):
        await worker.sleep(for: duration)
        next = worker.withMachine { $0.next() }
      case .claim(let limit):
        let step: DebouncerWorkerState.Step
        var failure: (any Error)?
        do {
          let claims = try await claim(limit: limit)
          // The database answers: the calls kept during an outage go first.
          if outbox.startDelivery() { await deliverOutbox(.ask) }
          step = worker.withMachine { $0.claimed(claims.count, limit: limit, now: clock.now) }
          for claim in claims {
            worker.start { _ = await self.execute(claim) { worker.withMachine { $0.mayStartHandler } } }
          }
        } catch {
          failure = error
          let kind: DebouncerWorkerState.ClaimFailure =
            isUnavailableError(error) ? .unavailable : sqlState(of: error) == "42P01" ? .tablesMissing : .refused
          step = worker.withMachine { $0.claimFailed(kind, now: clock.now) }
        }
        for log in step.logs { self.log(log, error: failure) }
        next = step.next
      }
    }
  }

  private func log(_ event: DebouncerWorkerState.Log, error: (any Error)?) {
    let error: Logger.Metadata = error.map(errorMetadata) ?? [:]
    switch event {
    case .outageStarted:
      logger.warning(
        "PostgresDebouncer: the database is unavailable; polling until it answers", metadata: error)
    case .outageEnded(let duration):
      logger.info("PostgresDebouncer: the database answers again", metadata: ["outage": "\(duration)"])
    case .claimRefused(let refusals, let wait):
      logger.error(
        """
        PostgresDebouncer: the database refused to claim due keys; retrying. A missing table (42P01) needs \
        migrate(); a permission (42501) needs a GRANT on the debouncer's tables; pace.sql_message says which
        """,
        metadata: error.merging(["attempt": "\(refusals)", "retry_in": "\(wait)"]) { $1 })
    case .waitingForTables:
      logger.info(
        "PostgresDebouncer: its tables do not exist yet; waiting for migrate() to make them",
        metadata: ["grace": "\(DebouncerWorkerState.defaultStartupGrace)"])
    }
  }

  /// Claims up to `limit` due keys and runs their executions concurrently; returns how many ran
  /// to completion with their lease still held.
  ///
  /// Failed executions are retried or dead-lettered as in ``run()``.
  ///
  /// - Parameter limit: The most keys claimed. Positive.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `limit` is not positive;
  ///   ``PacePostgresError/unavailable(reason:)`` if the claim could not reach the database; the
  ///   database's error if it refused the claim.
  @discardableResult
  public func runDue(limit: Int = 16) async throws -> Int {
    guard limit > 0 else {
      throw PacePostgresError.invalid("PostgresDebouncer.runDue.limit", limit, "must be positive")
    }
    let claims = try await claim(limit: limit)
    return await withTaskGroup(of: Bool.self) { group in
      for claim in claims { group.addTask { await execute(claim) { true } } }
      return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
  }

  /// A claimed key: its payloads up to `through`, reserved by `token` until the lease ends.
  struct Claim: Sendable {
    let key: String
    let through: Int64?
    let token: UUID
    /// Which attempt this is, from 1, counted since the key's last acknowledgement.
    let attempt: Int
    /// How late the claim was after the key was due, by the database's clock.
    let lateness: Duration
    /// When the claim came back, by this instance's clock.
    let claimedAt: ContinuousClock.Instant
  }

  /// Claims up to `limit` due keys for this instance (internal: tests claim and execute directly).
  func claim(limit: Int) async throws -> [Claim] {
    var binds = PostgresBindings()
    binds.append(leaseMicroseconds)
    binds.append(limit)
    let (client, logger, statement) = (
      client, logger, PreparedSQL("claim", table: keys, names: statementNames, sql: claimSQL)
    )
    return try await boundedTransaction(client: client, logger: logger) { [binds] connection in
      var claims: [Claim] = []
      let rows = try await statement.query(binds, on: connection, logger: logger)
      let clock = ContinuousClock()
      for try await row in rows {
        let (key, through, token, attempt, lateness) = try row.decode((String, Int64?, UUID, Int, Int64).self)
        claims.append(
          Claim(
            key: key, through: through, token: token, attempt: attempt,
            lateness: .microseconds(max(lateness, 0)), claimedAt: clock.now))
      }
      return claims
    }
  }

  /// `$1` the lease in microseconds, `$2` how many keys. Skips keys another instance holds or a
  /// call is updating; records the last payload id the execution covers and counts the attempt.
  var claimSQL: String {
    """
    UPDATE \(keys) AS j
    SET lease_until = clock_timestamp() + $1 * interval '1 microsecond',
        lease_token = gen_random_uuid(),
        attempts = j.attempts + 1,
        claimed_through = (SELECT max(c.id) FROM \(calls) AS c WHERE c.key = j.key)
    WHERE j.key IN (
      SELECT d.key FROM \(keys) AS d
      WHERE d.due_at <= clock_timestamp() AND (d.lease_until IS NULL OR d.lease_until <= clock_timestamp())
      ORDER BY d.due_at
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    )
    RETURNING j.key, j.claimed_through, j.lease_token, j.attempts,
      (extract(epoch FROM clock_timestamp() - j.due_at) * 1000000)::bigint
    """
  }
}

/// A `ServiceGroup` runs the worker (``PostgresDebouncer/run()``) and shuts it down gracefully.
extension PostgresDebouncer: Service {}

extension PostgresDebouncer {
  // The initialisers under their 0.3.0 name, `maxWait` for `maximumWait`: they only forward, so
  // they are written compactly. `maxWait` has no default, so a call naming neither label reaches
  // the current initialisers alone.

  /// The initialiser that runs a client of its own, under its 0.3.0 name: `maxWait` is `maximumWait`.
  @available(
    *, deprecated,
    renamed:
      "init(configuration:table:quiet:maximumWait:lease:merge:maximumPayloadBytes:pollInterval:timeout:maximumAttempts:retryBackoff:maximumRetryBackoff:maximumConcurrentExecutions:shutdownGracePeriod:circuitBreaker:whenUnavailable:logger:metricsFactory:perform:)"
  )
  public init(
    configuration: PostgresClient.Configuration, table: String = "pace_debounce", quiet: Duration, maxWait: Duration?,
    lease: Duration = .seconds(30), merge: Merge<Payload> = .latest, maximumPayloadBytes: Int = 64 * 1024,
    pollInterval: Duration = .milliseconds(100), timeout: Duration = .seconds(5), maximumAttempts: Int = 5,
    retryBackoff: Duration? = nil, maximumRetryBackoff: Duration = .seconds(300), maximumConcurrentExecutions: Int = 16,
    shutdownGracePeriod: Duration = .seconds(10), circuitBreaker: CircuitBreaker = CircuitBreaker(),
    whenUnavailable: FailureMode = .throwError,
    logger: Logger = Logger(label: "pace.postgres.debouncer", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    perform: @escaping @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  ) throws(PacePostgresError) {
    try self.init(
      configuration: configuration, table: table, quiet: quiet, maximumWait: maxWait, lease: lease, merge: merge,
      maximumPayloadBytes: maximumPayloadBytes, pollInterval: pollInterval, timeout: timeout,
      maximumAttempts: maximumAttempts, retryBackoff: retryBackoff, maximumRetryBackoff: maximumRetryBackoff,
      maximumConcurrentExecutions: maximumConcurrentExecutions, shutdownGracePeriod: shutdownGracePeriod,
      circuitBreaker: circuitBreaker, whenUnavailable: whenUnavailable, logger: logger,
      metricsFactory: metricsFactory, perform: perform)
  }

  /// The initialiser on the app's client, under its 0.3.0 name: `maxWait` is `maximumWait`.
  @available(
    *, deprecated,
    renamed:
      "init(client:table:quiet:maximumWait:lease:merge:maximumPayloadBytes:pollInterval:timeout:maximumAttempts:retryBackoff:maximumRetryBackoff:maximumConcurrentExecutions:shutdownGracePeriod:circuitBreaker:whenUnavailable:logger:metricsFactory:perform:)"
  )
  public init(
    client: PostgresClient, table: String = "pace_debounce", quiet: Duration, maxWait: Duration?,
    lease: Duration = .seconds(30), merge: Merge<Payload> = .latest, maximumPayloadBytes: Int = 64 * 1024,
    pollInterval: Duration = .milliseconds(100), timeout: Duration = .seconds(5), maximumAttempts: Int = 5,
    retryBackoff: Duration? = nil, maximumRetryBackoff: Duration = .seconds(300), maximumConcurrentExecutions: Int = 16,
    shutdownGracePeriod: Duration = .seconds(10), circuitBreaker: CircuitBreaker = CircuitBreaker(),
    whenUnavailable: FailureMode = .throwError,
    logger: Logger = Logger(label: "pace.postgres.debouncer", factory: { _ in SwiftLogNoOpLogHandler() }),
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    perform: @escaping @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  ) throws(PacePostgresError) {
    try self.init(
      client: client, table: table, quiet: quiet, maximumWait: maxWait, lease: lease, merge: merge,
      maximumPayloadBytes: maximumPayloadBytes, pollInterval: pollInterval, timeout: timeout,
      maximumAttempts: maximumAttempts, retryBackoff: retryBackoff, maximumRetryBackoff: maximumRetryBackoff,
      maximumConcurrentExecutions: maximumConcurrentExecutions, shutdownGracePeriod: shutdownGracePeriod,
      circuitBreaker: circuitBreaker, whenUnavailable: whenUnavailable, logger: logger,
      metricsFactory: metricsFactory, perform: perform)
  }
}
#endif
