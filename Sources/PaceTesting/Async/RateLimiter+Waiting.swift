extension RateLimiter {
  /// Returns once at least `count` requests are waiting in `acquire`, so that a test can
  /// advance time knowing that they are queued.
  ///
  /// A request made in a new task joins the queue when that task runs. Rather than yielding and
  /// hoping, wait for it: the limiter resumes this call as the `count`-th request queues. Unlike
  /// `TestScheduler.waitUntilPending(_:)`, which sees only the timer of the first request, this
  /// sees every waiting request.
  ///
  /// ```swift
  /// @MainActor @Test func uploadsStartInTheOrderTheyWereQueued() async throws {
  ///   let scheduler = TestScheduler()
  ///   let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
  ///   let started = LockedRecorder<Int>()
  ///   let uploads = (1...3).map { upload in
  ///     Task { try await limiter.acquire(); started.record(upload) }
  ///   }
  ///   await limiter.waitUntilWaiting(count: 2)        // upload 1 took the permit; 2 and 3 wait
  ///   scheduler.advance(by: .milliseconds(200))
  ///   for upload in uploads { try await upload.value }
  ///   #expect(started.values == [1, 2, 3])
  /// }
  /// ```
  ///
  /// Returns at once if `count` requests wait already. If fewer ever do, it never returns: give
  /// the test a time limit (`.timeLimit(.minutes(1))`).
  public func waitUntilWaiting(count: Int) async {
    await waitUntilWaitingCount(count)
  }
}
