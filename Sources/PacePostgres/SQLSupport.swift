#if PostgreSQL
import Pace
import PostgresNIO

/// A table name checked to be a plain identifier, so that it can be spliced into SQL text
/// (PostgreSQL cannot bind identifiers as parameters).
struct TableName: Sendable, Hashable, CustomStringConvertible {
  /// The name as given, `name` or `schema.name`.
  let name: String
  /// The name quoted for SQL, `"schema"."name"`: a reserved word (`user`, `order`) is a table name too.
  let description: String

  init(_ name: String) throws(PacePostgresError) {
    let parts = name.split(separator: ".", omittingEmptySubsequences: false)
    let isIdentifier: (Substring) -> Bool = { part in
      guard let first = part.unicodeScalars.first, part.utf8.count <= 63 else { return false }
      let letters = Unicode.Scalar("a")...Unicode.Scalar("z")
      return (letters.contains(first) || first == "_")
        && part.unicodeScalars.allSatisfy { letters.contains($0) || $0 == "_" || ("0"..."9").contains($0) }
    }
    guard (1...2).contains(parts.count), parts.allSatisfy(isIdentifier) else { throw .invalidTableName(name) }
    self.name = name
    description = parts.map { "\"\($0)\"" }.joined(separator: ".")
  }

  /// `name` with a suffix, for an index or a companion table; quoted, as ``description``.
  func suffixed(_ suffix: String) -> String {
    "\"" + String("\(name)_\(suffix)".map { $0 == "." ? "_" : $0 }) + "\""
  }

  /// The table where a rate-limit store keeps the keys of a window `algorithm`, beside this one (in
  /// its schema): `name_sliding` or `name_fixed`.
  ///
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if that name is longer than PostgreSQL's
  ///   63 bytes.
  func companion(_ algorithm: StoredLimit.Algorithm) throws(PacePostgresError) -> TableName {
    switch algorithm {
    case .tokenBucket: self
    case .slidingWindow: try TableName(name + "_sliding")
    case .fixedWindow: try TableName(name + "_fixed")
    }
  }
}

/// The locks a migration takes, for its transaction, before it touches the catalog: concurrent
/// migrations of the same tables would race on it ("tuple concurrently updated").
///
/// One lock per table, so that migrations of different tables (every tenant's, every test's) run
/// side by side instead of queueing for one; and, for the kinds of table that 0.4 had, the single
/// lock it took for every table, in shared mode, so that an instance of 0.4 migrating the same
/// tables during a rolling upgrade still waits, and is waited for.
///
/// - Parameters:
///   - family: The kind of table (the store's, the debouncer's, …), the first of the lock's two keys.
///   - table: The table the migration creates; its name, hashed, is the second key.
///   - legacyLock: The single lock of earlier versions for this kind of table; nil for a kind
///     that no earlier version had.
func migrationLockSQL(family: Int32, table: TableName, legacyLock: Int64?) -> [String] {
  var hash: UInt32 = 2_166_136_261
  for byte in table.name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
  let legacy = legacyLock.map { ["SELECT pg_advisory_xact_lock_shared(\($0))"] } ?? []
  return legacy + ["SELECT pg_advisory_xact_lock(\(family), \(Int32(bitPattern: hash)))"]
}

extension Duration {
  /// Whole microseconds, rounded toward zero; nil for a duration of `Int64.max` nanoseconds (about
  /// 292 years) or more, either way, where Pace's one conversion (`paceNanoseconds`) saturates.
  var wholeMicroseconds: Int64? {
    let nanoseconds = paceNanoseconds
    guard nanoseconds != .max, nanoseconds != .min else { return nil }
    return nanoseconds / 1000
  }
}

/// Checks a configured duration: positive (or, with `zeroAllowed`, not negative) and below
/// `Int64.max` nanoseconds, about 292 years, the longest a timer, a sleep or a SQL interval takes
/// without a trap; ``PacePostgresError/invalidSetting(name:value:rule:)`` names the setting
/// (`owner.name`), its value and the rule otherwise.
func checkSetting(
  _ name: String, _ duration: Duration, of owner: String, zeroAllowed: Bool = false
) throws(PacePostgresError) {
  let inRange = zeroAllowed ? duration >= .zero : duration > .zero
  guard inRange, duration.wholeMicroseconds != nil else {
    throw .invalid(
      "\(owner).\(name)", duration,
      "must be \(zeroAllowed ? "0 or more" : "positive") and below Int64.max nanoseconds (about 292 years)")
  }
}

