import Pace

/// A scheduler whose timers fire late, on a tick: at the first boundary of `granularity` at or
/// after their deadline, or after it, as a ticking timer does (a timer wheel, a run loop that
/// wakes on a beat, a kernel that coalesces timers). Time and every other piece of work are its
/// ``base`` `TestScheduler`'s.
///
/// It is virtual time, exactly: with a granularity of 1 ms, a timer for 7 µs fires at 1 ms with
/// `now` at 1 ms, and a call made at 13 µs still finds that timer waiting. Work enqueued to run
/// now runs at the next advance, as on `TestScheduler`:
///
/// ```swift
/// let scheduler = CoarseScheduler(granularity: .milliseconds(1))
/// let debouncer = Debouncer<[Int]>(for: .microseconds(7), merge: .append, scheduler: scheduler) { … }
/// debouncer.call([6])                         // at 0: the timer is for 7 µs, it fires at 1 ms
/// scheduler.advance(to: PaceInstant(nanoseconds: 13_000))
/// debouncer.call([13])                        // overdue, and still pending
/// scheduler.advance(to: ms(1))                // [6, 13] at 1 ms
/// ```
///
/// With ``Tick/afterTheDeadline``, a timer for 1 ms itself fires at 2 ms.
///
/// A scheduler that says it is not current makes the pacers enqueue their deliveries; with
/// ``Enqueued/onTheTick`` that work, too, runs only on a tick (the first at or after now, or
/// after it, as ``tick`` says), as on a run loop that wakes only on its beat.
public final class CoarseScheduler: PaceScheduler {
  /// Which boundary a timer fires at.
  public enum Tick: Sendable, CaseIterable, CustomStringConvertible {
    /// The first boundary at or after the deadline: a deadline on a boundary fires there.
    case atOrAfterTheDeadline
    /// The first boundary after the deadline: a deadline on a boundary fires at the next one.
    case afterTheDeadline

    /// How a test's failure message names it.
    public var description: String {
      switch self {
      case .atOrAfterTheDeadline: "at or after the deadline"
      case .afterTheDeadline: "after the deadline"
      }
    }
  }

  /// When work enqueued to run now runs.
  public enum Enqueued: Sendable, CaseIterable, CustomStringConvertible {
    /// At the base's next advance, at the instant it was enqueued: it is no timer.
    case atTheNextAdvance
    /// At the tick a timer for now fires at: the work waits for the scheduler's beat.
    case onTheTick

    /// How a test's failure message names it.
    public var description: String {
      switch self {
      case .atTheNextAdvance: "enqueued work at the next advance"
      case .onTheTick: "enqueued work on the tick"
      }
    }
  }

  /// The scheduler that keeps the time and runs the work.
  public let base: TestScheduler
  /// The spacing of the instants a timer can fire at, in nanoseconds; positive.
  public let granularity: Int64
  /// Which boundary a timer fires at.
  public let tick: Tick
  /// What ``isCurrent`` answers: a scheduler that says it is not current makes the pacers
  /// enqueue what they would otherwise run at once.
  public let reportsCurrent: Bool
  /// When work enqueued to run now runs.
  public let enqueued: Enqueued

  /// A scheduler whose timers fire at multiples of `granularity` (at least 1 ns), on `base`,
  /// answering `reportsCurrent` when asked whether the caller is on it, and running enqueued
  /// work as `enqueued` says.
  public init(
    granularity: Duration, tick: Tick = .atOrAfterTheDeadline, reportsCurrent: Bool = true,
    enqueued: Enqueued = .atTheNextAdvance, base: TestScheduler = TestScheduler()
  ) {
    let (seconds, attoseconds) = granularity.components
    let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    let nanoseconds = overflow ? Int64.max : whole &+ attoseconds / 1_000_000_000
    precondition(nanoseconds > 0, "CoarseScheduler: granularity must be at least 1 ns (got \(granularity))")
    self.base = base
    self.granularity = nanoseconds
    self.tick = tick
    self.reportsCurrent = reportsCurrent
    self.enqueued = enqueued
  }

  /// The instant a timer for `deadline` fires at; ``PaceInstant/max`` when there is no such
  /// boundary before the end of the timeline.
  public func firingInstant(for deadline: PaceInstant) -> PaceInstant {
    let nanoseconds = deadline.nanoseconds
    var remainder = nanoseconds % granularity
    // Below zero, `%` is negative: count from the boundary below.
    if remainder < 0 { remainder += granularity }
    let up = remainder == 0 ? (tick == .atOrAfterTheDeadline ? 0 : granularity) : granularity - remainder
    let (boundary, overflow) = nanoseconds.addingReportingOverflow(up)
    return overflow ? .max : PaceInstant(nanoseconds: boundary)
  }

  /// The base's time.
  public var now: PaceInstant { base.now }

  /// ``reportsCurrent``: `true` by default, as the base's.
  public var isCurrent: Bool { reportsCurrent }

  /// Runs `work` at ``firingInstant(for:)`` of `deadline` (at the next advance if that has passed).
  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    base.schedule(at: firingInstant(for: deadline), work)
  }

  /// Runs `work` at the base's next advance, or on the tick, as ``enqueued`` says.
  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    switch enqueued {
    case .atTheNextAdvance: base.enqueue(work)
    case .onTheTick: base.schedule(at: firingInstant(for: base.now), work)
    }
  }

  /// Moves time forward to `instant`, running the work that falls due on the way.
  public func advance(to instant: PaceInstant) {
    base.advance(to: instant)
  }

  /// The instants the timers and work still scheduled fire at, earliest first.
  public var pendingDeadlines: [PaceInstant] { base.pendingDeadlines }
}
