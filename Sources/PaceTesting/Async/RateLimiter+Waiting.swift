extension RateLimiter {
  /// Returns once at least `count` requests are waiting in `acquire`, so that a test can
  /// advance time knowing that they are queued.
  ///
  /// A request made in a new task joins the queue when that task runs. Rather than yielding and
  /// hoping, wait for it: the limiter resumes this call as the `count`-th request queues. Unlike
  /// `TestScheduler.waitUntilPending(_:)`, which sees only the timer of the first request, this
  /// sees every waiting request. When the test cannot reach the limiter (it is inside a view
  /// model), `TestScheduler.waitForSuspendedCallers(_:)` waits for the same through the clock.
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
  /// Returns at once if `count` requests wait already. If fewer do within `timeout` of real
  /// time, it fails the test (Swift Testing or XCTest, whichever runs it), saying how many wait,
  /// and returns.
  ///
  /// - Parameters:
  ///   - count: How many waiting requests to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitUntilWaiting(
    count: Int,
    timeout: Duration = .seconds(30),
    fileID: String = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    guard await waitUntilWaitingCount(count, timeout: timeout) else {
      reportFailure(
        "RateLimiter.waitUntilWaiting(count: \(count)): waited \(timeout) of real time for \(count) request(s)"
          + " waiting in acquire, saw \(waitingCount): the code under test never got there, or was granted at once",
        at: FailureLocation(fileID: fileID, filePath: filePath, line: line, column: column))
      return
    }
  }

  /// `waitUntilWaiting(count:timeout:fileID:filePath:line:column:)` with its default time
  /// limit: the signature of earlier releases, kept for code compiled against it.
  @_disfavoredOverload
  public func waitUntilWaiting(count: Int) async {
    await waitUntilWaiting(count: count, timeout: .seconds(30))
  }
}
