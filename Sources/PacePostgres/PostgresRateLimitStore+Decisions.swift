#if PostgreSQL
import Logging
import Pace
import Tracing

extension PostgresRateLimitStore {
  /// Takes `cost` permits for `key` under `limit` if they are available now, atomically across
  /// every instance that shares the table, with `limit`'s policy: a token bucket, a sliding window
  /// or a fixed window aligned to the Unix epoch, each decided by the database's clock exactly as
  /// in memory (see <doc:SharedRateLimitsAndDebouncing>). Each call's `limit` applies to that
  /// call: keys with different limits (plans) share one store.
  ///
  /// The key and the cost follow `InputRules`: the key is stored in Unicode NFC; a cost of 0 takes
  /// nothing and gets the answer a cost of 1 would get (the permits available now, or cost 1's
  /// `retryAfter`), so it never passes a key that would deny cost 1.
  ///
  /// With a tracer bootstrapped (swift-distributed-tracing), each call is a span
  /// `pace.rate_limit.store.decide`, a child of the caller's: who answered (`database`,
  /// `denial_cache` or `failure_mode`), the round trips and `db.operation.batch.size`, the
  /// algorithm, permits, cost and decision, and the key only as the first 16 hexadecimal digits of
  /// its SHA-256. Without one, no span is started.
  ///
  /// - Throws: `InvalidInput` for a key or cost outside `InputRules` (a negative cost, or one above
  ///   the limit's burst, a window's permits);
  ///   ``PacePostgresError/invalidSetting(name:value:rule:)`` for a limit whose arithmetic overflows 64-bit
  ///   microseconds, or a sliding window of more than 10,000 permits (its row keeps every grant);
  ///   ``PacePostgresError/unavailable(reason:)`` under `.throwError` when the database cannot
  ///   decide; what the database reports about the statement itself.
  public func tryAcquire(_ requestedKey: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    // A child of the caller's span (a middleware's decision); without a tracer, no span at all.
    guard DecisionTrace.isOn else { return try await tryAcquire(requestedKey, cost: cost, limit: limit, trace: .off) }
    let span = InstrumentationSystem.tracer.startSpan(TraceNames.decision, ofKind: .internal)
    defer { span.end() }
    let trace = DecisionTrace(span)
    do {
      let decision = try await tryAcquire(requestedKey, cost: cost, limit: limit, trace: trace)
      trace.decided(decision, cost: cost)
      return decision
    } catch {
      trace.failed(error)
      throw error
    }
  }

  private func tryAcquire(
    _ requestedKey: String, cost: Int, limit: RateLimit, trace: DecisionTrace
  ) async throws -> RateLimitDecision {
    // Synchronous up to the denial cache, in a small async frame: a cached denial costs no task
    // allocation beyond this call's, and one clock read.
    let started = ContinuousClock.now
    let (key, stored) = try checked(requestedKey, cost: cost, limit: limit)
    trace.asked(key: key, cost: cost, limit: limit)
    // A busy key's lease answers at memory speed, before anything else.
    var lease: Int? = nil
    if let hotKeys {
      switch hotKeys.decide(key, cost: cost, limit: limit, now: hotKeys.micros(started, roundingUp: true)) {
      case .grant(let remaining, let refill):
        return await grantFromLease(key, cost: cost, limit: limit, remaining: remaining, refill: refill, trace: trace)
      case .ask(let permits):
        lease = permits
      }
    }
    // A denial this instance was given is answered again until it expires, at memory speed.
    let entry = DenialCacheState.Entry(key: key, limit: stored)
    if let retryAfter = denials.withLock({ $0.retryAfter(entry, now: started) }) {
      if lease != nil { hotKeys?.notLeased(key, limit: limit, now: hotKeys?.micros(.now, roundingUp: true) ?? 0) }
      health.count(cost == 0 ? .question : .denied)
      trace.answered(by: "denial_cache")
      return .limited(retryAfter: retryAfter)
    }
    return try await decide(
      entry, cost: cost, limit: limit, started: started, databaseNow: nil, trace: trace, lease: lease)
  }

