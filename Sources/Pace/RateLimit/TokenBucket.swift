/// The arithmetic of a token bucket (the ``RateLimit/Algorithm/tokenBucket`` algorithm), as a value type
/// with exact integer time.
///
/// Credit is counted in *units*: a permit costs `unitsPerPermit` and `unitsPerNanosecond`
/// accrue every nanosecond, both divided by their greatest common divisor, so that "3 permits per
/// second" is exact (one permit every 333,333,333⅓ ns) and no rounding accumulates. The balance
/// is capped at `capacity` (the burst). The arithmetic lets a request larger than the burst take
/// a full bucket and leave it in debt; the limiters never ask it to (a cost above the burst is
/// refused by the cost rule).
///
/// Nothing here traps on extreme input: an interval beyond `Int64.max` nanoseconds counts as
/// `Int64.max`, a capacity or cost beyond `Int64.max` units saturates, and a ready time beyond
/// the end of the timeline is `nil` (never), not ``PaceInstant/max``, so the limiter never grants
/// early at the end of the timeline.
///
/// The bucket is its ``TokenBucketRate`` (shared by every key of a ``KeyedRateLimiter``) and its
/// ``TokenBucketLevel`` (one per key), read and written through forwarding properties.
///
/// **Memory per key**: 16 bytes, the ``TokenBucketLevel`` (balance and time).
///
/// `@inlinable` throughout, so that a ``KeyedRateLimiter``'s decision is specialised, and its
/// arithmetic inlined, in the module that calls it.
@usableFromInline
package struct TokenBucket: Sendable, Equatable {
  @usableFromInline package let rate: TokenBucketRate
  @usableFromInline package var level: TokenBucketLevel

  @inlinable package var unitsPerPermit: Int64 { rate.unitsPerPermit }
  @inlinable package var unitsPerNanosecond: Int64 { rate.unitsPerNanosecond }
  /// `burst` permits' worth of units.
  @inlinable package var capacity: Int64 { rate.capacity }
  /// Units in the bucket; negative after a request larger than the burst.
  @inlinable package var balance: Int64 {
    get { level.balance }
    set { level.balance = newValue }
  }
  /// When `balance` was last brought up to date.
  @inlinable package var updated: PaceInstant {
    get { level.updated }
    set { level.updated = newValue }
  }

  /// A full bucket at `now`.
  package init(permits: Int, per interval: Duration, burst: Int, now: PaceInstant) {
    let rate = TokenBucketRate(permits: permits, per: interval, burst: burst)
    self.init(rate: rate, level: rate.full(at: now))
  }

  @inlinable
  package init(rate: TokenBucketRate, level: TokenBucketLevel) {
    self.rate = rate
    self.level = level
  }

  /// Whole permits in the bucket; 0 while in debt.
  @inlinable
  package var availablePermits: Int {
    Int(max(0, balance / unitsPerPermit))
  }

  /// Adds the credit accrued since the last update, up to the capacity.
  @inlinable
  package mutating func refill(now: PaceInstant) {
    guard now > updated else { return }
    // In 64-bit nanoseconds (a `Duration` would divide 128-bit integers on every decision); a
    // gap too large for `Int64` fills any bucket.
    let (elapsed, wrapped) = now.nanoseconds.subtractingReportingOverflow(updated.nanoseconds)
    let (accrued, overflow) = elapsed.multipliedReportingOverflow(by: unitsPerNanosecond)
    balance = wrapped || overflow ? capacity : min(capacity, balance.addingSaturating(accrued))
    updated = now
  }

  /// Whether `permits` can be taken from the balance as it is.
  @inlinable
  package func canTake(_ permits: Int) -> Bool {
    balance >= threshold(for: permits)
  }

  /// Takes `permits`; call only when ``canTake(_:)`` says so.
  @inlinable
  package mutating func take(_ permits: Int) {
    balance = balance.addingSaturating(-cost(of: permits))
  }

  /// The earliest instant at which `permits` can be taken, if nothing else is taken meanwhile;
  /// `nil` if that is beyond the end of the timeline (``PaceInstant/max``).
  @inlinable
  package func readyTime(for permits: Int) -> PaceInstant? {
    let threshold = threshold(for: permits)
    guard threshold > balance else { return updated }
    // Up to 2^64 - 1 units (a full bucket's worth over a saturated debt): exact in UInt64.
    let deficit = UInt64(bitPattern: threshold &- balance)
    let rate = UInt64(unitsPerNanosecond)
    let nanoseconds = deficit / rate + (deficit % rate == 0 ? 0 : 1)
    guard let nanoseconds = Int64(exactly: nanoseconds) else { return nil }
    let (ready, beyondTheEnd) = updated.nanoseconds.addingReportingOverflow(nanoseconds)
    return beyondTheEnd ? nil : PaceInstant(nanoseconds: ready)
  }

  /// The balance a request needs: its cost, or a full bucket if it costs more than the burst.
  @inlinable
  package func threshold(for permits: Int) -> Int64 {
    min(cost(of: permits), capacity)
  }

  @inlinable
  package func cost(of permits: Int) -> Int64 {
    let (cost, overflow) = Int64(permits).multipliedReportingOverflow(by: unitsPerPermit)
    return overflow ? .max : cost
  }
}

