#if PostgreSQL
import Logging
import PostgresNIO

extension PostgresRateLimitStore {

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
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `timeout` is not positive
  ///   or is `Int64.max` nanoseconds or more; ``PacePostgresError/unavailable(reason:)`` if the database does not answer in time
  ///   (the store logs what it is waiting for meanwhile), or what the database reports.
  public func migrate(timeout: Duration = .seconds(30)) async throws {
    let (client, logger) = (client, logger)
    let statements =
      migrationLockSQL(family: Self.migrationLockFamily, table: tableName, legacyLock: Self.migrationLock) + [
        Self.migrationSQL(table: tableName, options: tableOptions),
        Self.slidingWindowSQL(table: try tableName.companion(.slidingWindow), options: tableOptions),
        Self.fixedWindowSQL(table: try tableName.companion(.fixedWindow), options: tableOptions),
        // The limit each row is written under, since 0.5.0 (see `limitColumnsSQL`).
        try Self.limitColumnsSQL(table: tableName),
        // A table made with other options (or by an earlier version, before it had any) gets these.
        tableOptions.alterSQL(table: tableName),
        tableOptions.alterSQL(table: try tableName.companion(.slidingWindow)),
        tableOptions.alterSQL(table: try tableName.companion(.fixedWindow)),
        try Self.functionSQL(table: tableName),
        try Self.singleFunctionSQL(table: tableName),
      ] + Self.previousFunctionsSQL(table: tableName) + [Self.heartbeatMigrationSQL(table: tableName)]
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
  /// upgraded store keeps its keys' state, with the limit each row is written under and the
  /// instant its last grant was decided at (see ``limitColumnsSQL(table:)``).
  static func migrationSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      tat bigint NOT NULL,
      unit bigint,
      tolerance bigint,
      changed bigint,
      decided bigint
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// The sliding window's table: one row per key, the grant time of every permit that may still
  /// count (one entry per permit, oldest first, at most the window's permits once trimmed), and
  /// when the last of them stops counting (`expires`, which the purge reads), and the limit the
  /// row was last written under.
  static func slidingWindowSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      expires bigint NOT NULL,
      grants bigint[] NOT NULL,
      permits bigint,
      span bigint,
      changed bigint
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// The fixed window's table: one row per key, the end of the window it counts (windows are
  /// aligned to the Unix epoch, so the end names the window), the permits granted in it, and the
  /// limit the row was last written under.
  static func fixedWindowSQL(table: TableName, options: TableOptions) -> String {
    """
    \(options.createPrefix) TABLE IF NOT EXISTS \(table) (
      key text PRIMARY KEY,
      window_end bigint NOT NULL,
      used bigint NOT NULL,
      permits bigint,
      span bigint,
      changed bigint
    ) WITH (fillfactor = \(options.fillfactor))
    """
  }

  /// Adds the columns that record the limit each row was last written under, to tables of an
  /// earlier version (NULL in their rows: nothing is carried over or assumed for them): a token
  /// bucket's emission interval per permit (`unit`), so that a change of rate keeps the permits
  /// owed, and its tolerance; a window's permits and length, so that a new limit that looks
  /// further back and allows more assumes the use the row no longer records. And a token bucket's
  /// `decided`, the instant its last grant was decided at, which a decision that began earlier
  /// (and waited behind that grant for the row) decides at instead of its own. Only a table that
  /// lacks one is altered: `ALTER TABLE` takes an exclusive lock even when it would do nothing.
  static func limitColumnsSQL(table: TableName) throws(PacePostgresError) -> String {
    let columns: [(TableName, String)] = [
      (table, "unit"), (table, "tolerance"),
      (try table.companion(.slidingWindow), "permits"), (try table.companion(.slidingWindow), "span"),
      (try table.companion(.fixedWindow), "permits"), (try table.companion(.fixedWindow), "span"),
      (table, "changed"), (try table.companion(.slidingWindow), "changed"),
      (try table.companion(.fixedWindow), "changed"), (table, "decided"),
    ]
    let additions = columns.map { table, column in
      """
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '\(table)'::regclass AND attname = '\(column)'
          AND NOT attisdropped) THEN
          ALTER TABLE \(table) ADD COLUMN \(column) bigint;
        END IF;
      """
    }
    return "DO $pace$ BEGIN\n" + additions.joined(separator: "\n") + "\nEND $pace$"
  }

  /// The advisory lock that serialised every migration of a store's tables up to 0.4, now taken
  /// shared (see `migrationLockSQL`).
  static let migrationLock: Int64 = 0x7061_6365_726c_0001

  /// The first key of the advisory lock that serialises migrations of one store's tables (and of
  /// one plans table's).
  static let migrationLockFamily: Int32 = 0x7072_6c01

  /// The function that decides a batch, in the table's schema; with `suffix`, another function
  /// beside it (tests only).
  static func functionName(table: TableName, suffix: String = "") -> String {
    let parts = table.name.split(separator: ".")
    let function = "\"\(parts.last!)_decide\(suffix)\""
    return parts.count == 2 ? "\"\(parts[0])\".\(function)" : function
  }
}
#endif
