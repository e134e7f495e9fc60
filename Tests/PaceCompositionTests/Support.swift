import PaceTestSupport

@testable import Pace

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
