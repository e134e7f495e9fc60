#if Hummingbird || Vapor
import Logging
import Metrics
import Pace

/// The part of a rate-limit middleware that no framework changes: asks each policy's limiter,
/// logs and counts the answers, and says what to send. Each framework's middleware reads every
/// policy's key and cost from its request and translates the ``RateLimitOutcome`` into its own
/// response.
///
/// A policy's limit is looked up by the key the request sent; the limiter counts it under the key
/// ``LongKeyHandling`` makes of it (a long key's digest), so a long key keeps its plan.
///
/// Several policies on one request are asked so that a denied request is charged nowhere: each
/// policy in order is first asked with a cost of 0 (a question, which answers as cost 1 would
/// and takes nothing); only if each has the permits does each get charged, in order. The first
/// policy whose question says no ends the request's work: the policies after it are neither
/// asked nor charged (no round trip to their stores), and the `429` reports the policies asked.
/// For a cost above 1 the policy that would deny is asked again with the request's cost, which
/// it refuses without taking anything, for its exact `retryAfter`. Between the question and the
/// charge another request may take the last permits: then the policies charged before the one
/// that denies keep their charge (a race of concurrent requests on one key, never a way for one
/// client to pass). A policy whose cost is 0 is asked its question and never charged.
package struct RateLimitGate: Sendable {
  /// One policy: its name, its limiter, its counters.
  package struct Policy: Sendable {
    package var name: String { template.policyName }
    /// Where the policy's decisions are made.
    package let decider: PolicyLimiter
    let responses: ResponseMetrics
    /// Its near-limit signals and its counters of exempted and blocked requests.
    let controls: RateLimitControls.Policy
    /// The fields of the limiter's one limit, made once: the name quoted and the policy member
    /// written, so that a request only writes its own state.
    let template: RateLimitFields
    /// What makes the `pk` of the policy's members, if it says one.
    let partitionKeys: RateLimitPartitionKeys?

    /// The limit of `key`: the limiter's, or its plan's for a limiter with limits per key.
    package func limit(for key: String) -> RateLimit {
      decider.limit(for: key)
    }

    /// The fields for `key`, whose limit is `limit`.
    func fields(limit: RateLimit, key: String) -> RateLimitFields {
      // Only a fixed window's `t` needs the window's end: the other policies never ask the clock.
      let windowEndsIn: Duration? =
        if case .fixedWindow = limit.algorithm { decider.timeUntilWindowEnds(under: limit) } else { nil }
      var fields = template.with(limit: limit, windowEndsIn: windowEndsIn)
      if let partitionKeys { fields.partitionKey = partitionKeys.fieldValue(for: key) }
      return fields
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

  /// A policy asked about a request: the key its limiter counts, the cost, and the limit of the
  /// key the request sent, read once (a per-key limit is user code).
  private struct Asked {
    let policy: Policy
    let key: String
    let cost: Int
    let limit: RateLimit
  }

  package let policies: [Policy]
  package let longKeys: LongKeyHandling
  package let logger: Logger
  /// The exemptions, blocks and near-limit hook, set by the operator.
  package let controls: RateLimitControls
  private let invalidReport = OccasionalReport(every: .seconds(10))
  private let shadowReport = OccasionalReport(every: .seconds(10))

  /// - Precondition: at least one policy, no two with the same name, each name printable ASCII.
  package init(
    policies: [(
      name: String, decider: PolicyLimiter, partitionKeys: RateLimitPartitionKeys?, nearLimit: NearLimitThreshold
    )],
    longKeys: LongKeyHandling, logger: Logger,
    metricsFactory: any MetricsFactory, controls: RateLimitControls = RateLimitControls()
  ) {
    precondition(!policies.isEmpty, "RateLimitMiddleware: give it at least one policy")
    precondition(
      Set(policies.map(\.name)).count == policies.count, "RateLimitMiddleware: each policy needs a name of its own")
    self.policies = policies.map {
      // A limiter with limits per key has no one limit: each key's own replaces the placeholder.
      Policy(
        decider: $0.decider, responses: ResponseMetrics(policy: $0.name, factory: metricsFactory),
        controls: RateLimitControls.Policy(name: $0.name, threshold: $0.nearLimit, metricsFactory: metricsFactory),
        template: RateLimitFields(
          limit: $0.decider.uniformLimit ?? RateLimit(permits: .max, per: .nanoseconds(1)), policyName: $0.name),
        partitionKeys: $0.partitionKeys)
    }
    self.longKeys = longKeys
    self.logger = logger
    self.controls = controls
  }

  /// What to do with a request that counts against `key` (nil: unlimited) with `cost` permits,
  /// for a gate of one policy: the whole answer without a list of charges.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(key: String?, cost: Int) async throws -> RateLimitOutcome {
    // In memory the decision is taken at once, with no async call into the limiter.
    if let decided = outcomeAtOnce(key: key, cost: cost) { return decided }
    guard let key else { return .proceed(fields: []) }
    // A question (cost 0) asks before it charges: the path of several policies.
    guard cost >= 1 else { return try await outcome([Charge(key: key, cost: cost)]) }
    let policy = policies[0]
    let asked = ask(policy, key: key, cost: cost)
    if let invalid = check(asked) { return invalid }
    let decision: RateLimitDecision
    do {
      decision = try await decide(asked, cost: cost)
    } catch {
      return try answer(error)
    }
    return outcome(decision, asked)
  }

  /// The same answer as ``outcome(key:cost:)``, taken without suspending where it can be: for a
  /// gate of one policy whose limiter decides in memory, and a cost of at least 1 (or no key).
  /// Nil where the limiter must be awaited (a store), or a question (cost 0) goes the path of several
  /// policies: call ``outcome(key:cost:)`` then, with the same key and cost.
  package func outcomeAtOnce(key: String?, cost: Int) -> RateLimitOutcome? {
    precondition(policies.count == 1, "one charge per policy")
    guard let key else { return .proceed(fields: []) }
    let policy = policies[0]
    guard cost >= 1, let limiter = policy.decider.decidingInMemory else { return nil }
    let asked = ask(policy, key: key, cost: cost)
    if let invalid = check(asked) { return invalid }
    // `check` passed the key and cost through `InputRules`: the in-memory `decide` would do no more.
    let decision = GateTracing.tracedAtOnce(policy: policy.name, key: asked.key, cost: cost) {
      limiter.tryAcquire(asked.key, cost: cost, limit: asked.limit)
    }
    return outcome(decision, asked)
  }

  /// What one policy's `decision` on `asked` answers.
  private func outcome(_ decision: RateLimitDecision, _ asked: Asked) -> RateLimitOutcome {
    let policy = asked.policy
    let fields = policy.fields(limit: asked.limit, key: asked.key)
    switch decision {
    case .allowed(let remaining):
      policy.responses.allowed.increment()
      signalNearLimit(policy, key: asked.key, limit: asked.limit, cost: asked.cost, remaining: remaining)
      return .proceed(fields: fields.fields(remaining: remaining))
    case .limited:
      policy.responses.limited.increment()
      guard isEnforced(asked) else {
        letThroughInShadow(policy)
        return .proceed(fields: RateLimitFields.fields(states: [(fields, decision)]))
      }
      return .respond(RateLimitFields.tooManyRequests(states: [(fields, decision)], deniedBy: 0))
    }
  }

  /// Whether a refusal of `asked` by its policy is enforced: false for a key in shadow
  /// (``RateLimitShadowMode``).
  private func isEnforced(_ asked: Asked) -> Bool {
    controls.shadowMode?.snapshot.enforces(key: asked.key, inPolicy: asked.policy.name) ?? true
  }

  /// Counts a request that `policy` limited and shadow mode let through, and reports it at most
  /// once per 10 s.
  private func letThroughInShadow(_ policy: Policy) {
    policy.controls.shadowLimited.increment()
    if let requests = shadowReport.record() {
      logger.info(
        "rate limit: a request over its limit was let through in shadow",
        metadata: ["pace.requests": "\(requests)", "pace.policy": "\(policy.name)"])
    }
  }

  /// What to do with a request that makes `charges`, one per policy in order.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(_ charges: [Charge]) async throws -> RateLimitOutcome {
    precondition(charges.count == policies.count, "one charge per policy")
    var asked: [Asked] = []
    asked.reserveCapacity(charges.count)
    for (policy, charge) in zip(policies, charges) {
      guard let key = charge.key else { continue }
      asked.append(ask(policy, key: key, cost: charge.cost))
    }
    guard !asked.isEmpty else { return .proceed(fields: []) }
    // Every key and cost is checked before any limiter is asked, so a refused request takes
    // nothing anywhere.
    for one in asked {
      if let invalid = check(one) { return invalid }
    }
    do {
      let states = try await decide(asked)
      return outcome(states, asked)
    } catch {
      return try answer(error)
    }
  }

  /// The policy's question about `key`: the plan is looked up by the key the request sent, before
  /// any hashing; only the counter is kept under the key the limiter gets.
  private func ask(_ policy: Policy, key: String, cost: Int) -> Asked {
    Asked(policy: policy, key: longKeys.limiterKey(for: key), cost: cost, limit: policy.limit(for: key))
  }

  /// The `400` for a key or cost no limiter takes; nil for one that may be asked.
  private func check(_ asked: Asked) -> RateLimitOutcome? {
    do throws(InvalidInput) {
      try InputRules.check(cost: asked.cost, limit: asked.limit)
      try InputRules.check(key: asked.key)
      return nil
    } catch {
      return invalid(error.description, policy: asked.policy)
    }
  }

  /// The answer to a limiter's refusal or failure; a cancellation is thrown on.
  private func answer(_ error: any Error) throws -> RateLimitOutcome {
    switch error {
    case let refusal as LimiterRefusal:
      return invalid(refusal.reason.description, policy: refusal.policy)
    case let failure as LimiterFailure:
      failure.policy.responses.unavailable.increment()
      logger.error(
        "rate limit: the limiter could not decide; answered 503",
        metadata: ["error": "\(String(reflecting: failure.error))", "pace.policy": "\(failure.policy.name)"])
      return .respond(RateLimitFields.unavailable(policies: [failure.policy.name]))
    default:
      throw error
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

  /// The decision of `asked`'s policy with `cost`, under the limit looked up for the request's key.
  private func decide(_ asked: Asked, cost: Int) async throws -> RateLimitDecision {
    let policy = asked.policy
    do {
      return try await GateTracing.traced(policy: policy.name, key: asked.key, cost: cost) {
        try await policy.decider.decide(asked.key, cost: cost, limit: asked.limit)
      }
    } catch let reason as InvalidInput {
      throw LimiterRefusal(policy: policy, reason: reason)
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      throw LimiterFailure(policy: policy, error: error)
    }
  }

  /// Each asked policy's decision, in order, and the index of the one that denied the request, if
  /// one did: the decisions stop at the first policy whose question says no, so the policies after
  /// it are neither asked nor charged.
  private func decide(_ asked: [Asked]) async throws -> (decisions: [RateLimitDecision], deniedBy: Int?) {
    // One policy and a real cost: one charge, which decides and charges at once.
    if asked.count == 1, asked[0].cost >= 1 {
      let decision = try await decide(asked[0], cost: asked[0].cost)
      return ([decision], decision.isAllowed || !isEnforced(asked[0]) ? nil : 0)
    }
    var decisions: [RateLimitDecision] = []
    decisions.reserveCapacity(asked.count)
    // Charged by the question's pass, or limited in shadow: neither is charged again.
    var settled: Set<Int> = []
    for (index, one) in asked.enumerated() {
      let question = try await decide(one, cost: 0)
      decisions.append(question)
      if Self.passes(question, cost: one.cost) { continue }
      // The question answered as cost 1 would: for a cost of at most 1, its retryAfter is the
      // request's own.
      if case .limited = question, one.cost <= 1 {
        // A refusal in shadow lets the request on to the next policy, uncharged here.
        guard isEnforced(one) else {
          settled.insert(index)
          continue
        }
        return (decisions, index)
      }
      // Asked again with the request's cost for its own retryAfter; a refusal takes nothing.
      let exact = try await decide(one, cost: max(one.cost, 1))
      decisions[index] = exact
      guard exact.isAllowed || !isEnforced(one) else { return (decisions, index) }
      settled.insert(index)  // permits came back in between: it is charged, go on with the others
    }
    // A cost of 0 asks and takes nothing: its question was the answer.
    for (index, one) in asked.enumerated() where one.cost > 0 && !settled.contains(index) {
      let decision = try await decide(one, cost: one.cost)
      decisions[index] = decision
      if !decision.isAllowed && isEnforced(one) { return (decisions, index) }
    }
    return (decisions, nil)
  }

  /// Whether a question's answer says a request of `cost` would pass.
  private static func passes(_ question: RateLimitDecision, cost: Int) -> Bool {
    guard case .allowed(let remaining) = question else { return false }
    return remaining >= max(cost, 1)
  }

  private func outcome(
    _ result: (decisions: [RateLimitDecision], deniedBy: Int?), _ asked: [Asked]
  ) -> RateLimitOutcome {
    // The policies asked: a refusal ends the list.
    let states = zip(asked, result.decisions).map { ($0.policy.fields(limit: $0.limit, key: $0.key), $1) }
    // A policy that limited the request in shadow counts it as limited, as an enforced one would.
    for (index, (one, decision)) in zip(asked, result.decisions).enumerated()
    where !decision.isAllowed && index != result.deniedBy {
      one.policy.responses.limited.increment()
      letThroughInShadow(one.policy)
    }
    guard let deniedBy = result.deniedBy else {
      // One request: once per policy, whatever questions it took.
      for (one, decision) in zip(asked, result.decisions) where decision.isAllowed {
        one.policy.responses.allowed.increment()
      }
      // Every decision is the charge of its policy's cost (a question for a cost of 0).
      for (one, decision) in zip(asked, result.decisions) {
        guard case .allowed(let remaining) = decision else { continue }
        signalNearLimit(one.policy, key: one.key, limit: one.limit, cost: one.cost, remaining: remaining)
      }
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
