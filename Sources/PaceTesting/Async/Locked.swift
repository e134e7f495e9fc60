import Foundation

/// A value behind an `NSLock`: the async harness's state is touched from the test's task and
/// from the tasks under test. `NSLock`, unlike `Mutex`, is available on every platform Pace
/// supports and is visible to the thread sanitizer. Never call user code inside `withLock`.
final class Locked<State>: @unchecked Sendable {
  // @unchecked Sendable: `state` is only read or written inside `withLock`, under `lock`.
  private let lock = NSLock()
  private var state: State

  init(_ initial: State) {
    state = initial
  }

  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}
