#if PostgreSQL

extension PostgresRateLimitStore {
  /// How the store's tables are stored: written to PostgreSQL's write-ahead log or not, and how
  /// full their pages are filled. ``PostgresRateLimitStore/migrate(timeout:)`` creates the tables
  /// with them, and switches tables made with other options to them (see
  /// <doc:SharedRateLimitsAndDebouncing>): give every instance that shares the tables the same
  /// options.
  ///
  /// ```swift
  /// let options = try PostgresRateLimitStore.TableOptions(durability: .unlogged, fillfactor: 70)
  /// let store = try PostgresRateLimitStore(client: client, tableOptions: options)
  /// try await store.migrate()
  /// ```
  public struct TableOptions: Sendable, Hashable, CustomStringConvertible {
    /// Whether the tables' changes are written to the write-ahead log (WAL).
    public enum Durability: Sendable, Hashable {
      /// Every change is written to the WAL: the tables survive a crash and reach the replicas,
      /// and each grant costs WAL. The default.
      case logged
      /// `UNLOGGED` tables: no WAL for their changes, so a grant costs the primary less (no WAL
      /// to write, archive or ship). After a crash of the database (or an immediate shutdown),
      /// PostgreSQL empties them: for a rate limit, every key starts again with a fresh burst.
      /// Replicas do not see them (a promoted replica starts with them empty: the same fresh
      /// burst after a failover), and neither do logical replication or a physical backup.
      case unlogged
    }

    /// Whether the tables are logged; ``Durability/logged`` by default.
    public let durability: Durability
    /// The percentage of each table page that inserts fill, 10 to 100; the rest is kept for the
    /// new versions of the page's rows, so that a grant stays on its row's page (a heap-only
    /// update, which writes no index entry and is cleaned up without a vacuum). 70 by default.
    public let fillfactor: Int

    /// Logged tables with a fill factor of 70: the store's tables as every version made them.
    public static let logged = TableOptions(checkedDurability: .logged, fillfactor: 70)
    /// Unlogged tables (see ``Durability/unlogged``) with a fill factor of 70.
    public static let unlogged = TableOptions(checkedDurability: .unlogged, fillfactor: 70)

    /// Options for the store's tables.
    ///
    /// - Parameters:
    ///   - durability: Whether the tables are logged; ``Durability/logged`` by default.
    ///   - fillfactor: The percentage of each page that inserts fill, 10 to 100; 70 by default.
    /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)``, naming `fillfactor`, if it is outside
    ///   10...100 (PostgreSQL's range).
    public init(durability: Durability = .logged, fillfactor: Int = 70) throws(PacePostgresError) {
      guard (10...100).contains(fillfactor) else {
        throw .invalid(
          "PostgresRateLimitStore.TableOptions.fillfactor", fillfactor,
          "must be in 10...100 (a percentage of each page)")
      }
      self.init(checkedDurability: durability, fillfactor: fillfactor)
    }

    private init(checkedDurability durability: Durability, fillfactor: Int) {
      self.durability = durability
      self.fillfactor = fillfactor
    }

    /// The options as a log line reads them: `logged, fillfactor 70`.
    public var description: String {
      "\(durability == .logged ? "logged" : "unlogged"), fillfactor \(fillfactor)"
    }

    /// `CREATE TABLE`'s words before `TABLE`.
    var createPrefix: String { durability == .logged ? "CREATE" : "CREATE UNLOGGED" }

    /// `pg_class.relpersistence` of a table with these options.
    var persistence: String { durability == .logged ? "p" : "u" }

    /// A statement that switches `table`, which exists, to these options where it differs: its
    /// durability (`ALTER TABLE … SET LOGGED` or `SET UNLOGGED`, which rewrites the table, its
    /// indexes and its TOAST table under an exclusive lock) and its fill factor (a change to the
    /// catalog only; pages written from then on follow it). A table that has them is not touched,
    /// so that a migration takes no lock on it.
    func alterSQL(table: TableName) -> String {
      let literal = "'" + table.description + "'"
      return """
        DO $pace$
        BEGIN
          IF (SELECT relpersistence FROM pg_class WHERE oid = \(literal)::regclass) <> '\(persistence)' THEN
            ALTER TABLE \(table) SET \(durability == .logged ? "LOGGED" : "UNLOGGED");
          END IF;
          IF NOT coalesce(
            (SELECT reloptions FROM pg_class WHERE oid = \(literal)::regclass) @> ARRAY['fillfactor=\(fillfactor)'], false)
          THEN
            ALTER TABLE \(table) SET (fillfactor = \(fillfactor));
          END IF;
        END
        $pace$
        """
    }
  }
}
#endif
