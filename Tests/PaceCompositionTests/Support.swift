@testable import Pace

/// A milliseconds instant, so expectations read like the timelines in the docs.
func ms(_ value: Int64) -> PaceInstant {
  PaceInstant(nanoseconds: value * 1_000_000)
}

/// Records values from any thread, with the scheduler time of each.
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

extension Recorder where Value == Void {
  func record() { record(()) }
}

/// A thread-safe counter.
final class Counter: Sendable {
  private let value = LockedState(0)
  func increment() { value.withLock { $0 += 1 } }
  var count: Int { value.withLock { $0 } }
}

/// What changed, as a mask: the `DispatchSourceUserDataOr` use case.
struct ChangeKinds: OptionSet, Sendable, Hashable {
  let rawValue: UInt8
  static let title = ChangeKinds(rawValue: 1 << 0)
  static let items = ChangeKinds(rawValue: 1 << 1)
  static let selection = ChangeKinds(rawValue: 1 << 2)
}

/// `LockedState` under a name that does not need `@testable` at the use site.
final class LockedStateBox<Value: Sendable>: Sendable {
  private let state: LockedState<Value>
  init(_ value: Value) { state = LockedState(value) }
  func mutate(_ body: (inout Value) -> Void) { state.withLock { body(&$0) } }
  var value: Value { state.withLock { $0 } }
}
