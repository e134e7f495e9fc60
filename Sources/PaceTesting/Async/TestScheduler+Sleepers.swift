extension TestScheduler {
  /// The number of tasks suspended in `sleep(until:tolerance:)` now.
  public var sleeperCount: Int { sleepingTaskCount }

  /// Returns once at least `count` tasks are sleeping on this scheduler (suspended in
  /// `sleep(until:)` or `sleep(for:)`), so that advancing time wakes them.
  ///
  /// Code under test that sleeps on the clock registers its sleep from its own task, some time
  /// after the test started it. Rather than yielding and hoping, wait for the registration:
  /// the scheduler resumes this call as the `count`-th sleeper registers.
  ///
  /// ```swift
  /// @Test func theSearchTakesOneSecondOfVirtualTime() async throws {
  ///   let scheduler = TestScheduler()
  ///   let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
  ///     try await scheduler.sleep(for: .seconds(1))     // the "network"
  ///     return query.uppercased()
  ///   }
  ///   let result = search.submit("swift")                // registered now, at 0 ms
  ///   scheduler.advance(by: .milliseconds(300))          // the work starts at 300 ms
  ///   await scheduler.waitForSleepers(1)                 // and sleeps until 1300 ms
  ///   scheduler.advance(by: .seconds(1))
  ///   #expect(try await result.value == "SWIFT")
  /// }
  /// ```
  ///
  /// Returns at once if `count` tasks are sleeping already. If fewer do within `timeout` of real
  /// time, it fails the test (Swift Testing or XCTest, whichever runs it), saying how many sleep,
  /// and returns.
  ///
  /// - Parameters:
  ///   - count: How many sleepers to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForSleepers(
    _ count: Int = 1, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await wait(count, .sleepers, timeout, FailureLocation(fileID, filePath, line, column))
  }

  /// Returns once at least `count` work items are scheduled: timers that Pace's primitives arm
  /// on this scheduler, and tasks sleeping on it (see `pendingCount`).
  ///
  /// A call such as `limiter.acquire()` made in a new task registers some time after the task
  /// starts (an `AsyncDebouncer` call does not need this: `submit` registers at once, and
  /// `try await search(q)` registers before it first suspends). Wait for its timer instead of
  /// yielding:
  ///
  /// ```swift
  /// @MainActor @Test func theSecondRequestWaitsForItsPermit() async throws {
  ///   let scheduler = TestScheduler()
  ///   let limiter = RateLimiter(permits: 10, per: .seconds(1), burst: 1, clock: scheduler)
  ///   try await limiter.acquire()
  ///   let second = Task { try await limiter.acquire() }
  ///   await scheduler.waitForPending(1)             // its permit is due at 100 ms
  ///   #expect(scheduler.pendingDeadlines == [PaceInstant(.milliseconds(100))])
  ///   scheduler.advance(by: .milliseconds(100))
  ///   try await second.value
  /// }
  /// ```
  ///
  /// A rate limiter arms one timer for its whole queue: to wait for several requests to queue,
  /// use `waitForSuspendedCallers(_:timeout:fileID:filePath:line:column:)`.
  ///
  /// Returns at once if `count` items are scheduled already. If fewer are within `timeout` of
  /// real time, it fails the test, naming the deadlines scheduled, and returns.
  ///
  /// - Parameters:
  ///   - count: How many scheduled work items to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForPending(
    _ count: Int = 1, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await wait(count, .pending, timeout, FailureLocation(fileID, filePath, line, column))
  }

  /// Returns once at least `count` work items are scheduled; `waitForPending(_:timeout:)`.
  @available(*, deprecated, renamed: "waitForPending(_:timeout:fileID:filePath:line:column:)")
  public func waitUntilPending(
    _ count: Int = 1, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitForPending(count, timeout: timeout, fileID: fileID, filePath: filePath, line: line, column: column)
  }
}

extension TestScheduler {
  /// The number of callers suspended now in a Pace primitive on this scheduler: requests
  /// waiting in `acquire` of a `RateLimiter` or `KeyedRateLimiter` whose clock it is.
  public var suspendedCallerCount: Int { count(of: .suspendedCallers) }

  /// Returns once at least `count` callers are suspended in Pace primitives on this scheduler:
  /// requests waiting for a permit in `acquire` of a `RateLimiter` or `KeyedRateLimiter` whose
  /// clock it is. The test needs no access to the primitive, only to the scheduler.
  ///
  /// A view model's requests reach its limiter from tasks of their own, some time after the
  /// test calls the model. Wait for them to queue before moving time, so that they are granted
  /// in the order they were made:
  ///
  /// ```swift
  /// @MainActor @Test func uploadsStartInTheOrderTheyWereQueued() async {
  ///   let scheduler = TestScheduler()
  ///   let queue = UploadQueue(clock: scheduler)   // a RateLimiter of 1 per 100 ms inside
  ///   for file in ["a", "b", "c"] { queue.enqueue(file) }
  ///   await scheduler.waitForSuspendedCallers(2)  // "a" took the permit; "b" and "c" wait
  ///   await scheduler.settle(by: .milliseconds(200))
  ///   #expect(queue.started == ["a", "b", "c"])
  /// }
  /// ```
  ///
  /// Returns at once if `count` callers wait already. If fewer do within `timeout` of real
  /// time, it fails the test, saying how many wait, and returns.
  ///
  /// - Parameters:
  ///   - count: How many suspended callers to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForSuspendedCallers(
    _ count: Int = 1, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await wait(count, .suspendedCallers, timeout, FailureLocation(fileID, filePath, line, column))
  }

  /// `waitForSleepers(_:timeout:fileID:filePath:line:column:)` with its default time limit:
  /// the signature of earlier releases, kept for code compiled against it.
  @_disfavoredOverload
  public func waitForSleepers(_ count: Int = 1) async {
    await waitForSleepers(count, timeout: .seconds(30))
  }

  /// `waitForPending(_:timeout:fileID:filePath:line:column:)` with its default time limit: the
  /// signature of earlier releases, kept for code compiled against it.
  @_disfavoredOverload
  @available(*, deprecated, renamed: "waitForPending(_:timeout:fileID:filePath:line:column:)")
  public func waitUntilPending(_ count: Int = 1) async {
    await waitForPending(count, timeout: .seconds(30))
  }

  /// The wait behind `waitForSleepers`, `waitForPending` and `waitForSuspendedCallers`: each count
  /// names its call and what it counts in the failure.
  private func wait(_ count: Int, _ what: WaitedCount, _ timeout: Duration, _ location: FailureLocation) async {
    let (call, noun) =
      switch what {
      case .sleepers: ("waitForSleepers", "task(s) sleeping on the scheduler")
      case .pending: ("waitForPending", "work item(s) scheduled")
      case .suspendedCallers: ("waitForSuspendedCallers", "caller(s) suspended in a rate limiter on it")
      }
    await waitFor(
      "TestScheduler.\(call)(\(count))", count, noun, timeout: timeout, at: location,
      until: { await waitUntil(count, of: what, timeout: $0) },
      saw: {
        "\(self.count(of: what)) (now is \(now)"
          + (what == .pending ? ", pending deadlines: \(pendingDeadlines))" : ")")
      })
  }
}
