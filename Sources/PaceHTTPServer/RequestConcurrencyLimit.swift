#if Hummingbird || Vapor
import Logging
import Metrics
import Pace

/// A concurrency limit in a rate-limit middleware: at most N requests in flight, for the whole
/// middleware or per key, each request in a priority class, the lower classes refused first.
///
/// ```swift
/// // Hummingbird: 64 requests at once; sheddable ones may fill half, default ones 80 %.
/// let inFlight = RequestConcurrencyLimit<(Request, BasicRequestContext)>(
///   limiter: ConcurrencyLimiter(
///     maximumInFlight: 64, maximumQueued: 0, shares: PriorityShares(defaultPercent: 80, sheddablePercent: 50))
/// ) { request, _ in request.uri.path.hasPrefix("/health") ? .critical : .default }
/// router.add(middleware: RateLimitMiddleware(policies: [perClient]).limitingConcurrency(inFlight))
/// ```
///
/// The rules, exactly:
/// - **Where.** After the rate-limit policies: a request one of them refuses gets its `429` (or
///   `400`, `503`) and takes no place; a request they let through (or exempt) then asks for a
///   place, as the limiter's rules say (its class, its share, its queue and maximum wait).
/// - **Refusal.** A request the limiter refuses (``ConcurrencyLimiterError``: the queue full,
///   the maximum wait reached, a class with no room and no queue) is answered
///   `503 Service Unavailable` with `Retry-After: ` ``retryAfter`` in whole seconds (1 by
///   default), and, for a client whose `Accept` prefers JSON, RFC 9457 problem details of the
///   type `temporary-reduced-capacity` whose `violated-policies` is ``name``; the plain text
///   otherwise; both with `Vary: Accept`. It carries `RateLimit-Policy` with the limit's member
///   alone (below), and no `RateLimit` field. A `429` stays the answer to a client over its own
///   rate limit.
/// - **`RateLimit-Policy`.** The limit is a policy of draft -11's quota unit
///   `concurrent-requests`: `"name";q=N;qu="concurrent-requests"`, `N` the maximum in flight when
///   the request is answered (a key's, for a keyed or shared limit; an adaptive limit's limit
///   now), no window. Every response that lists the policies in `RateLimit-Policy` (the route's,
///   a `429`) lists it after them; it has no member in `RateLimit`, whose places left change
///   from one instant to the next.
/// - **The place is held** from admission until the response's body is fully written, the
///   connection drops, or the handler throws: on Hummingbird until the body's `write` returns or
///   throws; on Vapor until the body stream's `.end` (or `.error`) is written and flushed, or a
///   write fails (PaceVapor's and PaceHummingbird's `RateLimitMiddleware` say more). A response the
///   server discards unwritten gives its place back when it is deallocated.
/// - **Keyed.** With a ``KeyedConcurrencyLimiter``, each key has its own limit: the `key`
///   closure's, or the client's address (the key of a policy without one, `ip:…`) by default; a
///   request whose key is `nil` takes no place.
/// - **Adaptive.** With an ``AdaptiveConcurrencyLimiter``, each request is a sample: its latency
///   from admission to the end of its body, a `5xx` response or a thrown handler error as a drop,
///   a client that left mid-body as no sample.
/// - **Shadow mode.** The middleware's ``RateLimitShadowMode`` applies with ``name`` as the
///   policy's name and the request's key (its client's address when the limit is not keyed): a
///   refusal in shadow lets the request through without a place, counted in
///   `pace_http_rate_limit_shadow_limited_total` (`policy` = ``name``) and in the refusals.
///
/// Metrics: `pace_http_concurrency_in_flight`, a gauge of the places held (all keys), and
/// `pace_http_concurrency_refused_total`, the refusals (shadow included), both with the dimension
/// `limit` (``name``), the refusals also `priority` (`critical`, `default`, `sheddable`). Logs: a
/// warning when the limit starts refusing, a notice when it admits again after refusals.
public struct RequestConcurrencyLimit<Input>: Sendable {
  /// Which limiter admits the requests.
  package enum Limiter: Sendable {
    case single(ConcurrencyLimiter)
    case keyed(KeyedConcurrencyLimiter<String>, key: (@Sendable (Input) -> String?)?)
    case adaptive(AdaptiveConcurrencyLimiter)
    case shared(any SharedConcurrencyLimiter, key: (@Sendable (Input) -> String?)?)
  }

