/// A concurrency limit that finds itself: fed the samples of completed requests (their round
/// trip, whether they were dropped, how many were in flight), it answers how many requests may be
/// in flight now.
///
/// A value with no clock, lock or task: `now` comes in with each sample, the new limit comes out,
/// so a test can feed it a hand-made sequence and expect exact limits. An
/// ``AdaptiveConcurrencyLimiter`` keeps one behind its lock and applies its answers.
///
/// ```swift
/// var limit = AdaptiveLimit.aimd(initialLimit: 10, timeout: .milliseconds(30))
/// let newLimit = limit.record(AdaptiveLimitSample(roundTrip: .milliseconds(21), inFlight: 9), now: now)
/// ```
///
/// The limit stays within `minimumLimit...maximumLimit`, the floor and the ceiling, whatever the
/// samples. Two algorithms (after Netflix's concurrency-limits), each smoothed as its case says:
///
/// - ``aimd(initialLimit:minimumLimit:maximumLimit:timeout:backoffRatio:)``: one more per round of
///   good samples, `backoffRatio` times fewer on a drop or a round trip over `timeout`. Reads
///   failures; needs the latency that counts as too slow.
/// - ``gradient2(initialLimit:minimumLimit:maximumLimit:tolerance:smoothing:queueSize:window:longWindow:)``:
///   once per `window`, the ratio of the long-term to the short-term mean round trip moves the
///   limit. Reads latency only; finds the service's queueing point by itself.
public struct AdaptiveLimit: Sendable, Hashable {
  /// How an ``AdaptiveLimit`` moves, with its settings.
  public enum Algorithm: Sendable, Hashable {
    /// Additive increase, multiplicative decrease: see
    /// ``AdaptiveLimit/aimd(initialLimit:minimumLimit:maximumLimit:timeout:backoffRatio:)``.
    case aimd(timeout: Duration, backoffRatio: Double)
    /// The long-term to short-term round-trip ratio: see
    /// ``AdaptiveLimit/gradient2(initialLimit:minimumLimit:maximumLimit:tolerance:smoothing:queueSize:window:longWindow:)``.
    case gradient2(tolerance: Double, smoothing: Double, queueSize: Int, window: Duration, longWindow: Int)
  }

  /// The algorithm and its settings.
  public let algorithm: Algorithm
  /// The floor: the limit never goes below it.
  public let minimumLimit: Int
  /// The ceiling: the limit never goes above it.
  public let maximumLimit: Int
  /// How many requests may be in flight now.
  public private(set) var limit: Int

  private var state: State

  private enum State: Sendable, Hashable {
    case aimd(AIMDState)
    case gradient2(Gradient2State)
  }

  private struct AIMDState: Sendable, Hashable {
    /// Good samples since the last change of the limit, towards the next increase.
    var goodSamples = 0
    /// Samples still to come that were let through before the last decrease: their drops do
    /// not decrease again.
    var samplesHeld = 0
  }

  private struct Gradient2State: Sendable, Hashable {
    /// The limit before it is rounded down.
    var estimate: Double
    /// When the current window opened: the first sample's instant, then each close's.
    var windowStart: PaceInstant?
    var windowSamples = 0
    var windowRoundTripNanoseconds = 0.0
    var windowMaximumInFlight = 0
    /// The long-term mean round trip, in nanoseconds; `nil` until the first window closes.
    var longRoundTripNanoseconds: Double?
  }

  private init(algorithm: Algorithm, initialLimit: Int, minimumLimit: Int, maximumLimit: Int, state: State) {
    self.algorithm = algorithm
    self.limit = initialLimit
    self.minimumLimit = minimumLimit
    self.maximumLimit = maximumLimit
    self.state = state
  }

