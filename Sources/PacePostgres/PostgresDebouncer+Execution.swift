#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace
import PostgresNIO
import Tracing

extension PostgresDebouncer {
  /// Reads and merges the claim's payloads, runs the handler while renewing the lease, then
  /// acknowledges them, retries them or dead-letters them, if the lease is still held. Returns
  /// whether it acknowledged. Never throws: every outcome is logged and counted.
  ///
  /// `mayStart` is asked once the payloads are read: a worker shutting down says no, and the claim
  /// is given back untouched.
  ///
  /// Traced as a span (``TraceNames/execution``, the key hashed) whose children are the claim's
  /// payloads read, the handler's run (the handler's own spans are its children) and the
  /// settlement; without a tracer they record nothing.
  func execute(_ claim: Claim, mayStart: @Sendable () -> Bool) async -> Bool {
    await withSpan(TraceNames.execution, ofKind: .consumer) { span in
      if span.isRecording {
        span.attributes[TraceNames.debounceKeyHash] = tracedKey(claim.key)
        span.attributes[TraceNames.attempt] = claim.attempt
      }
      return await executeTraced(claim, mayStart: mayStart)
    }
  }

  /// A settlement's span: `outcome` is `acknowledged`, `lease_lost`, `given_back` or `failed`.
  private func settling<Result: Sendable>(
    _ outcome: String, _ body: () async throws -> Result
  ) async throws -> Result {
    try await withSpan(TraceNames.settle) { span in
      if span.isRecording { span.attributes[TraceNames.outcome] = outcome }
      return try await body()
    }
  }

  private func executeTraced(_ claim: Claim, mayStart: @Sendable () -> Bool) async -> Bool {
    let logger = {
      var logger = self.logger
      logger[metadataKey: "pace.key"] = "\(claim.key)"
      logger[metadataKey: "attempt"] = "\(claim.attempt)"
      return logger
    }()
    do {
      let stored = try await withSpan(TraceNames.claim) { span in
        let stored = try await storedPayloads(of: claim)
        if span.isRecording {
          span.attributes[TraceNames.payloads] = stored.count
          span.attributes[TraceNames.lateness] = claim.lateness.tracedSeconds
        }
        return stored
      }
      guard mayStart() else {
        try await settling("given_back") { try await uncancelled { try await self.release(claim) } }
        logger.debug("PostgresDebouncer: gave back a claim whose handler had not started (shutting down)")
        return false
      }
      let lateness = claim.lateness + (ContinuousClock().now - claim.claimedAt)
      metrics.lag.recordNanoseconds(lateness.paceNanoseconds)

      var payloads: [Payload] = []
      let decoder = JSONDecoder()
      for (id, payload) in stored {
        do {
          payloads.append(try decoder.decode(Payload.self, from: Data(payload.readableBytesView)))
        } catch {
          let failure = PacePostgresError.undecodablePayload(
            key: claim.key, description: "call \(id): \(String(describing: error))")
          try await settling("failed") {
            try await uncancelled { try await self.failed(claim, failure, undecodable: true, logger: logger) }
          }
          return false
        }
      }
      if let merged = merge.fold(payloads) {
        do {
          try await withSpan(TraceNames.run) { _ in
            try await withLeaseRenewed(claim, logger: logger) { try await self.perform(claim.key, merged) }
          }
          metrics.succeeded.increment()
        } catch {
          if Task.isCancelled {
            // The shutdown's grace period is over: the next instance should not wait for the lease.
            try await settling("given_back") { try await uncancelled { try await self.release(claim) } }
            logger.warning(
              "PostgresDebouncer: a shutdown cancelled the handler; its claim is given back",
              metadata: errorMetadata(error))
            return false
          }
          metrics.failed.increment()
          try await settling("failed") {
            try await uncancelled { try await self.failed(claim, error, undecodable: false, logger: logger) }
          }
          return false
        }
      }
      let acknowledged = try await withSpan(TraceNames.settle) { span in
        let acknowledged = try await uncancelled { try await self.settle(claim, deadLetter: nil) }
        if span.isRecording { span.attributes[TraceNames.outcome] = acknowledged ? "acknowledged" : "lease_lost" }
        return acknowledged
      }
      if !acknowledged {
        logger.warning(
          "PostgresDebouncer: the lease was lost before the acknowledgement; another instance runs the payloads again")
      }
      return acknowledged
    } catch {
      if isUnavailableError(error) {
        logger.warning(
          "PostgresDebouncer: the database is unavailable mid-execution; the key runs again after its lease",
          metadata: errorMetadata(error))
      } else {
        logger.error(
          "PostgresDebouncer: the database refused a statement of an execution; the key runs again after its lease",
          metadata: errorMetadata(error))
      }
      return false
    }
  }

