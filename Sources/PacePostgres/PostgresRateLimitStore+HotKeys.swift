#if PostgreSQL
import Logging
import Metrics
import Pace

extension PostgresRateLimitStore {
  /// This store, deciding its busy keys from leases: a share of a key's permits charged in the
  /// database in one decision, then granted from memory (see ``HotKeyLeasing`` for when a key is
  /// busy, how much a lease takes and the bound it keeps). The copy shares everything else with
  /// this store (its lanes, its breaker, its denials): run either one.
  ///
  /// Keys that are not busy, and sliding windows, are decided exactly as without leasing. A key's
  /// leases are dropped when a call brings it another limit (a plan change), so no permit of the
  /// old limit is granted under the new one; a blocked key is refused before the store is asked,
  /// so a lease never outlives a block. While the database is away, the leases already taken still
  /// grant until they expire (they were charged), and the failure mode decides the rest.
  ///
  /// - Parameters:
  ///   - leasing: When a key is busy and what a lease takes.
  ///   - metricsFactory: Where to count leases (`pace_rate_limit_leases_total`,
  ///     `pace_rate_limit_leased_permits_total`, `pace_rate_limit_lease_expired_permits_total`,
  ///     `pace_rate_limit_leases_denied_total`); the process's `MetricsSystem` by default.
  public func leasingHotKeys(
    _ leasing: HotKeyLeasing, metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) -> PostgresRateLimitStore {
    var store = self
    store.hotKeys = HotKeyLeases(leasing, table: table, factory: metricsFactory)
    return store
  }

  /// The store's leasing settings, or nil if it decides every key in the database.
  public var hotKeyLeasing: HotKeyLeasing? { hotKeys?.settings }

  /// A grant from a busy key's lease; with `refill`, the next lease is asked for first, the one
  /// round trip per lease that a caller waits for.
  func grantFromLease(
    _ key: String, cost: Int, limit: RateLimit, remaining: Int, refill: Int?, trace: DecisionTrace,
    databaseNow: Int64? = nil
  ) async -> RateLimitDecision {
    health.count(cost == 0 ? .question : .allowed)
    trace.answered(by: "lease")
    if let refill { await refillLease(key, permits: refill, limit: limit, databaseNow: databaseNow) }
    return .allowed(remaining: remaining)
  }

  /// Asks the database for the next lease of a busy key, for no caller's decision: a fault is
  /// logged and counted by the breaker, and the key is decided in the database until it leases again.
  private func refillLease(_ key: String, permits: Int, limit: RateLimit, databaseNow: Int64?) async {
    guard let hotKeys else { return }
    let started = ContinuousClock.now
    let now = { databaseNow ?? hotKeys.micros(.now, roundingUp: true) }
    let admission = health.admit(now: started, logger: logger)
    guard admission != .reject, let stored = try? StoredLimit(cost: permits, limit: limit) else {
      hotKeys.notLeased(key, limit: limit, now: now())
      return
    }
    do {
      let answer = try await batcher.decide(
        DecisionRequest(
          key: key, limit: stored, takes: true, deadline: started.advanced(by: timeout), databaseNow: databaseNow))
      health.ended(
        admission, unavailable: answer.late, now: .now, error: answer.late ? DatabaseTimeout() : nil, logger: logger)
      if !answer.late, let granted = answer.granted {
        _ = hotKeys.leased(
          key, limit: limit, permits: Int64(permits), amount: stored.amount, granted: granted, decided: answer.now,
          sent: databaseNow ?? hotKeys.micros(answer.sent, roundingUp: false), requested: 0, now: now())
      } else {
        hotKeys.notLeased(key, limit: limit, now: now(), wasDenied: !answer.late)
      }
    } catch {
      let kind = error is CancellationError ? nil : failureKind(of: error)
      let unavailable = kind.map { admission == .probe ? $0 != .fatal : $0 == .unavailable }
      health.ended(admission, unavailable: unavailable, now: .now, error: error, logger: logger)
      if kind != nil, kind != .unavailable, kind != .retryOnce {
        logger.error(
          "hot-key lease failed", metadata: errorMetadata(error).merging(["pace.key": "\(key)"]) { $1 })
      }
      hotKeys.notLeased(key, limit: limit, now: now())
    }
  }
}
#endif
