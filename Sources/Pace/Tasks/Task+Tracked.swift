extension Task where Failure == Never {
  /// Starts `operation` in a new task, as `Task { }` does, that a ``TestScheduler`` given as
  /// `clock` follows: PaceTesting's `settle(by:)` lets it run to its next wait on the scheduler
  /// (a sleep on it, a ``RateLimiter`` permit, a shared run) or its end before it moves time.
  ///
  /// For a task a view model keeps (to cancel it, say) rather than spawns through
  /// ``OwnedTasks``: write `Task(clock: clock) { … }` where `Task { … }` was, with the clock the
  /// model was given. With any other clock it is a plain task.
  ///
  /// ```swift
  /// @MainActor final class Poller {
  ///   private var loop: Task<Void, Never>?
  ///
  ///   func start(clock: some Clock<Duration>, poll: @escaping @Sendable () async -> Void) {
  ///     loop = Task(clock: clock) {
  ///       while (try? await clock.sleep(for: .seconds(5))) != nil { await poll() }
  ///     }
  ///   }
  /// }
  /// ```
  ///
  /// On a `TestScheduler` the task counts as running from now until it ends, except while it
  /// sleeps on that scheduler, waits in `acquire` of a rate limiter on it, or waits for the run
  /// of a `SharedWork` or `KeyedSharedWork` on it. A task that awaits anything else keeps `settle`
  /// waiting until its time limit fails the test. That includes its own children: the child
  /// tasks of `async let` and of a task group are not followed (Swift tells nobody when they
  /// start or end), so a task awaiting children that sleep on the scheduler counts as running;
  /// wait for them with `waitForSleepers(_:timeout:)` and `advance(by:)` instead of `settle`.
  ///
  /// - Parameters:
  ///   - clock: The clock the caller was given.
  ///   - priority: The task's priority, as for `Task { }`.
  ///   - operation: The work; it inherits the caller's actor, as with `Task { }`.
  @discardableResult
  public init<C: Clock>(
    clock: C, priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async -> Success
  ) where C.Duration == Duration {
    // `following` calls the closure once, before it returns, and nothing else uses `operation`:
    // it is still sent to the one task, as `sending` asks.
    nonisolated(unsafe) let operation = operation
    self = Self.following(clock) { Task(priority: priority, operation: operation) }
  }

}

extension Task where Failure == any Error {
  /// Starts throwing `operation` in a new task that a ``TestScheduler`` given as `clock`
  /// follows, as the non-throwing `init(clock:priority:operation:)` does.
  ///
  /// - Parameters:
  ///   - clock: The clock the caller was given.
  ///   - priority: The task's priority, as for `Task { }`.
  ///   - operation: The work; it inherits the caller's actor, as with `Task { }`.
  @discardableResult
  public init<C: Clock>(
    clock: C, priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async throws -> Success
  ) where C.Duration == Duration {
    // `following` calls the closure once, before it returns, and nothing else uses `operation`:
    // it is still sent to the one task, as `sending` asks.
    nonisolated(unsafe) let operation = operation
    self = Self.following(clock) { Task(priority: priority, operation: operation) }
  }

}

extension Task {
  /// Makes the task `start` makes, followed by `clock` if it is a ``TestScheduler``: counted in
  /// before it can run, and out by a second task once it has ended (its closure cannot be
  /// wrapped without losing its actor).
  fileprivate static func following(_ clock: some Clock<Duration>, _ start: () -> Task) -> Task {
    guard let scheduler = clock as? TestScheduler else { return start() }
    scheduler.activityStarted()
    let task = TrackedTask.start(on: scheduler, start)
    Task<Void, Never> {
      _ = await task.result
      scheduler.activityStopped()
    }
    return task
  }
}
