/// An instant of wall-clock time, in whole nanoseconds since the Unix epoch (1970-01-01 00:00 UTC):
/// when a block ends, say, which every instance of a server reads alike, unlike an instant of a
/// monotonic clock, which means nothing outside its process.
///
/// ```swift
/// let inAnHour = UnixTime.now + .seconds(3600)
/// blocks.block("abuser", until: inAnHour)
/// ```
///
/// Arithmetic saturates at the ends of `Int64` nanoseconds (about the years 1678 and 2262), so an
/// instant read from a database row or a request never traps.
public struct UnixTime: Sendable, Hashable, Comparable, CustomStringConvertible {
  /// Nanoseconds since the Unix epoch; negative before it.
  public let nanosecondsSinceEpoch: Int64

  /// The instant `nanosecondsSinceEpoch` nanoseconds after the Unix epoch.
  public init(nanosecondsSinceEpoch: Int64) {
    self.nanosecondsSinceEpoch = nanosecondsSinceEpoch
  }

  /// The instant `sinceEpoch` after the Unix epoch, in whole nanoseconds (a fraction is dropped),
  /// saturating at the ends of `Int64` nanoseconds.
  public init(sinceEpoch: Duration) {
    nanosecondsSinceEpoch = sinceEpoch.paceNanoseconds
  }

  /// How long after the Unix epoch this instant is.
  public var sinceEpoch: Duration { .nanoseconds(nanosecondsSinceEpoch) }

  /// The system's wall clock now (`CLOCK_REALTIME`).
  public static var now: UnixTime { UnixTime(nanosecondsSinceEpoch: unixTimeNanoseconds()) }

  /// The instant `duration` after `time`, saturating at the ends of the timeline.
  public static func + (time: UnixTime, duration: Duration) -> UnixTime {
    UnixTime(sinceEpoch: time.sinceEpoch + clamped(duration))
  }

  /// The instant `duration` before `time`, saturating at the ends of the timeline.
  public static func - (time: UnixTime, duration: Duration) -> UnixTime {
    UnixTime(sinceEpoch: time.sinceEpoch - clamped(duration))
  }

  /// `duration` within twice `Int64` nanoseconds: beyond, a sum with any instant saturates
  /// anyway, and `Duration`'s own arithmetic could overflow.
  private static func clamped(_ duration: Duration) -> Duration {
    let bound = Duration.nanoseconds(Int64.max) * 2
    return duration > bound ? bound : duration < .zero - bound ? .zero - bound : duration
  }

  /// How long from `earlier` to `later` (negative if `later` comes first).
  public static func - (later: UnixTime, earlier: UnixTime) -> Duration {
    .nanoseconds(later.nanosecondsSinceEpoch) - .nanoseconds(earlier.nanosecondsSinceEpoch)
  }

  public static func < (lhs: UnixTime, rhs: UnixTime) -> Bool {
    lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch
  }

  /// Seconds since the Unix epoch, with the nanoseconds when there are any:
  /// `"1700000000 s since the Unix epoch"`, `"1700000000.000000250 s since the Unix epoch"`.
  public var description: String {
    let (seconds, nanoseconds) = nanosecondsSinceEpoch.quotientAndRemainder(dividingBy: 1_000_000_000)
    guard nanoseconds != 0 else { return "\(seconds) s since the Unix epoch" }
    let sign = nanosecondsSinceEpoch < 0 && seconds == 0 ? "-" : ""
    let fraction = String(nanoseconds.magnitude)
    let padded = String(repeating: "0", count: 9 - fraction.count) + fraction
    return "\(sign)\(seconds).\(padded) s since the Unix epoch"
  }
}
