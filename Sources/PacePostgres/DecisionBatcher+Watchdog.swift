#if PostgreSQL
import Pace

/// The watchdog: one task, started by ``DecisionBatcher/start()``, that answers the callers whose
/// deadline passes, so that no caller waits past its timeout for a lane or a connection.
extension DecisionBatcher {
  /// Answers the callers whose deadline passed, sleeping until the earliest; parks while nobody
  /// waits; ends after ``shutdown()``, which owns its task.
  func watch() async {
    while true {
      enum Next {
        case stop, park
        case sleep(until: ContinuousClock.Instant)
      }
      let next: Next = state.withLock { state in
        if let earliest = state.waiters.values.lazy.map(\.request.deadline).min() { return .sleep(until: earliest) }
        return state.closed ? .stop : .park
      }
      switch next {
      case .stop:
        return
      case .park:
        // Nobody waits: park until a decision comes, or ``shutdown()``.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          let parked = state.withLock { state in
            guard !state.closed, state.waiters.isEmpty else { return false }
            state.parkedWatchdog = continuation
            return true
          }
          if !parked { continuation.resume() }
        }
        if state.withLock({ $0.closed && $0.waiters.isEmpty }) { return }
      case .sleep(let earliest):
        // One sleep for every waiter rather than a timer per decision: a decision costs no task.
        // Only ``shutdown()`` cancels it, once every caller is answered.
        guard await Task.sleepUnlessCancelled(for: ContinuousClock.now.duration(to: earliest)) else {
          // Cancelled by ``shutdown()`` once every lane has ended: whoever still waits is answered.
          fail(state.withLock { Array($0.waiters.keys) }, with: StoreShutDown())
          return
        }
        let now = ContinuousClock.now
        let expired = state.withLock { state in state.waiters.filter { $0.value.request.deadline <= now }.map(\.key) }
        fail(expired, with: DatabaseTimeout())
      }
    }
  }
}
#endif
