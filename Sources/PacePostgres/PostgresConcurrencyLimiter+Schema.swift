#if PostgreSQL
import Logging
import PostgresNIO

extension PostgresConcurrencyLimiter {
  /// Creates the lease table, its index on `key`, the heartbeat table beside it
  /// (`…_instances`) and the function that admits a call, if they do not exist (the function is
  /// replaced). Idempotent, and safe to run from several instances at once; call it at startup or
  /// from your migrations.
  ///
  /// - Parameter timeout: How long to wait for the database; 30 seconds by default. Positive.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `timeout` is out of its
  ///   range; ``PacePostgresError/unavailable(reason:)`` if the database does not answer in time,
  ///   or what the database reports.
  public func migrate(timeout: Duration = .seconds(30)) async throws {
    let (client, logger) = (client, logger)
    let lock = migrationLockSQL(family: Self.migrationLockFamily, table: tableName, legacyLock: nil)
    let statements =
      lock + [
        Self.tableSQL(table: tableName),
        "CREATE INDEX IF NOT EXISTS \(tableName.suffixed("key")) ON \(tableName) (key)",
        Self.functionSQL(table: tableName),
        PostgresRateLimitStore.heartbeatMigrationSQL(table: tableName),
      ]
    try await migrating(client: client, timeout: timeout, logger: logger) {
      try await client.withTransaction(logger: logger) { connection in
        for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
      }
    }
  }

  /// The first key of the advisory lock that serialises migrations of one limiter's tables.
  static let migrationLockFamily: Int32 = 0x7063_6c01

  /// One row per permit held: its lease id, its key, the instance that holds it, and when it stops
  /// counting by the database's clock.
  static func tableSQL(table: TableName) -> String {
    """
    CREATE TABLE IF NOT EXISTS \(table) (
      lease text PRIMARY KEY,
      key text NOT NULL,
      instance text NOT NULL,
      expires_at timestamptz NOT NULL
    )
    """
  }

  /// The function that admits a call, in the table's schema.
  static func functionName(table: TableName) -> String {
    let parts = table.name.split(separator: ".")
    let function = "\"\(parts.last!)_acquire\""
    return parts.count == 2 ? "\"\(parts[0])\".\(function)" : function
  }

  /// The per-key lock's first half: the table's, so that two tables' keys do not wait for each
  /// other (FNV-1a of its name; its second half is `hashtext(key)`). A collision only makes two
  /// keys take turns.
  static func lockSpace(table: TableName) -> Int32 {
    var hash: UInt32 = 2_166_136_261
    for byte in table.name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
    return Int32(bitPattern: hash)
  }

  /// Admits a call: takes the key's lock for the transaction (a concurrent call of the key waits
  /// for it, and its statements then see this one's lease), deletes the key's expired leases,
  /// counts the others, and inserts the call's lease only if they are fewer than `p_bound`.
  /// Returns the count before the insert: the call was admitted if it is below `p_bound`.
  ///
  /// Each statement of a volatile PL/pgSQL function takes a new snapshot under read committed
  /// (PostgreSQL's default), so the count, taken after the lock, sees every lease committed
  /// before it; under serializable a race is a serialization failure, retried. Repeatable read
  /// would count from the snapshot taken before the lock: refused.
  static func functionSQL(table: TableName) -> String {
    """
    CREATE OR REPLACE FUNCTION \(functionName(table: table))(
      p_key text, p_lease text, p_instance text, p_bound bigint, p_lease_us bigint
    ) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $pace$
    DECLARE
      held bigint;
    BEGIN
      IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'a shared concurrency limit needs read committed or serializable isolation';
      END IF;
      PERFORM pg_advisory_xact_lock(\(lockSpace(table: table)), hashtext(p_key));
      DELETE FROM \(table) WHERE key = p_key AND expires_at <= clock_timestamp();
      SELECT count(*) INTO held FROM \(table) WHERE key = p_key;
      IF held < p_bound THEN
        INSERT INTO \(table) (lease, key, instance, expires_at)
        VALUES (p_lease, p_key, p_instance, clock_timestamp() + p_lease_us * interval '1 microsecond');
      END IF;
      RETURN held;
    END
    $pace$
    """
  }

  /// One call: `$1` the key, `$2` the lease id, `$3` the instance, `$4` the class's share of the
  /// limit, `$5` the lease in microseconds.
  static func acquireSQL(table: TableName) -> String {
    "SELECT \(functionName(table: table))($1, $2, $3, $4, $5)"
  }

  /// Renews the leases `$1` that have not expired, for `$2` microseconds from now; returns those
  /// it renewed. An expired lease stays expired: another instance may have its place already.
  static func renewSQL(table: TableName) -> String {
    """
    UPDATE \(table) SET expires_at = clock_timestamp() + $2 * interval '1 microsecond'
    WHERE lease = ANY($1) AND expires_at > clock_timestamp()
    RETURNING lease
    """
  }

  /// Deletes every expired lease: those of keys no call asked for since they expired.
  static func purgeSQL(table: TableName) -> String {
    "DELETE FROM \(table) WHERE expires_at <= clock_timestamp()"
  }
}
#endif
