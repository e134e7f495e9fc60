import PaceTestSupport

@testable import Pace

extension Recorder where Value: Equatable {
  /// `(milliseconds, value)` pairs, for exact timeline comparisons.
  var timeline: [Event<Value>] {
    entriesWithTimes.map { Event(ms: $0.time.nanoseconds / 1_000_000, value: $0.value) }
  }
}

/// One invocation on a millisecond timeline.
struct Event<Value: Equatable>: Equatable, CustomStringConvertible {
  var ms: Int64
  var value: Value
  var description: String { "\(value)@\(ms)" }
}

func at<Value: Equatable>(_ ms: Int64, _ value: Value) -> Event<Value> {
  Event(ms: ms, value: value)
}

/// A scheduler that counts how often it is armed, over a `TestScheduler`.
final class CountingScheduler: PaceScheduler {
  let base = TestScheduler()
  private let armed = LockedState(0)

  var armCount: Int { armed.withLock { $0 } }
  var now: PaceInstant { base.now }
  var isCurrent: Bool { base.isCurrent }

  func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    armed.withLock { $0 += 1 }
    return base.schedule(at: deadline, work)
  }

  func enqueue(_ work: @escaping @Sendable () -> Void) {
    base.enqueue(work)
  }
}
