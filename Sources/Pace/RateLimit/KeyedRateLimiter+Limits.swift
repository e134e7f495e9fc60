extension KeyedRateLimiter {
  /// Where a ``KeyedRateLimiter`` finds a key's limit.
  @usableFromInline
  enum Limits: Sendable {
    /// Every key has this limit, resolved once.
    case uniform(KeyLimit)
    /// Each key's limit is looked up at each call: user code, called outside the shard locks.
    case perKey(@Sendable (Key) -> RateLimit)
  }

  /// A key's limit as the decisions use it: the burst a cost is checked against and the rate in
  /// exact units.
  @usableFromInline
  struct KeyLimit: Sendable {
    @usableFromInline let limit: RateLimit
    @usableFromInline let rate: TokenBucketRate

    /// Converts `limit` into units; the greatest common divisor is computed here, once per call
    /// on a per-key limiter, and once for all on a uniform one.
    @usableFromInline
    init(_ limit: RateLimit) {
      self.limit = limit
      rate = TokenBucketRate(permits: limit.permits, per: limit.interval, burst: limit.burst)
    }

    /// The largest cost a request can ever be granted.
    @inlinable var burst: Int { limit.burst }
  }

  /// The requests waiting for one key, and the rate they are granted at: the rate of the key's
  /// latest ``acquire(_:cost:isolation:)``, so that the shard's timer grants them without asking
  /// the key's limit (user code) under the lock.
  @usableFromInline
  struct WaitingRequests {
    @usableFromInline var queue: RateLimitQueue
    @usableFromInline var rate: TokenBucketRate

    @inlinable init(queue: RateLimitQueue, rate: TokenBucketRate) {
      self.queue = queue
      self.rate = rate
    }
  }
}

// MARK: The level a key of a per-key limiter keeps

/// A key of a limiter with per-key limits keeps its bucket as the instant it is full again (its
/// theoretical arrival time, what a store keeps), not as a balance in units of one rate: so the
/// stored level means the same thing whatever the key's limit is at the next call, and the shard's
/// timer can tell whether the bucket is full without asking the key's limit.
///
/// In this form, ``TokenBucketLevel/updated`` is the instant the bucket is full again, rounded
/// down to the nanosecond, and ``TokenBucketLevel/balance`` the units still missing at that
/// instant (less than one nanosecond's worth at the rate it was stored with).
extension TokenBucketRate {
  /// `level` in the full-instant form.
  @inlinable
  func fullInstantForm(of level: TokenBucketLevel) -> TokenBucketLevel {
    // At most 2^64 - 1 units (a full bucket's worth over a saturated debt): exact in UInt64.
    let deficit = UInt64(bitPattern: capacity &- level.balance)
    let rate = UInt64(unitsPerNanosecond)
    let (whole, remainder) = deficit.quotientAndRemainder(dividingBy: rate)
    guard let nanoseconds = Int64(exactly: whole) else { return .neverFull }
    let (full, beyondTheEnd) = level.updated.nanoseconds.addingReportingOverflow(nanoseconds)
    if beyondTheEnd { return .neverFull }
    return TokenBucketLevel(balance: Int64(remainder), updated: PaceInstant(nanoseconds: full))
  }

  /// The level at `now` of a bucket stored in the full-instant form, read at this rate: a bucket
  /// holds at most this rate's capacity, and misses what the time until it is full is worth at
  /// this rate (so a key whose limit changed keeps the instant it is full again).
  @inlinable
  func level(fromFullInstantForm stored: TokenBucketLevel, now: PaceInstant) -> TokenBucketLevel {
    let rate = UInt64(unitsPerNanosecond)
    // What was missing below one nanosecond at the stored rate, at most that at this one.
    let remainder = Swift.min(UInt64(bitPattern: stored.balance), rate &- 1)
    var deficit: UInt64
    if now >= stored.updated {
      let elapsed = UInt64(bitPattern: now.nanoseconds &- stored.updated.nanoseconds)
      let (accrued, overflow) = elapsed.multipliedReportingOverflow(by: rate)
      deficit = overflow || accrued >= remainder ? 0 : remainder - accrued
    } else {
      let ahead = UInt64(bitPattern: stored.updated.nanoseconds &- now.nanoseconds)
      let (missing, overflow) = ahead.multipliedReportingOverflow(by: rate)
      let (sum, overflow2) = missing.addingReportingOverflow(remainder)
      deficit = overflow || overflow2 ? .max : sum
    }
    let capacity = UInt64(self.capacity)
    let balance: Int64
    if deficit <= capacity {
      balance = Int64(capacity - deficit)
    } else {
      deficit -= capacity
      balance = deficit > UInt64(Int64.max) ? .min : -Int64(deficit)
    }
    return TokenBucketLevel(balance: balance, updated: now)
  }
}

extension TokenBucketLevel {
  /// A bucket full again only beyond the end of the timeline, in the full-instant form.
  @inlinable static var neverFull: Self { Self(balance: 0, updated: .max) }

  /// Whether a bucket stored in the full-instant form is full at `now`, at any rate.
  @inlinable
  func isFullInFullInstantForm(at now: PaceInstant) -> Bool {
    updated != .max && (now > updated || (now == updated && balance == 0))
  }

  /// When a bucket stored in the full-instant form is full, at any rate; `nil` if that is beyond
  /// the end of the timeline.
  @inlinable
  var fullTimeInFullInstantForm: PaceInstant? {
    if updated == .max { return nil }
    return balance == 0 ? updated : PaceInstant(nanoseconds: updated.nanoseconds &+ 1)
  }
}
