import Pace

/// One key's rate limit, decided the slow and obvious way: what every engine (``RateLimiter``,
/// `KeyedRateLimiter`, a store) must answer, for every ``RateLimit/Algorithm``, written straight from
/// the definitions so that a reader can check it against them line by line.
///
/// - `tokenBucket`: a balance of *units*, a permit being `interval / gcd` units and each
///   nanosecond bringing `permits / gcd`, capped at `burst` permits: the arithmetic of Pace's
///   token bucket (GCRA), with no shortcut.
/// - `slidingWindow(N, per: T)`: every grant is kept as (time, cost). A grant at `g` counts during
///   `[g, g + T)`; a request of cost `c` at `t` is allowed iff the costs counting at `t`, plus `c`,
///   are at most `N`. When denied, it waits for the oldest grants to stop counting.
/// - `fixedWindow(N, per: T)`: the window of `t` is `floor(t / T)`; a request is allowed iff the
///   costs granted in its window, plus `c`, are at most `N`. When denied, it waits for the next
///   window's start.
///
/// The cost rule, the same for every policy: a cost of 0 takes nothing and gets cost 1's answer
/// (`.allowed(remaining:)` with the permits available now, or cost 1's `retryAfter`); a cost
/// above the burst is `.limited(retryAfter: RateLimitDecision.never)` from ``tryAcquire(cost:at:)``
/// and ``InvalidInput/costAboveBurst(cost:burst:)`` from ``decide(cost:at:)``, which also throws
/// ``InvalidInput/negativeCost(_:)``.
///
/// ```swift
/// var model = RateLimitReferenceModel(limit: .slidingWindow(permits: 3, per: .seconds(10)))
/// model.tryAcquire(cost: 3, at: .zero)                  // .allowed(remaining: 0)
/// model.tryAcquire(cost: 1, at: PaceInstant(.seconds(4)))  // .limited(retryAfter: .seconds(6))
/// ```
///
/// Instants and durations are whole nanoseconds (an interval beyond `Int64.max` nanoseconds
/// counts as `Int64.max`, as in every engine). The model is for the values tests use: where its
/// plain arithmetic would overflow, it traps, loudly, rather than guess.
public struct RateLimitReferenceModel: Sendable {
  /// The limit this model decides.
  public let limit: RateLimit

  /// The limit's interval (a window's length) in nanoseconds.
  private let interval: Int64
  /// Token bucket: units in the bucket, and when they were counted.
  private var balance: Int64
  private var updated: Int64
  private let unitsPerPermit: Int64
  private let unitsPerNanosecond: Int64
  private let capacity: Int64
  /// Sliding window: every grant, oldest first (never dropped: a test's timeline is short).
  private var grants: [(time: Int64, cost: Int)] = []
  /// Fixed window: the window last granted in, and the costs granted in it.
  private var window: Int64 = 0
  private var windowCount = 0
  /// When the last request granted by ``acquire(cost:at:)`` was granted.
  private var lastGrant: Int64 = .min

  /// A key that has taken nothing: a full bucket at `start`, or empty windows.
  public init(limit: RateLimit, start: PaceInstant = .zero) {
    self.limit = limit
    interval = limit.interval.paceNanoseconds
    var a = Int64(limit.permits)
    var b = interval
    while b != 0 { (a, b) = (b, a % b) }
    unitsPerPermit = interval / a
    unitsPerNanosecond = Int64(limit.permits) / a
    capacity = Int64(limit.burst) * unitsPerPermit
    balance = capacity
    updated = start.nanoseconds
  }

  /// The permits a request could take at `now` (that a cost-0 request reports).
  public mutating func availablePermits(at now: PaceInstant) -> Int {
    let t = now.nanoseconds
    switch limit.algorithm {
    case .tokenBucket:
      refill(t)
      return Int(max(0, balance / unitsPerPermit))
    case .slidingWindow:
      return limit.permits - used(at: t)
    case .fixedWindow:
      return limit.permits - count(inWindowOf: t)
    }
  }

  /// Decides a request of `cost` permits at `now` and takes them if it is allowed. `cost` must
  /// not be negative.
  @discardableResult
  public mutating func tryAcquire(cost: Int, at now: PaceInstant) -> RateLimitDecision {
    precondition(cost >= 0, "RateLimitReferenceModel: a negative cost goes through decide")
    if cost > limit.burst { return .limited(retryAfter: RateLimitDecision.never) }
    if cost == 0 {
      let available = availablePermits(at: now)
      if available >= 1 { return .allowed(remaining: available) }
      return .limited(retryAfter: wait(for: 1, at: now.nanoseconds))
    }
    let t = now.nanoseconds
    let wait = wait(for: cost, at: t)
    guard wait == .zero else { return .limited(retryAfter: wait) }
    take(cost, at: t)
    return .allowed(remaining: availablePermits(at: now))
  }

