#if Hummingbird || Vapor
import Logging
import Metrics
import Pace

/// A framework's rate-limit middleware: PaceHummingbird's and PaceVapor's `RateLimitMiddleware`.
///
/// Everything but the translation of a request and a response is here, once: the initialisers
/// (with the same labels in the same order on every framework), the policies and what the
/// middleware answers. Allowed requests go on with the IETF rate-limit fields added; limited ones
/// get `429 Too Many Requests` with `Retry-After`. The fields follow
/// [draft-ietf-httpapi-ratelimit-headers-11](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/),
/// whose parameters are -10's (`q`, `w`, `r`, `t`); a quota of requests, the draft's default unit,
/// is written without `qu`, and no partition key (`pk`) is written, so that no key is disclosed:
///
/// ```
/// RateLimit-Policy: "default";q=100;w=60
/// RateLimit: "default";r=42;t=35
/// ```
///
/// A policy's limit (`limit(for:)`, a plan per key) is looked up by the key the request sent; a
/// key over `InputRules.maximumKeyBytes` is then counted under its digest (``LongKeyHandling``),
/// and keeps its plan.
///
/// The order of work for a request: every policy's key and cost are read and checked (a `400`
/// before any limiter is asked); then, with several policies, each in order is asked a question
/// (a cost of 0: answered as a cost of 1 would be, taking nothing), and only if every one has
/// the permits is each charged, in order. The first policy that refuses ends the request's work:
/// the policies after it are neither asked nor charged (no round trip to their stores), the
/// policies before it are not charged, and the `429` names it and reports the policies asked.
/// Middlewares stacked on one route each add their members to the lists, the outer one's first;
/// an outer one charges before an inner one decides.
///
/// Every request gets an answer, never a crash or an empty `500`:
///
/// | The limiter… | Response |
/// |---|---|
/// | allows the request | the route's response, with the fields |
/// | denies it | `429 Too Many Requests`, `Retry-After` and the fields |
/// | refuses the key or the cost (`InvalidInput`: empty, NUL, a negative cost, a cost above the burst; a key over `InputRules.maximumKeyBytes` only under ``LongKeyHandling/refuse``) | `400 Bad Request`, with the reason as plain text |
/// | cannot decide (its store throws) | `503 Service Unavailable`, `Retry-After: 1` |
///
/// A `429` or `503` is RFC 9457 problem details (`application/problem+json`, the rate-limit
/// draft's `quota-exceeded` or `temporary-reduced-capacity`, with `violated-policies`) for a client
/// whose `Accept` prefers JSON, the plain text otherwise; both carry `Vary: Accept`. A policy in
/// shadow (``RateLimitShadowMode``) decides and counts as usual but lets through what it limits.
///
/// A store with a failure mode decides before that. Invalid requests and failures are logged to
/// `logger` (invalid requests at most one line per 10 s, with how many it stands for) and counted
/// in `pace_http_rate_limit_responses_total`, with dimensions `policy` and `outcome` (`allowed`,
/// `limited`, `invalid`, `unavailable`, `exempted`, `blocked`). It counts requests, not the
/// questions asked for them: an allowed request once for each policy that counted it, a limited
/// one once for the policy that refused it, an invalid or unavailable one once for the policy at
/// fault, an exempt one once for each policy it passed without a decision, a blocked one once for
/// the policy that answered. Before any decision, a blocked key (`blocks:`) is answered `429`
/// and an exempt one (`exemptions:`, ``RateLimitExemptions``) let through without fields; after
/// it, a key past its policy's near-limit threshold is signalled (``NearLimitSignal``). A store counts
/// its own decisions (PacePostgres: `pace_rate_limit_decisions_total`, where the questions are
/// `question`).
public protocol RateLimitingMiddleware: Sendable {
  /// What a policy reads a request's key and cost from: the framework's request (and context).
  /// Not `Input`, which a framework's middleware protocol may name (Hummingbird's does).
  associatedtype PolicyInput

