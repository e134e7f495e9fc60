/// The state behind ``ManualConnectivity``, apart from any lock or continuation: whether the path
/// is up, and who waits for it, by id, in the order they came.
struct ReachabilityMachine: Sendable, Equatable {
  /// What a caller of `waitUntilReachable` does.
  enum WaitAction: Sendable, Equatable {
    /// The path is up: return at once.
    case proceed
    /// The path is down: suspend until the id is resumed.
    case suspend
  }

  /// Whether the path is up.
  private(set) var isReachable: Bool
  /// The ids of the callers waiting for the path, oldest first.
  private(set) var waiting: [UInt64] = []

  init(isReachable: Bool) {
    self.isReachable = isReachable
  }

  /// A caller `id` asks to wait.
  mutating func wait(id: UInt64) -> WaitAction {
    if isReachable { return .proceed }
    waiting.append(id)
    return .suspend
  }

  /// The path goes up or down; returns the ids to resume (every waiter, once it is up).
  mutating func setReachable(_ reachable: Bool) -> [UInt64] {
    isReachable = reachable
    guard reachable else { return [] }
    defer { waiting = [] }
    return waiting
  }

  /// The caller `id` is cancelled; `true` if it was waiting, and its caller throws.
  mutating func cancel(id: UInt64) -> Bool {
    guard let index = waiting.firstIndex(of: id) else { return false }
    waiting.remove(at: index)
    return true
  }
}
