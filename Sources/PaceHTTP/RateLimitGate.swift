#if Hummingbird || Vapor
import Logging
import Metrics
import Pace

/// The part of a rate-limit middleware that no framework changes: asks the limiter, logs and counts
/// the answer, and says what to send. Each framework's middleware reads the key and the cost from
/// its request and translates the ``RateLimitOutcome`` into its own response.
package struct RateLimitGate: Sendable {
  package let limiter: KeyedRateLimiter<String>
  package let fields: RateLimitFields
  package let logger: Logger
  private let responses: ResponseMetrics
  private let invalidReport = OccasionalReport(every: .seconds(10))

  package init(
    limiter: KeyedRateLimiter<String>, policyName: String, logger: Logger, metricsFactory: any MetricsFactory
  ) {
    self.limiter = limiter
    self.fields = RateLimitFields(limit: limiter.limit, policyName: policyName)
    self.logger = logger
    self.responses = ResponseMetrics(policy: policyName, factory: metricsFactory)
  }

  /// What to do with a request that counts against `key` with `cost` permits.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(key: String, cost: Int) async throws -> RateLimitOutcome {
    let answer: LimiterAnswer
    do {
      answer = .decided(try await limiter.decide(key, cost: cost))
    } catch let invalid as InvalidInput {
      answer = .invalid(invalid.description)
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      responses.unavailable.increment()
      logger.error(
        "rate limit: the limiter could not decide; answered 503",
        metadata: ["error": "\(String(reflecting: error))", "pace.policy": "\(fields.policyName)"])
      return fields.outcome(for: .unavailable)
    }
    switch answer {
    case .decided(.allowed):
      responses.allowed.increment()
    case .decided(.limited):
      responses.limited.increment()
    case .invalid(let reason):
      responses.invalid.increment()
      if let requests = invalidReport.record() {
        logger.notice(
          "rate limit: invalid request answered 400",
          metadata: ["pace.reason": "\(reason)", "pace.requests": "\(requests)", "pace.policy": "\(fields.policyName)"])
      }
    case .unavailable:
      break
    }
    return fields.outcome(for: answer)
  }
}

/// The counters of `pace_http_rate_limit_responses_total`, made once per middleware.
struct ResponseMetrics: Sendable {
  let allowed: Counter
  let limited: Counter
  let invalid: Counter
  let unavailable: Counter

  init(policy: String, factory: any MetricsFactory) {
    func counter(_ outcome: String) -> Counter {
      Counter(
        label: "pace_http_rate_limit_responses_total", dimensions: [("policy", policy), ("outcome", outcome)],
        factory: factory)
    }
    allowed = counter("allowed")
    limited = counter("limited")
    invalid = counter("invalid")
    unavailable = counter("unavailable")
  }
}
#endif
