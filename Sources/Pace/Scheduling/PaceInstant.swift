/// A point on a scheduler's timeline, in nanoseconds from the scheduler's origin.
///
/// Every ``PaceScheduler`` measures time with this one type, so the state machines behind
/// ``Debouncer`` and ``Throttler`` work the same on Dispatch, on any `Clock` and on
/// ``TestScheduler``. It is an `InstantProtocol` whose `Duration` is `Swift.Duration`.
///
/// Instants of different schedulers are not comparable with each other: each scheduler has its
/// own origin (``TestScheduler`` starts at ``zero``).
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

  /// How far this instant is from the origin.
  @inlinable
  public var offset: Duration { .nanoseconds(nanoseconds) }

  @inlinable
  public func advanced(by duration: Duration) -> PaceInstant {
    PaceInstant(nanoseconds: nanoseconds.addingSaturating(duration.paceNanoseconds))
  }

  @inlinable
  public func duration(to other: PaceInstant) -> Duration {
    .nanoseconds(other.nanoseconds &- nanoseconds)
  }

  @inlinable
  public static func < (lhs: PaceInstant, rhs: PaceInstant) -> Bool {
    lhs.nanoseconds < rhs.nanoseconds
  }

  /// The offset from the origin, such as `"300 ms"` or `"1.5 s"`.
  public var description: String { offset.paceDescription }
}

extension Duration {
  /// This duration in whole nanoseconds, saturating at the bounds of `Int64`.
  @inlinable
  var paceNanoseconds: Int64 {
    let (seconds, attoseconds) = components
    let (wholeNanos, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    return wholeNanos.addingSaturating(attoseconds / 1_000_000_000)
  }

  /// A short human form used in diagrams and messages: `"0 ms"`, `"250 ms"`, `"1.5 s"`, `"40 µs"`.
  var paceDescription: String {
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
  func addingSaturating(_ other: Int64) -> Int64 {
    let (sum, overflow) = addingReportingOverflow(other)
    if overflow { return other < 0 ? .min : .max }
    return sum
  }
}