  /// ``tryAcquire(_:cost:limit:)`` decided at `databaseNow` microseconds since the Unix epoch
  /// instead of the database's clock, for tests that drive the store on a chosen timeline: the
  /// denial cache, which counts real time, is neither read nor written. Production never calls it.
  func tryAcquire(
    _ requestedKey: String, cost: Int, limit: RateLimit, databaseNow: Int64
  ) async throws -> RateLimitDecision {
    let started = ContinuousClock.now
    let (key, stored) = try checked(requestedKey, cost: cost, limit: limit)
    let entry = DenialCacheState.Entry(key: key, limit: stored)
    var lease: Int? = nil
    if let hotKeys {
      switch hotKeys.decide(key, cost: cost, limit: limit, now: databaseNow) {
      case .grant(let remaining, let refill):
        return await grantFromLease(
          key, cost: cost, limit: limit, remaining: remaining, refill: refill, trace: .off, databaseNow: databaseNow)
      case .ask(let permits):
        lease = permits
      }
    }
    return try await decide(
      entry, cost: cost, limit: limit, started: started, databaseNow: databaseNow, trace: .off, lease: lease)
  }

  /// The stored key and the stored form of a request, or the error that rejects it (counted).
  private func checked(_ requestedKey: String, cost: Int, limit: RateLimit) throws -> (String, StoredLimit) {
    do {
      try InputRules.check(cost: cost, limit: limit)
      return (try storedKey(requestedKey), try StoredLimit(cost: cost, limit: limit))
    } catch {
      health.count(error is InvalidInput ? .invalid : .error)
      throw error
    }
  }

