#if Hummingbird
import Pace

/// A ``Pace/RateLimitStore`` in this process's memory: GCRA per key on the continuous clock.
///
/// The default store of ``RateLimitMiddleware``, and the natural local fallback of a shared store
/// whose database is down. Each instance of a server keeps its own counts, so N instances allow up
/// to N times the limit; share the limit with `PostgresRateLimitStore` (PacePostgres).
public actor InMemoryRateLimitStore<Key: Hashable & Sendable>: RateLimitStore {
  /// Each key's theoretical arrival time: when its bucket is full again.
  private var arrivals: [Key: ContinuousClock.Instant] = [:]
  private var decisionsSincePrune = 0
  private let clock = ContinuousClock()

  /// An empty store.
  public init() {}

  /// How many keys the store holds (keys whose bucket is full are pruned now and then).
  public var count: Int { arrivals.count }

  public func tryAcquire(_ key: Key, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    precondition(cost > 0 && cost <= limit.burst, "InMemoryRateLimitStore: cost must be in 1...\(limit.burst) (got \(cost))")
    let now = clock.now
    pruneNow(now)
    let emission = limit.interval / limit.permits
    let tolerance = emission * limit.burst
    let arrival = max(arrivals[key] ?? now, now) + emission * cost
    let ahead = arrival - now
    guard ahead <= tolerance else { return .limited(retryAfter: ahead - tolerance) }
    arrivals[key] = arrival
    return .allowed(remaining: Int(((tolerance - ahead) / emission).rounded(.down)))
  }

  /// Every 1024 decisions, drops the keys whose bucket is full again (they mean the same as absent).
  private func pruneNow(_ now: ContinuousClock.Instant) {
    decisionsSincePrune += 1
    guard decisionsSincePrune >= 1024 else { return }
    decisionsSincePrune = 0
    arrivals = arrivals.filter { $0.value > now }
  }
}
#endif
