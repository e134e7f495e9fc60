/// How Pace's async primitives read the time and arm their timers, for any clock.
///
/// A ``TestScheduler`` is used directly, so its timers fire synchronously inside
/// ``TestScheduler/advance(by:)`` at their exact deadlines. Any other clock is read relative to
/// its reading when this value was made, and a timer is a task that sleeps on the clock.
///
/// The initialiser is `@inlinable`, so both closures are specialised for the concrete clock in
/// the caller's module: reading `ContinuousClock.now` on an operator's hot path costs a clock
/// read, with no generic dispatch.
@usableFromInline
struct AsyncClock: Sendable {
  /// The current time on this clock's timeline.
  @usableFromInline let now: @Sendable () -> PaceInstant
  /// Runs the work at the deadline; returns a handle that cancels it.
  @usableFromInline let schedule: @Sendable (PaceInstant, @escaping @Sendable () -> Void) -> any PaceCancellable

  @inlinable
  init<C: Clock>(_ clock: C) where C.Duration == Duration {
    if let scheduler = clock as? TestScheduler {
      now = { scheduler.now }
      schedule = { deadline, work in scheduler.schedule(at: deadline, work) }
    } else if C.self == ContinuousClock.self {
      // The default clock, read without going through `Clock`'s witnesses: the keyed rate
      // limiter reads it on every decision.
      let origin = ContinuousClock.now
      now = { PaceInstant(origin.duration(to: ContinuousClock.now)) }
      schedule = { deadline, work in
        Task {
          do {
            try await ContinuousClock().sleep(until: origin.advanced(by: deadline.offset), tolerance: nil)
          } catch {
            return  // cancelled
          }
          work()
        }
      }
    } else {
      let origin = clock.now
      now = { PaceInstant(origin.duration(to: clock.now)) }
      schedule = { deadline, work in
        Task {
          do {
            try await clock.sleep(until: origin.advanced(by: deadline.offset), tolerance: nil)
          } catch {
            return  // cancelled
          }
          work()
        }
      }
    }
  }
}
