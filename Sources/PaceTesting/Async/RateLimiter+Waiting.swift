extension RateLimiter {
  /// Returns once at least `count` requests are waiting in `acquire`, so that a test can
  /// advance time knowing that they are queued.
  ///
  /// A request made in a new task joins the queue when that task runs. Rather than yielding and
  /// hoping, wait for it: the limiter resumes this call as the `count`-th request queues. Unlike
  /// `TestScheduler.waitForPending(_:)`, which sees only the timer of the first request, this
  /// sees every waiting request. When the test cannot reach the limiter (it is inside a view
  /// model), `TestScheduler.waitForSuspendedCallers(_:)` waits for the same through the clock.
  ///
  /// ```swift
  /// @MainActor @Test func uploadsStartInTheOrderTheyWereQueued() async throws {
  ///   let scheduler = TestScheduler()
  ///   let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
  ///   let started = LockedRecorder<Int>(scheduler: scheduler)
  ///   let uploads = (1...3).map { upload in
  ///     Task { try await limiter.acquire(); started.record(upload) }
  ///   }
  ///   await limiter.waitForWaiters(2)                 // upload 1 took the permit; 2 and 3 wait
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
  public func waitForWaiters(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "RateLimiter.waitForWaiters(\(count))", count, "request(s) waiting in acquire", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilWaitingCount(count, timeout: $0) }, saw: { "\(waitingCount)" },
      hint: "the code under test never got there, or was granted at once")
  }

  /// Returns once at least `count` requests are waiting in `acquire`.
  @available(*, deprecated, renamed: "waitForWaiters(_:timeout:fileID:filePath:line:column:)")
  public func waitUntilWaiting(
    count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitForWaiters(count, timeout: timeout, fileID: fileID, filePath: filePath, line: line, column: column)
  }

  /// Returns once at least `count` requests are waiting in `acquire`: the signature of earlier
  /// releases, kept for code compiled against it.
  @_disfavoredOverload
  @available(*, deprecated, renamed: "waitForWaiters(_:timeout:fileID:filePath:line:column:)")
  public func waitUntilWaiting(count: Int) async {
    await waitForWaiters(count)
  }
}

extension KeyedRateLimiter {
  /// Returns once at least `count` requests wait in `acquire`, over every key: the keyed
  /// limiter's `RateLimiter.waitForWaiters(_:timeout:)`, which, unlike
  /// `TestScheduler.waitForSuspendedCallers(_:)`, counts this limiter's requests only.
  ///
  /// ```swift
  /// let limiter = KeyedRateLimiter<String>(limit: RateLimit(permits: 1, per: .seconds(1)), clock: scheduler)
  /// for user in ["ann", "ann", "bob", "bob"] { Task { try await limiter.acquire(user) } }
  /// await limiter.waitForWaiters(2)                  // each user's second request waits
  /// await limiter.waitForWaiters(1, for: "bob")
  /// ```
  ///
  /// Nothing tells a test when a keyed limiter's requests queue: it looks every millisecond of
  /// real time. If fewer wait within `timeout`, it fails the test, saying how many wait, and
  /// returns.
  ///
  /// - Parameters:
  ///   - count: How many waiting requests to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForWaiters(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "KeyedRateLimiter.waitForWaiters(\(count))", count, "request(s) waiting in acquire", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await pollUntil(timeout: $0) { waitingCount >= count } }, saw: { "\(waitingCount)" })
  }

  /// Returns once at least `count` requests for `key` wait in `acquire`; fails the test after
  /// `timeout` of real time, as ``waitForWaiters(_:timeout:fileID:filePath:line:column:)`` does
  /// for every key.
  ///
  /// - Parameters:
  ///   - count: How many waiting requests for `key` to wait for.
  ///   - key: Whose requests to count.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForWaiters(
    _ count: Int, for key: Key, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "KeyedRateLimiter.waitForWaiters(\(count), for: \(key))", count, "request(s) waiting in acquire",
      timeout: timeout, at: FailureLocation(fileID, filePath, line, column),
      until: { await pollUntil(timeout: $0) { waitingCount(for: key) >= count } }, saw: { "\(waitingCount(for: key))" })
  }
}
