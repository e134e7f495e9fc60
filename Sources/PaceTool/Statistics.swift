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
    maxDelay = delays.max()
    // Selection instead of a sort: linear time, which matters for a million calls.
    let p95Index = Self.nearestRankIndex(95, count: delays.count)
    let medianIndex = Self.nearestRankIndex(50, count: delays.count)
    delays.withUnsafeMutableBufferPointer { buffer in
      p95Delay = Self.select(p95Index, in: buffer, from: 0, to: buffer.count)
      // Everything before the 95th percentile's place is now no larger than it.
      medianDelay = Self.select(medianIndex, in: buffer, from: 0, to: p95Index + 1)
    }
  }

  /// The 0-based index of the `percent`-th percentile among `count` sorted values, by nearest
  /// rank: `ceil(percent / 100 * count) - 1`.
  static func nearestRankIndex(_ percent: Int, count: Int) -> Int {
    max((percent * count + 99) / 100, 1) - 1
  }

  /// The `percent`-th percentile of sorted `values`, by nearest rank.
  static func nearestRank(_ percent: Int, of sorted: [Int64]) -> Int64 {
    sorted[nearestRankIndex(percent, count: sorted.count)]
  }

  /// The value that would be at `index` if `buffer[start..<end]` were sorted (quickselect);
  /// reorders that part of the buffer so that smaller values come before `index`.
  static func select(_ index: Int, in buffer: UnsafeMutableBufferPointer<Int64>, from start: Int, to end: Int) -> Int64
  {
    var low = start
    var high = end - 1
    while low < high {
      let middle = low + (high - low) / 2
      // The median of three as pivot keeps sorted and constant inputs linear.
      let a = buffer[low]
      let b = buffer[middle]
      let c = buffer[high]
      let pivot = max(min(a, b), min(max(a, b), c))
      var left = low
      var right = high
      while left <= right {
        while buffer[left] < pivot { left += 1 }
        while buffer[right] > pivot { right -= 1 }
        if left <= right {
          buffer.swapAt(left, right)
          left += 1
          right -= 1
        }
      }
      if index <= right {
        high = right
      } else if index >= left {
        low = left
      } else {
        return buffer[index]
      }
    }
    return buffer[index]
  }
}