  /// The claim's stored payloads, in call order: `(call id, JSON)`.
  private func storedPayloads(of claim: Claim) async throws -> [(Int64, ByteBuffer)] {
    guard let through = claim.through else { return [] }
    let statement = PreparedSQL(
      "payloads", table: keys, names: statementNames,
      sql: "SELECT id, payload FROM \(calls) WHERE key = $1 AND id <= $2 ORDER BY id")
    var binds = PostgresBindings()
    binds.append(claim.key)
    binds.append(through)
    let (client, logger) = (client, logger)
    return try await unavailableAsError { [binds] in
      var stored: [(Int64, ByteBuffer)] = []
      for try await row in try await statement.execute(binds, on: client, logger: logger) {
        stored.append(try row.decode((Int64, ByteBuffer).self))
      }
      return stored
    }
  }

  /// Counts a failed attempt, logs it, then retries the key after a backoff or dead-letters its
  /// payloads.
  private func failed(_ claim: Claim, _ error: any Error, undecodable: Bool, logger: Logger) async throws {
    metrics.failures.increment()
    let decision = retryPolicy.afterFailure(attempt: claim.attempt)
    var metadata = errorMetadata(error)
    if case .retry(let wait) = decision { metadata["retry_in"] = "\(wait)" }
    let what = undecodable ? "a stored payload does not decode as the debouncer's Payload" : "the handler failed"
    switch decision {
    case .retry: logger.warning("PostgresDebouncer: \(what); retrying", metadata: metadata)
    case .deadLetter: logger.warning("PostgresDebouncer: \(what); no attempt left", metadata: metadata)
    }
    switch decision {
    case .retry(let wait):
      try await retry(claim, after: wait)
    case .deadLetter:
      let lastError = String(describing: error)
      if try await settle(claim, deadLetter: lastError) {
        metrics.deadLetters.increment()
        logger.error(
          "PostgresDebouncer: moved the execution's payloads to the dead-letter table",
          metadata: ["error": "\(lastError)", "pace.dead_letters": "\(deadLetters)"])
      } else {
        logger.warning("PostgresDebouncer: the lease was lost before the dead letter; another instance retries")
      }
    }
  }

