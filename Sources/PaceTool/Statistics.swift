/// The trade-off of a strategy on a trace: how many invocations, and how long calls wait.
///
/// The **delay** of a call is the time from the call to the invocation that covers it: the
/// invocation whose merged value includes the call. Pace merges each call into exactly one
/// invocation, the first at or after the call that includes it, or into none: a call that a
/// leading-only strategy ignores is **dropped** and has no delay. Percentiles use the
/// nearest-rank method over the covered calls (the median of 4 delays is the 2nd smallest).
public struct Statistics: Sendable, Equatable {
  /// Calls in.
  public var calls: Int
  /// Invocations out.
  public var invocations: Int
  /// Calls no invocation covers.
  public var dropped: Int
  /// The median delay of the covered calls, in nanoseconds; `nil` if none is covered.
  public var medianDelay: Int64?
  /// The 95th percentile delay, in nanoseconds.
  public var p95Delay: Int64?
  /// The longest delay, in nanoseconds.
  public var maxDelay: Int64?

  /// The share of calls that did not become an invocation: 1 − invocations / calls.
  public var reduction: Double {
    calls == 0 ? 0 : 1 - Double(invocations) / Double(calls)
  }

  /// The statistics of `invocations` made from `trace`.
  public init(trace: Trace, invocations: [Invocation]) {
    calls = trace.count
    self.invocations = invocations.count
    var delays: [Int64] = []
    delays.reserveCapacity(trace.count)
    for invocation in invocations {
      for call in invocation.firstCall..<(invocation.firstCall + invocation.callCount) {
        delays.append(invocation.time - trace.times[call])
      }
    }
    dropped = calls - delays.count
    guard !delays.isEmpty else { return }
    delays.sort()
    medianDelay = Self.nearestRank(50, of: delays)
    p95Delay = Self.nearestRank(95, of: delays)
    maxDelay = delays.last
  }

  /// The `percent`-th percentile of sorted `values`, by nearest rank.
  static func nearestRank(_ percent: Int, of sorted: [Int64]) -> Int64 {
    let rank = (percent * sorted.count + 99) / 100  // ceil(percent / 100 * n)
    return sorted[max(rank, 1) - 1]
  }
}
