/// ``TestScheduler`` is also a `Clock`, so the async API (``AsyncDebouncedSequence``,
/// ``AsyncDebouncer``, ``RateLimiter``, ...) runs on the same virtual time as ``Debouncer``.
///
/// Pace's async primitives recognise a `TestScheduler` passed as their `clock` and arm their
/// timers on it directly, so a timer fires *inside* ``TestScheduler/advance(by:)``, at its exact
/// deadline, with no task to wait for:
///
/// ```swift
/// @Test func searchIsDebounced() async throws {
///   let scheduler = TestScheduler()
///   let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
///     query.uppercased()
///   }
///   let swift = search.submit("swift")        // registered now, at 0 ms
///   scheduler.advance(by: .milliseconds(300))                   // the invocation starts at 300 ms
///   #expect(try await swift.value == "SWIFT")
/// }
/// ```
///
/// Any other code may sleep on it like on any clock: `sleep(until:)` returns once the scheduler
/// has been advanced to the deadline (at once if the deadline has passed), and throws
/// `CancellationError` when its task is cancelled first. A sleep is scheduled work like any
/// other, so ``pendingCount`` counts it from the moment `sleep` starts. The sleeper is resumed
/// from `advance`, so the sleeping task runs again some time after `advance` returns.
extension TestScheduler: Clock {
  /// One nanosecond: virtual time is exact.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// Suspends until the scheduler has been advanced to `deadline`.
  ///
  /// - Parameters:
  ///   - deadline: The virtual instant to wake at.
  ///   - tolerance: Ignored: virtual time is exact.
  /// - Throws: `CancellationError` if the task is cancelled before the deadline.
  public func sleep(until deadline: PaceInstant, tolerance: Duration? = nil) async throws {
    try await sleep(until: deadline, whenScheduled: nil)
  }

  /// Sleeps as ``sleep(until:tolerance:)``, and calls `whenScheduled` once, as soon as advancing
  /// the scheduler would wake the sleeper (or once the sleep has ended without sleeping): for
  /// PaceTesting's fakes, which count a call once it sleeps.
  package func sleep(until deadline: PaceInstant, whenScheduled: (@Sendable () -> Void)?) async throws {
    guard !Task.isCancelled, deadline > now else {
      whenScheduled?()
      try Task.checkCancellation()
      return
    }
    let sleeper = VirtualSleeper()
    // A task Pace started on this scheduler waits here rather than runs: counted out while it
    // sleeps, and in again by whatever wakes it, before it can run.
    let tracked = followsCurrentTask
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        guard sleeper.begin(continuation) else {
          whenScheduled?()
          return
        }
        let job = schedule(at: deadline) { [self] in
          if tracked { activityStarted() }
          if sleeper.wake() {
            sleeperCountChanged(by: -1)
          } else if tracked {
            activityStopped()  // cancelled meanwhile: its handler counted it in
          }
        }
        sleeper.keep(job)
        // Counted in only once its job is scheduled: a test that waits for this sleeper and
        // then advances must find the job there to run.
        sleeperCountChanged(by: 1)
        if tracked { activityStopped() }
        whenScheduled?()
      }
    } onCancel: {
      if tracked { activityStarted() }
      if sleeper.cancel() {
        sleeperCountChanged(by: -1)
      } else if tracked {
        activityStopped()  // not sleeping (yet, or any more): nothing to count in
      }
    }
  }
}

/// One sleep on a scheduler (``TestScheduler/sleep(until:tolerance:)``,
/// ``DispatchScheduler/sleep(until:tolerance:)``): its continuation and scheduled job.
final class VirtualSleeper: Sendable {
  private enum State {
    case initial
    case sleeping(UnsafeContinuation<Void, any Error>, (any PaceCancellable)?)
    case done
  }

  private let state = LockedState(State.initial)

  /// Stores the continuation; returns `false` (and resumes it) if the task was cancelled first.
  func begin(_ continuation: UnsafeContinuation<Void, any Error>) -> Bool {
    let started = state.withLock { state -> Bool in
      guard case .initial = state else { return false }
      state = .sleeping(continuation, nil)
      return true
    }
    if !started { continuation.resume(throwing: CancellationError()) }
    return started
  }

  /// Keeps the scheduled job so that cancellation can unschedule it.
  func keep(_ job: any PaceCancellable) {
    let cancelledMeanwhile = state.withLock { state -> Bool in
      guard case .sleeping(let continuation, nil) = state else { return true }
      state = .sleeping(continuation, job)
      return false
    }
    // Woken already (its deadline had passed) or cancelled: the job is spent or must not run.
    if cancelledMeanwhile { job.cancel() }
  }

  /// Resumes the sleeper; `false` if it had been cancelled already.
  func wake() -> Bool {
    guard let (continuation, _) = finish() else { return false }
    continuation.resume()
    return true
  }

  /// Throws `CancellationError` in the sleeper; `true` if it was sleeping (counted in).
  func cancel() -> Bool {
    let sleeping = state.withLock { state -> Bool in
      if case .initial = state {
        state = .done  // `begin` will see it and throw
        return false
      }
      return true
    }
    guard sleeping, let (continuation, job) = finish() else { return false }
    job?.cancel()
    continuation.resume(throwing: CancellationError())
    return true
  }

  private func finish() -> (continuation: UnsafeContinuation<Void, any Error>, job: (any PaceCancellable)?)? {
    state.withLock { state in
      guard case .sleeping(let continuation, let job) = state else { return nil }
      state = .done
      return (continuation, job)
    }
  }
}