  /// The limit's name: the `violated-policies` member of its `503`, the shadow-mode policy name,
  /// the metrics' `limit` dimension.
  public let name: String
  /// The `Retry-After` of a refused request.
  public let retryAfter: Duration
  package let limiter: Limiter
  package let priority: @Sendable (Input) -> AdmissionPriority
  package let stage: ConcurrencyStage

  private init(
    _ name: String, limiter: Limiter, retryAfter: Duration, logger: Logger, metricsFactory: any MetricsFactory,
    priority: @escaping @Sendable (Input) -> AdmissionPriority
  ) {
    precondition(retryAfter >= .zero, "RequestConcurrencyLimit: retryAfter must not be negative")
    RateLimitFields.checkName(name)
    self.name = name
    self.retryAfter = retryAfter
    self.limiter = limiter
    self.priority = priority
    stage = ConcurrencyStage(name: name, retryAfter: retryAfter, logger: logger, metricsFactory: metricsFactory)
  }

  /// At most `limiter.maximumInFlight` requests of the middleware in flight at once.
  ///
  /// - Parameters:
  ///   - name: The limit's name; `"concurrency"` by default.
  ///   - limiter: The limit, its shares of the classes, its queue and maximum wait. Give it
  ///     `maximumQueued: 0` to refuse at once rather than wait.
  ///   - retryAfter: The `Retry-After` of a refusal, in whole seconds rounded up; 1 s by default.
  ///   - logger: Where the limit's changes of state are logged; silent by default.
  ///   - metricsFactory: Where the gauge and the refusals are counted; the process's by default.
  ///   - priority: A request's class; `.default` for every request by default.
  public init(
    _ name: String = "concurrency", limiter: ConcurrencyLimiter, retryAfter: Duration = .seconds(1),
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    priority: @escaping @Sendable (Input) -> AdmissionPriority = { _ in .default }
  ) {
    self.init(
      name, limiter: .single(limiter), retryAfter: retryAfter, logger: logger, metricsFactory: metricsFactory,
      priority: priority)
  }

  /// At most `limiter.maximumInFlight` requests of each key in flight at once.
  ///
  /// - Parameters:
  ///   - name: The limit's name; `"concurrency"` by default.
  ///   - limiter: The limit per key.
  ///   - retryAfter: The `Retry-After` of a refusal; 1 s by default.
  ///   - logger: Where the limit's changes of state are logged; silent by default.
  ///   - metricsFactory: Where the gauge and the refusals are counted; the process's by default.
  ///   - key: A request's key, or `nil` to let it through without a place; the client's address
  ///     (as the middleware's `clientAddress` reads it) by default.
  ///   - priority: A request's class; `.default` for every request by default.
  public init(
    _ name: String = "concurrency", limiter: KeyedConcurrencyLimiter<String>, retryAfter: Duration = .seconds(1),
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: (@Sendable (Input) -> String?)? = nil,
    priority: @escaping @Sendable (Input) -> AdmissionPriority = { _ in .default }
  ) {
    self.init(
      name, limiter: .keyed(limiter, key: key), retryAfter: retryAfter, logger: logger, metricsFactory: metricsFactory,
      priority: priority)
  }

  /// A limit that adapts to the requests' latency and failures: each request's time from
  /// admission to the end of its body is a sample, a `5xx` or a thrown error a drop.
  ///
  /// - Parameters:
  ///   - name: The limit's name; `"concurrency"` by default.
  ///   - limiter: The adaptive limiter.
  ///   - retryAfter: The `Retry-After` of a refusal; 1 s by default.
  ///   - logger: Where the limit's changes of state are logged; silent by default.
  ///   - metricsFactory: Where the gauge and the refusals are counted; the process's by default.
  ///   - priority: A request's class; `.default` for every request by default.
  public init(
    _ name: String = "concurrency", limiter: AdaptiveConcurrencyLimiter, retryAfter: Duration = .seconds(1),
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    priority: @escaping @Sendable (Input) -> AdmissionPriority = { _ in .default }
  ) {
    self.init(
      name, limiter: .adaptive(limiter), retryAfter: retryAfter, logger: logger, metricsFactory: metricsFactory,
      priority: priority)
  }