  /// The middleware's policies and gate, read by PaceHTTPServer only.
  var _rateLimitState: RateLimitMiddlewareState<PolicyInput> { get }

  /// The middleware made of `state`: what every initialiser comes to.
  init(_rateLimitState: RateLimitMiddlewareState<PolicyInput>)
}

/// A logger that discards, every middleware's default: a library is silent until the application
/// passes its own.
@usableFromInline package let silentRateLimitLogger = Logger(
  label: "pace.http.ratelimit", factory: { _ in SwiftLogNoOpLogHandler() })

/// What a rate-limit middleware holds, in no framework's types: its policies, what it does with
/// long keys, and the gate that asks the limiters and says what to answer. Opaque outside
/// PaceHTTPServer.
public struct RateLimitMiddlewareState<Input>: Sendable {
  package let policies: [RateLimitPolicy<Input>]
  package let longKeys: LongKeyHandling
  package let gate: RateLimitGate
  /// How a request's client is read: the key of a policy without one, and the address that
  /// exemptions and blocks are checked against.
  package let clientAddress: ClientAddress
  /// The limit on requests in flight, asked after the policies; none unless
  /// ``RateLimitingMiddleware/limitingConcurrency(_:)`` set one.
  package var concurrency: RequestConcurrencyLimit<Input>?

  /// - Precondition: at least one policy, no two with the same name, each name printable ASCII.
  package init(
    policies: [RateLimitPolicy<Input>], longKeys: LongKeyHandling, logger: Logger, metricsFactory: any MetricsFactory,
    clientAddress: ClientAddress = .peer, controls: RateLimitControls = RateLimitControls()
  ) {
    self.policies = policies
    self.longKeys = longKeys
    self.clientAddress = clientAddress
    gate = RateLimitGate(
      policies: policies.map { ($0.name, $0.decider, $0.partitionKeys, $0.nearLimit) }, longKeys: longKeys,
      logger: logger, metricsFactory: metricsFactory, controls: controls)
  }

  /// Asks the concurrency limit, if any, for `input`'s place: after the policies let it through.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled while it waits.
  package func admitConcurrency(_ input: Input, client: ClientReader<Input>) async throws -> ConcurrencyAdmission {
    guard let concurrency else { return .admitted(nil) }
    return try await concurrency.admit(
      input, clientKey: { clientKey(input, client: client) }, shadowMode: gate.controls.shadowMode)
  }

  /// What the policy at `index` makes of `input`: its key (the client's address, `clientKey`, for
  /// a policy without a key of its own) and its cost. Read once per request: they are user code.
  package func charge(_ index: Int, _ input: Input, clientKey: (Input) -> String?) -> RateLimitGate.Charge {
    let policy = policies[index]
    return RateLimitGate.Charge(key: policy.key.map { $0(input) } ?? clientKey(input), cost: policy.cost(input))
  }

  /// What to do with `input`, whose client `client` reads: the whole answer, for the framework to
  /// translate.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled.
  package func outcome(_ input: Input, client: ClientReader<Input>) async throws -> RateLimitOutcome {
    let outcome = try await policiesOutcome(input, client: client)
    guard let concurrency else { return outcome }
    // The concurrency limit is a policy too: listed after the rate limits.
    switch outcome {
    case .proceed(let fields):
      var listed = fields
      if let index = listed.firstIndex(where: { $0.name == RateLimitFields.policy }) {
        listed[index] = HeaderField(RateLimitFields.policy, listed[index].value + ", " + concurrency.policyMember)
      } else {
        listed.append(HeaderField(RateLimitFields.policy, concurrency.policyMember))
      }
      return .proceed(fields: listed)
    case .respond(let answer) where answer.status == 429:
      return .respond(answer.adding(policyMember: concurrency.policyMember))
    case .respond:
      return outcome
    }
  }