  /// Additive increase, multiplicative decrease (as TCP's congestion window): the limit grows by
  /// one per round of good samples and shrinks by `backoffRatio` on a drop.
  ///
  /// For each sample, in this order:
  /// 1. A sample that is dropped, or whose round trip is above `timeout`, is a drop. The limit
  ///    becomes `max(minimumLimit, ⌊limit × backoffRatio⌋)`, unless it is one of
  ///    the `L` samples after the last decrease, `L` being the limit before that decrease: those
  ///    requests were let through under the old limit, and their drops say nothing of the new one.
  /// 2. Any other sample is good. It counts towards an increase only if its `inFlight × 2` is at
  ///    least the limit (a limit that is not half used is not being tested). When `limit` good
  ///    samples have counted since the last change, the limit becomes
  ///    `min(maximumLimit, limit + 1)`: one more per round, about one per round trip.
  ///
  /// The smoothing is thus the round: at most one step up per `limit` good samples, and at most
  /// one step down per `limit` samples. `now` is not read.
  ///
  /// - Parameters:
  ///   - initialLimit: The limit before any sample, within `minimumLimit...maximumLimit`.
  ///   - minimumLimit: The floor. Positive.
  ///   - maximumLimit: The ceiling. At least `minimumLimit`.
  ///   - timeout: The round trip above which a request counts as dropped: the latency the
  ///     service should keep under. Positive.
  ///   - backoffRatio: What a drop multiplies the limit by (rounded down). Above 0, below 1.
  public static func aimd(
    initialLimit: Int = 10,
    minimumLimit: Int = 1,
    maximumLimit: Int = 200,
    timeout: Duration,
    backoffRatio: Double = 0.9
  ) -> AdaptiveLimit {
    checkBounds("aimd", initialLimit: initialLimit, minimumLimit: minimumLimit, maximumLimit: maximumLimit)
    precondition(timeout > .zero, "AdaptiveLimit.aimd: timeout must be positive (got \(timeout))")
    precondition(
      backoffRatio > 0 && backoffRatio < 1,
      "AdaptiveLimit.aimd: backoffRatio must be above 0 and below 1 (got \(backoffRatio))")
    return AdaptiveLimit(
      algorithm: .aimd(timeout: timeout, backoffRatio: backoffRatio), initialLimit: initialLimit,
      minimumLimit: minimumLimit, maximumLimit: maximumLimit, state: .aimd(AIMDState()))
  }

  /// The gradient of the round trip: the limit follows the ratio of the long-term mean round
  /// trip (the service unloaded) to the short-term one (the service now), with room for a small
  /// queue.
  ///
  /// Samples are gathered into windows: the first opens at the first sample, each later one at
  /// the instant the one before closed, and a window closes with the first sample at or after
  /// `window` after it opened, that sample included. When a window closes, with `short` its mean
  /// round trip and `inFlight` the largest `inFlight` of its samples:
  /// 1. The long-term round trip `long` becomes `short` at the first window, and
  ///    `long + (short - long) × 2 / (longWindow + 1)` at every later one (an exponential
  ///    average over about `longWindow` windows).
  /// 2. If `long > 2 × short`, `long` becomes `long × 0.9`: after a long overload, the baseline
  ///    comes back down faster than the average alone would bring it.
  /// 3. If `inFlight × 2` is below the estimate, nothing else changes: a limit that is not half
  ///    used is not being tested.
  /// 4. `gradient = max(0.5, min(1, tolerance × long / short))`; `target = estimate × gradient +
  ///    queueSize`; the estimate becomes `estimate × (1 - smoothing) + target × smoothing`, then
  ///    `max(minimumLimit, min(maximumLimit, estimate))`, and the limit is the estimate rounded
  ///    down.
  ///
  /// Under `tolerance` times the baseline round trip the gradient is 1 and the limit grows by
  /// `queueSize × smoothing` per window; above it, the limit shrinks, by at most half of
  /// `smoothing` per window. It settles where `tolerance × long / short = 1 - queueSize / limit`.
  /// The first window's mean is the baseline: start at a limit the service handles without
  /// queueing. `dropped` is not read: use ``aimd(initialLimit:minimumLimit:maximumLimit:timeout:backoffRatio:)``
  /// where failures are the signal.
  ///
  /// - Parameters:
  ///   - initialLimit: The limit before any sample, within `minimumLimit...maximumLimit`.
  ///   - minimumLimit: The floor. Positive.
  ///   - maximumLimit: The ceiling. At least `minimumLimit`.
  ///   - tolerance: How many times the baseline round trip is still no queueing. At least 1.
  ///   - smoothing: The share of the target the estimate moves by per window. Above 0, at most 1.
  ///   - queueSize: How many requests may queue beyond the gradient's limit. Zero or more.
  ///   - window: How long a window gathers samples for. Positive.
  ///   - longWindow: How many windows the long-term average spans. Positive.
  public static func gradient2(
    initialLimit: Int = 10,
    minimumLimit: Int = 1,
    maximumLimit: Int = 200,
    tolerance: Double = 1.5,
    smoothing: Double = 0.2,
    queueSize: Int = 4,
    window: Duration = .seconds(1),
    longWindow: Int = 600
  ) -> AdaptiveLimit {
    checkBounds("gradient2", initialLimit: initialLimit, minimumLimit: minimumLimit, maximumLimit: maximumLimit)
    precondition(tolerance >= 1, "AdaptiveLimit.gradient2: tolerance must be at least 1 (got \(tolerance))")
    precondition(
      smoothing > 0 && smoothing <= 1,
      "AdaptiveLimit.gradient2: smoothing must be above 0 and at most 1 (got \(smoothing))")
    precondition(queueSize >= 0, "AdaptiveLimit.gradient2: queueSize must be zero or more (got \(queueSize))")
    precondition(window > .zero, "AdaptiveLimit.gradient2: window must be positive (got \(window))")
    precondition(longWindow > 0, "AdaptiveLimit.gradient2: longWindow must be positive (got \(longWindow))")
    return AdaptiveLimit(
      algorithm: .gradient2(
        tolerance: tolerance, smoothing: smoothing, queueSize: queueSize, window: window, longWindow: longWindow),
      initialLimit: initialLimit, minimumLimit: minimumLimit, maximumLimit: maximumLimit,
      state: .gradient2(Gradient2State(estimate: Double(initialLimit))))
  }