  /// At most `limiter.maximumInFlight` requests in flight at once across every instance that
  /// shares the limiter's store (PacePostgres's `PostgresConcurrencyLimiter`): one limit for the
  /// whole fleet, or one per key.
  ///
  /// The limiter's own rules say when a request waits and what it is answered while its store is
  /// away. A refusal (``ConcurrencyLimiterError``) is the `503` above; any other error of the
  /// limiter (its store unavailable under a failure mode that throws, a key it cannot take) is
  /// logged and answered the same `503`. A key longer than `InputRules.maximumKeyBytes` is
  /// hashed, as a policy's is (`LongKeyHandling.hash`).
  ///
  /// - Parameters:
  ///   - name: The limit's name; `"concurrency"` by default.
  ///   - limiter: The shared limit.
  ///   - retryAfter: The `Retry-After` of a refusal; 1 s by default.
  ///   - logger: Where the limit's changes of state are logged; silent by default.
  ///   - metricsFactory: Where the gauge and the refusals are counted; the process's by default.
  ///   - key: A request's key, or `nil` to let it through without a place; by default every
  ///     request counts against one key, `name`: one limit for the whole fleet.
  ///   - priority: A request's class; `.default` for every request by default.
  public init(
    _ name: String = "concurrency", limiter: some SharedConcurrencyLimiter, retryAfter: Duration = .seconds(1),
    logger: Logger = silentRateLimitLogger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    key: (@Sendable (Input) -> String?)? = nil,
    priority: @escaping @Sendable (Input) -> AdmissionPriority = { _ in .default }
  ) {
    self.init(
      name, limiter: .shared(limiter, key: key), retryAfter: retryAfter, logger: logger,
      metricsFactory: metricsFactory, priority: priority)
  }

  /// The most requests in flight now: a key's, for a keyed or shared limit.
  package var maximumInFlight: Int {
    switch limiter {
    case .single(let limiter): limiter.maximumInFlight
    case .keyed(let limiter, _): limiter.maximumInFlight
    case .adaptive(let limiter): limiter.maximumInFlight
    case .shared(let limiter, _): limiter.maximumInFlight
    }
  }

  /// The limit's member of `RateLimit-Policy`: `"name";q=N;qu="concurrent-requests"`.
  package var policyMember: String {
    "\(stage.quotedName);q=\(maximumInFlight);qu=\"concurrent-requests\""
  }

  /// How many places are held now, every key's together (this instance's, for a shared limit).
  package var inFlightCount: Int {
    switch limiter {
    case .single(let limiter): limiter.inFlightCount
    case .keyed(let limiter, _): limiter.inFlightCount
    case .adaptive(let limiter): limiter.limiter.inFlightCount
    case .shared(let limiter, _): limiter.inFlightCount
    }
  }

