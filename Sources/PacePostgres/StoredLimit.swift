#if PostgreSQL
import Pace

/// A request's limit and cost as the batch function decides them, in whole microseconds of the
/// database's clock, whatever the limit's policy.
///
/// The cost a request is checked with is never below 1: a cost of 0 gets exactly the answer a cost
/// of 1 would get and takes nothing (``takes`` is false), so a request-chosen cost of 0 never
/// passes a key that would deny cost 1.
struct StoredLimit: Hashable, Sendable {
  /// The algorithm's table and arithmetic in the batch function (`policies` there).
  enum Algorithm: Int16, Sendable {
    /// GCRA in the store's table: ``StoredLimit/amount`` is the checked cost's increment of the
    /// TAT, ``StoredLimit/capacity`` the burst's tolerance.
    case tokenBucket = 0
    /// A log of grant times in the `_sliding` table: ``StoredLimit/amount`` is the checked cost,
    /// ``StoredLimit/capacity`` the window's permits, ``StoredLimit/window`` its length.
    case slidingWindow = 1
    /// A count per window in the `_fixed` table, the windows aligned to the Unix epoch: the same
    /// fields as ``slidingWindow``.
    case fixedWindow = 2
  }

  let algorithm: Algorithm
  /// The checked cost, as the policy counts it.
  let amount: Int64
  /// What the key may hold, as the policy counts it.
  let capacity: Int64
  /// A window's length in microseconds; 0 for the token bucket.
  let window: Int64
  /// A token bucket's emission interval for one permit in microseconds (rounded up, as
  /// ``amount`` is), which its row records, so that the permits it owes can be read under another
  /// limit; 0 for the windows, whose state is counted in permits.
  let unit: Int64

  /// The most permits a sliding window holds in the store: its row keeps a time per permit and is
  /// rewritten on every grant, so it stays under 80 kB (a fixed window or a token bucket costs the
  /// same whatever its permits).
  static let maximumSlidingPermits = 10_000

  /// The checked cost: the request's, or 1 for a cost of 0.
  static func checkedCost(_ cost: Int) -> Int { Swift.max(cost, 1) }

  /// The stored form of `cost` under `limit`, or the error that rejects it. `cost` is in
  /// `0...limit.burst` (`InputRules` checked it); a window rounds up to a whole microsecond, so
  /// that rounding never lets more through than the limit.
  init(cost: Int, limit: RateLimit) throws(PacePostgresError) {
    switch limit.algorithm {
    case .tokenBucket:
      let arithmetic = try GCRA(cost: Self.checkedCost(cost), limit: limit)
      let unit = cost <= 1 ? arithmetic.increment : try GCRA(cost: 1, limit: limit).increment
      self.init(
        algorithm: .tokenBucket, amount: arithmetic.increment, capacity: arithmetic.tolerance, window: 0, unit: unit)
    case .slidingWindow, .fixedWindow:
      guard cost >= 0, cost <= limit.burst else {
        throw .invalid(
          "PostgresRateLimitStore.tryAcquire.cost", cost, "must be in 0...\(limit.burst), the burst of \(limit)")
      }
      // `paceNanoseconds` saturates rather than trapping: a window of `Int64.max` ns is refused.
      let nanoseconds = limit.interval.paceNanoseconds
      let (whole, fraction) = nanoseconds.quotientAndRemainder(dividingBy: 1000)
      let window = whole + (fraction > 0 ? 1 : 0)
      guard nanoseconds > 0, nanoseconds != .max, window < Int64.max / 4 else {
        throw .invalid(
          "PostgresRateLimitStore.tryAcquire.limit", limit,
          "must have a positive window that fits in 64-bit microseconds")
      }
      guard limit.algorithm == .fixedWindow || limit.permits <= Self.maximumSlidingPermits else {
        throw .invalid(
          "PostgresRateLimitStore.tryAcquire.limit", limit,
          "must be a sliding window of at most \(Self.maximumSlidingPermits) permits in PostgreSQL "
            + "(a row keeps each grant's time); use a fixed window or a token bucket for larger quotas")
      }
      self.init(
        algorithm: limit.algorithm == .slidingWindow ? .slidingWindow : .fixedWindow,
        amount: Int64(Self.checkedCost(cost)), capacity: Int64(limit.permits), window: window)
    }
  }

  init(algorithm: Algorithm, amount: Int64, capacity: Int64, window: Int64, unit: Int64 = 0) {
    self.algorithm = algorithm
    self.amount = amount
    self.capacity = capacity
    self.window = window
    self.unit = unit
  }
}

/// How the store turns the batch function's answer into a decision, per policy.
enum StoredDecision {
  /// The decision for a request of `cost` under `limit`, from the database's answer (not late).
  static func decision(cost: Int, limit: RateLimit, answer: DecisionAnswer) throws(PacePostgresError)
    -> RateLimitDecision
  {
    switch limit.algorithm {
    case .tokenBucket:
      // A cost of 0 is granted at the current TAT (nothing added): its `remaining` is every
      // permit available now; denied, it waits as cost 1 does.
      let arithmetic = try GCRA(cost: StoredLimit.checkedCost(cost), limit: limit)
      return arithmetic.decision(grantedTAT: answer.granted, currentTAT: answer.current, now: answer.now)
    case .slidingWindow, .fixedWindow:
      if answer.granted != nil, let used = answer.used {
        // `used` is at most the limit's permits and `cost` at most its burst: no overflow.
        return .allowed(remaining: Swift.max(0, limit.permits - Int(used) - cost))
      }
      // The wait the function computed, at least a microsecond; a window's length if it has none.
      // The largest `Int64` is the end of the timeline: no wait lets the request through.
      if answer.wait == .max { return .limited(retryAfter: RateLimitDecision.never) }
      let stored = try StoredLimit(cost: cost, limit: limit)
      return .limited(retryAfter: .microseconds(Swift.max(1, answer.wait ?? stored.window)))
    }
  }
}
#endif
