#if Hummingbird || Vapor
import Logging
import Metrics
import Pace

/// The part of a rate-limit middleware that no framework changes: asks each policy's limiter,
/// logs and counts the answers, and says what to send. Each framework's middleware reads every
/// policy's key and cost from its request and translates the ``RateLimitOutcome`` into its own
/// response.
///
/// Several policies on one request are asked so that a denied request is charged nowhere:
/// every policy is first asked with a cost of 0 (a query, which answers as cost 1 would and takes
/// nothing); only if each has the permits does each get charged. The policy that would deny is
/// then asked with the request's cost, which it refuses without taking anything, for its exact
/// `retryAfter`. Between the query and the charge another request may take the last permits:
/// then the policies charged before the one that denies keep their charge (a race of concurrent
/// requests on one key, never a way for one client to pass).
package struct RateLimitGate: Sendable {
  /// One policy: its name, its limiter, its counters.
  package struct Policy: Sendable {
    package let name: String
    package let limiter: KeyedRateLimiter<String>
    let responses: ResponseMetrics

    /// The limit of `key`: the limiter's, or its plan's for a limiter with limits per key.
    package func limit(for key: String) -> RateLimit {
      limiter.limit(for: key)
    }

    func fields(for key: String) -> RateLimitFields {
      RateLimitFields(
        limit: limit(for: key), policyName: name, windowEndsIn: limiter.timeUntilWindowEnds(for: key))
    }
  }

  /// What one policy makes of one request: its key, or nil to let the request through this
  /// policy unlimited, and its cost.
  package struct Charge: Sendable {
    package let key: String?
    package let cost: Int

    package init(key: String?, cost: Int) {
      self.key = key
      self.cost = cost
    }
  }

  package let policies: [Policy]
  package let longKeys: LongKeyRule
  package let logger: Logger
  private let invalidReport = OccasionalReport(every: .seconds(10))

  /// - Precondition: at least one policy, no two with the same name, each name printable ASCII.
  package init(
    policies: [(name: String, limiter: KeyedRateLimiter<String>)], longKeys: LongKeyRule, logger: Logger,
    metricsFactory: any MetricsFactory
  ) {
    precondition(!policies.isEmpty, "RateLimitMiddleware: give it at least one policy")
    precondition(
      Set(policies.map(\.name)).count == policies.count, "RateLimitMiddleware: each policy needs a name of its own")
    for policy in policies { RateLimitFields.checkName(policy.name) }
    self.policies = policies.map {
      Policy(name: $0.name, limiter: $0.limiter, responses: ResponseMetrics(policy: $0.name, factory: metricsFactory))
    }
    self.longKeys = longKeys
    self.logger = logger
  }

  /// What to do with a request that counts against one key with `cost` permits, for a gate of one
  /// policy.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(key: String, cost: Int) async throws -> RateLimitOutcome {
    try await outcome([Charge(key: key, cost: cost)])
  }

  /// What to do with a request that makes `charges`, one per policy in order.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(_ charges: [Charge]) async throws -> RateLimitOutcome {
    precondition(charges.count == policies.count, "one charge per policy")
    var asked: [(policy: Policy, key: String, cost: Int)] = []
    for (policy, charge) in zip(policies, charges) {
      guard let key = charge.key else { continue }
      asked.append((policy, longKeys.limiterKey(for: key), charge.cost))
    }
    guard !asked.isEmpty else { return .proceed(fields: []) }
    // Every key and cost is checked before any limiter is asked, so a refused request takes
    // nothing anywhere.
    for (policy, key, cost) in asked {
      do throws(InvalidInput) {
        try KeyPolicy.check(cost: cost, limit: policy.limit(for: key))
        try KeyPolicy.check(key: key)
      } catch {
        return invalid(error.description, policy: policy)
      }
    }
    do {
      let states = try await decide(asked)
      return outcome(states, asked)
    } catch let refusal as LimiterRefusal {
      return invalid(refusal.reason.description, policy: refusal.policy)
    } catch let failure as LimiterFailure {
      failure.policy.responses.unavailable.increment()
      logger.error(
        "rate limit: the limiter could not decide; answered 503",
        metadata: ["error": "\(String(reflecting: failure.error))", "pace.policy": "\(failure.policy.name)"])
      return .respond(RateLimitFields.unavailable)
    }
  }

  /// A limiter's failure, with the policy it failed for.
  private struct LimiterFailure: Error {
    let policy: Policy
    let error: any Error
  }

  /// A limiter's refusal of a key or cost the gate's checks let through (a store's own).
  private struct LimiterRefusal: Error {
    let policy: Policy
    let reason: InvalidInput
  }

  private func decide(_ policy: Policy, _ key: String, cost: Int) async throws -> RateLimitDecision {
    do {
      return try await policy.limiter.decide(key, cost: cost)
    } catch let reason as InvalidInput {
      throw LimiterRefusal(policy: policy, reason: reason)
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      throw LimiterFailure(policy: policy, error: error)
    }
  }

  /// Each policy's decision, in order, and the index of the one that denied the request, if one did.
  private func decide(
    _ asked: [(policy: Policy, key: String, cost: Int)]
  ) async throws -> (decisions: [RateLimitDecision], deniedBy: Int?) {
    // One policy and a real cost: one charge, which decides and charges at once.
    if asked.count == 1, asked[0].cost >= 1 {
      let decision = try await decide(asked[0].policy, asked[0].key, cost: asked[0].cost)
      return ([decision], decision.isAllowed ? nil : 0)
    }
    var decisions: [RateLimitDecision] = []
    var wouldDeny: Int?
    for (index, (policy, key, cost)) in asked.enumerated() {
      let query = try await decide(policy, key, cost: 0)
      decisions.append(query)
      if wouldDeny == nil, !Self.passes(query, cost: cost) { wouldDeny = index }
    }
    var charged: Set<Int> = []
    if let index = wouldDeny {
      let (policy, key, cost) = asked[index]
      if case .limited = decisions[index], cost <= 1 {
        // The query answered as cost 1 would: its retryAfter is the request's own.
        return (decisions, index)
      }
      // Asked again with the request's cost for its own retryAfter; a refusal takes nothing.
      let exact = try await decide(policy, key, cost: max(cost, 1))
      decisions[index] = exact
      guard exact.isAllowed else { return (decisions, index) }
      charged.insert(index)  // permits came back in between: it is charged, go on with the others
    }
    // A cost of 0 asks and takes nothing: the queries were the answer.
    if asked.allSatisfy({ $0.cost == 0 }) && wouldDeny == nil { return (decisions, nil) }
    for (index, (policy, key, cost)) in asked.enumerated() where !charged.contains(index) {
      let decision = try await decide(policy, key, cost: cost)
      decisions[index] = decision
      if !decision.isAllowed { return (decisions, index) }
    }
    return (decisions, nil)
  }

  /// Whether a query's answer says a request of `cost` would pass.
  private static func passes(_ query: RateLimitDecision, cost: Int) -> Bool {
    guard case .allowed(let remaining) = query else { return false }
    return remaining >= max(cost, 1)
  }

  private func outcome(
    _ result: (decisions: [RateLimitDecision], deniedBy: Int?), _ asked: [(policy: Policy, key: String, cost: Int)]
  ) -> RateLimitOutcome {
    let states = zip(asked, result.decisions).map { ($0.policy.fields(for: $0.key), $1) }
    guard let deniedBy = result.deniedBy else {
      for (policy, _, _) in asked { policy.responses.allowed.increment() }
      return .proceed(fields: RateLimitFields.fields(states: states))
    }
    asked[deniedBy].policy.responses.limited.increment()
    return .respond(RateLimitFields.tooManyRequests(states: states, deniedBy: deniedBy))
  }

  private func invalid(_ reason: String, policy: Policy) -> RateLimitOutcome {
    policy.responses.invalid.increment()
    if let requests = invalidReport.record() {
      logger.notice(
        "rate limit: invalid request answered 400",
        metadata: ["pace.reason": "\(reason)", "pace.requests": "\(requests)", "pace.policy": "\(policy.name)"])
    }
    return .respond(RateLimitFields.badRequest(reason))
  }
}

/// The counters of `pace_http_rate_limit_responses_total`, made once per policy.
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