/// What a failed statement means for the caller: the database's SQLSTATE (or the client's error)
/// read through the table in the SharedRateLimitsAndDebouncing article.
enum FailureKind: Sendable, Equatable {
  /// The database cannot decide now: the failure policy answers, and the circuit breaker counts it.
  case unavailable
  /// A serialization failure or a deadlock: the statement is retried once.
  case retryOnce
  /// A bug or a configuration error (a missing table, a syntax error, a wrong password): thrown.
  case fatal
}

/// The SQLSTATEs that mean "the database cannot decide now" rather than "the query is wrong".
let unavailableStates: Set<String> = [
  "25006",  // read_only_sql_transaction: a hot standby, or a primary demoted by a failover
  "53300",  // too_many_connections
  "55P03",  // lock_not_available: our lock_timeout
  "57014",  // query_canceled: a statement_timeout
  "57P01",  // admin_shutdown
  "57P02",  // crash_shutdown
  "57P03",  // cannot_connect_now: the server is starting or in recovery
]

/// Classifies `error` as the table in the article says.
func failureKind(of error: any Error) -> FailureKind {
  if error is DatabaseTimeout || error is StoreShutDown { return .unavailable }
  if let error = error as? PostgresTransactionError {
    let kinds = [error.beginError, error.closureError, error.commitError].compactMap { $0.map(failureKind(of:)) }
    if kinds.contains(.unavailable) { return .unavailable }
    return kinds.contains(.retryOnce) ? .retryOnce : .fatal
  }
  guard let error = error as? PSQLError else { return .fatal }
  switch error.code {
  case .server:
    let state = error.serverInfo?[.sqlState] ?? ""
    if state.hasPrefix("08") || unavailableStates.contains(state) { return .unavailable }
    if state == "40001" || state == "40P01" { return .retryOnce }
    return .fatal
  case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
    .queryCancelled:
    return .unavailable
  default:
    // Decoding, protocol, TLS and authentication errors: the configuration or the code is wrong.
    return .fatal
  }
}

/// Whether `error` means that the database could not decide now (as opposed to a query it refused).
func isUnavailability(_ error: any Error) -> Bool { failureKind(of: error) == .unavailable }

/// The SQLSTATE of a server error, for logs.
func sqlState(of error: any Error) -> String? {
  if let transaction = error as? PostgresTransactionError {
    return [transaction.closureError, transaction.beginError, transaction.commitError].lazy.compactMap {
      $0.flatMap(sqlState(of:))
    }.first
  }
  return (error as? PSQLError)?.serverInfo?[.sqlState]
}

/// The database did not answer within the configured time.
struct DatabaseTimeout: Error {}

/// The store was shut down: the failure policy answers, as when the database is unavailable.
struct StoreShutDown: Error {}

/// Runs `operation`, giving up with ``DatabaseTimeout`` after `timeout`.
///
/// A pool whose server is down keeps a query waiting for a connection; the timeout turns that wait
/// into an answer the caller's policy can act on. The caller never waits for `operation` to
/// notice its cancellation (a task group would: it awaits every child, and a query on a dropped
/// connection can ignore cancellation); on a timeout, or when the caller is cancelled, the
/// operation is cancelled and left to finish on its own.
func withTimeout<Result: Sendable>(
  _ timeout: Duration,
  _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
  // The first of the operation's answer, the timeout and the caller's cancellation wins; the
  // stream ignores whatever comes after it has finished.
  let (answers, answer) = AsyncThrowingStream<Result, any Error>.makeStream()
  let work = Task {
    do {
      answer.yield(try await operation())
      answer.finish()
    } catch {
      answer.finish(throwing: error)
    }
  }
  let timer = Task {
    try await Task.sleep(for: timeout)
    answer.finish(throwing: DatabaseTimeout())
  }
  defer {
    work.cancel()
    timer.cancel()
  }
  for try await result in answers { return result }
  throw CancellationError()  // the caller was cancelled: the stream ended without an answer
}
#endif

#if PostgreSQL
import Logging

/// A statement PostgreSQL parses and plans once per connection: PostgresNIO prepares it under
/// ``name`` on a connection's first use and binds it afterwards.
struct PreparedSQL: Sendable {
  /// The statement's name on every connection; it names its table, so one name is always one text.
  let name: String
  let sql: String
  /// Where its names come from, told when the database refuses it; nil for no renaming.
  let names: StatementNames?