  /// ``outcome(_:client:)`` as the rate-limit policies answer, before the concurrency limit.
  private func policiesOutcome(_ input: Input, client: ClientReader<Input>) async throws -> RateLimitOutcome {
    guard policies.count > 1 else {
      // One policy, the usual case: no list of charges.
      switch admitOne(input, client: client) {
      case .answered(let outcome): return outcome
      case .decide(let charge): return try await gate.outcome(key: charge.key, cost: charge.cost)
      }
    }
    switch admit(input, client: client) {
    case .answered(let outcome): return outcome
    case .decide(let charges): return try await gate.outcome(charges)
    }
  }
}

extension RateLimitingMiddleware {
  /// The policies, in the order a request meets them and the fields list them.
  public var policies: [RateLimitPolicy<PolicyInput>] { _rateLimitState.policies }
  /// What happens to a key longer than `InputRules.maximumKeyBytes`.
  public var longKeys: LongKeyHandling { _rateLimitState.longKeys }
  /// Where invalid requests and limiter failures are logged.
  public var logger: Logger { _rateLimitState.gate.logger }
  /// The first policy's name in the `RateLimit-Policy` and `RateLimit` fields.
  public var policyName: String { policies[0].name }

  /// The limit on requests in flight, if the middleware has one.
  public var concurrencyLimit: RequestConcurrencyLimit<PolicyInput>? { _rateLimitState.concurrency }

  /// This middleware with `limit` on the requests in flight: asked after the policies, for each
  /// request they let through; a request it refuses is answered `503` with `Retry-After`, and its
  /// place is held until the response's body is written or the connection drops
  /// (``RequestConcurrencyLimit`` says the rules). Replaces any limit set before.
  public func limitingConcurrency(_ limit: RequestConcurrencyLimit<PolicyInput>) -> Self {
    var state = _rateLimitState
    state.concurrency = limit
    return Self(_rateLimitState: state)
  }

  /// The first policy's limiter, for a policy made with a `KeyedRateLimiter` or a limit.
  @available(*, deprecated, message: "Keep the limiter you gave the middleware: it may be a StoreBackedRateLimiter")
  public var limiter: KeyedRateLimiter<String> { policies[0].limiter }

  /// The first policy's limit, for a limiter with one limit; a limiter with limits per key has
  /// none (this then answers a limit no key has), and reports each key's own in the fields.
  @available(*, deprecated, message: "A limiter with limits per key has no one limit: use its limit(for:)")
  public var limit: RateLimit { policies[0].decider.uniformLimit ?? RateLimit(permits: .max, per: .nanoseconds(1)) }

  /// A middleware that limits each request by every one of `policies`.
  ///
  /// - Parameters:
  ///   - policies: The limits, in order; at least one, each with a name of its own.
  ///   - longKeys: What to do with a key over `InputRules.maximumKeyBytes`; hashed by default.
  ///   - logger: Where to log invalid requests and failures; silent by default (pass the
  ///     application's).
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - clientAddress: How a request's client is read: the key of a policy without one (`ip:…`),
  ///     and the address that `exemptions`' ranges and `blocks` are checked against; the
  ///     connection's peer by default (``ClientAddress/peer``).
  ///   - exemptions: Keys and address ranges never limited (``RateLimitExemptions``), changed at
  ///     run time; none by default.
  ///   - blocks: Keys refused until an instant (`RateLimitBlocks`), whatever their limits: each
  ///     policy's key, as the request sent it, and the client address's key (`ip:192.0.2.1`, an
  ///     IPv6 client's `/64` as `ip:2001:db8:1:2::/64`). A blocked request gets a `429` before any
  ///     limiter is asked; none by default.
  ///   - onNearLimit: Called once per key per window when a decision leaves the key past its
  ///     policy's near-limit threshold (``NearLimitSignal``), outside every lock, on the request's
  ///     thread: keep it quick. None by default; the signals are counted either way.
  ///   - shadowMode: Which policies' refusals are enforced, for which share of keys
  ///     (``RateLimitShadowMode``), changed at run time; every refusal enforced by default.
  public init(
    policies: [RateLimitPolicy<PolicyInput>],
    longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger,
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    clientAddress: ClientAddress = .peer,
    exemptions: RateLimitExemptions? = nil,
    blocks: RateLimitBlocks<String>? = nil,
    onNearLimit: (@Sendable (NearLimitSignal) -> Void)? = nil,
    shadowMode: RateLimitShadowMode? = nil
  ) {
    self.init(
      _rateLimitState: RateLimitMiddlewareState(
        policies: policies, longKeys: longKeys, logger: logger, metricsFactory: metricsFactory,
        clientAddress: clientAddress,
        controls: RateLimitControls(
          exemptions: exemptions, blocks: blocks, onNearLimit: onNearLimit, shadowMode: shadowMode)))
  }

