#if PostgreSQL
import Foundation
import Pace
import PostgresNIO

/// A debouncer shared by every instance of a server: calls for a key from any instance within the
/// quiet period lead to one execution of the handler, with all their payloads merged.
///
/// lodash's `debounce(wait, { maxWait })` moved into two tables: a call records its payload and
/// pushes the key's due time to `quiet` after it, but never past `maxWait` after the period's first
/// call. Workers (``run()`` on each instance) claim due keys with `FOR UPDATE SKIP LOCKED` and a
/// lease, merge the payloads in call order with ``merge``, run the handler, then delete exactly the
/// payloads they merged.
///
/// ```swift
/// let reindex = try PostgresDebouncer<[Int]>(client: client, quiet: .seconds(2), maxWait: .seconds(30), merge: .append) {
///   key, documentIDs in try await search.reindex(documentIDs)
/// }
/// try await reindex.migrate()
/// Task { try await reindex.run() }        // on every instance
/// try await reindex.call("catalog", [42])  // from any instance
/// ```
///
/// Guarantees: every recorded payload reaches a handler that completes (none is lost while the
/// database keeps it), merged in call order, and is acknowledged exactly once. Execution is
/// at least once: an instance that dies or outlives its lease mid-execution leaves the key to
/// another instance after the lease, which runs the handler again with the same payloads (and any
/// newer ones). Make the handler idempotent, and the lease longer than the handler takes.
/// See <doc:SharedRateLimitsAndDebouncing>.
public struct PostgresDebouncer<Payload: Codable & Sendable>: Sendable {
  /// The client the debouncer queries; the caller runs it (`client.run()`).
  public let client: PostgresClient
  /// How long after a key's last call its execution is due.
  public let quiet: Duration
  /// The longest an execution waits after its period's first call; nil for no limit.
  public let maxWait: Duration?
  /// How long a claimed execution is reserved to its instance.
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

  let keys: TableName
  let calls: TableName
  let perform: @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  private let quietMicroseconds: Int64
  private let maxWaitMicroseconds: Int64?
  private let leaseMicroseconds: Int64

  /// A debouncer on `client` in the tables `table` (keys) and `table_calls` (payloads).
  ///
  /// - Parameters:
  ///   - client: A running PostgreSQL client.
  ///   - table: The keys' table, `name` or `schema.name`; the payloads go in `<table>_calls`.
  ///   - quiet: The quiet period. Not negative.
  ///   - maxWait: The longest wait after a period's first call; nil (the default) for none. Not
  ///     shorter than `quiet`.
  ///   - lease: How long an instance holds a claimed execution; 30 seconds by default. Positive.
  ///   - merge: How the payloads combine; `.latest` by default, `.append` loses nothing.
  ///   - maximumPayloadBytes: The largest payload accepted, in bytes of JSON; 64 KiB by default.
  ///   - pollInterval: How often ``run()`` looks for due keys; 100 ms by default. Positive.
  ///   - timeout: How long a statement may wait for the database; 5 seconds by default. Positive.
  ///   - perform: The handler: the key and its merged payload.
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier.
  public init(
    client: PostgresClient,
    table: String = "pace_debounce",
    quiet: Duration,
    maxWait: Duration? = nil,
    lease: Duration = .seconds(30),
    merge: Merge<Payload> = .latest,
    maximumPayloadBytes: Int = 64 * 1024,
    pollInterval: Duration = .milliseconds(100),
    timeout: Duration = .seconds(5),
    perform: @escaping @Sendable (_ key: String, _ payload: Payload) async throws -> Void
  ) throws(PacePostgresError) {
    precondition(quiet >= .zero, "PostgresDebouncer: quiet must not be negative (got \(quiet))")
    if let maxWait {
      precondition(maxWait >= quiet, "PostgresDebouncer: maxWait must not be shorter than quiet (got \(maxWait))")
    }
    precondition(lease > .zero, "PostgresDebouncer: lease must be positive (got \(lease))")
    precondition(pollInterval > .zero, "PostgresDebouncer: pollInterval must be positive (got \(pollInterval))")
    precondition(timeout > .zero, "PostgresDebouncer: timeout must be positive (got \(timeout))")
    precondition(maximumPayloadBytes > 0, "PostgresDebouncer: maximumPayloadBytes must be positive")
    guard let quietMicroseconds = quiet.wholeMicroseconds, let leaseMicroseconds = lease.wholeMicroseconds,
      maxWait.map({ $0.wholeMicroseconds != nil }) ?? true
    else { throw .rateOutOfRange("quiet, maxWait and lease must fit in 64-bit microseconds") }
    self.client = client
    self.keys = try TableName(table)
    self.calls = try TableName(table + "_calls")
    self.quiet = quiet
    self.maxWait = maxWait
    self.lease = lease
    self.merge = merge
    self.maximumPayloadBytes = maximumPayloadBytes
    self.pollInterval = pollInterval
    self.timeout = timeout
    self.perform = perform
    self.quietMicroseconds = quietMicroseconds
    self.maxWaitMicroseconds = maxWait?.wholeMicroseconds
    self.leaseMicroseconds = leaseMicroseconds
  }