/// What every key of a rate limiter shares: the rate in exact units.
@usableFromInline
package struct TokenBucketRate: Sendable, Equatable {
  @usableFromInline package let unitsPerPermit: Int64
  @usableFromInline package let unitsPerNanosecond: Int64
  /// `burst` permits' worth of units.
  @usableFromInline package let capacity: Int64
  /// The largest cost the bucket grants: the limit's burst.
  @usableFromInline package let burst: Int

  package init(permits: Int, per interval: Duration, burst: Int) {
    let nanoseconds = interval.paceNanoseconds
    precondition(permits > 0, "RateLimiter: permits must be positive (got \(permits))")
    precondition(nanoseconds > 0, "RateLimiter: interval must be at least 1 ns (got \(interval))")
    precondition(burst > 0, "RateLimiter: burst must be positive (got \(burst))")
    let divisor = greatestCommonDivisor(Int64(permits), nanoseconds)
    unitsPerPermit = nanoseconds / divisor
    unitsPerNanosecond = Int64(permits) / divisor
    // Billions of permits of a slow rate: the bucket holds what 64 bits can count.
    let (capacity, overflow) = Int64(burst).multipliedReportingOverflow(by: unitsPerPermit)
    self.capacity = overflow ? .max : capacity
    self.burst = burst
  }

  /// The whole permits a full bucket holds: the burst, or fewer where its capacity saturates 64
  /// bits. Every limiter reports this for a bucket it has not touched.
  @inlinable
  package var fullPermits: Int { Int(capacity / unitsPerPermit) }

  /// A full bucket at `now`.
  @inlinable
  package func full(at now: PaceInstant) -> TokenBucketLevel {
    TokenBucketLevel(balance: capacity, updated: now)
  }
}

/// What one key of a rate limiter remembers: its balance and when it was brought up to date.
@usableFromInline
package struct TokenBucketLevel: Sendable, Equatable {
  /// Units in the bucket; negative after a request larger than the burst.
  @usableFromInline package var balance: Int64
  /// When `balance` was last brought up to date.
  @usableFromInline package var updated: PaceInstant

  @inlinable
  package init(balance: Int64, updated: PaceInstant) {
    self.balance = balance
    self.updated = updated
  }
}

extension TokenBucket: RateLimitCounting {
  @inlinable package var burst: Int { rate.burst }

  /// Behind the waiting requests' permits, counted as one request.
  @inlinable
  package func readyTime(for permits: Int, behind queue: RateLimitQueue) -> PaceInstant? {
    readyTime(for: queue.permits &+ permits)
  }

  /// Whether the bucket is full.
  @inlinable package var isIdle: Bool { balance >= capacity }

  /// When the bucket is full again.
  @inlinable package var idleTime: PaceInstant? { readyTime(for: .max) }
}

private func greatestCommonDivisor(_ a: Int64, _ b: Int64) -> Int64 {
  var (a, b) = (a, b)
  while b != 0 { (a, b) = (b, a % b) }
  return a
}
