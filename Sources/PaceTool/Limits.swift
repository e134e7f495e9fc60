import PaceMarbles

/// What the tool accepts, chosen so that its work is bounded by its input and its time
/// arithmetic never reaches the end of `Int64`.
///
/// A call at the latest time plus three of the longest intervals (the default maxWait of
/// `pace compare`) is 7e18 ns, short of `Int64.max` (9.2e18), so no deadline the engine computes
/// saturates. Traces stamped with Unix time in milliseconds (1.7e12 ms today) fit.
public enum ToolLimits {
  /// The latest time of a call: 4,000,000,000 s (about 126 years), in nanoseconds.
  public static let maximumTime: Int64 = 4_000_000_000 * 1_000_000_000
  /// The longest interval, maxWait or step: 1,000,000,000 s (about 31 years), in nanoseconds.
  public static let maximumDuration: Int64 = 1_000_000_000 * 1_000_000_000
  /// The widest text diagram `--step` may ask for, in columns. Wider is no longer a diagram
  /// anyone reads, and a step of 1us over a day of trace would be 86 billion columns.
  public static let maximumColumns = 1_000
  /// The largest trace file read: 256 MiB, about 16 million calls of CSV.
  public static let maximumTraceBytes = 256 << 20

  /// `maximumTime` as the trace formats write it: `4000000000000ms (about 126 years)`.
  static var maximumTimeText: String { "\(maximumTime / 1_000_000)ms (about 126 years)" }
  /// `maximumDuration` as a duration: `1000000000s (about 31 years)`.
  static var maximumDurationText: String { "\(DurationText.format(.nanoseconds(maximumDuration))) (about 31 years)" }
}
