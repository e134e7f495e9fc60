extension KeyedSharedWork {
  /// Returns once at least `count` callers wait for `key`'s run, so that a test can end the run
  /// knowing they all share it.
  ///
  /// ```swift
  /// @Test func tenCellsDownloadTheAvatarOnce() async throws {
  ///   let scheduler = TestScheduler()
  ///   let download = FakeDependency<URL, Data>(scheduler: scheduler, latency: .milliseconds(200)) { _ in Data() }
  ///   let avatars = KeyedSharedWork<URL, Data>(clock: scheduler)
  ///   let cells = (0..<10).map { _ in Task { try await avatars.run(url) { try await download(url) } } }
  ///   await avatars.waitForCallers(10, for: url)
  ///   scheduler.advance(by: .milliseconds(200))
  ///   for cell in cells { _ = try await cell.value }
  ///   #expect(download.calls.count == 1)
  /// }
  /// ```
  ///
  /// Returns at once if `count` callers wait already; resumed by the call that makes the count,
  /// not by polling. If fewer wait within `timeout` of real time, it fails the test, saying how
  /// many wait, and returns.
  ///
  /// - Parameters:
  ///   - count: How many callers to wait for.
  ///   - key: The run's key.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCallers(
    _ count: Int, for key: Key, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "KeyedSharedWork.waitForCallers(\(count), for: \(key))", count, "caller(s) waiting for the run",
      timeout: timeout, at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilCallerCount(count, for: key, timeout: $0) }, saw: { "\(callerCount(for: key))" })
  }

  /// Returns once at least `count` calls have reached the instance, whatever became of them
  /// (joined a run, started one, reused a result or been refused); fails the test after
  /// `timeout` of real time.
  ///
  /// - Parameters:
  ///   - count: How many calls to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCalls(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "KeyedSharedWork.waitForCalls(\(count))", count, "call(s)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilCallCount(count, timeout: $0) }, saw: { "fewer (\(runningCount) run(s) in flight)" })
  }
}

extension SharedWork {
  /// Returns once at least `count` callers wait for the run in flight; fails the test after
  /// `timeout` of real time: `KeyedSharedWork`'s `waitForCallers(_:for:timeout:)` for the one key.
  ///
  /// - Parameters:
  ///   - count: How many callers to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCallers(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "SharedWork.waitForCallers(\(count))", count, "caller(s) waiting for the run", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilCallerCount(count, timeout: $0) }, saw: { "\(callerCount)" })
  }

  /// Returns once at least `count` calls have reached the instance; fails the test after
  /// `timeout` of real time.
  ///
  /// - Parameters:
  ///   - count: How many calls to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCalls(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "SharedWork.waitForCalls(\(count))", count, "call(s)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilCallCount(count, timeout: $0) }, saw: { "fewer (a run in flight: \(isRunning))" })
  }
}

extension Batcher {
  /// Returns once at least `count` calls (`load` or `submit`) have reached the batcher; fails
  /// the test after `timeout` of real time.
  ///
  /// ```swift
  /// let events = LockedRecorder<[String]>(scheduler: scheduler)
  /// let analytics = Batcher<String, Void>(maximumCount: 10, maximumWait: .seconds(30), clock: scheduler) {
  ///   events.record($0)
  /// }
  /// Task { try await analytics.submit("opened") }
  /// await analytics.waitForCalls(1)                   // buffered at 0 s
  /// scheduler.advance(by: .seconds(30))               // due: the batch's task starts
  /// await analytics.waitForEndedBatches(1)
  /// #expect(events.values == [["opened"]])
  /// ```
  ///
  /// - Parameters:
  ///   - count: How many calls to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCalls(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "Batcher.waitForCalls(\(count))", count, "call(s)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilCallCount(count, timeout: $0) }, saw: { "fewer (\(bufferedCount) item(s) buffered)" })
  }

  /// Returns once at least `count` batches have ended (their `send` returned or threw, and their
  /// loaders were resumed); fails the test after `timeout` of real time.
  ///
  /// A batch is sent in a task of its own: it starts when its batch is due (inside `advance`, on
  /// a `TestScheduler`), and ends some time after, when that task has run. Wait for it here
  /// before reading what `send` did.
  ///
  /// - Parameters:
  ///   - count: How many ended batches to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForEndedBatches(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "Batcher.waitForEndedBatches(\(count))", count, "ended batch(es)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilEndedBatchCount(count, timeout: $0) },
      saw: { "fewer (\(sentBatchCount) sent, \(inFlightCount) in flight)" })
  }
}
