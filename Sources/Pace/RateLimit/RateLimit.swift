/// The limit a rate limiter enforces, for each key of a keyed one: `permits` per `interval`,
/// counted by an ``Algorithm``.
///
/// ```swift
/// RateLimit(permits: 100, per: .seconds(60), burst: 20)   // a token bucket: smooths
/// RateLimit.slidingWindow(permits: 3, per: .seconds(10))      // at most 3 in any 10 s
/// RateLimit.fixedWindow(permits: 5_000, per: .seconds(3600))  // 5,000 per clock hour
/// ```
public struct RateLimit: Sendable, Hashable, CustomStringConvertible {
  /// How a limit counts the permits it grants.
  public enum Algorithm: Sendable, Hashable {
    /// A token bucket (GCRA's arithmetic): permits come back one by one, at `permits` per
    /// `interval`, into a bucket of `burst`. Smooths a flow.
    case tokenBucket
    /// At most `permits` granted in any `interval` (a window that slides with every request):
    /// a permit granted at `t` counts until `t + interval`.
    case slidingWindow
    /// At most `permits` granted per window of `interval`, the windows starting at whole
    /// multiples of `interval` in Unix time (on a real clock, and in a store), or at a test
    /// clock's origin: the count starts again at each window's start.
    case fixedWindow
  }

  /// How the permits are counted.
  public let algorithm: Algorithm
  /// How many permits come back per ``interval`` (a window's count, for the window algorithms).
  public let permits: Int
  /// The period of the rate (the window, for the window algorithms).
  public let interval: Duration
  /// How many permits can be taken at once: a token bucket's capacity; ``permits`` for the
  /// window algorithms.
  public let burst: Int

  /// A token bucket: `permits` per `interval`, with a bucket of `burst` (by default `permits`).
  ///
  /// - Parameters:
  ///   - permits: How many permits come back per `interval`. Positive.
  ///   - interval: The period of the rate. At least 1 ns (Pace counts time in whole nanoseconds).
  ///   - burst: How many permits can be taken at once; `permits` by default. Positive.
  public init(permits: Int, per interval: Duration, burst: Int? = nil) {
    precondition(permits > 0, "RateLimit: permits must be positive (got \(permits))")
    precondition(interval >= .nanoseconds(1), "RateLimit: interval must be at least 1 ns (got \(interval))")
    let burst = burst ?? permits
    precondition(burst > 0, "RateLimit: burst must be positive (got \(burst))")
    self.algorithm = .tokenBucket
    self.permits = permits
    self.interval = interval
    self.burst = burst
  }

  private init(algorithm: Algorithm, permits: Int, window: Duration) {
    precondition(permits > 0, "RateLimit: permits must be positive (got \(permits))")
    precondition(window >= .nanoseconds(1), "RateLimit: window must be at least 1 ns (got \(window))")
    self.algorithm = algorithm
    self.permits = permits
    self.interval = window
    self.burst = permits
  }

  /// At most `permits` in any `window`: an exact sliding window.
  ///
  /// - Parameters:
  ///   - permits: How many permits any `window` may hold. Positive.
  ///   - window: The window's length. At least 1 ns.
  public static func slidingWindow(permits: Int, per window: Duration) -> RateLimit {
    RateLimit(algorithm: .slidingWindow, permits: permits, window: window)
  }

  /// At most `permits` per `window`, the windows aligned to the clock: as most APIs count quotas.
  ///
  /// - Parameters:
  ///   - permits: How many permits each window may hold. Positive.
  ///   - window: The window's length. At least 1 ns.
  public static func fixedWindow(permits: Int, per window: Duration) -> RateLimit {
    RateLimit(algorithm: .fixedWindow, permits: permits, window: window)
  }

  /// Such as `"100 per 60 s, burst 20"` or `"3 in any 10 s"`.
  public var description: String {
    switch algorithm {
    case .tokenBucket: "\(permits) per \(interval.paceDescription), burst \(burst)"
    case .slidingWindow: "\(permits) in any \(interval.paceDescription)"
    case .fixedWindow: "\(permits) per window of \(interval.paceDescription)"
    }
  }
}
