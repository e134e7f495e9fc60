import PaceTesting
import XCTest

/// The XCTest helpers, passing (their failure path shares `MarbleComparison` with the Swift
/// Testing helpers, tested in `ExpectMarblesTests`).
final class XCTestHelperTests: XCTestCase {
  func testAssertMarbles() {
    XCTAssertMarbles(
      "a-b-c------d---", step: .milliseconds(100),
      through: { marbles in
        marbles.debouncer(for: .milliseconds(300))
      }, equals: "-------c------d")
  }

  func testAssertNothingScheduled() {
    let scheduler = TestScheduler()
    let throttle = Throttler<Int>(for: .seconds(1), scheduler: scheduler) { _ in }
    throttle(1)
    scheduler.run()
    XCTAssertNothingScheduled(scheduler)
  }
}
