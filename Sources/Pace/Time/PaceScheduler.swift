/// Something that tells the time and runs work at a deadline.
///
/// Pace's primitives take a scheduler so the same code runs on a Dispatch queue
/// (``DispatchScheduler``, spelled `.main` or `.queue(q)`), on any `Clock`
/// (``ClockScheduler``), or in virtual time (``TestScheduler``).
///
/// The name is not `Scheduler` so that it does not clash with Combine's when a file imports both.
public protocol PaceScheduler: Sendable {
  /// The current time on this scheduler's timeline.
  var now: PaceInstant { get }

  /// Whether the calling code already runs in this scheduler's execution context, so work for
  /// it may run inline instead of being dispatched.
  ///
  /// `true` on a ``DispatchScheduler``'s own queue, always for ``TestScheduler`` (synchronous)
  /// and for ``ClockScheduler`` (which has no context of its own).
  var isCurrent: Bool { get }

  /// Runs `work` in this scheduler's context at or soon after `deadline`.
  ///
  /// A deadline in the past runs as soon as possible. Work scheduled for the same deadline runs
  /// in the order it was scheduled.
  ///
  /// - Returns: A handle that cancels the work if it has not started yet.
  @discardableResult
  func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable

  /// Runs `work` in this scheduler's context as soon as possible, after work already enqueued.
  func enqueue(_ work: @escaping @Sendable () -> Void)
}

extension PaceScheduler {
  /// Runs `work` in this scheduler's context after `delay` from now.
  @discardableResult
  public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    schedule(at: now.advanced(by: delay), work)
  }
}

/// A handle to scheduled work that can be cancelled before it runs.
///
/// Named apart from Combine's `Cancellable` so the two never clash.
public protocol PaceCancellable: Sendable {
  /// Prevents the work from running if it has not started. Calling it again does nothing.
  func cancel()
}