  init(name: String, sql: String) {
    self.name = name
    self.sql = sql
    self.names = nil
  }

  /// `sql` under a name made of `kind`, `table` and the generation of `names`, the store's or the
  /// debouncer's own.
  init(_ kind: String, table: TableName, names: StatementNames, sql: String) {
    self.name = "pace.\(names.generation).\(kind).\(table.name)"
    self.sql = sql
    self.names = names
  }
}

/// When a store's (or a debouncer's) prepared statements take new names, apart from any lock or
/// clock: PostgresNIO remembers a refused preparation on its connection for good, so after the
/// schema is fixed (a `migrate()`) the statements need names no connection has seen refused.
///
/// Bounded: a refusal that a preparation can cause (SQLSTATE class 42, a missing or forbidden
/// object; 3F, a missing schema; 0A) renames at most once per ``minimumInterval`` and at most
/// ``maximumRenames`` times between two successful migrations, so a persistent misconfiguration
/// prepares a bounded number of names; a successful `migrate()` of the owner renames once more
/// and restores the allowance. Other refusals never rename.
struct StatementNamesMachine: Sendable, Equatable {
  static let maximumRenames = 8
  static let minimumInterval = Duration.seconds(1)

  /// The current generation of the names.
  private(set) var generation = 0
  /// Renames left before the next successful migration.
  private(set) var renamesLeft = Self.maximumRenames
  private var lastRename: ContinuousClock.Instant?

  /// What a refusal changed.
  enum Refusal: Sendable, Equatable {
    /// Nothing: not a refusal a preparation causes, or a rename within the last second.
    case kept
    /// The statements take new names.
    case renamed(generation: Int)
    /// The last rename allowed before a successful migration: log it, with what to do.
    case exhausted(generation: Int)
  }

  /// The database refused a statement with `sqlState` (nil: not a server error).
  mutating func refused(sqlState: String?, now: ContinuousClock.Instant) -> Refusal {
    guard let sqlState, ["42", "3F", "0A"].contains(where: sqlState.hasPrefix), renamesLeft > 0 else { return .kept }
    if let lastRename, lastRename.duration(to: now) < Self.minimumInterval { return .kept }
    lastRename = now
    generation += 1
    renamesLeft -= 1
    return renamesLeft == 0 ? .exhausted(generation: generation) : .renamed(generation: generation)
  }

  /// The owner's `migrate()` succeeded: new names, and the allowance back.
  mutating func migrated() {
    generation += 1
    renamesLeft = Self.maximumRenames
    lastRename = nil
  }
}

/// A store's or a debouncer's ``StatementNamesMachine`` behind a lock.
final class StatementNames: Sendable {
  private let machine = LockedState(StatementNamesMachine())
  private let logger: Logger

  init(logger: Logger) {
    self.logger = logger
  }

  var generation: Int { machine.withLock { $0.generation } }

  func refused(_ error: any Error) {
    guard failureKind(of: error) == .fatal else { return }
    let state = sqlState(of: error)
    let refusal = machine.withLock { $0.refused(sqlState: state, now: .now) }
    switch refusal {
    case .kept:
      break
    case .renamed(let generation):
      logger.debug(
        "prepared statements take new names after a refusal",
        metadata: ["pace.generation": "\(generation)", "pace.sqlstate": "\(state ?? "")"])
    case .exhausted(let generation):
      logger.error(
        """
        the database keeps refusing this component's statements (a missing table, function or \
        permission): call migrate() or fix the grant; the statements are renamed again after a \
        successful migrate(), or restart the instance
        """,
        metadata: ["pace.generation": "\(generation)", "pace.sqlstate": "\(state ?? "")"])
    }
  }

  func migrated() { machine.withLock { $0.migrated() } }
}

/// The statement being executed, for ``NamedStatement``: PostgresNIO reads a prepared statement's
/// name and text as static properties, synchronously within `execute`, and a table is known only
/// at run time.
enum CurrentStatement {
  @TaskLocal static var value = PreparedSQL(name: "", sql: "")
}

/// ``CurrentStatement``'s statement with its binds, as PostgresNIO's prepared statements are.
struct NamedStatement: PostgresPreparedStatement {
  typealias Row = PostgresRow
  static var name: String { CurrentStatement.value.name }
  static var sql: String { CurrentStatement.value.sql }
  let binds: PostgresBindings

