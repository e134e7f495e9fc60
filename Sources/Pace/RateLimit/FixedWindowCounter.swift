/// The arithmetic of a fixed window, `permits` per window of `rate.nanoseconds`, the windows
/// starting at `rate.phase + k * T` (the timeline's origin for a ``TestScheduler``, whole
/// multiples of the window in Unix time for a real clock), as a value type with exact integer time.
///
/// The window of `t` is `floor((t - phase) / T)` (floor division, so instants before the first
/// window fall in negative windows), starting at `floor((t - phase) / T) * T + phase`. A request of cost `c` fits iff the costs
/// granted in its window, plus `c`, are at most the permits; when it does not, it is ready when
/// the next window starts.
///
/// **Memory per key**: 16 bytes, the window's index and the permits granted in it.
///
/// Nothing here traps on extreme input: a window's start beyond the end of the timeline is `nil`
/// (never).
@usableFromInline
package struct FixedWindowCounter: WindowCounting, Sendable, Equatable {
  @usableFromInline package let rate: WindowRate
  /// The window being counted: `floor(t / T)` of the last update.
  @usableFromInline package var window: Int64
  /// The permits granted in `window`.
  @usableFromInline package var used = 0

  /// A counter at `now` that has granted nothing.
  @inlinable
  package init(rate: WindowRate, now: PaceInstant) {
    self.rate = rate
    self.window = Self.window(of: now.nanoseconds, rate: rate)
  }

  /// `floor((t - phase) / T)`, without computing `t - phase` (which could overflow).
  @inlinable
  package static func window(of t: Int64, rate: WindowRate) -> Int64 {
    var (quotient, remainder) = t.quotientAndRemainder(dividingBy: rate.nanoseconds)
    if remainder < 0 {
      quotient &-= 1
      remainder &+= rate.nanoseconds
    }
    return remainder < rate.phase ? quotient &- 1 : quotient
  }

  /// Starts counting again if `now` is in a later window.
  @inlinable
  package mutating func refill(now: PaceInstant) {
    let current = Self.window(of: now.nanoseconds, rate: rate)
    guard current > window else { return }
    window = current
    used = 0
  }

  @inlinable
  package mutating func take(_ permits: Int) {
    used &+= permits
  }

  /// The next window's start; `nil` beyond the end of the timeline.
  @inlinable package var nextWindowStart: PaceInstant? {
    guard window < .max, let start = Self.start(ofWindow: window &+ 1, rate: rate) else { return nil }
    return PaceInstant(nanoseconds: start)
  }

  /// The start of the current window (the start of the timeline if it began before it).
  @inlinable package var windowStart: PaceInstant {
    PaceInstant(nanoseconds: Self.start(ofWindow: window, rate: rate) ?? (window < 0 ? .min : .max))
  }

  /// `index * T + phase` if it is on the timeline: computed in 128 bits, since the product alone
  /// can leave the timeline where the sum does not (the first window of a timeline that starts
  /// at `Int64.min`).
  @inlinable
  package static func start(ofWindow index: Int64, rate: WindowRate) -> Int64? {
    let (high, low) = index.multipliedFullWidth(by: rate.nanoseconds)
    let (sum, carry) = low.addingReportingOverflow(UInt64(rate.phase))
    let top = high &+ (carry ? 1 : 0)
    if top == 0, sum <= UInt64(Int64.max) { return Int64(sum) }
    if top == -1, sum >= UInt64(1) << 63 { return Int64(bitPattern: sum) }
    return nil
  }

  @inlinable
  package func readyTime(for permits: Int) -> PaceInstant? {
    guard permits <= rate.permits else { return nil }
    return canTake(permits) ? windowStart : nextWindowStart
  }

  /// When the current window ends, if it counted anything.
  @inlinable package var idleTime: PaceInstant? {
    used == 0 ? windowStart : nextWindowStart
  }
}
