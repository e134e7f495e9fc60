#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace
import PostgresNIO

extension PostgresDebouncer {
  /// Reads and merges the claim's payloads, runs the handler while renewing the lease, then
  /// acknowledges them, retries them or dead-letters them, if the lease is still held. Returns
  /// whether it acknowledged. Never throws: every outcome is logged and counted.
  ///
  /// `mayStart` is asked once the payloads are read: a worker shutting down says no, and the claim
  /// is given back untouched.
  func execute(_ claim: Claim, mayStart: @Sendable () -> Bool) async -> Bool {
    let logger = {
      var logger = self.logger
      logger[metadataKey: "pace.key"] = "\(claim.key)"
      logger[metadataKey: "attempt"] = "\(claim.attempt)"
      return logger
    }()
    do {
      let stored = try await storedPayloads(of: claim)
      guard mayStart() else {
        try await uncancelled { try await self.release(claim) }
        logger.debug("PostgresDebouncer: gave back a claim whose handler had not started (shutting down)")
        return false
      }
      let lateness = claim.lateness + (ContinuousClock().now - claim.claimedAt)
      metrics.lag.recordNanoseconds(lateness.wholeNanoseconds)

      var payloads: [Payload] = []
      let decoder = JSONDecoder()
      for (id, payload) in stored {
        do {
          payloads.append(try decoder.decode(Payload.self, from: Data(payload.readableBytesView)))
        } catch {
          let failure = PacePostgresError.undecodablePayload(
            key: claim.key, description: "call \(id): \(String(describing: error))")
          try await uncancelled { try await self.failed(claim, failure, undecodable: true, logger: logger) }
          return false
        }
      }
      if let merged = merge.fold(payloads) {
        do {
          try await withLeaseRenewed(claim, logger: logger) { try await self.perform(claim.key, merged) }
          metrics.succeeded.increment()
        } catch {
          if Task.isCancelled {
            // The shutdown's grace period is over: the next instance should not wait for the lease.
            try await uncancelled { try await self.release(claim) }
            logger.warning(
              "PostgresDebouncer: a shutdown cancelled the handler; its claim is given back",
              metadata: ["error": "\(error)"])
            return false
          }
          metrics.failed.increment()
          try await uncancelled { try await self.failed(claim, error, undecodable: false, logger: logger) }
          return false
        }
      }
      let acknowledged = try await uncancelled { try await self.settle(claim, deadLetter: nil) }
      if !acknowledged {
        logger.warning(
          "PostgresDebouncer: the lease was lost before the acknowledgement; another instance runs the payloads again")
      }
      return acknowledged
    } catch {
      if isUnavailableError(error) {
        logger.warning(
          "PostgresDebouncer: the database is unavailable mid-execution; the key runs again after its lease",
          metadata: ["error": "\(error)"])
      } else {
        logger.error(
          "PostgresDebouncer: the database refused a statement of an execution; the key runs again after its lease",
          metadata: ["error": "\(error)"])
      }
      return false
    }
  }

  /// The claim's stored payloads, in call order: `(call id, JSON)`.
  private func storedPayloads(of claim: Claim) async throws -> [(Int64, ByteBuffer)] {
    guard let through = claim.through else { return [] }
    let (client, logger, calls) = (client, logger, calls.description)
    return try await unavailableAsError {
      let rows = try await client.query(
        "SELECT id, payload FROM \(unescaped: calls) WHERE key = \(claim.key) AND id <= \(through) ORDER BY id",
        logger: logger
      )
      var stored: [(Int64, ByteBuffer)] = []
      for try await row in rows.decode((Int64, ByteBuffer).self) { stored.append(row) }
      return stored
    }
  }

  /// Counts a failed attempt, logs it, then retries the key after a backoff or dead-letters its
  /// payloads.
  private func failed(_ claim: Claim, _ error: any Error, undecodable: Bool, logger: Logger) async throws {
    metrics.failures.increment()
    let decision = retryPolicy.afterFailure(attempt: claim.attempt)
    var metadata: Logger.Metadata = ["error": "\(error)"]
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
    let (client, logger, keys, lease) = (client, logger, keys.description, leaseMicroseconds)
    while true {
      do {
        try await Task.sleep(for: self.lease / 3)
      } catch {
        return
      }
      do {
        let held = try await unavailableAsError {
          let rows = try await client.query(
            """
            UPDATE \(unescaped: keys) SET lease_until = clock_timestamp() + \(lease) * interval '1 microsecond'
            WHERE key = \(claim.key) AND lease_token = \(claim.token) RETURNING 1
            """,
            logger: logger
          )
          var held = false
          for try await _ in rows { held = true }
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
          "PostgresDebouncer: could not renew the lease; trying again", metadata: ["error": "\(error)"])
      }
    }
  }

