extension RateLimit {
  /// The longest interval (a window's length) a limit can have: `Int64.max` nanoseconds, about
  /// 292 years, the span of Pace's integer time.
  public static let maximumInterval: Duration = .nanoseconds(Int64.max)

  /// A limit from values read at run time (a configuration file, a database row, a plan), checked
  /// with a thrown error rather than a trap.
  ///
  /// ```swift
  /// let limit = try RateLimit.validated(permits: row.permits, per: .seconds(row.seconds), algorithm: .slidingWindow)
  /// ```
  ///
  /// A limit this accepts is counted exactly at every instant: no arithmetic of any policy
  /// overflows or saturates for it. It accepts:
  /// - `permits` of 1 or more (up to `Int.max`);
  /// - an `interval` from 1 ns to ``maximumInterval`` (`Int64.max` nanoseconds); a fraction of a
  ///   nanosecond is dropped;
  /// - for a token bucket, a `burst` of 1 or more (`permits` by default) whose capacity fits 64
  ///   bits: `burst` times `interval / gcd(permits, interval in ns)` at most `Int64.max`
  ///   (``RateLimitError/burstTooLarge(_:maximum:)`` says the largest);
  /// - for a window, `burst` `nil` or equal to `permits` (a window's burst is its permits).
  ///
  /// - Parameters:
  ///   - permits: How many permits per `interval` (in each window, for the window algorithms).
  ///   - interval: The period of the rate, or the window's length.
  ///   - burst: A token bucket's capacity; `permits` by default.
  ///   - algorithm: How the permits are counted; a token bucket by default.
  /// - Throws: ``RateLimitError``, naming the first value out of range.
  public static func validated(
    permits: Int, per interval: Duration, burst: Int? = nil, algorithm: Algorithm = .tokenBucket
  ) throws(RateLimitError) -> RateLimit {
    guard permits > 0 else { throw .permitsNotPositive(permits) }
    guard interval >= .nanoseconds(1) else { throw .intervalTooShort(interval) }
    guard interval <= maximumInterval else { throw .intervalTooLong(interval) }
    switch algorithm {
    case .tokenBucket:
      let burst = burst ?? permits
      guard burst > 0 else { throw .burstNotPositive(burst) }
      let nanoseconds = interval.paceNanoseconds
      var (a, b) = (Int64(permits), nanoseconds)
      while b != 0 { (a, b) = (b, a % b) }
      let unitsPerPermit = nanoseconds / a
      let maximum = Int(Int64.max / unitsPerPermit)
      guard burst <= maximum else { throw .burstTooLarge(burst, maximum: maximum) }
      return RateLimit(permits: permits, per: interval, burst: burst)
    case .slidingWindow, .fixedWindow:
      if let burst, burst != permits { throw .burstIsNotPermits(burst: burst, permits: permits) }
      return algorithm == .slidingWindow
        ? .slidingWindow(permits: permits, per: interval) : .fixedWindow(permits: permits, per: interval)
    }
  }
}

/// Why ``RateLimit/validated(permits:per:burst:algorithm:)`` refused a limit.
public enum RateLimitError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The permits are 0 or negative.
  case permitsNotPositive(Int)
  /// The burst is 0 or negative.
  case burstNotPositive(Int)
  /// The interval is shorter than 1 ns (0 or negative, say).
  case intervalTooShort(Duration)
  /// The interval is longer than ``RateLimit/maximumInterval`` (`Int64.max` nanoseconds).
  case intervalTooLong(Duration)
  /// A token bucket's capacity would not fit 64 bits: at most `maximum` permits for this rate.
  case burstTooLarge(Int, maximum: Int)
  /// A window limit was given a burst other than its permits.
  case burstIsNotPermits(burst: Int, permits: Int)

  /// One short line, fit for a log or a configuration error.
  public var description: String {
    switch self {
    case .permitsNotPositive(let permits): "the permits \(permits) are not positive"
    case .burstNotPositive(let burst): "the burst \(burst) is not positive"
    case .intervalTooShort(let interval): "the interval \(interval) is shorter than 1 ns"
    case .intervalTooLong(let interval): "the interval \(interval) is longer than Int64.max ns (about 292 years)"
    case .burstTooLarge(let burst, let maximum): "the burst \(burst) is above \(maximum), the most this rate can count"
    case .burstIsNotPermits(let burst, let permits): "a window's burst is its permits, \(permits), not \(burst)"
    }
  }
}
