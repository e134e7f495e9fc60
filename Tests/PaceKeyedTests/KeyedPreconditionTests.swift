import Pace
import Testing

/// Bad parameters stop the process with a message that names the parameter.
@Suite struct KeyedPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aNegativeKeyedDebounceIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedDebouncer<Int, Int>(for: .milliseconds(-1), scheduler: TestScheduler()) { _, _ in }
    }
    #expect(Self.message(result).contains("KeyedDebouncer: interval must not be negative"))
  }

  @Test func aNegativeKeyedMaxWaitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedDebouncer<Int, Int>(for: .zero, maximumWait: .seconds(-1), scheduler: TestScheduler()) { _, _ in }
    }
    #expect(Self.message(result).contains("KeyedDebouncer: maximumWait must not be negative"))
  }

  @Test func emptyKeyedEdgesNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedThrottler<Int, Int>(for: .seconds(1), edges: [], scheduler: TestScheduler()) { _, _ in }
    }
    #expect(Self.message(result).contains("KeyedThrottler: edges must not be empty"))
  }

  @Test func aNegativeKeyedThrottleIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedThrottler<Int, Int>(for: .seconds(-2), scheduler: TestScheduler()) { _, _ in }
    }
    #expect(Self.message(result).contains("KeyedThrottler: interval must not be negative"))
  }

  @Test func aNegativeRateNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedRateLimiter<Int>(permits: -1, per: .seconds(1), clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedRateLimiter: permits must be positive"))
  }

  @Test func aNegativeRateIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedRateLimiter<Int>(permits: 1, per: .seconds(-1), clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedRateLimiter: interval must be at least 1 ns"))
  }

  @Test func aNegativeCostNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedRateLimiter<Int>(permits: 1, per: .seconds(1), clock: TestScheduler()).tryAcquire(1, cost: -1)
    }
    #expect(Self.message(result).contains("KeyedRateLimiter.tryAcquire: cost must not be negative"))
  }
}