  /// Runs `body` while renewing the claim's lease every third of it; logs a lost lease once.
  private func withLeaseRenewed(
    _ claim: Claim, logger: Logger, _ body: @escaping @Sendable () async throws -> Void
  ) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await self.renewLease(claim, logger: logger) }
      defer { group.cancelAll() }
      try await body()
    }
  }

  private func renewLease(_ claim: Claim, logger: Logger) async {
    let statement = PreparedSQL(
      "renew", table: keys, names: statementNames,
      sql: """
        UPDATE \(keys) SET lease_until = clock_timestamp() + $1 * interval '1 microsecond'
        WHERE key = $2 AND lease_token = $3 RETURNING 1
        """)
    var binds = PostgresBindings()
    binds.append(leaseMicroseconds)
    binds.append(claim.key)
    binds.append(claim.token)
    let client = client
    while true {
      do {
        try await Task.sleep(for: self.lease / 3)
      } catch {
        return
      }
      do {
        let held = try await unavailableAsError { [binds] in
          var held = false
          for try await _ in try await statement.execute(binds, on: client, logger: logger) { held = true }
          return held
        }
        guard held else {
          logger.warning(
            "PostgresDebouncer: the lease was lost while the handler runs; another instance may run the same payloads")
          return
        }
      } catch {
        if Task.isCancelled { return }
        logger.warning(
          "PostgresDebouncer: could not renew the lease; trying again", metadata: errorMetadata(error))
      }
    }
  }

  /// Gives a key whose execution failed back, due after `wait`, payloads and attempts untouched.
  private func retry(_ claim: Claim, after wait: Duration) async throws {
    let statement = PreparedSQL(
      "retry", table: keys, names: statementNames,
      sql: """
        UPDATE \(keys)
        SET lease_until = NULL, lease_token = NULL, claimed_through = NULL,
            due_at = clock_timestamp() + $1 * interval '1 microsecond'
        WHERE key = $2 AND lease_token = $3
        """)
    var binds = PostgresBindings()
    binds.append(wait.wholeMicroseconds ?? Int64.max)
    binds.append(claim.key)
    binds.append(claim.token)
    let (client, logger) = (client, logger)
    try await unavailableAsError { [binds] in
      for try await _ in try await statement.execute(binds, on: client, logger: logger) {}
    }
  }

  /// Gives back a claim whose handler did not run to its end, due as it was, without counting the
  /// attempt: another instance may claim it at once.
  private func release(_ claim: Claim) async throws {
    let statement = PreparedSQL(
      "release", table: keys, names: statementNames,
      sql: """
        UPDATE \(keys)
        SET lease_until = NULL, lease_token = NULL, claimed_through = NULL, attempts = GREATEST(attempts - 1, 0)
        WHERE key = $1 AND lease_token = $2
        """)
    var binds = PostgresBindings()
    binds.append(claim.key)
    binds.append(claim.token)
    let (client, logger) = (client, logger)
    try await unavailableAsError { [binds] in
      for try await _ in try await statement.execute(binds, on: client, logger: logger) {}
    }
  }

  /// In one transaction, if the lease is still ours: copies the merged payloads to the dead-letter
  /// table when `deadLetter` gives the last error, deletes them, then either deletes the key (no
  /// newer call) or makes it due for the calls that came during the execution, with no attempt
  /// counted. Returns whether the lease was held.
  func settle(_ claim: Claim, deadLetter lastError: String?) async throws -> Bool {
    let (client, logger, statements) = (client, logger, settleStatements)
    let (key, token, attempt) = (claim.key, claim.token, claim.attempt)
    let (through, quiet, maximumWait) = (claim.through ?? 0, quietMicroseconds, maximumWaitMicroseconds)
    return try await boundedTransaction(client: client, logger: logger) { connection in
      var binds = PostgresBindings()
      binds.append(key)
      binds.append(token)
      var isHeld = false
      for try await _ in try await statements.held.query(binds, on: connection, logger: logger) { isHeld = true }
      guard isHeld else { return false }
      if let lastError {
        binds = PostgresBindings(token, attempt, lastError, key, through)
        for try await _ in try await statements.deadLetter.query(binds, on: connection, logger: logger) {}
      }
      binds = PostgresBindings(key, through)
      for try await _ in try await statements.acknowledge.query(binds, on: connection, logger: logger) {}
      binds = PostgresBindings()
      binds.append(key)
      binds.append(quiet)
      binds.append(maximumWait)
      for try await _ in try await statements.reschedule.query(binds, on: connection, logger: logger) {}
      binds = PostgresBindings(key)
      for try await _ in try await statements.forget.query(binds, on: connection, logger: logger) {}
      return true
    }
  }

  /// ``settle(_:deadLetter:)``'s statements, in the order it runs them.
  private var settleStatements:
    (held: PreparedSQL, deadLetter: PreparedSQL, acknowledge: PreparedSQL, reschedule: PreparedSQL, forget: PreparedSQL)
  {
    (
      held: PreparedSQL(
        "held", table: keys, names: statementNames,
        sql: "SELECT 1 FROM \(keys) WHERE key = $1 AND lease_token = $2 FOR UPDATE"),
      deadLetter: PreparedSQL(
        "dead_letter", table: keys, names: statementNames,
        sql: """
          INSERT INTO \(deadLetters) (execution, key, call_id, payload, called_at, attempts, last_error)
          SELECT $1, key, id, payload, called_at, $2, $3
          FROM \(calls) WHERE key = $4 AND id <= $5 ORDER BY id
          """),
      acknowledge: PreparedSQL(
        "acknowledge", table: keys, names: statementNames, sql: "DELETE FROM \(calls) WHERE key = $1 AND id <= $2"),
      reschedule: PreparedSQL(
        "reschedule", table: keys, names: statementNames,
        sql: """
          UPDATE \(keys) AS j
          SET lease_until = NULL, lease_token = NULL, claimed_through = NULL, attempts = 0,
              first_call_at = rest.first,
              due_at = LEAST(rest.last + $2 * interval '1 microsecond',
                             rest.first + $3 * interval '1 microsecond')
          FROM (SELECT min(called_at) AS first, max(called_at) AS last FROM \(calls) WHERE key = $1) AS rest
          WHERE j.key = $1 AND rest.first IS NOT NULL
          """),
      forget: PreparedSQL(
        "forget", table: keys, names: statementNames,
        sql: """
          DELETE FROM \(keys) AS j
          WHERE j.key = $1 AND NOT EXISTS (SELECT 1 FROM \(calls) AS c WHERE c.key = $1)
          """)
    )
  }

  /// Runs `body` in a transaction on a connection of `client` whose every wait the database bounds
  /// by what is left of ``timeout``, and which commits only while the caller still waits: a claim
  /// or a settle that the caller gave up on (``PacePostgresError/unavailable(reason:)``) changes
  /// nothing, whatever PostgreSQL waited on (a row or a table lock, a slow trigger).
  ///
  /// Its first statement sets the transaction's `lock_timeout` and `statement_timeout` to the time
  /// left, less a margin for the way back; before the commit, a transaction past that time is
  /// rolled back.
  func boundedTransaction<Result: Sendable>(
    client: PostgresClient, logger: Logger,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    let clock = ContinuousClock()
    let (margin, timeout) = (min(timeout / 5, .milliseconds(100)), timeout)
    let deadline = clock.now.advanced(by: timeout - margin)
    return try await unavailableAsError {
      try await client.withTransaction(logger: logger) { connection in
        guard let left = clock.now.duration(to: deadline).wholeMicroseconds, left >= 1000 else {
          throw DatabaseTimeout()
        }
        let setting = "\(left / 1000)ms"
        try await connection.query(
          "SELECT set_config('lock_timeout', \(setting), true), set_config('statement_timeout', \(setting), true)",
          logger: logger)
        let result = try await body(connection)
        // Too late to commit: the caller was answered without it.
        guard clock.now < deadline else { throw DatabaseTimeout() }
        return result
      }
    }
  }

  /// Runs `operation` within ``timeout``, turning the errors that mean "the database is
  /// unreachable" into ``PacePostgresError/unavailable(reason:)``.
  @discardableResult
  func unavailableAsError<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws -> Result {
    do {
      return try await withTimeout(timeout, operation)
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "no answer within \(timeout)")
    } catch let error as PostgresTransactionError where error.closureError is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "no answer within \(timeout); the transaction was rolled back")
    } catch  where isUnavailability(error) {
      throw PacePostgresError.unavailable(reason: String(reflecting: error))
    }
  }
}

/// Whether `error` is ``PacePostgresError/unavailable(reason:)``.
func isUnavailableError(_ error: any Error) -> Bool {
  guard case .unavailable = error as? PacePostgresError else { return false }
  return true
}

/// Runs `operation` in a task of its own, so that it completes even when the caller is cancelled:
/// the bookkeeping after a handler (acknowledging, retrying, giving a claim back) must not be
/// lost to the cancellation that ended the handler.
func uncancelled<Result: Sendable>(
  _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
  try await Task { try await operation() }.value
}

#endif
