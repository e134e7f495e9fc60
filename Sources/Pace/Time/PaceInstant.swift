/// A point on a scheduler's timeline, in nanoseconds from the scheduler's origin.
///
/// Every ``PaceScheduler`` measures time with this one type, so the state machines behind
/// ``Debouncer`` and ``Throttler`` work the same on Dispatch, on any `Clock` and on
/// ``TestScheduler``. It is an `InstantProtocol` whose `Duration` is `Swift.Duration`.
///
/// Instants of different schedulers are not comparable with each other: each scheduler has its
/// own origin (``TestScheduler`` starts at ``zero``).
///
/// ## Time arithmetic never traps
///
/// The timeline ends at ``max``, `Int64.max` nanoseconds (about 292 years) after the origin.
/// ``advanced(by:)`` saturates there: a deadline beyond the end of the timeline *is* the end.
/// Pace computes every deadline with ``advanced(by:)`` and tests it with `now >= deadline`, so a
/// timer that fires at its deadline always finds it reached, saturated or not. A timer that fires
/// at ``max`` therefore does its work and arms nothing more at that instant: on a
/// ``TestScheduler``, ``TestScheduler/run()`` returns even with an interval of
/// `.seconds(Int64.max)`. ``duration(to:)`` is exact between any two instants.
public struct PaceInstant: InstantProtocol, Sendable, CustomStringConvertible {
  /// Nanoseconds since the scheduler's origin. 64 bits cover about 292 years either way.
  public var nanoseconds: Int64

  /// The instant `nanoseconds` after the origin.
  @inlinable
  public init(nanoseconds: Int64) {
    self.nanoseconds = nanoseconds
  }

  /// The instant `offset` after the origin.
  @inlinable
  public init(_ offset: Duration) {
    self.nanoseconds = offset.paceNanoseconds
  }

  /// The origin of the timeline; ``TestScheduler`` starts here.
  public static let zero = PaceInstant(nanoseconds: 0)

  /// The end of the timeline, `Int64.max` nanoseconds (about 292 years) after the origin.
  /// Deadlines further away saturate here (see ``advanced(by:)``).
  public static let max = PaceInstant(nanoseconds: .max)

  /// How far this instant is from the origin.
  @inlinable
  public var offset: Duration { .nanoseconds(nanoseconds) }

  /// The instant `duration` after this one, in whole nanoseconds, saturating at the ends of the
  /// timeline (``max`` and `Int64.min` nanoseconds) instead of trapping.
  @inlinable
  public func advanced(by duration: Duration) -> PaceInstant {
    PaceInstant(nanoseconds: nanoseconds.addingSaturating(duration.paceNanoseconds))
  }

  /// The instant `nanoseconds` after this one, saturating like ``advanced(by:)``: for hot paths
  /// that convert their interval once (`Duration.paceNanoseconds` divides 128-bit integers).
  @inlinable
  package func advanced(byNanoseconds nanoseconds: Int64) -> PaceInstant {
    PaceInstant(nanoseconds: self.nanoseconds.addingSaturating(nanoseconds))
  }

  /// The exact duration from this instant to `other`, even across the whole timeline: `Duration`
  /// holds any difference of two `Int64` nanosecond counts.
  @inlinable
  public func duration(to other: PaceInstant) -> Duration {
    let (difference, overflow) = other.nanoseconds.subtractingReportingOverflow(nanoseconds)
    if !overflow { return .nanoseconds(difference) }
    return .nanoseconds(other.nanoseconds) - .nanoseconds(nanoseconds)
  }

  @inlinable
  public static func < (lhs: PaceInstant, rhs: PaceInstant) -> Bool {
    lhs.nanoseconds < rhs.nanoseconds
  }

  /// The offset from the origin, such as `"300 ms"` or `"1.5 s"`.
  public var description: String { offset.paceDescription }
}

extension Duration {
  /// This duration in whole nanoseconds (truncated toward zero), saturating at the bounds of
  /// `Int64`: `.seconds(Int64.max)` is `Int64.max` nanoseconds, and so is
  /// `.seconds(Int64.max) * 4`. The package's one conversion of a `Duration` to an integer.
  @inlinable
  package var paceNanoseconds: Int64 {
    // `components` traps beyond `Int64.max` seconds, which a `Duration` can hold: compare first.
    if self >= .nanoseconds(Int64.max) { return .max }
    if self <= .nanoseconds(Int64.min) { return .min }
    let (seconds, attoseconds) = components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }

  /// A short human form used in diagrams and messages: `"0 ms"`, `"250 ms"`, `"1.5 s"`, `"40 µs"`.
  package var paceDescription: String {
    let nanos = paceNanoseconds
    let magnitude = nanos.magnitude
    if magnitude == 0 { return "0 ms" }
    if magnitude % 1_000_000_000 == 0 { return "\(nanos / 1_000_000_000) s" }
    if magnitude >= 1_000_000_000, magnitude % 1_000_000 == 0 {
      return "\(Double(nanos) / 1e9) s"
    }
    if magnitude % 1_000_000 == 0 { return "\(nanos / 1_000_000) ms" }
    if magnitude % 1_000 == 0 { return "\(nanos / 1_000) µs" }
    return "\(nanos) ns"
  }
}

extension Int64 {
  @inlinable
  package func addingSaturating(_ other: Int64) -> Int64 {
    let (sum, overflow) = addingReportingOverflow(other)
    if overflow { return other < 0 ? .min : .max }
    return sum
  }

  /// `self - other`, clamped to the type's range.
  @inlinable
  package func subtractingSaturating(_ other: Int64) -> Int64 {
    let (difference, overflow) = subtractingReportingOverflow(other)
    if overflow { return other > 0 ? .min : .max }
    return difference
  }
}
