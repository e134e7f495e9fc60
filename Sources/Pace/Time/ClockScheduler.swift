/// A ``PaceScheduler`` over any `Clock` whose duration is `Swift.Duration`:
/// `ContinuousClock`, `SuspendingClock`, or another library's test clock.
///
/// ```swift
/// let save = Debouncer<Draft>(for: .seconds(2), scheduler: .clock(ContinuousClock())) { store($0) }
/// ```
///
/// Time is measured from the clock's reading when the scheduler was made. Scheduled work runs in
/// a task that sleeps on the clock until the deadline; on a ``TestScheduler`` it is scheduled
/// on the scheduler itself, so that it runs inside `advance`, at its exact deadline, as when the
/// `TestScheduler` is passed as the scheduler. So code that is given a clock can hand it to every
/// primitive: `clock:` to the async ones, `scheduler: .clock(clock)` to the others. The scheduler has no execution context
/// of its own, so ``isCurrent`` is always `true`: a leading invocation runs inline in `call`,
/// and a trailing one in the timer's task.
public struct ClockScheduler<C: Clock>: PaceScheduler where C.Duration == Duration {
  /// The clock that tells the time.
  public let clock: C
  private let origin: C.Instant
  /// The clock when it is a ``TestScheduler``, and its time when this scheduler was made.
  private let virtual: (scheduler: TestScheduler, origin: PaceInstant)?

  /// A scheduler on `clock`, whose ``now`` starts at ``PaceInstant/zero``.
  public init(_ clock: C) {
    self.clock = clock
    self.origin = clock.now
    virtual = (clock as? TestScheduler).map { ($0, $0.now) }
  }

  public var now: PaceInstant {
    PaceInstant(origin.duration(to: clock.now))
  }

  /// Always `true`: a clock has no context to hop to.
  public var isCurrent: Bool { true }

  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    if let (scheduler, origin) = virtual {
      return scheduler.schedule(at: origin.advanced(by: deadline.offset), work)
    }
    let instant = origin.advanced(by: deadline.offset)
    let clock = self.clock
    return Task {
      do {
        try await clock.sleep(until: instant, tolerance: nil)
      } catch {
        return  // cancelled
      }
      work()
    }
  }

  /// Runs `work` in a new task. Tasks give no order among themselves; Pace's primitives never
  /// rely on it, since ``isCurrent`` is always `true`.
  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    if let (scheduler, _) = virtual { return scheduler.enqueue(work) }
    Task { work() }
  }
}

extension Task: PaceCancellable {}

extension PaceScheduler {
  /// A scheduler on `clock`.
  public static func clock<C: Clock>(_ clock: C) -> ClockScheduler<C> where Self == ClockScheduler<C> {
    ClockScheduler(clock)
  }
}
