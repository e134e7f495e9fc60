import Pace

/// When to try a request again, and how long to wait first: capped exponential backoff with full
/// jitter, a server's `Retry-After` as a floor, for the failures a retry can mend.
///
/// ```swift
/// let policy = RetryStrategy(maximumAttempts: 4, baseDelay: .milliseconds(200), maximumDelay: .seconds(10))
/// switch policy.decision(afterAttempt: 1, outcome: .status(503), idempotent: true, retryAfter: nil) {
/// case .retry(let delay): print("retry in \(delay)")   // 0 ... 200 ms
/// case .stop(let reason): print("give up: \(reason)")
/// }
/// ```
///
/// Retry `n` (1 for the first retry) waits a random duration in
/// `0 ... min(maximumDelay, baseDelay * 2^(n-1))`, uniformly (full jitter: a fleet of clients
/// that failed together does not come back together). A server's `Retry-After` is a floor: the
/// wait is at least that, and a `Retry-After` above ``maximumRetryAfter`` is not waited for at
/// all (the request is not retried). Retried: the statuses in ``retryableStatuses`` (429 and 503
/// by default) and connection errors; only idempotent requests, unless
/// ``retriesNonIdempotentRequests`` is set.
public struct RetryStrategy: Sendable {
  /// What ended an attempt.
  public enum Outcome: Sendable, Hashable {
    /// A response with this status.
    case status(Int)
    /// No response: the connection failed (refused, reset, timed out).
    case connectionError
  }

  /// Why a request is not tried again.
  public enum StopReason: Sendable, Hashable, CustomStringConvertible {
    /// The outcome is a success, or a failure a retry does not mend.
    case notRetryable
    /// The request is not idempotent: a retry could do its work twice.
    case notIdempotent
    /// ``maximumAttempts`` attempts were made.
    case attemptsExhausted
    /// The server asked for a longer wait than ``maximumRetryAfter``.
    case retryAfterTooLong(Duration)
    /// The retry budget is spent: too many retries among recent requests.
    case budgetExhausted

    /// The reason, in words.
    public var description: String {
      switch self {
      case .notRetryable: "not retryable"
      case .notIdempotent: "not idempotent"
      case .attemptsExhausted: "attempts exhausted"
      case .retryAfterTooLong(let wait): "the server asked to wait \(wait.paceDescription), too long"
      case .budgetExhausted: "retry budget exhausted"
      }
    }
  }

  /// What to do after an attempt.
  public enum Decision: Sendable, Hashable {
    /// Try again after this delay.
    case retry(after: Duration)
    /// Do not try again.
    case stop(StopReason)
  }

  /// How many attempts a request makes at most, the first included; 1 never retries.
  public var maximumAttempts: Int
  /// The first retry's largest delay; each further retry doubles it, up to ``maximumDelay``.
  public var baseDelay: Duration
  /// The largest backoff delay.
  public var maximumDelay: Duration
  /// The longest `Retry-After` waited for; a longer one stops the retries.
  public var maximumRetryAfter: Duration
  /// The statuses that are retried: 429 and 503 by default.
  public var retryableStatuses: Set<Int>
  /// Whether requests that are not idempotent (a `POST`) are retried too; `false` by default.
  public var retriesNonIdempotentRequests: Bool
  /// A random number in the range, uniformly: `Int64.random(in:)` by default; a seeded generator
  /// in tests.
  public var random: @Sendable (ClosedRange<Int64>) -> Int64

