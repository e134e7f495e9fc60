extension TestScheduler {
  /// Moves time forward by `duration` (or, with `nil`, until nothing is scheduled), letting
  /// the work that Pace's async pacers start on this scheduler run to its next wait at every
  /// step, then awaits the tasks in `tasks`: an `await` that replaces each
  /// `waitForSleepers`/`waitForPending` between the steps of a test.
  ///
  /// ```swift
  /// @MainActor @Test func theResultsArriveAfterThePauseAndTheRequest() async {
  ///   let scheduler = TestScheduler()
  ///   let api = FakeDependency<String, [String]>(scheduler: scheduler, latency: .milliseconds(200)) { query in
  ///     ["swift", "swiftui"].filter { $0.hasPrefix(query) }
  ///   }
  ///   let model = SearchModel(clock: scheduler, api: api.function)
  ///   model.queryChanged("swiftu")                         // registered at 0 ms
  ///   await scheduler.settle(by: .milliseconds(300))       // the search starts and sleeps
  ///   #expect(api.calls == [.init(input: "swiftu", start: .milliseconds(300))])
  ///   await scheduler.settle(by: .milliseconds(200), awaiting: model.tasks)
  ///   #expect(model.items == ["swiftui"])                  // delivered at 500 ms
  /// }
  /// ```
  ///
  /// **What settles.** When `settle` moves time, nothing that Pace starts or lets through on
  /// this scheduler is left half-way: the scheduler counts as *running*
  ///
  /// - each invocation that an `AsyncDebouncer` or `AsyncThrottler` on this scheduler starts;
  /// - each task of an `OwnedTasks(clock:)` and each `Task(clock:)` given this scheduler
  ///   as their clock (a view model's own tasks, made with the clock it was given);
  /// - each run that a `SharedWork` or `KeyedSharedWork` on this scheduler starts;
  ///
  /// from the moment it starts until it ends, except while it waits on this scheduler: sleeping
  /// on it (`sleep(for:)`, a `FakeDependency`'s latency), waiting in `acquire` of a
  /// `RateLimiter` or `KeyedRateLimiter` whose clock it is, or waiting for the run of a
  /// `SharedWork` or `KeyedSharedWork` whose clock it is. Whatever makes such work runnable (a
  /// timer firing in `advance`, a sleep waking or being cancelled, a permit granted, a run ending)
  /// counts it in
  /// before it can run, and the work counts itself out as it waits or ends, so the count never
  /// reads zero while something is on its way. So a request that a rate limiter grants at an
  /// instant runs, within the settle, to its next wait or its end. Settling is:
  ///
  /// 1. wait until nothing counted runs;
  /// 2. advance to the next deadline (timers and sleeps), if it is within `duration`, running
  ///    the work due there, and go back to 1;
  /// 3. advance to the end of `duration`; then await every task of `tasks`
  ///    (`OwnedTasks.waitForAll(timeout:)`), and wait again until nothing counted runs.
  ///
  /// Every wait is bounded: after `timeout` of real time it fails the test, naming what still
  /// runs, and returns. Without `duration`, at most `limit` of virtual time passes; work still
  /// scheduled beyond it (a repeating timer) fails the test.
  ///
  /// **What it cannot see.** A task that is not counted (a plain `Task { }`, the tasks of an
  /// `OwnedTasks()` made without a clock, and the children of a counted task: its `async let`s,
  /// its task group's tasks, the plain tasks it starts, since Swift tells nobody when they start
  /// or end) is not waited for while it runs: such a task that
  /// sleeps or waits for a permit on the scheduler must have done so before a step advances past
  /// the instant it waits for. Make it with the clock (`Task(clock: clock)`,
  /// `OwnedTasks(clock: clock)`), or wait for it with `waitForSleepers(_:)` or
  /// `waitForSuspendedCallers(_:)`. And a counted task that awaits something else (another
  /// task's value, its own children, a real request) keeps the count up: the settle fails after
  /// `timeout`, saying how many still run. The
  /// tasks of `tasks` are awaited to their end only in step 3, so they must end within the time
  /// the settle advances.
  ///
  /// - Parameters:
  ///   - duration: How far to move time; `nil` moves it until nothing is scheduled.
  ///   - tasks: Fire-and-forget tasks to await once time has moved (a view model's `OwnedTasks`).
  ///   - timeout: The real time each wait may take before the test fails.
  ///   - limit: Without `duration`, the most virtual time to move.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func settle(
    by duration: Duration? = nil,
    awaiting tasks: OwnedTasks...,
    timeout: Duration = .seconds(30),
    limit: Duration = .seconds(3600),
    fileID: String = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let location = FailureLocation(fileID, filePath, line, column)
    if let duration {
      precondition(duration >= .zero, "TestScheduler.settle(by:): duration must not be negative (got \(duration))")
    }
    let end = now.advanced(by: duration ?? limit)
    guard await settled(timeout, location) else { return }
    while let deadline = nextDeadline, deadline <= end {
      advance(to: max(deadline, now))
      guard await settled(timeout, location) else { return }
    }
    if duration != nil {
      advance(to: end)
    } else if let deadline = nextDeadline {
      reportFailure(
        "TestScheduler.settle: work is still scheduled at \(deadline) after \(limit) of virtual time (now is \(now));"
          + " a timer that re-arms itself never settles: settle(by:) a bounded duration",
        at: location)
      return
    }
    for set in tasks {
      guard await set.waitUntilIdle(timeout: timeout) else {
        reportFailure(
          "TestScheduler.settle: \(set.count) spawned task(s) still running after \(timeout) of real time at \(now):"
            + " they wait for time not reached yet, or for something other than this scheduler",
          at: location)
        return
      }
    }
    _ = await settled(timeout, location)
  }

  private func settled(_ timeout: Duration, _ location: FailureLocation) async -> Bool {
    if await waitUntilQuiet(timeout: timeout) { return true }
    reportFailure(
      "TestScheduler.settle: waited \(timeout) of real time for the work this scheduler follows to wait or end, saw"
        + " \(runningActivityCount) still running at \(now) (\(sleeperCount) sleeping, \(suspendedCallerCount) waiting"
        + " for a permit): a pacer's invocation or a tracked task waits for something other than this scheduler's time"
        + " (another clock, a real request, another task's value, its own child tasks: async let and task groups are"
        + " not followed; make them with Task(clock:) or wait with waitForSleepers)",
      at: location)
    return false
  }
}
