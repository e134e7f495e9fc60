/// Tests waiting for a count to reach a number (PaceTesting's `waitFor…` helpers): kept in the
/// state of whatever counts, under its lock, and resumed with the lock released: `true` once the
/// count is reached, `false` by their time limit. ``ConditionWaiters`` whose condition is "at
/// least this many".
package typealias CountWaiters = ConditionWaiters<Int>

extension ConditionWaiters where Condition == Int {
  /// Adds a waiter for `count`; `false` (not added) when `current` reaches it already, and the
  /// caller resumes the continuation with `true`.
  package mutating func add(
    id: UInt64, count: Int, _ continuation: UnsafeContinuation<Bool, Never>, current: Int
  ) -> Bool {
    add(id: id, count, continuation, holdsNow: current >= count)
  }

  /// Takes the waiters whose count `current` reaches.
  package mutating func takeReady(current: Int) -> [UnsafeContinuation<Bool, Never>] {
    takeReady { $0 <= current }
  }
}

/// Suspends until `register`'s continuation is resumed, with `true` by what it waits for, or
/// with `false` after `timeout` of real time, by `withdraw` (which takes waiter `id` out of the
/// list it joined and returns its continuation, if it is still there).
///
/// `register` runs synchronously: it adds the waiter with `id` and returns `true`, or returns
/// `false` when the wait is over already (the continuation is then resumed with `true`). The
/// timer starts only once the waiter is added, so it always finds it or finds it resumed.
package func waitBounded(
  id: UInt64,
  timeout: Duration?,
  withdraw: @escaping @Sendable (UInt64) -> UnsafeContinuation<Bool, Never>?,
  register: (UnsafeContinuation<Bool, Never>) -> Bool
) async -> Bool {
  var timer: Task<Void, Never>?
  let reached = await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
    guard register(continuation) else {
      continuation.resume(returning: true)
      return
    }
    timer = timeout.map { timeout in
      Task {
        // real-time: a test's time limit, cancelled as soon as the wait is over: a passing
        // test never waits for it.
        guard await Task.sleepUnlessCancelled(for: timeout) else { return }
        withdraw(id)?.resume(returning: false)
      }
    }
  }
  timer?.cancel()
  return reached
}
