import Testing
import XCTest

/// Lets go of `object` and checks that nothing else holds it (Swift Testing): a debouncer's
/// closure, a timer or a task that captured it strongly would keep it alive.
///
/// ```swift
/// @MainActor @Test func theModelIsReleasedWithItsPendingSearch() {
///   let scheduler = TestScheduler()
///   var model: SearchModel? = SearchModel(scheduler: scheduler)
///   model?.queryChanged("swift")                  // a search is pending
///   expectReleased(&model)                        // sets `model` to nil, then checks
///   expectNothingScheduled(on: scheduler)         // and its timer went with it
/// }
/// ```
///
/// Work the object started and still holds it (a task awaiting a result, say) keeps it alive
/// until that work ends: await the work first.
///
/// - Parameters:
///   - object: The test's only reference; set to `nil`.
///   - sourceLocation: Where to report a failure.
public func expectReleased<Object: AnyObject>(
  _ object: inout Object?, sourceLocation: SourceLocation = #_sourceLocation
) {
  if let description = releaseFailure(&object) {
    Issue.record(Comment(rawValue: description), sourceLocation: sourceLocation)
  }
}

/// Lets go of `object` and asserts that nothing else holds it (XCTest); the twin of
/// ``expectReleased(_:sourceLocation:)``.
///
/// - Parameters:
///   - object: The test's only reference; set to `nil`.
///   - file: Where to report a failure.
///   - line: Where to report a failure.
public func XCTAssertReleased<Object: AnyObject>(
  _ object: inout Object?, file: StaticString = #filePath, line: UInt = #line
) {
  if let description = releaseFailure(&object) {
    XCTFail(description, file: file, line: line)
  }
}

/// `nil` when `object` went away once let go of; otherwise what still holds it.
func releaseFailure<Object: AnyObject>(_ object: inout Object?) -> String? {
  weak let weakReference = object
  object = nil
  guard weakReference != nil else { return nil }
  return "\(Object.self) is still alive after the test let go of it: a closure, timer or task holds it strongly"
}
