import Pace

/// The clock of a ``PacedRequests``, as its send loop reads it: the time now, timers, and sleeps
/// until an instant (a `TestScheduler` is slept on directly, so that an instant is exact).
struct SendClock: Sendable {
  let clock: AsyncClock
  private let sleepFor: @Sendable (Duration) async throws -> Void

  init<C: Clock>(_ clock: C) where C.Duration == Duration {
    self.clock = AsyncClock(clock)
    sleepFor = { duration in try await clock.sleep(for: duration) }
  }

  func now() -> PaceInstant { clock.now() }

  /// Sleeps for `duration` on the clock, as the loop's back-off always has.
  func sleep(for duration: Duration) async throws {
    try await sleepFor(duration)
  }

  /// Sleeps until `instant` on the clock's timeline; returns at once if it has passed.
  func sleep(until instant: PaceInstant) async throws {
    if let scheduler = clock.testScheduler {
      try await scheduler.sleep(until: instant)
      return
    }
    let duration = clock.now().duration(to: instant)
    if duration > .zero { try await sleepFor(duration) } else { try Task.checkCancellation() }
  }

  /// Runs `work` at `instant` (at once if it has passed); the handle cancels it.
  func schedule(at instant: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    clock.schedule(instant, work)
  }

  /// The value of `waiter`, a task of a request's own, cut at `deadline`: the timer cancels the
  /// task there and the wait throws `PacedRequestsError.deadlineExceeded`; the caller's
  /// cancellation cancels the task too.
  func value<Value: Sendable>(
    of waiter: Task<Value, any Error>, cutAt deadline: PaceInstant, isolation: isolated (any Actor)? = #isolation
  ) async throws -> Value {
    let expired = LockedState(false)
    let timer = schedule(at: deadline) {
      expired.withLock { $0 = true }
      waiter.cancel()
    }
    defer { timer.cancel() }
    do {
      return try await withTaskCancellationHandler(
        operation: { try await waiter.value }, onCancel: { waiter.cancel() }, isolation: isolation)
    } catch is CancellationError where expired.withLock({ $0 }) {
      throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)
    }
  }
}