  private static func checkBounds(_ name: String, initialLimit: Int, minimumLimit: Int, maximumLimit: Int) {
    precondition(minimumLimit > 0, "AdaptiveLimit.\(name): minimumLimit must be positive (got \(minimumLimit))")
    precondition(
      maximumLimit >= minimumLimit,
      "AdaptiveLimit.\(name): maximumLimit must be at least minimumLimit \(minimumLimit) (got \(maximumLimit))")
    precondition(
      initialLimit >= minimumLimit && initialLimit <= maximumLimit,
      "AdaptiveLimit.\(name): initialLimit must be within \(minimumLimit)...\(maximumLimit) (got \(initialLimit))")
  }

  /// Takes in one completed request, at `now`, and answers the limit after it.
  ///
  /// - Parameters:
  ///   - sample: The request's round trip, whether it was dropped, and how many were in flight
  ///     when it was let through.
  ///   - now: When it completed, on the clock of the samples before it.
  /// - Returns: The new ``limit``.
  @discardableResult
  public mutating func record(_ sample: AdaptiveLimitSample, now: PaceInstant) -> Int {
    switch (algorithm, state) {
    case (.aimd(let timeout, let backoffRatio), .aimd(var aimd)):
      recordAIMD(sample, timeout: timeout, backoffRatio: backoffRatio, state: &aimd)
      state = .aimd(aimd)
    case (.gradient2(let tolerance, let smoothing, let queueSize, let window, let longWindow), .gradient2(var g)):
      recordGradient2(
        sample, now: now, tolerance: tolerance, smoothing: smoothing, queueSize: queueSize, window: window,
        longWindow: longWindow, state: &g)
      state = .gradient2(g)
    default:
      preconditionFailure("AdaptiveLimit: the state does not match the algorithm")
    }
    return limit
  }

  private mutating func recordAIMD(
    _ sample: AdaptiveLimitSample, timeout: Duration, backoffRatio: Double, state: inout AIMDState
  ) {
    let held = state.samplesHeld > 0
    if held { state.samplesHeld -= 1 }
    if sample.dropped || sample.roundTrip > timeout {
      guard !held else { return }
      state.goodSamples = 0
      state.samplesHeld = limit
      limit = Swift.max(minimumLimit, Int((Double(limit) * backoffRatio).rounded(.down)))
      return
    }
    // inFlight × 2 ≥ limit, written so that no inFlight overflows.
    guard sample.inFlight >= (limit + 1) / 2 else { return }
    state.goodSamples += 1
    guard state.goodSamples >= limit else { return }
    state.goodSamples = 0
    limit = Swift.min(maximumLimit, limit + 1)
  }

  private mutating func recordGradient2(
    _ sample: AdaptiveLimitSample, now: PaceInstant, tolerance: Double, smoothing: Double, queueSize: Int,
    window: Duration, longWindow: Int, state g: inout Gradient2State
  ) {
    let start = g.windowStart ?? now
    g.windowStart = start
    g.windowSamples += 1
    g.windowRoundTripNanoseconds += Double(sample.roundTrip.paceNanoseconds)
    g.windowMaximumInFlight = Swift.max(g.windowMaximumInFlight, sample.inFlight)
    guard now >= start.advanced(by: window) else { return }

    let short = g.windowRoundTripNanoseconds / Double(g.windowSamples)
    let inFlight = g.windowMaximumInFlight
    g.windowStart = now
    g.windowSamples = 0
    g.windowRoundTripNanoseconds = 0
    g.windowMaximumInFlight = 0

    var long = g.longRoundTripNanoseconds.map { $0 + (short - $0) * 2 / Double(longWindow + 1) } ?? short
    if long > 2 * short { long *= 0.9 }
    g.longRoundTripNanoseconds = long

    guard Double(inFlight) * 2 >= g.estimate else { return }
    let gradient = short > 0 ? Swift.max(0.5, Swift.min(1, tolerance * long / short)) : 1
    let target = g.estimate * gradient + Double(queueSize)
    let smoothed = g.estimate * (1 - smoothing) + target * smoothing
    g.estimate = Swift.max(Double(minimumLimit), Swift.min(Double(maximumLimit), smoothed))
    limit = Int(g.estimate.rounded(.down))
  }

  /// Gradient2's long-term mean round trip (the baseline), once its first window has closed; `nil`
  /// for AIMD.
  package var longRoundTrip: Duration? {
    guard case .gradient2(let g) = state, let long = g.longRoundTripNanoseconds else { return nil }
    return .nanoseconds(Int64(long.rounded()))
  }
}