  /// Asks for `input`'s place: the permit to release when its response is written, nothing for a
  /// request that takes no place (no key, or let through in shadow), or the `503`.
  ///
  /// - Throws: `CancellationError` only, when the request's task is cancelled while it waits.
  package func admit(
    _ input: Input, clientKey: () -> String?, shadowMode: RateLimitShadowMode?
  ) async throws -> ConcurrencyAdmission {
    let priority = priority(input)
    var key = ""
    do {
      switch limiter {
      case .single(let limiter):

        return .admitted(stage.admitted(.plain(try await limiter.acquire(priority: priority)), inFlight: countInFlight))
      case .keyed(let limiter, let keyOf):
        guard let found = keyOf.map({ $0(input) }) ?? clientKey() else { return .admitted(nil) }
        key = found
        return .admitted(
          stage.admitted(.plain(try await limiter.acquire(found, priority: priority)), inFlight: countInFlight))
      case .adaptive(let limiter):

        return .admitted(
          stage.admitted(.adaptive(try await limiter.acquire(priority: priority)), inFlight: countInFlight))
      case .shared(let limiter, let keyOf):
        if let keyOf {
          guard let found = keyOf(input) else { return .admitted(nil) }
          key = LongKeyHandling.hash.limiterKey(for: found)
        } else {
          key = name
        }
        let permit = try await limiter.acquire(key, priority: priority)
        return .admitted(stage.admitted(.shared(permit), inFlight: countInFlight))
      }
    } catch let refusal as ConcurrencyLimiterError {
      // The shadow key: the limit's key, or the client's for a limit of the whole middleware.
      let shadowKey: String
      switch limiter {
      case .keyed, .shared(_, key: _?): shadowKey = key
      default: shadowKey = clientKey() ?? ""
      }
      let enforced = shadowMode?.snapshot.enforces(key: shadowKey, inPolicy: name) ?? true
      return listed(stage.refused(priority: priority, reason: refusal, enforced: enforced))
    } catch let error where !(error is CancellationError) {
      // Only a shared limiter throws anything else: its store, or a key it cannot take.
      return listed(stage.failed(priority: priority, error: error))
    }
  }

  /// `admission`, its `503` listing the limit in `RateLimit-Policy`.
  private func listed(_ admission: ConcurrencyAdmission) -> ConcurrencyAdmission {
    guard case .refused(let answer) = admission else { return admission }
    return .refused(answer.adding(policyMember: policyMember))
  }
}

/// What the concurrency stage says of a request.
package enum ConcurrencyAdmission: Sendable {
  /// Go on; release the permit, if any, when the response is written.
  case admitted(RequestPermit?)
  /// Answer with this `503`.
  case refused(PlainTextResponse)
}

/// A request's place, released once: when its response's body is written, its write fails, the
/// handler throws, or (for a response discarded unwritten) when it is deallocated.
package final class RequestPermit: Sendable {
  package enum Held: Sendable {
    case plain(ConcurrencyPermit)
    case adaptive(AdaptiveConcurrencyPermit)
    case shared(any SharedConcurrencyPermit)
  }

  /// What became of the request, for an adaptive limit's sample.
  package enum Outcome: Sendable {
    /// Its response was written: a sample, a drop for a `5xx`.
    case written(status: Int)
    /// Its handler threw an error: a drop, unless the error carries a status below 500.
    case failed(status: Int?)
    /// The client left, or the response was discarded: no sample.
    case abandoned
  }

  private let held: LockedState<Held?>
  private let stage: ConcurrencyStage
  private let limiterInFlight: @Sendable () -> Int

  init(_ held: Held, stage: ConcurrencyStage, inFlight: @escaping @Sendable () -> Int) {
    self.held = LockedState(held)
    self.stage = stage
    limiterInFlight = inFlight
  }

  /// Gives the place back; a second release does nothing.
  package func release(_ outcome: Outcome) {
    guard
      let held = held.withLock({ held -> Held? in
        defer { held = nil }
        return held
      })
    else { return }
    switch held {
    case .plain(let permit): permit.release()
    case .shared(let permit): permit.release()
    case .adaptive(let permit):
      switch outcome {
      case .written(let status): permit.release(status >= 500 ? .dropped : .success)
      case .failed(let status): permit.release((status ?? 500) >= 500 ? .dropped : .success)
      case .abandoned: permit.release(.ignored)
      }
    }
    stage.inFlight.record(limiterInFlight())
  }

  deinit {
    release(.abandoned)
  }
}