  /// The decision of a request the denial cache does not answer: the database's, or the policy's.
  /// With `lease`, the database is asked for a lease of that many permits for a busy key, the
  /// request's among them; a lease it denies, and only then, is followed by the request alone.
  private func decide(
    _ entry: DenialCacheState.Entry, cost: Int, limit: RateLimit, started: ContinuousClock.Instant,
    databaseNow: Int64?, trace: DecisionTrace, lease: Int? = nil
  ) async throws -> RateLimitDecision {
    let key = entry.key
    // Every path that neither installs the lease nor hears it denied tells the leases so.
    var leaseAsked = lease != nil
    defer {
      if leaseAsked, let hotKeys {
        hotKeys.notLeased(key, limit: limit, now: databaseNow ?? hotKeys.micros(.now, roundingUp: true))
      }
    }
    let admission = health.admit(now: started, logger: logger)
    switch admission {
    case .ask:
      break
    case .reject:
      trace.answered(by: "failure_mode")
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "the circuit breaker is open", started: started)
    case .probe:
      // No request waits for a probe: it asks in the background, taking nothing (cost 0), while
      // this request follows the failure policy like the others of the outage.
      let query = DecisionRequest(
        key: key, limit: entry.limit, takes: false, deadline: started.advanced(by: timeout), databaseNow: nil)
      probes.spawn { await probe(query) }
      trace.answered(by: "failure_mode")
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "the circuit breaker is probing", started: started)
    }
    let alone = DecisionRequest(
      key: key, limit: entry.limit, takes: cost > 0, deadline: started.advanced(by: timeout), databaseNow: databaseNow)
    var request = alone
    let leaseLimit = try lease.map { permits throws(PacePostgresError) in try StoredLimit(cost: permits, limit: limit) }
    if let leaseLimit {
      request = DecisionRequest(
        key: key, limit: leaseLimit, takes: true, deadline: alone.deadline, databaseNow: databaseNow)
    }
    var answer: DecisionAnswer
    do {
      answer = try await batcher.decide(request)
      if let leaseLimit, let lease, !answer.late {
        if let granted = answer.granted, let hotKeys {
          leaseAsked = false
          let now = ContinuousClock.now
          health.ended(admission, unavailable: false, now: now, error: nil, logger: logger)
          trace.answered(by: "database", roundTrips: answer.roundTrips, batchSize: answer.batchSize)
          let remaining = hotKeys.leased(
            key, limit: limit, permits: Int64(lease), amount: leaseLimit.amount, granted: granted,
            decided: answer.now, sent: databaseNow ?? hotKeys.micros(answer.sent, roundingUp: false),
            requested: Int64(cost), now: databaseNow ?? hotKeys.micros(now, roundingUp: true))
          let decision = RateLimitDecision.allowed(remaining: remaining ?? 0)
          health.count(.decided(decision, cost: cost), duration: started.duration(to: now))
          return decision
        }
        // Denied: the key is near its limit; the request is decided alone, and no lease is asked
        // for this key for a while.
        leaseAsked = false
        hotKeys?.notLeased(
          key, limit: limit, now: databaseNow ?? hotKeys?.micros(.now, roundingUp: true) ?? 0, wasDenied: true)
        answer = try await batcher.decide(alone)
      }
    } catch {
      let kind = error is CancellationError ? nil : failureKind(of: error)
      health.ended(admission, unavailable: kind.map { $0 == .unavailable }, now: .now, error: error, logger: logger)
      guard kind == .unavailable || kind == .retryOnce else {
        if kind != nil {
          health.count(.error)
          logger.error(
            "rate-limit decision failed", metadata: errorMetadata(error).merging(["pace.key": "\(key)"]) { $1 })
        }
        throw error
      }
      let reason = error is DatabaseTimeout ? "no answer within \(timeout)" : String(reflecting: error)
      trace.answered(by: "failure_mode")
      return try await decideUnavailable(key, cost: cost, limit: limit, reason: reason, started: started)
    }
    let now = ContinuousClock.now
    trace.answered(
      by: answer.late ? "failure_mode" : "database", roundTrips: answer.roundTrips, batchSize: answer.batchSize)
    if answer.late {
      // The lock came after the caller's budget: nothing was taken; the database was too slow.
      health.ended(admission, unavailable: true, now: now, error: DatabaseTimeout(), logger: logger)
      return try await decideUnavailable(
        key, cost: cost, limit: limit, reason: "no answer within \(timeout)", started: started)
    }
    health.ended(admission, unavailable: false, now: now, error: nil, logger: logger)
    let decision = try StoredDecision.decision(cost: cost, limit: limit, answer: answer)
    if case .limited(let retryAfter) = decision, answer.current != nil || answer.wait != nil, databaseNow == nil,
      retryAfter != RateLimitDecision.never
    {
      // Anchored at the instant the batch was sent, before the database decided: the local
      // deadline is never later than the database's (see DenialCacheState for why it is exact).
      denials.withLock { $0.denied(entry, retryAfter: retryAfter, sent: answer.sent, now: now) }
    }
    health.count(.decided(decision, cost: cost), duration: started.duration(to: now))
    return decision
  }

  /// Asks the database whether it decides again, with a decision that takes nothing, and tells
  /// the breaker.
  private func probe(_ query: DecisionRequest) async {
    do {
      let answer = try await batcher.decide(query)
      health.ended(
        .probe, unavailable: answer.late, now: .now, error: answer.late ? DatabaseTimeout() : nil, logger: logger)
    } catch {
      let kind = error is CancellationError ? nil : failureKind(of: error)
      health.ended(.probe, unavailable: kind.map { $0 != .fatal }, now: .now, error: error, logger: logger)
    }
  }

  private func decideUnavailable(
    _ key: String,
    cost: Int,
    limit: RateLimit,
    reason: String,
    started: ContinuousClock.Instant
  ) async throws -> RateLimitDecision {
    let decision: RateLimitDecision
    switch whenUnavailable {
    case .throwError:
      health.count(.error, duration: started.duration(to: .now))
      throw PacePostgresError.unavailable(reason: reason)
    case .allow:
      decision = .allowed(remaining: 0)
    case .deny(let retryAfter):
      decision = .limited(retryAfter: retryAfter)
    case .fallback(let limiter):
      decision = try await limiter.decide(key, cost: cost)
    case .shareLimit:
      decision = try decideShare(key, cost: cost, limit: limit, now: started)
    }
    health.count(.fallback, duration: started.duration(to: .now))
    health.fellBack(reason: reason, policy: whenUnavailable.description(fleet: fleet), logger: logger)
    return decision
  }
}
#endif
