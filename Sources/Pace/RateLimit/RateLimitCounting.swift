/// What one key's counter of permits does, whatever its ``RateLimit/Algorithm``: the part of a rate
/// limit that ``RateLimitMachine`` (its FIFO queue and its timer deadline) runs over.
///
/// A counter is a value with exact integer time: `now` comes in through ``refill(now:)``, which
/// brings it up to date (time never goes back: an earlier `now` changes nothing), and every other
/// member answers for that instant. Conformers: ``TokenBucket``, ``SlidingWindowLog``,
/// ``FixedWindowCounter``, and ``RateLimitCounter``, which is any of the three.
@usableFromInline
package protocol RateLimitCounting {
  /// The largest cost the counter can ever grant: the limit's burst (a window's permits).
  var burst: Int { get }

  /// Brings the counter up to `now`: credit accrued, grants that stopped counting dropped, a new
  /// window started.
  mutating func refill(now: PaceInstant)

  /// Whether `permits` (1 or more) can be taken now.
  func canTake(_ permits: Int) -> Bool

  /// Takes `permits` now; call only when ``canTake(_:)`` says so.
  mutating func take(_ permits: Int)

  /// The earliest instant at which `permits` can be taken if nothing else is taken meanwhile;
  /// `nil` if never, or beyond the end of the timeline (``PaceInstant/max``).
  func readyTime(for permits: Int) -> PaceInstant?

  /// The earliest instant at which `permits` can be taken once every request in `queue` has been
  /// granted in order, if nothing else is taken meanwhile; `nil` as ``readyTime(for:)``.
  func readyTime(for permits: Int, behind queue: RateLimitQueue) -> PaceInstant?

  /// The whole permits a request could take now; 0 while a token bucket is in debt.
  var availablePermits: Int { get }

  /// Whether the counter remembers nothing a new one would not: its key can be forgotten.
  var isIdle: Bool { get }

  /// When ``isIdle`` becomes true if nothing is taken meanwhile; `nil` beyond the end of the
  /// timeline.
  var idleTime: PaceInstant? { get }
}

extension RateLimitCounting {
  /// Takes `permits` at `now` if they fit; whether they were taken.
  @inlinable
  package mutating func tryTake(_ permits: Int, now: PaceInstant) -> Bool {
    refill(now: now)
    guard canTake(permits) else { return false }
    take(permits)
    return true
  }

  /// The whole permits available at `now`.
  @inlinable
  package mutating func available(now: PaceInstant) -> Int {
    refill(now: now)
    return availablePermits
  }
}

/// The counter of one key under any ``RateLimit``: what ``RateLimiter`` keeps, so that one
/// limiter type runs every algorithm. Each member forwards to the algorithm's own counter.
@usableFromInline
package enum RateLimitCounter: RateLimitCounting {
  case tokenBucket(TokenBucket)
  case slidingWindow(SlidingWindowLog)
  case fixedWindow(FixedWindowCounter)

  /// A counter that has counted nothing at `now`: a full bucket, or empty windows.
  @usableFromInline
  package init(limit: RateLimit, now: PaceInstant, unixNanosecondsAtOrigin: Int64? = nil) {
    switch limit.algorithm {
    case .tokenBucket:
      self = .tokenBucket(TokenBucket(permits: limit.permits, per: limit.interval, burst: limit.burst, now: now))
    case .slidingWindow:
      self = .slidingWindow(SlidingWindowLog(rate: WindowRate(permits: limit.permits, per: limit.interval), now: now))
    case .fixedWindow:
      let rate = WindowRate(
        permits: limit.permits, per: limit.interval, unixNanosecondsAtOrigin: unixNanosecondsAtOrigin)
      self = .fixedWindow(FixedWindowCounter(rate: rate, now: now))
    }
  }

  @inlinable package var burst: Int {
    switch self {
    case .tokenBucket(let bucket): bucket.burst
    case .slidingWindow(let log): log.burst
    case .fixedWindow(let counter): counter.burst
    }
  }

  // The payload is consumed, changed and put back, so that a log's grants are never shared while
  // they change (which would copy them).
  @inlinable
  package mutating func refill(now: PaceInstant) {
    switch consume self {
    case .tokenBucket(var bucket):
      bucket.refill(now: now)
      self = .tokenBucket(bucket)
    case .slidingWindow(var log):
      log.refill(now: now)
      self = .slidingWindow(log)
    case .fixedWindow(var counter):
      counter.refill(now: now)
      self = .fixedWindow(counter)
    }
  }

  @inlinable
  package func canTake(_ permits: Int) -> Bool {
    switch self {
    case .tokenBucket(let bucket): bucket.canTake(permits)
    case .slidingWindow(let log): log.canTake(permits)
    case .fixedWindow(let counter): counter.canTake(permits)
    }
  }

  @inlinable
  package mutating func take(_ permits: Int) {
    switch consume self {
    case .tokenBucket(var bucket):
      bucket.take(permits)
      self = .tokenBucket(bucket)
    case .slidingWindow(var log):
      log.take(permits)
      self = .slidingWindow(log)
    case .fixedWindow(var counter):
      counter.take(permits)
      self = .fixedWindow(counter)
    }
  }

  @inlinable
  package func readyTime(for permits: Int) -> PaceInstant? {
    switch self {
    case .tokenBucket(let bucket): bucket.readyTime(for: permits)
    case .slidingWindow(let log): log.readyTime(for: permits)
    case .fixedWindow(let counter): counter.readyTime(for: permits)
    }
  }

  @inlinable
  package func readyTime(for permits: Int, behind queue: RateLimitQueue) -> PaceInstant? {
    switch self {
    case .tokenBucket(let bucket): bucket.readyTime(for: permits, behind: queue)
    case .slidingWindow(let log): log.readyTime(for: permits, behind: queue)
    case .fixedWindow(let counter): counter.readyTime(for: permits, behind: queue)
    }
  }

  @inlinable package var availablePermits: Int {
    switch self {
    case .tokenBucket(let bucket): bucket.availablePermits
    case .slidingWindow(let log): log.availablePermits
    case .fixedWindow(let counter): counter.availablePermits
    }
  }

  @inlinable package var isIdle: Bool {
    switch self {
    case .tokenBucket(let bucket): bucket.isIdle
    case .slidingWindow(let log): log.isIdle
    case .fixedWindow(let counter): counter.isIdle
    }
  }

  @inlinable package var idleTime: PaceInstant? {
    switch self {
    case .tokenBucket(let bucket): bucket.idleTime
    case .slidingWindow(let log): log.idleTime
    case .fixedWindow(let counter): counter.idleTime
    }
  }
}

