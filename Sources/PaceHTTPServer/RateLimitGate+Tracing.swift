#if Hummingbird || Vapor
import Pace
import Tracing

/// The span of each policy's decision on a request: a child of the request's span, if any, and
/// the parent of its store's (a ``PostgresRateLimitStore`` decision). Without a tracer it records
/// nothing: the span code is skipped after one look-up of the bootstrapped instrument.
enum GateTracing {
  /// The span's name, and its attributes: Pace's own, under `pace.rate_limit.`, and
  /// OpenTelemetry's `error.type`.
  static let spanName = "pace.rate_limit.decide"
  static let policy = "pace.rate_limit.policy"
  static let keyHash = "pace.rate_limit.key.hash"
  static let cost = "pace.rate_limit.cost"
  static let decision = "pace.rate_limit.decision"
  static let remaining = "pace.rate_limit.remaining"
  static let retryAfter = "pace.rate_limit.retry_after"
  static let errorType = "error.type"

  /// Whether an instrument is bootstrapped (or bound to the task): without one, a decision skips
  /// the span code, whose no-op tracer and span cost more than an in-memory decision.
  static var isOn: Bool { type(of: InstrumentationSystem.instrument) != NoOpInstrument.self }

  /// `decide` (a limiter's decision on `key`) in its span, the span's context current while it runs.
  static func traced(
    policy: String, key: String, cost: Int, _ decide: () async throws -> RateLimitDecision
  ) async throws -> RateLimitDecision {
    guard isOn else { return try await decide() }
    return try await withSpan(spanName, ofKind: .internal) { span in
      try await record(span, policy: policy, key: key, cost: cost, decide)
    }
  }

  /// ``traced(policy:key:cost:_:)`` for a limiter that decides at once, in memory.
  static func tracedAtOnce(
    policy: String, key: String, cost: Int, _ decide: () -> RateLimitDecision
  ) -> RateLimitDecision {
    guard isOn else { return decide() }
    let span = InstrumentationSystem.tracer.startSpan(spanName, ofKind: .internal)
    defer { span.end() }
    guard span.isRecording else { return decide() }
    asked(span, policy: policy, key: key, cost: cost)
    let decision = decide()
    decided(span, decision, cost: cost)
    return decision
  }

  private static func record(
    _ span: any Span, policy: String, key: String, cost: Int, _ decide: () async throws -> RateLimitDecision
  ) async throws -> RateLimitDecision {
    guard span.isRecording else { return try await decide() }
    asked(span, policy: policy, key: key, cost: cost)
    do {
      let decision = try await decide()
      decided(span, decision, cost: cost)
      return decision
    } catch {
      span.attributes[errorType] = String(describing: type(of: error))
      throw error
    }
  }

  private static func asked(_ span: any Span, policy: String, key: String, cost: Int) {
    span.attributes[self.policy] = policy
    // Never the key itself (an API key, an address): the first 16 digits of its SHA-256.
    span.attributes[keyHash] = String(SHA256.hex(key).prefix(16))
    span.attributes[self.cost] = cost
  }

  private static func decided(_ span: any Span, _ outcome: RateLimitDecision, cost: Int) {
    switch outcome {
    case .allowed(let left):
      span.attributes[decision] = cost == 0 ? "question" : "allowed"
      span.attributes[remaining] = left
    case .limited(let wait):
      span.attributes[decision] = cost == 0 ? "question" : "limited"
      if wait != RateLimitDecision.never {
        let (seconds, attoseconds) = wait.components
        span.attributes[retryAfter] = Double(seconds) + Double(attoseconds) / 1e18
      }
    }
  }
}
#endif
