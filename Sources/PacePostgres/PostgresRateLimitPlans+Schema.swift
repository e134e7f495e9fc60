#if PostgreSQL
import Logging
import Pace
import PostgresNIO

extension PostgresRateLimitPlans {
  /// Creates the plans and blocks tables if they do not exist, and the trigger on each that
  /// notifies every instance of a change in the transaction that makes it. Idempotent, and safe to
  /// run from several instances at once (a lock on the tables serialises it); call it
  /// at startup, after the client runs, or from your migrations.
  ///
  /// The tables, which an operator may also write by hand (each write notifies the instances):
  ///
  /// - `<table>_plans`: `key text PRIMARY KEY`, `algorithm text` (`token_bucket`,
  ///   `sliding_window` or `fixed_window`), `permits bigint`, `interval_nanoseconds bigint` (the
  ///   interval, or the window's length), `burst bigint` (a token bucket's; `NULL` for its permits,
  ///   and for a window), `updated_at timestamptz`;
  /// - `<table>_blocks`: `key text PRIMARY KEY`, `blocked_until timestamptz` (`'infinity'` blocks
  ///   for good), `updated_at timestamptz`.
  ///
  /// - Parameter timeout: How long to wait for the database; 30 seconds by default. Positive.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `timeout` is not positive;
  ///   ``PacePostgresError/unavailable(reason:)`` if the database does not answer in time, or what
  ///   it reports.
  public func migrate(timeout: Duration = .seconds(30)) async throws {
    let (client, logger) = (client, logger)
    let lock = migrationLockSQL(family: PostgresRateLimitStore.migrationLockFamily, table: plansTable, legacyLock: nil)
    let statements =
      lock + [
        """
        CREATE TABLE IF NOT EXISTS \(plansTable) (
          key text PRIMARY KEY,
          algorithm text NOT NULL,
          permits bigint NOT NULL,
          interval_nanoseconds bigint NOT NULL,
          burst bigint,
          updated_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS \(blocksTable) (
          key text PRIMARY KEY,
          blocked_until timestamptz NOT NULL,
          updated_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        notifyFunctionSQL,
        triggerSQL(on: plansTable, kind: "p"),
        triggerSQL(on: blocksTable, kind: "b"),
      ]
    try await migrating(client: client, timeout: timeout, logger: logger) {
      try await client.withTransaction(logger: logger) { connection in
        for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
      }
    }
  }

  /// The trigger function: one notification per key a statement changes, on ``channel``, as
  /// ``MirrorReload`` reads it (`p:key`, `b:key`; `p` or `b` alone to re-read a whole table, after a
  /// `TRUNCATE` or for a key too long for a notification's 8,000 bytes). PostgreSQL delivers it
  /// when the transaction commits, and not at all if it rolls back.
  var notifyFunctionSQL: String {
    let payload: (String) -> String = { key in
      "CASE WHEN octet_length(\(key)) <= 7000 THEN TG_ARGV[0] || ':' || \(key) ELSE TG_ARGV[0] END"
    }
    return """
      CREATE OR REPLACE FUNCTION \(notifyFunctionName)() RETURNS trigger LANGUAGE plpgsql AS $pace$
      BEGIN
        IF TG_OP = 'TRUNCATE' THEN
          PERFORM pg_notify('\(channel)', TG_ARGV[0]);
          RETURN NULL;
        END IF;
        IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('\(channel)', \(payload("OLD.key"))); END IF;
        IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('\(channel)', \(payload("NEW.key"))); END IF;
        RETURN NULL;
      END
      $pace$
      """
  }

  /// The triggers that call the function on `table`, made unless they exist (so that a migration
  /// of an up-to-date schema takes no lock on the table).
  func triggerSQL(on table: TableName, kind: String) -> String {
    """
    DO $pace$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '\(table)'::regclass AND tgname = 'pace_notify') THEN
        CREATE TRIGGER pace_notify AFTER INSERT OR UPDATE OR DELETE ON \(table)
          FOR EACH ROW EXECUTE FUNCTION \(notifyFunctionName)('\(kind)');
      END IF;
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '\(table)'::regclass AND tgname = 'pace_notify_truncate') THEN
        CREATE TRIGGER pace_notify_truncate AFTER TRUNCATE ON \(table)
          FOR EACH STATEMENT EXECUTE FUNCTION \(notifyFunctionName)('\(kind)');
      END IF;
    END
    $pace$
    """
  }

  /// The trigger function, in the tables' schema.
  var notifyFunctionName: String {
    let parts = plansTable.name.split(separator: ".")
    let function = "\"\(parts.last!)_notify\""
    return parts.count == 2 ? "\"\(parts[0])\".\(function)" : function
  }

  /// The plans' columns, in ``PlanRow``'s order.
  var planColumns: String { "key, algorithm, permits, interval_nanoseconds, burst" }

  /// A block's end in whole microseconds since the Unix epoch: `Int64.max` for `'infinity'`.
  var blockEndSQL: String {
    """
    CASE WHEN isfinite(blocked_until)
      THEN LEAST(extract(epoch FROM blocked_until) * 1000000, 9223372036854775807)::bigint
      ELSE 9223372036854775807 END
    """
  }
}

/// A plan as its row stores it: what an operator may write by hand, so checked when read.
struct PlanRow: Sendable, Hashable, CustomStringConvertible {
  let algorithm: String
  let permits: Int64
  let intervalNanoseconds: Int64
  /// A token bucket's burst; nil for its permits, and for a window.
  let burst: Int64?

  static let algorithmNames: [(String, RateLimit.Algorithm)] = [
    ("token_bucket", .tokenBucket), ("sliding_window", .slidingWindow), ("fixed_window", .fixedWindow),
  ]

  init(algorithm: String, permits: Int64, intervalNanoseconds: Int64, burst: Int64?) {
    self.algorithm = algorithm
    self.permits = permits
    self.intervalNanoseconds = intervalNanoseconds
    self.burst = burst
  }

  /// The row of `limit`, one that ``limit()`` reads back as `limit`.
  init(_ limit: RateLimit) {
    algorithm = Self.algorithmNames.first { $0.1 == limit.algorithm }!.0
    permits = Int64(limit.permits)
    intervalNanoseconds = limit.interval.paceNanoseconds
    burst = limit.algorithm == .tokenBucket ? Int64(limit.burst) : nil
  }

  /// The limit this row stores, if a limiter and the store can count it exactly.
  ///
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the column at fault.
  func limit() throws(PacePostgresError) -> RateLimit {
    guard let algorithm = Self.algorithmNames.first(where: { $0.0 == self.algorithm })?.1 else {
      throw .invalid(
        "PostgresRateLimitPlans.row.algorithm", self.algorithm,
        "must be one of \(Self.algorithmNames.map(\.0).joined(separator: ", "))")
    }
    guard let permits = Int(exactly: permits) else {
      throw .invalid("PostgresRateLimitPlans.row.permits", self.permits, "must fit Int")
    }
    var burst: Int?
    if let stored = self.burst {
      guard let fits = Int(exactly: stored) else {
        throw .invalid("PostgresRateLimitPlans.row.burst", stored, "must fit Int")
      }
      burst = fits
    }
    let limit: RateLimit
    do {
      limit = try RateLimit.validated(
        permits: permits, per: .nanoseconds(intervalNanoseconds), burst: burst, algorithm: algorithm)
    } catch {
      throw .invalid("PostgresRateLimitPlans.row", self, "must be a limit RateLimit.validated accepts: \(error)")
    }
    return try PostgresRateLimitPlans.checked(limit, setting: "PostgresRateLimitPlans.row")
  }

  var description: String {
    "\(algorithm), \(permits) per \(intervalNanoseconds) ns" + (burst.map { ", burst \($0)" } ?? "")
  }
}
#endif