  /// Gives a key whose execution failed back, due after `wait`, payloads and attempts untouched.
  private func retry(_ claim: Claim, after wait: Duration) async throws {
    let (client, logger, keys) = (client, logger, keys.description)
    let wait = wait.wholeMicroseconds ?? Int64.max
    try await unavailableAsError {
      try await client.query(
        """
        UPDATE \(unescaped: keys)
        SET lease_until = NULL, lease_token = NULL, claimed_through = NULL,
            due_at = clock_timestamp() + \(wait) * interval '1 microsecond'
        WHERE key = \(claim.key) AND lease_token = \(claim.token)
        """,
        logger: logger
      )
    }
  }

  /// Gives back a claim whose handler did not run to its end, due as it was, without counting the
  /// attempt: another instance may claim it at once.
  private func release(_ claim: Claim) async throws {
    let (client, logger, keys) = (client, logger, keys.description)
    try await unavailableAsError {
      try await client.query(
        """
        UPDATE \(unescaped: keys)
        SET lease_until = NULL, lease_token = NULL, claimed_through = NULL, attempts = GREATEST(attempts - 1, 0)
        WHERE key = \(claim.key) AND lease_token = \(claim.token)
        """,
        logger: logger
      )
    }
  }

  /// In one transaction, if the lease is still ours: copies the merged payloads to the dead-letter
  /// table when `deadLetter` gives the last error, deletes them, then either deletes the key (no
  /// newer call) or makes it due for the calls that came during the execution, with no attempt
  /// counted. Returns whether the lease was held.
  func settle(_ claim: Claim, deadLetter lastError: String?) async throws -> Bool {
    let (client, logger) = (client, logger)
    let (keys, calls, deadLetters) = (keys.description, calls.description, deadLetters.description)
    let (key, through, quiet, maxWait) = (claim.key, claim.through ?? 0, quietMicroseconds, maxWaitMicroseconds)
    return try await unavailableAsError {
      try await client.withTransaction(logger: logger) { connection in
        let held = try await connection.query(
          "SELECT 1 FROM \(unescaped: keys) WHERE key = \(key) AND lease_token = \(claim.token) FOR UPDATE",
          logger: logger
        )
        var isHeld = false
        for try await _ in held { isHeld = true }
        guard isHeld else { return false }
        if let lastError {
          try await connection.query(
            """
            INSERT INTO \(unescaped: deadLetters) (execution, key, call_id, payload, called_at, attempts, last_error)
            SELECT \(claim.token), key, id, payload, called_at, \(claim.attempt), \(lastError)
            FROM \(unescaped: calls) WHERE key = \(key) AND id <= \(through) ORDER BY id
            """,
            logger: logger
          )
        }
        try await connection.query(
          "DELETE FROM \(unescaped: calls) WHERE key = \(key) AND id <= \(through)", logger: logger)
        try await connection.query(
          """
          UPDATE \(unescaped: keys) AS j
          SET lease_until = NULL, lease_token = NULL, claimed_through = NULL, attempts = 0,
              first_call_at = rest.first,
              due_at = LEAST(rest.last + \(quiet) * interval '1 microsecond',
                             rest.first + \(maxWait) * interval '1 microsecond')
          FROM (SELECT min(called_at) AS first, max(called_at) AS last FROM \(unescaped: calls) WHERE key = \(key)) AS rest
          WHERE j.key = \(key) AND rest.first IS NOT NULL
          """,
          logger: logger
        )
        try await connection.query(
          """
          DELETE FROM \(unescaped: keys) AS j
          WHERE j.key = \(key) AND NOT EXISTS (SELECT 1 FROM \(unescaped: calls) AS c WHERE c.key = \(key))
          """,
          logger: logger
        )
        return true
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
