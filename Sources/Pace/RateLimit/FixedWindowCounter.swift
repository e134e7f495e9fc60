/// The arithmetic of a fixed window, `permits` per window of `rate.nanoseconds` aligned to the
/// clock's origin, as a value type with exact integer time.
///
/// The window of `t` is `floor(t / T)` (floor division, so instants before the origin fall in
/// negative windows), starting at `floor(t / T) * T`. A request of cost `c` fits iff the costs
/// granted in its window, plus `c`, are at most the permits; when it does not, it is ready when
/// the next window starts.
///
/// **Memory per key**: 16 bytes, the window's index and the permits granted in it.
///
/// Nothing here traps on extreme input: a window's start beyond the end of the timeline is `nil`
/// (never).
@usableFromInline
struct FixedWindowCounter: RateLimitCounting, Sendable, Equatable {
  @usableFromInline let rate: WindowRate
  /// The window being counted: `floor(t / T)` of the last update.
  @usableFromInline var window: Int64
  /// The permits granted in `window`.
  @usableFromInline var count = 0

  /// A counter at `now` that has granted nothing.
  @inlinable
  init(rate: WindowRate, now: PaceInstant) {
    self.rate = rate
    self.window = Self.window(of: now.nanoseconds, length: rate.nanoseconds)
  }

  /// `floor(t / length)`.
  @inlinable
  static func window(of t: Int64, length: Int64) -> Int64 {
    let (quotient, remainder) = t.quotientAndRemainder(dividingBy: length)
    return remainder < 0 ? quotient &- 1 : quotient
  }

  @inlinable var burst: Int { rate.permits }

  /// Starts counting again if `now` is in a later window.
  @inlinable
  mutating func refill(now: PaceInstant) {
    let current = Self.window(of: now.nanoseconds, length: rate.nanoseconds)
    guard current > window else { return }
    window = current
    count = 0
  }

  @inlinable
  func canTake(_ permits: Int) -> Bool {
    permits <= rate.permits &- count
  }

  @inlinable
  mutating func take(_ permits: Int) {
    count &+= permits
  }

  /// The next window's start; `nil` beyond the end of the timeline.
  @inlinable var nextWindowStart: PaceInstant? {
    let (start, overflow) = (window &+ 1).multipliedReportingOverflow(by: rate.nanoseconds)
    return overflow || window == .max ? nil : PaceInstant(nanoseconds: start)
  }

  /// The start of the current window.
  @inlinable var windowStart: PaceInstant {
    PaceInstant(nanoseconds: window &* rate.nanoseconds)
  }

  @inlinable
  func readyTime(for permits: Int) -> PaceInstant? {
    guard permits <= rate.permits else { return nil }
    return canTake(permits) ? windowStart : nextWindowStart
  }

  @inlinable
  func readyTime(for permits: Int, behind queue: RateLimitQueue) -> PaceInstant? {
    simulatedReadyTime(for: permits, behind: queue)
  }

  @inlinable var availablePermits: Int { rate.permits &- count }

  @inlinable var isIdle: Bool { count == 0 }

  /// When the current window ends, if it counted anything.
  @inlinable var idleTime: PaceInstant? {
    count == 0 ? windowStart : nextWindowStart
  }
}
