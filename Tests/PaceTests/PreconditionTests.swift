import Pace
import Testing

/// Bad parameters stop the process with a message that names the parameter.
@Suite struct PreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aNegativeDebounceIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Debouncer<Int>(for: .milliseconds(-1), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Debouncer: interval must not be negative"))
  }

  @Test func aNegativeMaxWaitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Debouncer<Int>(for: .zero, maxWait: .seconds(-1), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Debouncer: maxWait must not be negative"))
  }

  @Test func emptyEdgesNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Throttler<Int>(for: .seconds(1), edges: [], scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Throttler: edges must not be empty"))
  }

  @Test func aNegativeThrottleIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Throttler<Int>(for: .seconds(-2), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Throttler: interval must not be negative"))
  }

  @Test func aNegativeCoalescerWindowNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Coalescer<Int>(window: .seconds(-2), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Coalescer: window must not be negative"))
  }

  @Test func advancingATestSchedulerBackwardsIsRefused() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let scheduler = TestScheduler(now: PaceInstant(.seconds(1)))
      scheduler.advance(to: .zero)
    }
    #expect(Self.message(result).contains("is before now"))
  }
}