/// What every key of a window limit shares: its permits and its window's length.
@usableFromInline
package struct WindowRate: Sendable, Equatable {
  /// How many permits a window holds.
  @usableFromInline package let permits: Int
  /// The window's length in nanoseconds; a window beyond `Int64.max` nanoseconds counts as
  /// `Int64.max`.
  @usableFromInline package let nanoseconds: Int64
  /// Where fixed windows start on the timeline: at `phase + k * nanoseconds`, `0 <= phase <
  /// nanoseconds`. 0 aligns them to the timeline's origin; a limiter on a real clock sets it so
  /// that they start at whole multiples of the window in Unix time, as a store's do.
  @usableFromInline package let phase: Int64

  /// - Parameter unixNanosecondsAtOrigin: The Unix time, in nanoseconds, of the timeline's
  ///   instant 0 (``AsyncClock/unixNanosecondsAtOrigin``): fixed windows then start at whole
  ///   multiples of the window in Unix time. `nil` aligns them to the timeline's origin.
  @usableFromInline
  package init(permits: Int, per window: Duration, unixNanosecondsAtOrigin: Int64? = nil) {
    let nanoseconds = window.paceNanoseconds
    precondition(permits > 0, "RateLimit: permits must be positive (got \(permits))")
    precondition(nanoseconds > 0, "RateLimit: a window must be 1 ns or longer (got \(window))")
    self.permits = permits
    self.nanoseconds = nanoseconds
    // Windows start where `t + unix ≡ 0 (mod T)`, that is at `t ≡ -unix (mod T)`.
    let remainder = (unixNanosecondsAtOrigin ?? 0) % nanoseconds
    self.phase = remainder == 0 ? 0 : (remainder < 0 ? -remainder : nanoseconds - remainder)
  }
}

/// What both window algorithms share, a window of ``WindowRate/permits`` and the permits that count
/// in it now (``FixedWindowCounter``'s window, ``SlidingWindowLog``'s grants within the last `T`):
/// the members of ``RateLimitCounting`` that read only those.
@usableFromInline
package protocol WindowCounting: RateLimitCounting {
  /// The window's permits and length.
  var rate: WindowRate { get }
  /// The permits granted that count now.
  var used: Int { get }
}

extension WindowCounting {
  @inlinable package var burst: Int { rate.permits }

  @inlinable
  package func canTake(_ permits: Int) -> Bool {
    permits <= rate.permits &- used
  }

  @inlinable package var availablePermits: Int { rate.permits &- used }

  @inlinable package var isIdle: Bool { used == 0 }

  /// Grants the waiting requests on a copy, in order, each at its own ready time, then asks the
  /// copy.
  @inlinable
  package func readyTime(for permits: Int, behind queue: RateLimitQueue) -> PaceInstant? {
    var counter = self
    var done = false
    queue.forEachWaitingCost { cost in
      guard !done else { return }
      guard let ready = counter.readyTime(for: Swift.max(cost, 1)) else {
        done = true
        return
      }
      counter.refill(now: ready)
      if cost > 0 { counter.take(cost) }
    }
    return done ? nil : counter.readyTime(for: permits)
  }
}