/// A concurrency limit's counters, logs and answers.
package final class ConcurrencyStage: Sendable {
  let name: String
  let logger: Logger
  let inFlight: Gauge
  private let refusals: [AdmissionPriority: Counter]
  private let shadowLimited: Counter
  private let refusing = LockedState(false)
  private let shadowReport = OccasionalReport(every: .seconds(10))
  private let failureReport = OccasionalReport(every: .seconds(10))
  /// The `503` of a refusal, made once.
  let refusal: PlainTextResponse
  /// The limit's name as a Structured Fields string.
  let quotedName: String

  init(name: String, retryAfter: Duration, logger: Logger, metricsFactory: any MetricsFactory) {
    self.name = name
    self.logger = logger
    inFlight = Gauge(label: "pace_http_concurrency_in_flight", dimensions: [("limit", name)], factory: metricsFactory)
    var refusals: [AdmissionPriority: Counter] = [:]
    for priority in AdmissionPriority.allCases {
      refusals[priority] = Counter(
        label: "pace_http_concurrency_refused_total", dimensions: [("limit", name), ("priority", "\(priority)")],
        factory: metricsFactory)
    }
    self.refusals = refusals
    shadowLimited = Counter(
      label: "pace_http_rate_limit_shadow_limited_total", dimensions: [("policy", name)], factory: metricsFactory)
    let seconds = RateLimitFields.wholeSeconds(retryAfter)
    quotedName = RateLimitFields.quoted(name)
    var quoted = ""
    ProblemDetails.appendString(name, to: &quoted)
    let detail = "Service unavailable: too many requests in flight (limit \(quoted)): retry after \(seconds) s"
    refusal = PlainTextResponse(
      status: 503, fields: [HeaderField(RateLimitFields.retryAfter, String(seconds))], body: detail + "\n",
      problem: ProblemDetails(.temporaryReducedCapacity, status: 503, detail: detail, violatedPolicies: [name]))
  }

  /// A permit taken: counted, and logged if the limit was refusing.
  fileprivate func admitted(_ held: RequestPermit.Held, inFlight count: @escaping @Sendable () -> Int) -> RequestPermit
  {
    inFlight.record(count())
    if refusing.withLock({ refusing in
      defer { refusing = false }
      return refusing
    }) {
      logger.notice("concurrency limit: admitting requests again", metadata: ["pace.limit": "\(name)"])
    }
    return RequestPermit(held, stage: self, inFlight: count)
  }

  /// A shared limiter's error other than a refusal: logged (at most one line per 10 s), counted
  /// as a refusal, and answered with the same `503`, in shadow mode too (nothing was decided).
  fileprivate func failed(priority: AdmissionPriority, error: any Error) -> ConcurrencyAdmission {
    refusals[priority]?.increment()
    if let requests = failureReport.record() {
      logger.error(
        "concurrency limit: the shared limiter failed; answering 503",
        metadata: ["pace.limit": "\(name)", "pace.requests": "\(requests)", "error": "\(String(reflecting: error))"])
    }
    return .refused(refusal)
  }

  /// A refusal: counted, logged if the limit was admitting, and enforced or let through in shadow.
  fileprivate func refused(
    priority: AdmissionPriority, reason: ConcurrencyLimiterError, enforced: Bool
  ) -> ConcurrencyAdmission {
    refusals[priority]?.increment()
    guard enforced else {
      shadowLimited.increment()
      if let requests = shadowReport.record() {
        logger.info(
          "concurrency limit: a request over the limit was let through in shadow",
          metadata: ["pace.requests": "\(requests)", "pace.limit": "\(name)"])
      }
      return .admitted(nil)
    }
    if !refusing.withLock({ refusing in
      defer { refusing = true }
      return refusing
    }) {
      logger.warning(
        "concurrency limit: refusing requests with 503",
        metadata: ["pace.limit": "\(name)", "pace.priority": "\(priority)", "pace.reason": "\(reason)"])
    }
    return .refused(refusal)
  }
}

extension RequestConcurrencyLimit {
  fileprivate var countInFlight: @Sendable () -> Int {
    switch limiter {
    case .single(let limiter): { limiter.inFlightCount }
    case .keyed(let limiter, _): { limiter.inFlightCount }
    case .adaptive(let limiter): { limiter.limiter.inFlightCount }
    case .shared(let limiter, _): { limiter.inFlightCount }
    }
  }
}
#endif
