#if PostgreSQL
import PostgresNIO

/// A table name checked to be a plain identifier, so that it can be spliced into SQL text
/// (PostgreSQL cannot bind identifiers as parameters).
struct TableName: Sendable, Hashable, CustomStringConvertible {
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
    description = name
  }

  /// `name` with a suffix, for an index or a companion table.
  func suffixed(_ suffix: String) -> String {
    String("\(description)_\(suffix)".map { $0 == "." ? "_" : $0 })
  }
}

extension Duration {
  /// Whole microseconds, rounded toward zero; nil if they do not fit in an `Int64`.
  var wholeMicroseconds: Int64? {
    let (seconds, attoseconds) = components
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
    if overflow { return nil }
    let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000)
    return overflow2 ? nil : sum
  }
}

/// Whether `error` means that the database could not be reached (as opposed to a query it refused).
func isUnavailability(_ error: any Error) -> Bool {
  if error is DatabaseTimeout { return true }
  if let error = error as? PostgresTransactionError {
    return [error.beginError, error.closureError, error.commitError].contains { $0.map(isUnavailability) ?? false }
  }
  guard let error = error as? PSQLError else { return false }
  if error.code == .server {
    // Class 08 (connection exception) and 57 (operator intervention: a shutdown, a terminated
    // backend) are outages; every other server error is about the query.
    let state = error.serverInfo?[.sqlState] ?? ""
    return state.hasPrefix("08") || state.hasPrefix("57")
  }
  return error.code != .tooManyParameters && error.code != .messageDecodingFailure
}

/// The database did not answer within the configured time.
struct DatabaseTimeout: Error {}

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