  // MARK: Schema

  /// Creates the tables and indexes if they do not exist. Idempotent, and safe to call from every
  /// instance at once (an advisory lock serialises it).
  public func migrate() async throws {
    try await client.withTransaction(logger: Logger(label: "pace.postgres.migrate")) { connection in
      try await connection.query("SELECT pg_advisory_xact_lock(\(Int64(0x5041_4345)))", logger: Self.logger)
      for statement in migrationSQL {
        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Self.logger)
      }
    }
  }

  static var logger: Logger { Logger(label: "pace.postgres.debouncer") }

  /// One row per key with pending calls; one row per call with its payload.
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
    ]
  }

  // MARK: Calls

  /// Records a call for `key` with `payload`, from any instance: one statement.
  ///
  /// - Throws: `InvalidInput` for a key outside `KeyPolicy` (the key is stored in Unicode NFC) or
  ///   ``PacePostgresError/payloadTooLarge(bytes:limit:)`` before anything is recorded;
  ///   ``PacePostgresError/unavailable(reason:)`` if the database could not be reached. After that
  ///   error the call may or may not have been recorded (the connection can drop after the commit):
  ///   retrying never loses the payload but can deliver it twice.
  public func call(_ key: String, _ payload: Payload) async throws {
    let key = try storedKey(key)
    let json = try JSONEncoder().encode(payload)
    guard json.count <= maximumPayloadBytes else {
      throw PacePostgresError.payloadTooLarge(bytes: json.count, limit: maximumPayloadBytes)
    }
    var binds = PostgresBindings()
    binds.append(key)
    binds.append(quietMicroseconds)
    binds.append(maxWaitMicroseconds)
    binds.append(ByteBuffer(bytes: json))
    let (client, query) = (client, PostgresQuery(unsafeSQL: callSQL, binds: binds))
    try await unavailableAsError { try await client.query(query) }
  }

  /// `$1` key, `$2` quiet and `$3` maxWait in microseconds (NULL: none), `$4` the payload. The key's
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

  /// Runs the due executions until the task is cancelled: call it once on every instance.
  ///
  /// While the database is unavailable it keeps polling; handler errors release the key, which
  /// is retried a quiet period later with the same payloads.
  public func run() async throws {
    while !Task.isCancelled {
      let ran: Int
      do {
        ran = try await runDue()
      } catch let error as PacePostgresError {
        guard case .unavailable = error else { throw error }
        ran = 0
      }
      if ran == 0 { try await Task.sleep(for: pollInterval) }
    }
  }

  /// Claims up to `limit` due keys and runs their executions concurrently; returns how many ran
  /// to completion with their lease still held.
  @discardableResult
  public func runDue(limit: Int = 16) async throws -> Int {
    precondition(limit > 0, "PostgresDebouncer.runDue: limit must be positive (got \(limit))")
    var binds = PostgresBindings()
    binds.append(leaseMicroseconds)
    binds.append(limit)
    let (client, query) = (client, PostgresQuery(unsafeSQL: claimSQL, binds: binds))
    let claims = try await unavailableAsError {
      var claims: [Claim] = []
      let rows = try await client.query(query)
      for try await (key, through, token) in rows.decode((String, Int64?, UUID).self) {
        claims.append(Claim(key: key, through: through, token: token))
      }
      return claims
    }
    return try await withThrowingTaskGroup(of: Bool.self) { group in
      for claim in claims { group.addTask { try await execute(claim) } }
      return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
  }

  /// A claimed key: its payloads up to `through`, reserved by `token` until the lease ends.
  struct Claim: Sendable {
    let key: String
    let through: Int64?
    let token: UUID
  }

  /// `$1` the lease in microseconds, `$2` how many keys. Skips keys another instance holds or a
  /// call is updating; records the last payload id the execution covers.
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
    RETURNING j.key, j.claimed_through, j.lease_token
    """
  }

  /// Reads and merges the claim's payloads, runs the handler, then acknowledges them if the lease
  /// is still held. Returns whether it acknowledged.
  private func execute(_ claim: Claim) async throws -> Bool {
    var payloads: [Payload] = []
    if let through = claim.through {
      let (client, calls) = (client, calls.description)
      let stored = try await unavailableAsError {
        let rows = try await client.query(
          "SELECT payload FROM \(unescaped: calls) WHERE key = \(claim.key) AND id <= \(through) ORDER BY id"
        )
        return try await rows.decode(ByteBuffer.self).reduce(into: [ByteBuffer]()) { $0.append($1) }
      }
      let decoder = JSONDecoder()
      for payload in stored {
        do {
          payloads.append(try decoder.decode(Payload.self, from: Data(payload.readableBytesView)))
        } catch {
          throw PacePostgresError.undecodablePayload(key: claim.key, description: String(describing: error))
        }
      }
    }
    if let merged = await merge.fold(payloads) {
      do {
        try await perform(claim.key, merged)
      } catch {
        try await release(claim)
        return false
      }
    }
    return try await acknowledge(claim)
  }

  /// Gives a key whose handler failed back, due a quiet period from now, payloads untouched.
  private func release(_ claim: Claim) async throws {
    let (client, keys, quietMicroseconds) = (client, keys, quietMicroseconds)
    try await unavailableAsError {
      try await client.query(
        """
        UPDATE \(unescaped: keys.description)
        SET lease_until = NULL, lease_token = NULL, claimed_through = NULL,
            due_at = clock_timestamp() + \(quietMicroseconds) * interval '1 microsecond'
        WHERE key = \(claim.key) AND lease_token = \(claim.token)
        """
      )
    }
  }

  /// In one transaction, if the lease is still ours: deletes the merged payloads, then either
  /// deletes the key (no newer call) or makes it due for the calls that came during the execution.
  private func acknowledge(_ claim: Claim) async throws -> Bool {
    let (client, keys, calls, key, through) = (client, keys.description, calls.description, claim.key, claim.through ?? 0)
    let (quiet, maxWait) = (quietMicroseconds, maxWaitMicroseconds)
    return try await unavailableAsError {
      try await client.withTransaction(logger: Self.logger) { connection in
        let held = try await connection.query(
          "SELECT 1 FROM \(unescaped: keys) WHERE key = \(key) AND lease_token = \(claim.token) FOR UPDATE",
          logger: Self.logger
        )
        var isHeld = false
        for try await _ in held { isHeld = true }
        guard isHeld else { return false }
        try await connection.query(
          "DELETE FROM \(unescaped: calls) WHERE key = \(key) AND id <= \(through)", logger: Self.logger)
        try await connection.query(
          """
          UPDATE \(unescaped: keys) AS j
          SET lease_until = NULL, lease_token = NULL, claimed_through = NULL,
              first_call_at = rest.first,
              due_at = LEAST(rest.last + \(quiet) * interval '1 microsecond',
                             rest.first + \(maxWait) * interval '1 microsecond')
          FROM (SELECT min(called_at) AS first, max(called_at) AS last FROM \(unescaped: calls) WHERE key = \(key)) AS rest
          WHERE j.key = \(key) AND rest.first IS NOT NULL
          """,
          logger: Self.logger
        )
        try await connection.query(
          """
          DELETE FROM \(unescaped: keys) AS j
          WHERE j.key = \(key) AND NOT EXISTS (SELECT 1 FROM \(unescaped: calls) AS c WHERE c.key = \(key))
          """,
          logger: Self.logger
        )
        return true
      }
    }
  }

  /// Runs `operation` within ``timeout``, turning the errors that mean "the database is
  /// unreachable" into ``PacePostgresError/unavailable(reason:)``.
  @discardableResult
  private func unavailableAsError<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws -> Result {
    do {
      return try await withTimeout(timeout, operation)
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "no answer within \(timeout)")
    } catch where isUnavailability(error) {
      throw PacePostgresError.unavailable(reason: String(reflecting: error))
    }
  }
}
#endif