  /// A retry policy.
  ///
  /// - Parameters:
  ///   - maximumAttempts: Attempts at most, the first included; 3 by default. Positive.
  ///   - baseDelay: The first retry's largest delay; 200 ms by default. Not negative.
  ///   - maximumDelay: The largest backoff delay; 20 s by default. Not below `baseDelay`.
  ///   - maximumRetryAfter: The longest `Retry-After` waited for; 60 s by default. Not negative.
  ///   - retryableStatuses: The statuses retried; 429 and 503 by default.
  ///   - retriesNonIdempotentRequests: Whether a request that is not idempotent is retried.
  ///   - random: A uniform random number in a range, for the jitter.
  public init(
    maximumAttempts: Int = 3,
    baseDelay: Duration = .milliseconds(200),
    maximumDelay: Duration = .seconds(20),
    maximumRetryAfter: Duration = .seconds(60),
    retryableStatuses: Set<Int> = [429, 503],
    retriesNonIdempotentRequests: Bool = false,
    random: @escaping @Sendable (ClosedRange<Int64>) -> Int64 = { Int64.random(in: $0) }
  ) {
    precondition(maximumAttempts > 0, "RetryStrategy: maximumAttempts must be positive (got \(maximumAttempts))")
    precondition(baseDelay >= .zero, "RetryStrategy: baseDelay must not be negative (got \(baseDelay))")
    precondition(
      maximumDelay >= baseDelay, "RetryStrategy: maximumDelay must not be below baseDelay (got \(maximumDelay))")
    precondition(
      maximumRetryAfter >= .zero, "RetryStrategy: maximumRetryAfter must not be negative (got \(maximumRetryAfter))")
    self.maximumAttempts = maximumAttempts
    self.baseDelay = baseDelay
    self.maximumDelay = maximumDelay
    self.maximumRetryAfter = maximumRetryAfter
    self.retryableStatuses = retryableStatuses
    self.retriesNonIdempotentRequests = retriesNonIdempotentRequests
    self.random = random
  }

  /// A policy that never retries.
  public static var never: RetryStrategy { RetryStrategy(maximumAttempts: 1) }

  /// Whether `outcome` is one a retry can mend.
  public func isRetryable(_ outcome: Outcome) -> Bool {
    switch outcome {
    case .status(let status): retryableStatuses.contains(status)
    case .connectionError: true
    }
  }

  /// The largest backoff delay before retry `retry` (1 for the first): `min(maximumDelay,
  /// baseDelay * 2^(retry-1))`, without overflow.
  public func backoffCeiling(beforeRetry retry: Int) -> Duration {
    let base = baseDelay.paceNanoseconds
    let cap = maximumDelay.paceNanoseconds
    let doublings = max(0, retry - 1)
    guard base > 0 else { return .zero }
    guard doublings < 63 else { return .nanoseconds(cap) }
    let (product, overflow) = base.multipliedReportingOverflow(by: Int64(1) << doublings)
    return .nanoseconds(overflow ? cap : min(cap, product))
  }

  /// The delay before retry `retry` (1 for the first): a uniform random duration in
  /// `0 ... backoffCeiling(beforeRetry:)`, at least `retryAfter`.
  public func delay(beforeRetry retry: Int, retryAfter: Duration? = nil) -> Duration {
    let ceiling = backoffCeiling(beforeRetry: retry).paceNanoseconds
    let jittered = ceiling > 0 ? min(max(random(0...ceiling), 0), ceiling) : 0
    return max(.nanoseconds(jittered), max(retryAfter ?? .zero, .zero))
  }

  /// What to do after attempt `attempt` (1 for the first) ended with `outcome`.
  ///
  /// - Parameters:
  ///   - attempt: The attempt that just ended; 1 for the first.
  ///   - outcome: Its status, or a connection error.
  ///   - idempotent: Whether the request may be sent twice (`GET`, `PUT`, `DELETE`, …).
  ///   - retryAfter: The server's `Retry-After`, if it sent one.
  /// - Returns: `.retry(after:)` with the delay, or `.stop` with the reason.
  public func decision(
    afterAttempt attempt: Int, outcome: Outcome, idempotent: Bool, retryAfter: Duration? = nil
  ) -> Decision {
    guard isRetryable(outcome) else { return .stop(.notRetryable) }
    guard idempotent || retriesNonIdempotentRequests else { return .stop(.notIdempotent) }
    guard attempt < maximumAttempts else { return .stop(.attemptsExhausted) }
    if let retryAfter, retryAfter > maximumRetryAfter { return .stop(.retryAfterTooLong(retryAfter)) }
    return .retry(after: delay(beforeRetry: attempt, retryAfter: retryAfter))
  }
}