  func makeBindings() -> PostgresBindings { binds }
  func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

extension PostgresBindings {
  /// Bindings of `values`, in order.
  init<each Value: PostgresDynamicTypeEncodable>(_ values: repeat each Value) {
    self.init()
    repeat append(each values)
  }
}

extension PreparedSQL {
  /// Runs the statement with `binds` on `connection`, prepared on its first use there.
  func execute(
    _ binds: PostgresBindings = PostgresBindings(), on connection: PostgresConnection, logger: Logger
  ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
    try await whileCurrent { try await connection.execute(NamedStatement(binds: binds), logger: logger) }
  }

  /// Runs the statement with `binds` on `connection` unprepared (parsed, planned and run in one
  /// round trip, in the current transaction): for a statement whose parse can wait for a table's
  /// lock. PostgresNIO remembers a prepared statement's failed preparation on its connection for
  /// good, so a preparation that timed out behind a lock would fail every later use there.
  func query(
    _ binds: PostgresBindings = PostgresBindings(), on connection: PostgresConnection, logger: Logger
  ) async throws -> PostgresRowSequence {
    try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
  }

  /// Runs the statement with `binds` on a connection of `client`'s pool.
  func execute(
    _ binds: PostgresBindings = PostgresBindings(), on client: PostgresClient, logger: Logger
  ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
    try await whileCurrent { try await client.execute(NamedStatement(binds: binds), logger: logger) }
  }

  /// Runs `execute` with this statement as the one `NamedStatement` reads; a refusal is noted.
  private func whileCurrent<Rows>(_ execute: () async throws -> Rows) async throws -> Rows {
    do {
      return try await CurrentStatement.$value.withValue(self) { try await execute() }
    } catch {
      refused(error)
      throw error
    }
  }

  /// A statement the database refused may have been refused at its preparation: its names are
  /// told (the refusal is logged by whoever handles `error`).
  private func refused(_ error: any Error) {
    names?.refused(error)
  }
}
#endif

#if PostgreSQL
import Logging

extension Logger {
  /// This logger with `table` in its metadata (`pace.table`): a store's and a debouncer's lines
  /// say which tables they speak of, as an app may run several.
  func naming(table: String) -> Logger {
    var logger = self
    logger[metadataKey: "pace.table"] = "\(table)"
    return logger
  }
}

/// An error as a log line's metadata: `error`, and what PostgresNIO's description of a `PSQLError`
/// hides ("Generic description to prevent accidental leakage of sensitive data"): the server's
/// SQLSTATE, message, detail and hint (`pace.sqlstate`, `pace.sql_message`, `pace.sql_detail`,
/// `pace.sql_hint`), or the client's error code and its underlying error. A transaction's error
/// is read through to the error inside it. A `PSQLError`'s `error` is its code alone: its debug
/// description repeats the statement's text and binds, kilobytes of the library's own SQL.
func errorMetadata(_ error: any Error) -> Logger.Metadata {
  var metadata: Logger.Metadata = ["error": "\(String(reflecting: error))"]
  var inner: any Error = error
  if let transaction = error as? PostgresTransactionError,
    let cause = transaction.closureError ?? transaction.beginError ?? transaction.commitError
  {
    inner = cause
    metadata["pace.transaction_error"] = "\(String(reflecting: cause))"
  }
  guard let error = inner as? PSQLError else { return metadata }
  let short = "PSQLError(code: \(error.code))"
  if metadata["pace.transaction_error"] != nil {
    metadata["pace.transaction_error"] = "\(short)"
    metadata["error"] = "PostgresTransactionError(\(short))"
  } else {
    metadata["error"] = "\(short)"
  }
  metadata["pace.psql_code"] = "\(error.code)"
  if let info = error.serverInfo {
    let fields: [(String, PSQLError.ServerInfo.Field)] = [
      ("pace.sqlstate", .sqlState), ("pace.sql_message", .message), ("pace.sql_detail", .detail),
      ("pace.sql_hint", .hint),
    ]
    for (key, field) in fields {
      if let value = info[field] { metadata[key] = "\(value)" }
    }
  }
  if let underlying = error.underlying { metadata["pace.underlying_error"] = "\(String(reflecting: underlying))" }
  return metadata
}
#endif
