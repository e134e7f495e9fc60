/// ``DispatchScheduler`` is also a `Clock`, so one value serves both kinds of API in production:
/// `.main` is the `scheduler:` of a ``Debouncer`` and the `clock:` of an ``AsyncDebouncer``, as
/// a ``TestScheduler`` is both in tests.
///
/// ```swift
/// @MainActor final class SearchModel {
///   init(scheduler: some PaceScheduler & Clock<Duration> = DispatchScheduler.main) {
///     hint = Debouncer(for: .milliseconds(150), scheduler: scheduler) { ... }
///     search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { ... }
///   }
/// }
/// ```
///
/// Its time is the scheduler's ``DispatchScheduler/now`` (`DispatchTime` uptime). A sleep
/// resumes when the queue runs the work scheduled for its deadline, so it needs the queue to be
/// served (the main queue is, in an app).
extension DispatchScheduler: Clock {
  /// One nanosecond: `DispatchTime` counts nanoseconds.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// Suspends until the queue runs the work scheduled for `deadline`.
  ///
  /// - Parameters:
  ///   - deadline: The instant to wake at, on the scheduler's timeline.
  ///   - tolerance: Ignored: the queue's timer is exact.
  /// - Throws: `CancellationError` if the task is cancelled before the deadline.
  public func sleep(until deadline: PaceInstant, tolerance: Duration? = nil) async throws {
    try Task.checkCancellation()
    let sleeper = VirtualSleeper()
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        guard sleeper.begin(continuation) else { return }
        sleeper.keep(schedule(at: deadline) { _ = sleeper.wake() })
      }
    } onCancel: {
      _ = sleeper.cancel()
    }
  }
}
