import Testing
@testable import Pace

@Test func smoke() {
  #expect(PaceInstant.zero.nanoseconds == 0)
}