  /// ``tryAcquire(cost:at:)`` for a cost from a request: throws for a negative cost or one above
  /// the burst, and takes nothing then.
  @discardableResult
  public mutating func decide(cost: Int, at now: PaceInstant) throws(InvalidInput) -> RateLimitDecision {
    if cost < 0 { throw .negativeCost(cost) }
    if cost > limit.burst { throw .costAboveBurst(cost: cost, burst: limit.burst) }
    return tryAcquire(cost: cost, at: now)
  }

  /// When an `acquire(cost:)` made at `arrival` is granted, behind every request granted by this
  /// method before (first come, first served), if nothing else is taken meanwhile; takes its
  /// permits then (none for cost 0, which is granted when cost 1 would be).
  ///
  /// - Throws: As ``decide(cost:at:)``, for a cost no wait would let through.
  @discardableResult
  public mutating func acquire(cost: Int, at arrival: PaceInstant) throws(InvalidInput) -> PaceInstant {
    if cost < 0 { throw .negativeCost(cost) }
    if cost > limit.burst { throw .costAboveBurst(cost: cost, burst: limit.burst) }
    var t = max(arrival.nanoseconds, lastGrant)
    let wait = wait(for: max(cost, 1), at: t)
    t += wait.paceNanoseconds
    precondition(self.wait(for: max(cost, 1), at: t) == .zero, "RateLimitReferenceModel: retryAfter was not exact")
    if cost > 0 { take(cost, at: t) }
    lastGrant = t
    return PaceInstant(nanoseconds: t)
  }

  /// How long a request of `cost` (1 through the burst) waits at `t` if nothing else is taken:
  /// zero if it is allowed now.
  private mutating func wait(for cost: Int, at t: Int64) -> Duration {
    switch limit.algorithm {
    case .tokenBucket:
      refill(t)
      let needed = Int64(cost) * unitsPerPermit
      if balance >= needed { return .zero }
      let deficit = needed - balance
      let nanoseconds = (deficit + unitsPerNanosecond - 1) / unitsPerNanosecond
      return .nanoseconds(nanoseconds)
    case .slidingWindow:
      var used = used(at: t)
      if used + cost <= limit.permits { return .zero }
      // The oldest grants stop counting first.
      for grant in grants where counts(grant.time, at: t) {
        used -= grant.cost
        if used + cost <= limit.permits { return .nanoseconds(interval - (t - grant.time)) }
      }
      preconditionFailure("a cost within the window's permits always fits once every grant expires")
    case .fixedWindow:
      if count(inWindowOf: t) + cost <= limit.permits { return .zero }
      return .nanoseconds(interval - (t - windowIndex(t) * interval))
    }
  }

  private mutating func take(_ cost: Int, at t: Int64) {
    switch limit.algorithm {
    case .tokenBucket:
      refill(t)
      balance -= Int64(cost) * unitsPerPermit
    case .slidingWindow:
      grants.append((t, cost))
    case .fixedWindow:
      let index = windowIndex(t)
      if index != window { (window, windowCount) = (index, 0) }
      windowCount += cost
    }
  }

  /// Adds the units accrued since `updated`, up to the capacity; a gap too large to count fills
  /// the bucket.
  private mutating func refill(_ t: Int64) {
    guard t > updated else { return }
    let (elapsed, late) = t.subtractingReportingOverflow(updated)
    let (accrued, many) = elapsed.multipliedReportingOverflow(by: unitsPerNanosecond)
    let (sum, full) = balance.addingReportingOverflow(accrued)
    balance = late || many || full ? capacity : min(capacity, sum)
    updated = t
  }

  /// Whether a grant at `g` still counts at `t`: `g` in `(t - T, t]`.
  private func counts(_ g: Int64, at t: Int64) -> Bool {
    let (age, overflow) = t.subtractingReportingOverflow(g)
    return !overflow && age >= 0 && age < interval
  }

  private func used(at t: Int64) -> Int {
    grants.filter { counts($0.time, at: t) }.reduce(0) { $0 + $1.cost }
  }

  /// `floor(t / T)`.
  private func windowIndex(_ t: Int64) -> Int64 {
    let (quotient, remainder) = t.quotientAndRemainder(dividingBy: interval)
    return remainder < 0 ? quotient - 1 : quotient
  }

  private func count(inWindowOf t: Int64) -> Int {
    windowIndex(t) == window ? windowCount : 0
  }
}
