import Pace

/// When ``PacedRequests`` sends a second attempt of an idempotent request whose first is slow:
/// the first answer wins, and the other attempt is cancelled.
///
/// ```swift
/// let requests = PacedRequests(hedge: .after(.milliseconds(300)))
/// let tail = PacedRequests(hedge: .afterLatencyPercentile(95))   // the key's p95 of its last 100 answers
/// ```
///
/// A hedge is a retry for the ``RetryBudget``: it is withdrawn from it, and not sent when the
/// budget refuses. It is not sent when the key is being paced (its ``ServerPacedLimiter`` would
/// hold it: a `Retry-After`, no quota left, requests waiting, a key never answered), when the
/// key's circuit breaker is not closed, or when it would start at or after the attempt's timeout
/// or the send's deadline. It does not count as an attempt of the ``RetryStrategy``.
public struct Hedge: Sendable, Hashable {
  enum Delay: Hashable {
    case fixed(Duration)
    case latencyPercentile(Double, ofLast: Int, minimumSamples: Int)
  }

  let delay: Delay

  /// A hedge `delay` after the attempt started.
  ///
  /// - Parameter delay: How long the first attempt runs alone. Not negative.
  public static func after(_ delay: Duration) -> Hedge {
    precondition(delay >= .zero, "Hedge: delay must not be negative (got \(delay))")
    return Hedge(delay: .fixed(delay))
  }

  /// A hedge once the attempt has run as long as `percentile` of the key's recent answers took.
  ///
  /// - Parameters:
  ///   - percentile: Of the key's recent latencies, in `0 ... 100`: 95 by default (one request
  ///     in twenty is hedged when the server's latency holds steady).
  ///   - samples: How many of the key's latest answers count; 100 by default. An attempt cancelled
  ///     because the other answered first counts with the time it ran, a lower bound of its own.
  ///     Positive.
  ///   - minimumSamples: How many answers the key needs before it is hedged; 20 by default.
  ///     Positive, at most `samples`.
  public static func afterLatencyPercentile(
    _ percentile: Double = 95, ofLast samples: Int = 100, minimumSamples: Int = 20
  ) -> Hedge {
    precondition((0...100).contains(percentile), "Hedge: percentile must be in 0...100 (got \(percentile))")
    precondition(samples > 0, "Hedge: samples must be positive (got \(samples))")
    precondition(
      (1...samples).contains(minimumSamples),
      "Hedge: minimumSamples must be positive and at most samples (got \(minimumSamples))")
    return Hedge(delay: .latencyPercentile(percentile, ofLast: samples, minimumSamples: minimumSamples))
  }
}

/// Each key's latest latencies, for ``Hedge/afterLatencyPercentile(_:ofLast:minimumSamples:)``.
final class LatencyWindows: Sendable {
  private struct Window {
    var samples: [Duration] = []
    var next = 0
  }

  let capacity: Int
  private let windows = LockedState<[String: Window]>([:])

  init(capacity: Int) {
    self.capacity = capacity
  }

  func record(_ latency: Duration, for key: String) {
    windows.withLock { windows in
      var window = windows.removeValue(forKey: key) ?? Window()
      if window.samples.count < capacity {
        window.samples.append(latency)
      } else {
        window.samples[window.next] = latency
      }
      window.next = (window.next + 1) % capacity
      windows[key] = window
    }
  }

  /// The `percentile` of `key`'s latencies (nearest rank); nil with fewer than `minimumSamples`.
  func percentile(_ percentile: Double, for key: String, minimumSamples: Int) -> Duration? {
    let samples = windows.withLock { $0[key]?.samples ?? [] }
    guard samples.count >= minimumSamples, !samples.isEmpty else { return nil }
    let sorted = samples.sorted()
    let rank = Int((percentile / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
  }
}

extension Hedge {
  /// The capacity of the latency windows this hedge reads; nil when it reads none.
  var latencySamples: Int? {
    guard case .latencyPercentile(_, let samples, _) = delay else { return nil }
    return samples
  }

  /// How long after its start an attempt for `key` is hedged; nil when not yet known.
  func delay(for key: String, latencies: LatencyWindows?) -> Duration? {
    switch delay {
    case .fixed(let delay): delay
    case .latencyPercentile(let percentile, _, let minimumSamples):
      latencies?.percentile(percentile, for: key, minimumSamples: minimumSamples)
    }
  }
}
