import Pace
import PaceTestSupport
import Testing

@testable import PaceHTTPClient

/// Capped exponential backoff with full jitter, `Retry-After` as a floor, and what is retried:
/// exact delays from a scripted random source.
@Suite struct RetryStrategyTests {
  /// A random source that answers `fraction` of the way up the range: exact delays.
  static func fraction(_ numerator: Int64, of denominator: Int64) -> @Sendable (ClosedRange<Int64>) -> Int64 {
    { range in range.lowerBound + (range.upperBound - range.lowerBound) / denominator * numerator }
  }

  let policy = RetryStrategy(
    maximumAttempts: 6, baseDelay: .milliseconds(100), maximumDelay: .seconds(1), random: fraction(1, of: 1))

  @Test func theCeilingDoublesUpToTheCap() {
    let ceilings = (1...7).map { policy.backoffCeiling(beforeRetry: $0) }
    #expect(
      ceilings == [
        .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1),
        .seconds(1),
      ])
    #expect(policy.backoffCeiling(beforeRetry: 0) == .milliseconds(100))
    #expect(policy.backoffCeiling(beforeRetry: 63) == .seconds(1))
    #expect(policy.backoffCeiling(beforeRetry: .max) == .seconds(1))
  }

  /// Full jitter: the delay is the random source's pick in `0 ... ceiling`.
  @Test func theDelayIsUniformUpToTheCeiling() {
    var half = policy
    half.random = Self.fraction(1, of: 2)
    #expect((1...5).map { half.delay(beforeRetry: $0) } == [50, 100, 200, 400, 500].map { .milliseconds($0) })
    var zero = policy
    zero.random = Self.fraction(0, of: 1)
    #expect(zero.delay(beforeRetry: 3) == .zero)
    // A source that answers outside the range is clamped into it.
    var wild = policy
    wild.random = { _ in .max }
    #expect(wild.delay(beforeRetry: 1) == .milliseconds(100))
    wild.random = { _ in .min }
    #expect(wild.delay(beforeRetry: 1) == .zero)
  }

  /// On seeded random picks, every delay lies in `0 ... ceiling`.
  @Test func seededDelaysStayWithinTheCeiling() {
    let generator = LockedState(SeededGenerator(seed: 34))
    var seeded = policy
    seeded.random = { range in generator.withLock { Int64.random(in: range, using: &$0) } }
    for retry in 1...fuzzRuns(2_000) {
      let ceiling = seeded.backoffCeiling(beforeRetry: retry % 10)
      let delay = seeded.delay(beforeRetry: retry % 10)
      #expect(delay >= .zero && delay <= ceiling)
    }
  }

  /// `Retry-After` is a floor; one above the maximum stops the retries.
  @Test func retryAfterIsAFloorUpToTheMaximum() {
    var policy = policy
    policy.maximumRetryAfter = .seconds(30)
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: true, retryAfter: .seconds(5))
        == .retry(after: .seconds(5)))
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: true, retryAfter: .milliseconds(10))
        == .retry(after: .milliseconds(100)))
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(503), idempotent: true, retryAfter: .seconds(30))
        == .retry(after: .seconds(30)))
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: true, retryAfter: .seconds(31))
        == .stop(.retryAfterTooLong(.seconds(31))))
  }

  /// 429, 503 and connection errors are retried, for idempotent requests, until the attempts run out.
  @Test func whatIsRetried() {
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: true) == .retry(after: .milliseconds(100)))
    #expect(
      policy.decision(afterAttempt: 2, outcome: .status(503), idempotent: true) == .retry(after: .milliseconds(200)))
    #expect(
      policy.decision(afterAttempt: 3, outcome: .connectionError, idempotent: true) == .retry(after: .milliseconds(400))
    )
    for status in [200, 201, 304, 400, 401, 404, 500, 502, 504] {
      #expect(policy.decision(afterAttempt: 1, outcome: .status(status), idempotent: true) == .stop(.notRetryable))
    }
    #expect(policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: false) == .stop(.notIdempotent))
    #expect(policy.decision(afterAttempt: 6, outcome: .status(429), idempotent: true) == .stop(.attemptsExhausted))
    var posts = policy
    posts.retriesNonIdempotentRequests = true
    #expect(
      posts.decision(afterAttempt: 1, outcome: .connectionError, idempotent: false) == .retry(after: .milliseconds(100))
    )
    #expect(
      RetryStrategy.never.decision(afterAttempt: 1, outcome: .status(503), idempotent: true)
        == .stop(.attemptsExhausted))
  }

  /// The longest settings never overflow.
  @Test func extremeSettingsNeverTrap() {
    let policy = RetryStrategy(
      maximumAttempts: .max, baseDelay: .seconds(Int64.max), maximumDelay: .seconds(Int64.max),
      maximumRetryAfter: .seconds(Int64.max))
    #expect(policy.backoffCeiling(beforeRetry: 40) == .nanoseconds(Int64.max))
    #expect(
      policy.decision(afterAttempt: 1, outcome: .status(429), idempotent: true, retryAfter: .seconds(Int64.max))
        != .stop(.notRetryable))
    let none = RetryStrategy(baseDelay: .zero, maximumDelay: .zero)
    #expect(none.delay(beforeRetry: 9) == .zero)
  }
}

