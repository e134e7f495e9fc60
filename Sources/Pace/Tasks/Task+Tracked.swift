extension Task where Failure == Never {
  /// Starts `operation` in a new task, as `Task { }` does, that a ``TestScheduler`` given as
  /// `clock` follows: PaceTesting's `settle(by:)` lets it run to its next wait on the scheduler
  /// (a sleep on it, a ``RateLimiter`` permit) or its end before it moves time.
  ///
  /// For a task a view model keeps (to cancel it, say) rather than spawns through
  /// ``OwnedTasks``: write `Task(trackedBy: clock) { … }` where `Task { … }` was, with the clock
  /// the model was given. With any other clock it is a plain task.
  ///
  /// ```swift
  /// @MainActor final class Poller {
  ///   private var loop: Task<Void, Never>?
  ///
  ///   func start(clock: some Clock<Duration>, poll: @escaping @Sendable () async -> Void) {
  ///     loop = Task(trackedBy: clock) {
  ///       while (try? await clock.sleep(for: .seconds(5))) != nil { await poll() }
  ///     }
  ///   }
  /// }
  /// ```
  ///
  /// On a `TestScheduler` the task counts as running from now until it ends, except while it
  /// sleeps on that scheduler or waits in `acquire` of a rate limiter on it. A task that awaits
  /// anything else keeps `settle` waiting until its time limit fails the test.
  ///
  /// - Parameters:
  ///   - clock: The clock the caller was given.
  ///   - priority: The task's priority, as for `Task { }`.
  ///   - operation: The work; it inherits the caller's actor, as with `Task { }`.
  @discardableResult
  public init<C: Clock>(
    trackedBy clock: C,
    priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async -> Success
  ) where C.Duration == Duration {
    guard let scheduler = clock as? TestScheduler else {
      self.init(priority: priority, operation: operation)
      return
    }
    // `tracked` calls the closure once, before it returns, and nothing else uses `operation`:
    // it is still sent to the one task, as `sending` asks.
    nonisolated(unsafe) let operation = operation
    self = Self.tracked(on: scheduler) { Task(priority: priority, operation: operation) }
  }
}

extension Task where Failure == any Error {
  /// Starts throwing `operation` in a new task that a ``TestScheduler`` given as `clock`
  /// follows, as the non-throwing `init(trackedBy:priority:operation:)` does.
  ///
  /// - Parameters:
  ///   - clock: The clock the caller was given.
  ///   - priority: The task's priority, as for `Task { }`.
  ///   - operation: The work; it inherits the caller's actor, as with `Task { }`.
  @discardableResult
  public init<C: Clock>(
    trackedBy clock: C,
    priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async throws -> Success
  ) where C.Duration == Duration {
    guard let scheduler = clock as? TestScheduler else {
      self.init(priority: priority, operation: operation)
      return
    }
    // `tracked` calls the closure once, before it returns, and nothing else uses `operation`:
    // it is still sent to the one task, as `sending` asks.
    nonisolated(unsafe) let operation = operation
    self = Self.tracked(on: scheduler) { Task(priority: priority, operation: operation) }
  }
}

extension Task {
  /// Makes the task `start` makes with `scheduler` following it: counted in before it can run,
  /// and out by a second task once it has ended (its closure cannot be wrapped without losing
  /// its actor).
  fileprivate static func tracked(on scheduler: TestScheduler, _ start: () -> Task) -> Task {
    scheduler.activityStarted()
    let task = TestScheduler.$tracking.withValue(scheduler) { start() }
    Task<Void, Never> {
      _ = await task.result
      scheduler.activityStopped()
    }
    return task
  }
}
