#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The Unix time in nanoseconds (`CLOCK_REALTIME`), for aligning fixed windows on a real clock.
@usableFromInline
package func unixTimeNanoseconds() -> Int64 {
  var time = timespec()
  clock_gettime(CLOCK_REALTIME, &time)
  return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
}

#if os(Linux)
/// `CLOCK_BOOTTIME` in nanoseconds: what `ContinuousClock` reads on Linux.
@inlinable
package func bootTimeNanoseconds() -> Int64 {
  var time = timespec()
  clock_gettime(CLOCK_BOOTTIME, &time)
  return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
}
#endif

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
package struct AsyncClock: Sendable {
  /// The current time on this clock's timeline.
  @usableFromInline package let now: @Sendable () -> PaceInstant
  /// Runs the work at the deadline; returns a handle that cancels it.
  @usableFromInline package let schedule: @Sendable (PaceInstant, @escaping @Sendable () -> Void) -> any PaceCancellable
  /// The clock when it is a ``TestScheduler``, which counts the work started on it.
  @usableFromInline package let testScheduler: TestScheduler?
  /// The Unix time, in nanoseconds, of this timeline's instant 0, for a clock that runs with
  /// real time (`ContinuousClock`, `SuspendingClock`): fixed windows start at whole multiples
  /// of the window in Unix time, as most APIs and a store count them. `nil` for a test clock,
  /// whose fixed windows start at its origin.
  @usableFromInline package let unixNanosecondsAtOrigin: Int64?

  /// Time and timers from `scheduler`, whose timers fire as it says: for tests that run the
  /// async primitives on a scheduler with timing of its own (`PaceTestSupport`'s
  /// `CoarseScheduler`, whose timers fire late).
  package init(scheduler: any PaceScheduler) {
    testScheduler = scheduler as? TestScheduler
    unixNanosecondsAtOrigin = nil
    now = { scheduler.now }
    schedule = { deadline, work in scheduler.schedule(at: deadline, work) }
  }

  @inlinable
  package init<C: Clock>(_ clock: C) where C.Duration == Duration {
    testScheduler = clock as? TestScheduler
    // Read once, beside the origin: the windows of one limiter never move, whatever the wall
    // clock does later (an NTP step moves Unix time, not the monotonic timeline).
    let isRealTime = C.self == ContinuousClock.self || C.self == SuspendingClock.self
    unixNanosecondsAtOrigin = isRealTime ? unixTimeNanoseconds() : nil
    if let scheduler = clock as? TestScheduler {
      now = { scheduler.now }
      schedule = { deadline, work in scheduler.schedule(at: deadline, work) }
    } else if C.self == ContinuousClock.self {
      // The default clock, read without going through `Clock`'s witnesses and `Duration`'s
      // 128-bit arithmetic: the keyed rate limiter reads it on every decision.
      #if os(Linux)
      // `ContinuousClock` is `CLOCK_BOOTTIME` on Linux (swift_get_time). The origin is read
      // before the clock's own instant, so an elapsed time read here is never behind the
      // clock's: a sleep until `origin + deadline` always wakes to find `now >= deadline`.
      let originNanoseconds = bootTimeNanoseconds()
      let origin = ContinuousClock.now
      now = { PaceInstant(nanoseconds: bootTimeNanoseconds() &- originNanoseconds) }
      #else
      let origin = ContinuousClock.now
      now = { PaceInstant(origin.duration(to: ContinuousClock.now)) }
      #endif
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