/// The retry budget on virtual time: a fraction of the recent requests, plus a minimum, in a
/// window counted in tenths.
@Suite struct RetryBudgetTests {
  let scheduler = TestScheduler()

  @Test func retriesAreAFractionOfRecentRequests() {
    let budget = RetryBudget(ratio: 0.1, window: .seconds(10), minimumPerSecond: 0, clock: scheduler)
    #expect(!budget.tryWithdraw())
    for _ in 0..<30 { budget.recordRequest() }
    #expect(budget.availableRetries == 3)
    #expect(budget.tryWithdraw() && budget.tryWithdraw() && budget.tryWithdraw())
    #expect(!budget.tryWithdraw())
    #expect(budget.availableRetries == 0)
    // Ten more requests earn one more retry.
    for _ in 0..<10 { budget.recordRequest() }
    #expect(budget.tryWithdraw())
    #expect(!budget.tryWithdraw())
  }

  /// A request at 0 s counts in the slice [0 s, 1 s) until 10 s, exclusive.
  @Test func requestsAndRetriesStopCountingAfterTheWindow() {
    let budget = RetryBudget(ratio: 0.5, window: .seconds(10), minimumPerSecond: 0, clock: scheduler)
    for _ in 0..<4 { budget.recordRequest() }
    #expect(budget.tryWithdraw())
    scheduler.advance(to: ms(5_500))
    for _ in 0..<2 { budget.recordRequest() }
    #expect(budget.availableRetries == 2)
    scheduler.advance(to: ms(9_999))
    #expect(budget.availableRetries == 2)
    scheduler.advance(to: ms(10_000))
    #expect(budget.availableRetries == 1)
    scheduler.advance(to: ms(15_000))
    #expect(budget.availableRetries == 0)
  }

  @Test func aMinimumPerSecondAllowsRetriesWithoutRequests() {
    let budget = RetryBudget(ratio: 0.1, window: .seconds(10), minimumPerSecond: 1, clock: scheduler)
    #expect(budget.availableRetries == 10)
    for _ in 0..<10 { #expect(budget.tryWithdraw()) }
    #expect(!budget.tryWithdraw())
    for _ in 0..<10 { budget.recordRequest() }
    #expect(budget.tryWithdraw())
  }

  /// A fleet of clients each retrying every failure sends at most 1 + ratio of its requests
  /// (plus the minimum) while the server fails.
  @Test func aFailingServerSeesAtMostTheRatioInRetries() {
    let budget = RetryBudget(ratio: 0.1, window: .seconds(10), minimumPerSecond: 1, clock: scheduler)
    var retries = 0
    for second in 0..<60 {
      scheduler.advance(to: ms(Int64(second) * 1000))
      for _ in 0..<100 {
        budget.recordRequest()
        for _ in 0..<3 where budget.tryWithdraw() { retries += 1 }
      }
    }
    // 6,000 requests: at most 10 % of them plus 1 a second, over 60 s.
    #expect(retries <= 600 + 60 + 10)
    #expect(retries >= 600)
  }

  @Test func extremeSettingsNeverTrap() {
    let budget = RetryBudget(ratio: 1e300, window: .seconds(Int64.max), minimumPerSecond: .max, clock: scheduler)
    budget.recordRequest()
    #expect(budget.tryWithdraw())
    scheduler.advance(to: .max)
    #expect(budget.availableRetries > 0)
    let tiny = RetryBudget(ratio: 0, window: .nanoseconds(10), minimumPerSecond: 0, clock: scheduler)
    #expect(!tiny.tryWithdraw())
  }
}
