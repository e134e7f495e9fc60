import Pace
import Testing

/// Bad parameters of the async API stop the process with a message that names the parameter.
@Suite struct AsyncPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aNegativeDebouncedIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = ImmediateSequence(elements: [1]).debounced(for: .milliseconds(-1))
    }
    #expect(Self.message(result).contains("debounced: interval must not be negative"))
  }

  @Test func emptyThrottledEdgesNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = ImmediateSequence(elements: [1]).throttled(for: .seconds(1), edges: [])
    }
    #expect(Self.message(result).contains("throttled: edges must not be empty"))
  }

  @Test func aNegativeAsyncDebouncerMaxWaitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AsyncDebouncer(for: .zero, maximumWait: .seconds(-1)) { (value: Int) in value }
    }
    #expect(Self.message(result).contains("AsyncDebouncer: maximumWait must not be negative"))
  }

  @Test func aNegativeAsyncThrottlerIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AsyncThrottler(for: .seconds(-1)) { (value: Int) in value }
    }
    #expect(Self.message(result).contains("AsyncThrottler: interval must not be negative"))
  }

  @Test func rateLimiterParametersAreNamed() async {
    let permits = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimiter(permits: 0, per: .seconds(1))
    }
    #expect(Self.message(permits).contains("RateLimiter: permits must be positive"))
    let interval = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimiter(permits: 1, per: .zero)
    }
    #expect(Self.message(interval).contains("RateLimiter: interval must be at least 1 ns"))
    // Half a nanosecond is positive, but Pace counts whole nanoseconds: refused where the limit is
    // made, not trapped on at a request's decision.
    let belowOneNanosecond = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimit.slidingWindow(permits: 3, per: .nanoseconds(1) / 2)
    }
    #expect(Self.message(belowOneNanosecond).contains("RateLimit: window must be at least 1 ns"))
    let bucketBelowOneNanosecond = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimit(permits: 3, per: .nanoseconds(1) / 2)
    }
    #expect(Self.message(bucketBelowOneNanosecond).contains("RateLimit: interval must be at least 1 ns"))
    let burst = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimiter(permits: 1, per: .seconds(1), burst: 0)
    }
    #expect(Self.message(burst).contains("RateLimiter: burst must be positive"))
    let negative = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = RateLimiter(permits: 1, per: .seconds(1)).tryAcquire(cost: -1)
    }
    #expect(Self.message(negative).contains("RateLimiter.tryAcquire: cost must not be negative"))
  }
}
