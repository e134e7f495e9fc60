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
  /// Returns at once if `count` tasks are sleeping already. If fewer ever sleep, it never
  /// returns: give the test a time limit (`.timeLimit(.minutes(1))`).
  public func waitForSleepers(_ count: Int = 1) async {
    await waitUntilSleeping(count)
  }
}

extension TestScheduler {
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
  ///   await scheduler.waitUntilPending(1)           // its permit is due at 100 ms
  ///   #expect(scheduler.pendingDeadlines == [PaceInstant(.milliseconds(100))])
  ///   scheduler.advance(by: .milliseconds(100))
  ///   try await second.value
  /// }
  /// ```
  ///
  /// Returns at once if `count` items are scheduled already. If fewer ever are, it never
  /// returns: give the test a time limit (`.timeLimit(.minutes(1))`).
  public func waitUntilPending(_ count: Int = 1) async {
    await waitUntilPendingCount(count)
  }
}