  /// A middleware that takes permits from `limiter`, in this process's memory: each instance of
  /// the server counts alone, so N instances allow up to N times its limit.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its limit is the policy, or each key's own for a
  ///     limiter with limits per key (`KeyedRateLimiter(limits:)`, a plan per API key).
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - longKeys: What to do with a key over `InputRules.maximumKeyBytes`; hashed by default.
  ///   - logger: Where to log invalid requests and failures; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the client's
  ///     address by default (``ClientAddress/peer``). Key on what the client cannot choose freely:
  ///     a client that invents keys gets a fresh bucket with each. Before `cost`, so that a
  ///     trailing closure is the key.
  ///   - cost: How many permits a request takes; 1 by default. A request may choose it (a header,
  ///     say): a negative cost or one above the burst is answered `400`; a cost of 0 asks without
  ///     taking and is limited when a cost of 1 would be.
  public init(
    limiter: KeyedRateLimiter<String>,
    policyName: String = "default",
    longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger,
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: (@Sendable (PolicyInput) -> String?)? = nil,
    cost: @escaping @Sendable (PolicyInput) -> Int = { _ in 1 }
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, limiter: limiter, key: key, cost: cost)], longKeys: longKeys,
      logger: logger, metricsFactory: metricsFactory)
  }

  /// A middleware whose decisions are made by `limiter`'s store, shared by every instance of the
  /// server that uses it.
  ///
  /// - Parameters:
  ///   - limiter: Where the decisions are made; its limit is the policy, or each key's own.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - longKeys: What to do with a key over `InputRules.maximumKeyBytes`; hashed by default.
  ///   - logger: Where to log invalid requests and failures (a store that cannot decide);
  ///     silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the client's
  ///     address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    limiter: StoreBackedRateLimiter<String>,
    policyName: String = "default",
    longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger,
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: (@Sendable (PolicyInput) -> String?)? = nil,
    cost: @escaping @Sendable (PolicyInput) -> Int = { _ in 1 }
  ) {
    self.init(
      policies: [RateLimitPolicy(policyName, limiter: limiter, key: key, cost: cost)], longKeys: longKeys,
      logger: logger, metricsFactory: metricsFactory)
  }

  /// A middleware with its own in-memory limiter: each instance of the server counts alone, so N
  /// instances allow up to N times `limit`.
  ///
  /// - Parameters:
  ///   - limit: The limit per key.
  ///   - policyName: The policy's name in the fields; `"default"` by default.
  ///   - longKeys: What to do with a key over `InputRules.maximumKeyBytes`; hashed by default.
  ///   - logger: Where to log invalid requests; silent by default.
  ///   - metricsFactory: Where to count responses; the process's `MetricsSystem` by default.
  ///   - key: The key a request counts against, or nil to let it through unlimited; the client's
  ///     address by default.
  ///   - cost: How many permits a request takes; 1 by default.
  public init(
    limit: RateLimit,
    policyName: String = "default",
    longKeys: LongKeyHandling = .hash,
    logger: Logger = silentRateLimitLogger,
    metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: (@Sendable (PolicyInput) -> String?)? = nil,
    cost: @escaping @Sendable (PolicyInput) -> Int = { _ in 1 }
  ) {
    self.init(
      limiter: KeyedRateLimiter(limit: limit), policyName: policyName, longKeys: longKeys, logger: logger,
      metricsFactory: metricsFactory, key: key, cost: cost)
  }
}
#endif
