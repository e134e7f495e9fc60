/// The one task a ``TestScheduler`` follows for PaceTesting's `settle`: a tracked task
/// (``OwnedTasks`` made with a clock, `Task(clock:)`), a pacer's invocation or a shared run.
///
/// A task-local value names it, and task-local values are inherited: by the task's children
/// (`async let`, a task group), by the tasks it starts, and by a shared run it starts. So the
/// value alone cannot say which task it was set for; it keeps the identity of that one task, and
/// only that task counts itself out while it waits on the scheduler. Its children are not
/// followed: they were never counted in (a task's children start and end without a word to the
/// scheduler), so they must not count themselves out either.
package final class TrackedTask: Sendable {
  /// The scheduler that follows the task.
  package let scheduler: TestScheduler
  /// The followed task's handle (kept, so that no other task can take its address while a
  /// child still reads this) and its hash, which the current task's hash is compared with. Set
  /// under the lock, with the task made, before anything can read it.
  private let task = LockedState<(handle: (any Sendable)?, hash: Int?)>((nil, nil))

  /// The tracked task the current task belongs to: itself, or the task it descends from.
  @TaskLocal package static var current: TrackedTask?

  private init(scheduler: TestScheduler) {
    self.scheduler = scheduler
  }

  /// Makes the task `start` makes as one `scheduler` follows: ``current`` names it inside it.
  /// Counting it in and out is the caller's.
  package static func start<Success, Failure>(
    on scheduler: TestScheduler, _ start: () -> Task<Success, Failure>
  ) -> Task<Success, Failure> {
    let tracked = TrackedTask(scheduler: scheduler)
    // The task may run at once on another thread: a read from it waits here until its identity
    // is kept.
    return tracked.task.withLock { task in
      let made = $current.withValue(tracked) { start() }
      task = (made, made.hashValue)
      return made
    }
  }

  /// Whether the current task is the followed task itself (not one of its children).
  fileprivate var isCurrentTask: Bool {
    let current = withUnsafeCurrentTask { $0?.hashValue }
    return task.withLock { $0.hash } == current
  }
}

extension TestScheduler {
  /// Whether the current task is one this scheduler follows (``TrackedTask``): it counts itself
  /// out while it waits on the scheduler, and whatever wakes it counts it in.
  package var followsCurrentTask: Bool {
    guard let tracked = TrackedTask.current, tracked.scheduler === self else { return false }
    return tracked.isCurrentTask
  }
}
