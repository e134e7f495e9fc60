import Testing
import XCTest

/// Checks that `scheduler` has no work left (Swift Testing): no timer armed, no invocation
/// pending. A test that ends with work still scheduled usually forgot to advance time, or found
/// a timer that should have been cancelled.
///
/// ```swift
/// @Test func cancelLeavesNothingBehind() {
///   let scheduler = TestScheduler()
///   let save = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { _ in }
///   save("draft")
///   save.cancel()
///   expectNothingScheduled(on: scheduler)
/// }
/// ```
///
/// On failure the issue lists the deadlines: `TestScheduler still has 2 items scheduled, due at
/// 1s, 2s (now is 0ms)`.
///
/// - Parameters:
///   - scheduler: The scheduler to check.
///   - sourceLocation: Where to report a failure.
public func expectNothingScheduled(on scheduler: TestScheduler, sourceLocation: SourceLocation = #_sourceLocation) {
  if let failure = pendingWorkDescription(scheduler) {
    Issue.record(Comment(rawValue: failure), sourceLocation: sourceLocation)
  }
}

/// Asserts that `scheduler` has no work left (XCTest); the twin of
/// ``expectNothingScheduled(on:sourceLocation:)``.
///
/// ```swift
/// func testCancelLeavesNothingBehind() {
///   let scheduler = TestScheduler()
///   let save = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { _ in }
///   save("draft")
///   save.cancel()
///   XCTAssertNothingScheduled(scheduler)
/// }
/// ```
///
/// - Parameters:
///   - scheduler: The scheduler to check.
///   - file: Where to report a failure.
///   - line: Where to report a failure.
public func XCTAssertNothingScheduled(_ scheduler: TestScheduler, file: StaticString = #filePath, line: UInt = #line) {
  if let failure = pendingWorkDescription(scheduler) {
    XCTFail(failure, file: file, line: line)
  }
}

/// `nil` when nothing is scheduled; otherwise what is and when.
func pendingWorkDescription(_ scheduler: TestScheduler) -> String? {
  let deadlines = scheduler.pendingDeadlines
  guard !deadlines.isEmpty else { return nil }
  let shown = deadlines.prefix(10).map { DurationText.format($0.offset) }
  var list = shown.joined(separator: ", ")
  if deadlines.count > shown.count { list += ", and \(deadlines.count - shown.count) more" }
  let items = deadlines.count == 1 ? "1 item" : "\(deadlines.count) items"
  return
    "TestScheduler still has \(items) scheduled, due at \(list) (now is \(DurationText.format(scheduler.now.offset)))"
}
