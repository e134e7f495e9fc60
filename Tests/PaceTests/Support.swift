@testable import Pace

/// A milliseconds instant, so expectations read like the timelines in the docs.
func ms(_ value: Int64) -> PaceInstant {
  PaceInstant(nanoseconds: value * 1_000_000)
}

/// Records what `perform` receives, with the scheduler time of each invocation.
final class Recorder<Value: Sendable>: Sendable {
  private let entries = LockedState<[(PaceInstant, Value)]>([])
  private let clock: (any PaceScheduler)?

  init(clock: (any PaceScheduler)? = nil) {
    self.clock = clock
  }

  func record(_ value: Value) {
    let now = clock?.now ?? .zero
    entries.withLock { $0.append((now, value)) }
  }

  var values: [Value] { entries.withLock { $0.map(\.1) } }
  var times: [PaceInstant] { entries.withLock { $0.map(\.0) } }
  var count: Int { entries.withLock { $0.count } }
}

extension Recorder where Value: Equatable {
  /// `(milliseconds, value)` pairs, for exact timeline comparisons.
  var timeline: [Event<Value>] {
    entries.withLock { $0.map { Event(ms: $0.0.nanoseconds / 1_000_000, value: $0.1) } }
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

/// SplitMix64: a small seeded generator, so random timelines are reproducible from their seed.
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
