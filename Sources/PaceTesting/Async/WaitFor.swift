/// The one wait behind every `waitFor…` of PaceTesting: returns once `reached` says the awaited
/// count is there (it waits for the event that makes it, up to `timeout` of real time), or
/// records a test failure at `location` (Swift Testing or XCTest, whichever runs it) saying what
/// it waited for and what it saw, and returns: it never hangs.
///
/// - Parameters:
///   - call: The call as the test wrote it, such as `RateLimiter.waitForWaiters(3)`.
///   - count: How many it waited for.
///   - noun: What it counts, such as `request(s) waiting in acquire`.
///   - timeout: The real time to wait before failing.
///   - location: Where to report a failure.
///   - reached: Waits for the count for at most its argument; `false` if it did not come.
///   - saw: What was there instead, for the failure.
///   - hint: Why a count does not come, for the failure.
func waitFor(
  _ call: String, _ count: Int, _ noun: String, timeout: Duration, at location: FailureLocation,
  until reached: (Duration) async -> Bool, saw: () -> String,
  hint: String = "the code under test never got there, or waits for something else"
) async {
  guard await reached(timeout) else {
    reportFailure("\(call): waited \(timeout) of real time for \(count) \(noun), saw \(saw()): \(hint)", at: location)
    return
  }
}

/// A count that tests wait for (calls made, values recorded), resumed by the change that makes
/// it rather than by polling.
final class WaitableCount: Sendable {
  private struct State {
    var value = 0
    var waiters = CountWaiters()
  }

  private let state = LockedState(State())

  /// The count now.
  var value: Int { state.withLock { $0.value } }

  /// Adds `change` (negative to take away) and wakes the waiters whose count it reaches.
  func add(_ change: Int = 1) {
    let ready = state.withLock { state in
      state.value += change
      return state.waiters.takeReady(current: state.value)
    }
    for waiter in ready { waiter.resume(returning: true) }
  }

  /// Returns `true` once the count is at least `count` (at once if it is), `false` after
  /// `timeout` of real time.
  func waitUntil(atLeast count: Int, timeout: Duration) async -> Bool {
    await state.waitUntil(count, in: \.waiters, timeout: timeout) { $0.value >= $1 }
  }
}

/// Polls `condition` every millisecond of real time until it holds or `timeout` has passed: for
/// a count that nothing announces (a keyed limiter's waiting requests for one key).
func pollUntil(timeout: Duration, _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now.advanced(by: timeout)
  while !condition() {
    guard ContinuousClock.now < deadline else { return false }
    // real-time: the poll of a bounded wait, only while the count has not come
    try? await Task.sleep(for: .milliseconds(1))
  }
  return true
}
