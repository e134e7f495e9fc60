extension KeyedRateLimiter {
  /// Where a ``KeyedRateLimiter`` finds a key's limit.
  @usableFromInline
  enum Limits: Sendable {
    /// Every key has this limit, resolved once.
    case uniform(KeyLimit)
    /// Each key's limit is looked up at each call: user code, called outside the shard locks.
    case perKey(@Sendable (Key) -> RateLimit)
    /// Each key's limit is looked up in plans at each call, outside the shard locks; the plans
    /// tell the limiter of each change (``KeyedRateLimiter/planChanged(_:)``).
    case planned(RateLimitPlans<Key>)

    /// The one limit of a limiter made with one; `nil` for limits per key.
    var uniformLimit: RateLimit? {
      if case .uniform(let limit) = self { return limit.limit }
      return nil
    }

    /// The limit of `key`: the one limit, or what the closure answers for `key` now.
    func limit(for key: Key) -> RateLimit {
      switch self {
      case .uniform(let limit): limit.limit
      case .perKey(let limits): limits(key)
      case .planned(let plans): plans.limit(for: key)
      }
    }

    /// `key`'s limit in units on `clock`; calls a per-key closure, so never under a lock.
    @inlinable
    func keyLimit(for key: Key, clock: AsyncClock) -> KeyLimit {
      switch self {
      case .uniform(let limit): return limit
      case .perKey(let limits):
        return KeyLimit(limits(key), unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin)
      case .planned(let plans):
        let (limit, isDefault, version) = plans.limitAndIsDefault(for: key)
        return KeyLimit(
          limit, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin, isDefault: isDefault, planVersion: version)
      }
    }
  }

  /// A key's limit as the decisions use it: the burst a cost is checked against and the policy's
  /// parameters in exact units.
  @usableFromInline
  struct KeyLimit: Sendable {
    @usableFromInline let limit: RateLimit
    @usableFromInline let rate: KeyRate
    /// Whether the limit is its plans' default (``Limits/planned(_:)``), which a change of the
    /// default may have left a key with no state owing (``DefaultLimitChange``).
    @usableFromInline let isDefault: Bool
    /// The plans' version the limit was read at (``Limits/planned(_:)``; 0 otherwise): a shard
    /// that applied a later change (``Shard/planVersion``) tells a decision to read it again.
    @usableFromInline let planVersion: UInt64

    /// Converts `limit` into units; for a token bucket the greatest common divisor is computed
    /// here, once per call on a per-key limiter, and once for all on a uniform one.
    ///
    /// - Parameter unixNanosecondsAtOrigin: The clock's ``AsyncClock/unixNanosecondsAtOrigin``,
    ///   which aligns fixed windows to Unix time on a real clock.
    @usableFromInline
    init(_ limit: RateLimit, unixNanosecondsAtOrigin: Int64? = nil, isDefault: Bool = false, planVersion: UInt64 = 0) {
      self.limit = limit
      self.isDefault = isDefault
      self.planVersion = planVersion
      switch limit.algorithm {
      case .tokenBucket:
        rate = .tokenBucket(TokenBucketRate(permits: limit.permits, per: limit.interval, burst: limit.burst))
      case .slidingWindow:
        rate = .slidingWindow(WindowRate(permits: limit.permits, per: limit.interval))
      case .fixedWindow:
        rate = .fixedWindow(
          WindowRate(permits: limit.permits, per: limit.interval, unixNanosecondsAtOrigin: unixNanosecondsAtOrigin))
      }
    }

    /// The largest cost a request can ever be granted.
    @inlinable var burst: Int { limit.burst }

    /// How far back the limit counts a key's use (``KeyRate/lookBack``).
    @inlinable var lookBack: Int64 { rate.lookBack }

    /// How long until the fixed window that counts a key under this limit now ends, read on
    /// `clock`; `nil` unless the limit is a ``RateLimit/Algorithm/fixedWindow``.
    func timeUntilWindowEnds(clock: AsyncClock) -> Duration? {
      guard case .fixedWindow(let rate) = rate else { return nil }
      let now = clock.now()
      guard let end = FixedWindowCounter(rate: rate, now: now).nextWindowStart else { return nil }
      return .nanoseconds(end.nanoseconds &- now.nanoseconds)
    }
  }

  /// A limit's policy with its parameters: what a key's counter is built with.
  @usableFromInline
  enum KeyRate: Sendable, Equatable {
    case tokenBucket(TokenBucketRate)
    case slidingWindow(WindowRate)
    case fixedWindow(WindowRate)

    /// How far back the limit counts a key's use, in nanoseconds: a window's length, or the time
    /// a bucket takes to fill from empty (after that, whatever came before no longer counts).
    @inlinable var lookBack: Int64 {
      switch self {
      case .slidingWindow(let rate), .fixedWindow(let rate): return rate.nanoseconds
      case .tokenBucket(let rate):
        let (whole, remainder) = rate.capacity.quotientAndRemainder(dividingBy: rate.unitsPerNanosecond)
        return remainder == 0 ? whole : whole &+ 1
      }
    }
  }

  /// What a limiter that ``detectsLimitChanges`` knows of the limits it decided under: by
  /// algorithm, the longest look-back (``KeyRate/lookBack``), and whether a bucket's rate or a
  /// fixed window's length was not the only one (else a key's own is it, and its state says when
  /// that limit finds it idle).
  @usableFromInline
  struct SeenLimits: Sendable {
    @usableFromInline var sliding: Int64 = 0
    @usableFromInline var fixed: Int64 = 0
    @usableFromInline var bucket: Int64 = 0
    @usableFromInline var firstFixed: Int64 = 0
    @usableFromInline var severalFixed = false
    /// The first fixed window seen: the one a key's fixed window state was stored under unless
    /// the shard's `fixedRates` names another.
    @usableFromInline var firstFixedRate: WindowRate?
    @usableFromInline var firstBucket: TokenBucketRate?
    @usableFromInline var severalBuckets = false

    @inlinable init() {}

    /// Notes `rate`; whether it told anything new.
    @inlinable
    mutating func note(_ rate: KeyRate) -> Bool {
      switch rate {
      case .slidingWindow(let window):
        guard window.nanoseconds > sliding else { return false }
        sliding = window.nanoseconds
      case .fixedWindow(let window):
        if firstFixedRate == nil { firstFixedRate = window }
        if firstFixed == 0 {
          firstFixed = window.nanoseconds
        } else if window.nanoseconds != firstFixed, !severalFixed {
          severalFixed = true
        } else if window.nanoseconds <= fixed {
          return false
        }
        fixed = Swift.max(fixed, window.nanoseconds)
      case .tokenBucket(let bucketRate):
        if firstBucket == nil {
          firstBucket = bucketRate
        } else if bucketRate != firstBucket, !severalBuckets {
          severalBuckets = true
        } else if rate.lookBack <= bucket {
          return false
        }
        bucket = Swift.max(bucket, rate.lookBack)
      }
      return true
    }
  }

  /// The requests waiting for one key, and the limit they are granted under: the limit of the
  /// key's latest ``acquire(_:cost:isolation:)``, so that the shard's timer grants them without
  /// asking the key's limit (user code) under the lock.
  @usableFromInline
  struct WaitingRequests {
    @usableFromInline var queue: RateLimitQueue
    @usableFromInline var rate: KeyRate

    @inlinable init(queue: RateLimitQueue, rate: KeyRate) {
      self.queue = queue
      self.rate = rate
    }
  }

  /// What happens to a key with waiting requests, or that its check is due.
  @usableFromInline
  enum KeyEvent {
    case enqueue(id: UInt64, cost: Int)
    case cancel(id: UInt64)
    case timerFired
  }

  // MARK: A key's stored state

  // A key's entry in its shard's table holds two words, a `TokenBucketLevel`'s, whatever its
  // policy, so that every key's entry has one small size:
  //
  // - token bucket, one limit for every key: the level itself (balance in units, updated);
  // - token bucket, per-key limits: the instant the bucket is full again (`updated`) and the
  //   units still missing then (`balance`, 0 or more); see `TokenBucketRate.fullInstantForm(of:)`;
  //   the rate it was stored under is in the shard's `bucketRates`;
  // - fixed window: the window's end (`updated`) and `~used` (`balance`, below 0);
  // - sliding window: the instant its newest grant stops counting (`updated`) and `~used`
  //   (`balance`, below 0); the grants themselves are in the shard's `logs`.
  //
  // So a per-key limiter's timer can tell when a key is idle under the limit it was stored
  // under without asking its limit: at `updated` (a bucket's, within a nanosecond); it asks the
  // key's limit (outside the lock) before it forgets the key.
  //
  // A key whose limit changes keeps what it used that still counts, read under the new limit:
  // a bucket's missing units as permits owed, a window's count as grants at the latest instant
  // they can have been made, a log's grants where they were made. Where the old state cannot say
  // when its grants were made, they are taken as late as they can have been, so that the new
  // limit never counts fewer than it would have. What the state no longer records (a new limit
  // that looks further back) is assumed only by a limiter made with plans, which knows when the
  // limit changed: see "A change of plans" in KeyedRateLimiter+PlanChanges.swift.

  /// `key`'s counter at `now` under `rate`, from its stored `level` (`nil` for a key with no
  /// state), `log` (taken from the shard's logs) and, for a per-key limiter's bucket, the rate it
  /// was stored under (`bucketRate`, from the shard's `bucketRates`).
  ///
  /// A limiter that ``detectsLimitChanges`` passes `storedFixedRate`, the fixed window a fixed
  /// window's state was stored under, which the state does not hold
  /// (``storedFixedRate(of:in:)``).
  @inlinable
  func loadCounter(
    level: TokenBucketLevel?, log: SlidingWindowLog?, bucketRate: TokenBucketRate? = nil, rate: KeyRate,
    now: PaceInstant, storedFixedRate: WindowRate? = nil
  ) -> RateLimitCounter {
    loadCounter(
      level: level, log: log, bucketRate: bucketRate, rate: rate, now: now, storedFixedRate: storedFixedRate,
      earlierChange: nil
    ).counter
  }

  /// `key`'s counter at `now` under `rate`, as ``loadCounter(level:log:bucketRate:rate:now:storedFixedRate:)``
  /// loads it, with the use before the key's last change of limit where it changed again; records
  /// in `shard` a change it finds, for the caller stores the counter (under `rate`).
  @inlinable
  func loadCounterNotingChange(
    of key: Key, level: TokenBucketLevel?, log: SlidingWindowLog?, bucketRate: TokenBucketRate?, rate: KeyRate,
    now: PaceInstant, in shard: inout Shard
  ) -> RateLimitCounter {
    guard detectsLimitChanges else {
      return loadCounter(level: level, log: log, bucketRate: bucketRate, rate: rate, now: now)
    }
    let (counter, changed) = loadCounter(
      level: level, log: log, bucketRate: bucketRate, rate: rate, now: now,
      storedFixedRate: storedFixedRate(of: key, in: shard),
      earlierChange: shard.limitChanges.isEmpty ? nil : shard.limitChanges[key])
    if changed { shard.limitChanges[key] = now }
    return counter
  }

  /// The counter ``loadCounter(level:log:bucketRate:rate:now:storedFixedRate:)`` loads, and
  /// whether the key's limit changed (a limiter that ``detectsLimitChanges``, a state stored
  /// under another limit than `rate`). Where it had changed before, at `earlierChange`, the
  /// state holds only what the limit it was stored under counts since: the new limit is taken as
  /// used to its maximum then (see "A limit that changes unannounced" in
  /// KeyedRateLimiter+LimitHistory.swift).
  @inlinable
  func loadCounter(
    level: TokenBucketLevel?, log: SlidingWindowLog?, bucketRate: TokenBucketRate?, rate: KeyRate,
    now: PaceInstant, storedFixedRate: WindowRate?, earlierChange: PaceInstant?
  ) -> (counter: RateLimitCounter, changed: Bool) {
    var counter = convertedCounter(level: level, log: log, bucketRate: bucketRate, rate: rate, now: now)
    // A `limits` closure's key first decided under another limit than its state's: the change
    // is taken as made now, with the use the state no longer records (see "A limit that changes
    // unannounced" in KeyedRateLimiter+LimitHistory.swift).
    guard detectsLimitChanges, let level else { return (counter, false) }
    let old: KeyRate?
    if level.balance < 0, log == nil {
      old = storedFixedRate.map(KeyRate.fixedWindow)
    } else {
      old = Self.storedRate(level: level, log: log, bucketRate: bucketRate)
    }
    guard let old, old != rate else { return (counter, false) }
    counter.refill(now: now)
    Self.addUnseenUsage(to: &counter, from: old, at: now)
    if let earlierChange {
      Self.addUsage(to: &counter, beforeEarlierChange: earlierChange, latest: old, at: now)
    }
    return (counter, true)
  }

  /// The limit a per-key limiter's key stored as `level` was stored under, where its state says:
  /// a bucket's rate (`bucketRate`), a sliding log's; `nil` for a fixed window, whose state is
  /// a count and an instant.
  @inlinable
  static func storedRate(level: TokenBucketLevel, log: SlidingWindowLog?, bucketRate: TokenBucketRate?) -> KeyRate? {
    if level.balance >= 0 { return bucketRate.map { .tokenBucket($0) } }
    return log.map { .slidingWindow($0.rate) }
  }

  /// When a key of a limiter that ``detectsLimitChanges``, stored as `level`, is idle under every
  /// limit in `seen` (`nil`: beyond the end of the timeline), never before it is idle under the
  /// limit it was stored under. Its last grant was at `g` at the latest: a bucket full at `f`,
  /// at `f - T` (`T` a permit's time); a sliding log idle at `u`, at `u - W`; a fixed window
  /// ending at `e`, at `e - 1`. A limit of look-back `L` counts it until `g + L`, except the
  /// key's own, which its state says (the only bucket or fixed window length seen is its own).
  @inlinable
  func keptUntil(level: TokenBucketLevel, log: SlidingWindowLog?, bucketRate: TokenBucketRate?, seen: SeenLimits)
    -> PaceInstant?
  {
    let idle: PaceInstant
    let counted: Int64
    var lookBack = seen.sliding
    if level.balance >= 0 {
      guard let full = level.fullTimeInFullInstantForm else { return nil }
      (idle, counted) = (full, bucketRate.map { $0.unitsPerPermit / $0.unitsPerNanosecond } ?? 0)
      lookBack = Swift.max(lookBack, seen.fixed, seen.severalBuckets ? seen.bucket : 0)
    } else {
      if level.updated == .max { return nil }
      idle = level.updated
      if let log {
        counted = log.rate.nanoseconds
        lookBack = Swift.max(lookBack, seen.fixed, seen.bucket)
      } else {
        counted = 1
        lookBack = Swift.max(lookBack, seen.severalFixed ? seen.fixed : 0, seen.bucket)
      }
    }
    let extra = Swift.max(0, lookBack &- counted)
    let (kept, overflow) = idle.nanoseconds.addingReportingOverflow(extra)
    return overflow ? nil : PaceInstant(nanoseconds: kept)
  }

  /// ``loadCounter(level:log:bucketRate:rate:now:)`` without the use a change of limit assumes.
  @inlinable
  func convertedCounter(
    level: TokenBucketLevel?, log: SlidingWindowLog?, bucketRate: TokenBucketRate?, rate: KeyRate, now: PaceInstant
  ) -> RateLimitCounter {
    switch rate {
    case .tokenBucket(let rate):
      guard let level else { return .tokenBucket(TokenBucket(rate: rate, level: rate.full(at: now))) }
      if storesFullInstants, level.balance < 0 || bucketRate != rate {
        let owed = owedPermits(level: level, log: log, bucketRate: bucketRate, now: now)
        return .tokenBucket(TokenBucket(rate: rate, level: rate.level(owing: owed, at: now)))
      }
      return .tokenBucket(TokenBucket(rate: rate, level: readLevel(level, rate: rate, now: now)))
    case .fixedWindow(let rate):
      var counter = FixedWindowCounter(rate: rate, now: now)
      guard let level else { return .fixedWindow(counter) }
      if level.balance < 0, log == nil {
        // The count carries over while its window has not ended; a window of another length
        // counts it while the two windows overlap.
        if now < level.updated || (storesFullInstants && level.updated > counter.windowStart) {
          counter.used = Swift.min(Int(~level.balance), rate.permits)
        }
      } else if storesFullInstants {
        if let log {
          // A sliding window's grants made in this window count in it.
          let start = counter.windowStart.nanoseconds
          var used = 0
          for grant in log.grants[log.head...] where grant.time >= start { used &+= grant.cost }
          counter.used = Swift.min(used, rate.permits)
        } else {
          counter.used = Self.wholePermits(owedPermits(level: level, log: nil, bucketRate: bucketRate, now: now), rate)
        }
      }
      return .fixedWindow(counter)
    case .slidingWindow(let rate):
      guard let level else { return .slidingWindow(SlidingWindowLog(rate: rate, now: now)) }
      if level.balance < 0, let log {
        if log.rate == rate { return .slidingWindow(log) }
        // Another window length: the grants kept are read under it.
        var resized = SlidingWindowLog(rate: rate, now: log.updated)
        resized.grants = log.grants
        resized.head = log.head
        resized.used = log.used
        resized.dropGrantsThatNoLongerCount()
        return .slidingWindow(resized)
      }
      var log = SlidingWindowLog(rate: rate, now: now)
      guard storesFullInstants else { return .slidingWindow(log) }
      // A fixed window's count, as grants at its last instant (now at the latest); a bucket's
      // permits owed, as grants now.
      let used: Int
      let time: Int64
      if level.balance < 0 {
        used = Swift.min(Int(~level.balance), rate.permits)
        time = Swift.min(now.nanoseconds, level.updated.nanoseconds &- 1)
      } else {
        used = Self.wholePermits(owedPermits(level: level, log: nil, bucketRate: bucketRate, now: now), rate)
        time = now.nanoseconds
      }
      let (end, overflow) = time.addingReportingOverflow(rate.nanoseconds)
      if used > 0, overflow || end > now.nanoseconds {
        log.grants.append(SlidingWindowLog.Grant(time: time, cost: used))
        log.used = used
      }
      return .slidingWindow(log)
    }
  }

  /// What a per-key limiter's key stored as `level` has used that still counts at `now`, under
  /// the limit it was stored with, as permits owed (`units / perPermit`): a bucket's missing units
  /// at its rate `bucketRate`, a sliding log's grants that count, a fixed window's count until
  /// its window ends.
  @inlinable
  func owedPermits(level: TokenBucketLevel, log: SlidingWindowLog?, bucketRate: TokenBucketRate?, now: PaceInstant)
    -> (units: UInt64, perPermit: UInt64)
  {
    if level.balance >= 0 {
      guard let bucketRate else { return (0, 1) }
      let read = bucketRate.level(fromFullInstantForm: level, now: now)
      // At most 2^64 - 1 units (a full bucket's worth over a saturated debt): exact in UInt64.
      return (UInt64(bitPattern: bucketRate.capacity &- read.balance), UInt64(bucketRate.unitsPerPermit))
    }
    if var log {
      log.refill(now: now)
      return (UInt64(log.used), 1)
    }
    return (now < level.updated ? UInt64(~level.balance) : 0, 1)
  }

  /// Permits owed, rounded up, as a count in a window of `rate` (at most its permits: a full
  /// window).
  @inlinable
  static func wholePermits(_ owed: (units: UInt64, perPermit: UInt64), _ rate: WindowRate) -> Int {
    let (whole, remainder) = owed.units.quotientAndRemainder(dividingBy: owed.perPermit)
    let permits = whole &+ (remainder == 0 ? 0 : 1)
    return permits >= UInt64(rate.permits) ? rate.permits : Int(permits)
  }

  /// Stores `counter` as `key`'s state: into its entry's `level`, its log into `logs`, and a
  /// per-key limiter's bucket rate into `bucketRates`.
  @inlinable
  func store(
    _ counter: RateLimitCounter, of key: Key, into level: inout TokenBucketLevel, logs: inout [Key: SlidingWindowLog],
    bucketRates: inout [Key: TokenBucketRate]
  ) {
    switch counter {
    case .tokenBucket(let bucket):
      level = storedLevel(bucket.level, rate: bucket.rate)
      if storesFullInstants, bucketRates[key] != bucket.rate { bucketRates[key] = bucket.rate }
    case .fixedWindow(let counter):
      level = TokenBucketLevel(balance: ~Int64(counter.used), updated: counter.nextWindowStart ?? .max)
      if storesFullInstants, !bucketRates.isEmpty { bucketRates.removeValue(forKey: key) }
    case .slidingWindow(let log):
      level = TokenBucketLevel(balance: ~Int64(log.used), updated: log.idleTime ?? .max)
      logs[key] = log
      if storesFullInstants, !bucketRates.isEmpty { bucketRates.removeValue(forKey: key) }
    }
  }

  /// The fixed window `key`'s fixed window state in `shard` was stored under: the shard's first,
  /// unless `fixedRates` names another.
  @inlinable
  func storedFixedRate(of key: Key, in shard: borrowing Shard) -> WindowRate? {
    if !shard.fixedRates.isEmpty, let rate = shard.fixedRates[key] { return rate }
    return shard.seenLimits.firstFixedRate
  }

  /// Records, for a limiter that ``detectsLimitChanges``, the fixed window `counter` (just stored
  /// as `key`'s state) counts under, where it is not the shard's first (which a state without an
  /// entry was stored under, so that a limiter with one fixed window keeps no entry); forgets the
  /// entry of a key stored under anything else.
  @inlinable
  func noteStoredFixedRate(of key: Key, _ counter: RateLimitCounter, in shard: inout Shard) {
    guard detectsLimitChanges else { return }
    if case .fixedWindow(let window) = counter, let first = shard.seenLimits.firstFixedRate, window.rate != first {
      shard.fixedRates[key] = window.rate
    } else if !shard.fixedRates.isEmpty {
      shard.fixedRates.removeValue(forKey: key)
    }
  }

  /// The stored level of a key that has counted nothing under `rate`.
  @inlinable
  func freshLevel(_ rate: KeyRate, now: PaceInstant) -> TokenBucketLevel {
    switch rate {
    case .tokenBucket(let rate): storedLevel(rate.full(at: now), rate: rate)
    case .fixedWindow, .slidingWindow: TokenBucketLevel(balance: ~0, updated: now)
    }
  }

  /// Whether a per-key limiter's key, stored as `level`, is idle at `now`, and if not, when it
  /// will be (`nil`: beyond the end of the timeline); the same answer under any limit.
  @inlinable
  static func idleInstant(of level: TokenBucketLevel, now: PaceInstant) -> (idle: Bool, next: PaceInstant?) {
    if level.balance >= 0 {
      return (level.isFullInFullInstantForm(at: now), level.fullTimeInFullInstantForm)
    }
    if level.updated == .max { return (false, nil) }
    return (now >= level.updated, level.updated)
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
    // A window's state (its key's policy changed): the bucket starts afresh.
    if stored.balance < 0 { return full(at: now) }
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

extension TokenBucketRate {
  /// A bucket at `now` that owes `owed` permits (`units / perPermit`, rounded up to this rate's
  /// units): a full bucket less what is owed, in debt if that is more than the burst.
  @inlinable
  func level(owing owed: (units: UInt64, perPermit: UInt64), at now: PaceInstant) -> TokenBucketLevel {
    let (high, low) = owed.units.multipliedFullWidth(by: UInt64(unitsPerPermit))
    var deficit = UInt64.max
    if high < owed.perPermit {
      let (quotient, remainder) = owed.perPermit.dividingFullWidth((high, low))
      deficit = remainder == 0 || quotient == .max ? quotient : quotient + 1
    }
    let capacity = UInt64(self.capacity)
    if deficit <= capacity { return TokenBucketLevel(balance: Int64(capacity - deficit), updated: now) }
    let debt = deficit - capacity
    return TokenBucketLevel(balance: debt > UInt64(Int64.max) ? .min : -Int64(debt), updated: now)
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
