extension OwnedTasks {
  /// Returns once every spawned task has ended, or fails the test after `timeout` of real time
  /// (Swift Testing or XCTest, whichever runs it).
  ///
  /// ```swift
  /// @MainActor @Test func theResultsAreDelivered() async {
  ///   let scheduler = TestScheduler()
  ///   let model = ResultsModel(clock: scheduler) { query in [query] }
  ///   model.queryChanged("swift")                    // spawns the delivery
  ///   scheduler.advance(by: .milliseconds(300))      // the search runs and answers
  ///   await model.tasks.waitForAll(timeout: .seconds(30))
  ///   #expect(model.items == ["swift"])
  /// }
  /// ```
  ///
  /// A task still running after `timeout` waits for virtual time the test has not advanced, or
  /// for something that is not on virtual time at all; the failure says how many still run.
  ///
  /// - Parameters:
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForAll(
    timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "OwnedTasks.waitForAll", 0, "task(s) running", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await waitUntilIdle(timeout: $0) }, saw: { "\(count)" },
      hint: "they wait for virtual time not advanced yet, or for something else")
  }
}
