#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

extension PostgresConcurrencyLimiter {
  /// Runs the limiter until the task is cancelled or the service group shuts down gracefully,
  /// then returns once the deletes of released leases have ended.
  ///
  /// It owns everything long-lived of the limiter:
  ///
  /// - the renewal of this instance's leases every third of ``lease``, which also deletes every
  ///   expired lease once a minute;
  /// - under ``FailureMode/shareLimit(among:)`` with a learned count, the fleet's heartbeats.
  ///
  /// Once it has returned, nothing renews the leases: permits still held stop counting at most
  /// ``lease`` later. A limiter runs once: a second call returns at once.
  public func run() async throws {
    guard
      runState.withLock({ state in
        defer { state = max(state, 1) }
        return state == 0
      })
    else {
      logger.warning("PostgresConcurrencyLimiter.run() was called again: a limiter runs once; this call returns")
      return
    }
    logger.info(
      "PostgreSQL shared concurrency limit running",
      metadata: ["pace.maximum_in_flight": "\(maximumInFlight)", "pace.lease": "\(lease)"])
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await self.renewUntilShutdown() }
      if case .shareLimit(let size) = whenUnavailable, let interval = size.heartbeatInterval {
        group.addTask { await self.heartbeatUntilShutdown(every: interval) }
      }
    }
    runState.withLock { $0 = 2 }
    await deletes.waitUntilAllEnded()
    logger.info("PostgreSQL shared concurrency limit stopped")
  }

  /// Waits `interval`, or returns false when the limiter is shutting down.
  private func waited(_ interval: Duration) async -> Bool {
    guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return false }
    do {
      try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
      return true
    } catch {
      return false
    }
  }

  private func renewUntilShutdown() async {
    let clock = ContinuousClock()
    var lastPurge = clock.now
    while await waited(lease / 3) {
      await renew()
      if lastPurge.duration(to: clock.now) >= .seconds(60) {
        lastPurge = clock.now
        let (client, logger) = (client, logger)
        let purge = PostgresQuery(unsafeSQL: Self.purgeSQL(table: tableName))
        do {
          try await withTimeout(timeout) { _ = try await client.query(purge, logger: logger) }
        } catch {
          logger.debug("shared concurrency limit: deleting expired leases failed", metadata: errorMetadata(error))
        }
      }
    }
  }

  /// Renews every lease this instance holds in the database, at once; notes those that had
  /// expired. Call it yourself only if you do not run the limiter.
  func renew() async {
    let asked = book.withLock { $0.renewable }
    guard !asked.isEmpty else { return }
    let query = PostgresQuery(
      unsafeSQL: Self.renewSQL(table: tableName),
      binds: PostgresBindings(asked, lease.wholeMicroseconds ?? .max / 4))
    let (client, logger) = (client, logger)
    let kept: Set<String>
    do {
      kept = try await withTimeout(timeout) {
        var kept = Set<String>()
        for try await lease in try await client.query(query, logger: logger).decode(String.self) { kept.insert(lease) }
        return kept
      }
    } catch {
      metrics.renewalFailures.increment()
      if let failures = renewalReport.record() {
        var metadata = errorMetadata(error)
        metadata["pace.failures"] = "\(failures)"
        metadata["pace.leases"] = "\(asked.count)"
        logger.warning(
          "shared concurrency limit: renewing this instance's leases failed; they stop counting once they expire",
          metadata: metadata)
      }
      return
    }
    let lost = book.withLock { $0.renewed(asked: asked, kept: kept) }
    guard lost > 0 else { return }
    metrics.leasesLost.increment(by: Int64(lost))
    logger.warning(
      "shared concurrency limit: leases expired before they were renewed; their work goes on uncounted",
      metadata: [
        "pace.leases_lost": "\(lost)", "pace.lease": "\(lease)",
        "pace.action":
          "a renewal came later than the lease: give the limiter a longer lease, or look for what paused this instance or the database",
      ])
  }

  private func heartbeatUntilShutdown(every interval: Duration) async {
    repeat {
      do {
        try await heartbeat()
      } catch {
        if Task.isCancelled { break }
        let failure: FleetCountState.Failure = isUnavailability(error) ? .unavailable : .other
        _ = fleet.withLock { $0.failed(failure, now: .now) }
        logger.debug("shared concurrency limit: fleet heartbeat failed", metadata: errorMetadata(error))
      }
    } while await waited(interval)
    // Leaves the count at once rather than after the live span; best effort.
    let leave = PostgresQuery(
      unsafeSQL: "DELETE FROM \(PostgresRateLimitStore.heartbeatTableName(tableName)) WHERE instance = $1",
      binds: PostgresBindings(instance))
    let (client, timeout) = (client, timeout)
    _ = try? await Task.detached { try await withTimeout(timeout) { _ = try await client.query(leave) } }.value
  }

  /// Registers this instance in the heartbeat table and counts the instances that registered
  /// within the fleet's live span, this one included; ``run()`` calls it every heartbeat
  /// interval under ``FailureMode/shareLimit(among:)`` with a learned count.
  ///
  /// - Returns: How many instances are live.
  /// - Throws: ``PacePostgresError/unavailable(reason:)`` if the database does not answer within
  ///   ``timeout``; what the database reports (`undefined_table` before ``migrate(timeout:)``).
  @discardableResult
  public func heartbeat() async throws -> Int {
    var span = Duration.seconds(15)
    if case .shareLimit(let size) = whenUnavailable, let live = size.liveSpan { span = live }
    let count = try await PostgresRateLimitStore.sendHeartbeat(
      instance: instance, liveSpan: span, table: tableName, client: client, timeout: timeout, logger: logger)
    let (previous, current) = fleet.withLock { fleet in
      let previous = fleet.count
      fleet.counted(count, now: .now)
      return (previous, fleet.count)
    }
    metrics.instances.record(current)
    if previous != current {
      logger.info(
        "shared concurrency limit: fleet size learned; while PostgreSQL is away each instance admits its share",
        metadata: ["pace.instances": "\(current)", "pace.previous_instances": "\(previous)"])
    }
    return count
  }
}
#endif
