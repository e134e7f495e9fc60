extension Task where Success == Never, Failure == Never {
  /// Sleeps for `duration` of real time, or less if the task is cancelled meanwhile.
  ///
  /// For the timers that cancellation ends on purpose (a timeout no longer needed, a worker that
  /// shuts down): cancellation is `Task.sleep`'s only error, and here it is an answer, not a fault.
  ///
  /// - Returns: `true` if the whole duration passed; `false` if the task was cancelled first.
  @discardableResult
  package static func sleepUnlessCancelled(for duration: Duration) async -> Bool {
    do {
      try await sleep(for: duration)
      return true
    } catch {
      return false
    }
  }
}
