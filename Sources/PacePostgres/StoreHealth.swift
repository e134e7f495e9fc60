#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO

/// What a `PostgresRateLimitStore` knows of its database's health, shared by every copy of the
/// store: the circuit breaker, the fallback log's throttle, and the metrics it reports.
final class StoreHealth: Sendable {
  /// The outcomes counted in `pace_rate_limit_decisions_total`. `allowed` and `denied` count
  /// requests (a cost of 1 or more); a cost of 0 takes nothing and is a `question` whatever the
  /// answer (the middlewares ask one of each policy before they charge any).
  enum Outcome: Int, CaseIterable, Sendable {
    case allowed, denied, fallback, invalid, error, question

    /// `allowed` or `denied` for a request of `cost`; `question` for a cost of 0.
    static func decided(_ decision: RateLimitDecision, cost: Int) -> Outcome {
      cost == 0 ? .question : decision.isAllowed ? .allowed : .denied
    }

    var label: String {
      switch self {
      case .allowed: "allowed"
      case .denied: "denied"
      case .fallback: "fallback"
      case .invalid: "invalid"
      case .error: "error"
      case .question: "question"
      }
    }
  }

  /// The breaker, and what the fallback log has not yet said.
  private struct State {
    var breaker: CircuitBreakerMachine
    /// When the current outage began (the breaker opened), for the line that ends it.
    var outageStarted: ContinuousClock.Instant?
    var fallbacksInOutage = 0
  }

  /// At most one line about fallback decisions per this interval: an outage under load must not
  /// flood the log.
  static let fallbackLogInterval = Duration.seconds(10)

  private let state: LockedState<State>
  private let fallbackLog = OccasionalReport(every: fallbackLogInterval)
  /// By `Outcome.rawValue`: an index rather than a hash per decision.
  private let decisions: [Counter]
  private let latency: Metrics.Timer
  private let breakerState: Gauge
  /// Statements the store's decisions sent: fewer than decisions when they are batched, or denied locally.
  let roundTrips: Counter
  private let breakerTransitions: [CircuitBreakerMachine.Transition: Counter]

  init(_ breaker: CircuitBreaker, table: String, factory: any MetricsFactory) {
    state = LockedState(State(breaker: CircuitBreakerMachine(breaker)))
    let dimensions = [("table", table)]
    decisions = Outcome.allCases.map { outcome in
      Counter(
        label: "pace_rate_limit_decisions_total", dimensions: dimensions + [("outcome", outcome.label)],
        factory: factory)
    }
    latency = Metrics.Timer(
      label: "pace_rate_limit_decision_duration_seconds", dimensions: dimensions, factory: factory)
    breakerState = Gauge(label: "pace_rate_limit_breaker_state", dimensions: dimensions, factory: factory)
    roundTrips = Counter(label: "pace_rate_limit_round_trips_total", dimensions: dimensions, factory: factory)
    breakerTransitions = [
      .opened: Counter(
        label: "pace_rate_limit_breaker_transitions_total", dimensions: dimensions + [("to", "open")], factory: factory),
      .halfOpened: Counter(
        label: "pace_rate_limit_breaker_transitions_total", dimensions: dimensions + [("to", "half_open")],
        factory: factory),
      .closed: Counter(
        label: "pace_rate_limit_breaker_transitions_total", dimensions: dimensions + [("to", "closed")],
        factory: factory),
    ]
    breakerState.record(0)
  }

  /// Counts one decision; `duration` (when the decision got as far as the database or its policy)
  /// goes to the latency timer.
  func count(_ outcome: Outcome, duration: Duration? = nil) {
    decisions[outcome.rawValue].increment()
    if let duration { latency.recordNanoseconds(duration.paceNanoseconds) }
  }

  /// Whether a decision at `now` may ask the database.
  func admit(now: ContinuousClock.Instant, logger: Logger) -> CircuitBreakerMachine.Admission {
    let (admission, transition) = state.withLock { $0.breaker.admit(now: now) }
    if let transition { report(transition, error: nil, logger: logger) }
    return admission
  }

  /// A decision admitted with `admission` ended: `unavailable` if the database could not decide,
  /// nil if the caller was cancelled before anyone knew.
  func ended(
    _ admission: CircuitBreakerMachine.Admission,
    unavailable: Bool?,
    now: ContinuousClock.Instant,
    error: (any Error)?,
    logger: Logger
  ) {
    let transition: CircuitBreakerMachine.Transition? = state.withLock { state in
      switch admission {
      case .ask: return unavailable.flatMap { state.breaker.asked(unavailable: $0, now: now) }
      case .probe: return state.breaker.probeEnded(succeeded: unavailable.map { !$0 }, now: now)
      case .reject: return nil
      }
    }
    if let transition { report(transition, error: error, logger: logger) }
  }

  /// Logs a fallback decision, at most one line per ``fallbackLogInterval``: the fault, what the
  /// policy does meanwhile, and what to do.
  func fellBack(reason: String, policy: @autoclosure () -> String, logger: Logger) {
    state.withLock { $0.fallbacksInOutage += 1 }
    guard let decisions = fallbackLog.record() else { return }
    logger.warning(
      "rate-limit decisions follow the failure policy: PostgreSQL cannot decide",
      metadata: [
        "pace.reason": "\(reason)", "pace.decisions": "\(decisions)", "pace.policy": "\(policy())",
        "pace.action": "\(Self.outageAction)",
      ])
  }

  /// What an operator should do about an outage, in its log lines.
  static let outageAction =
    "check that PostgreSQL is running and reachable from this instance (pace.sqlstate, if any, says why it refused); decisions return to it on their own once it answers"

  private func report(_ transition: CircuitBreakerMachine.Transition, error: (any Error)?, logger: Logger) {
    breakerTransitions[transition]?.increment()
    let now = ContinuousClock.now
    switch transition {
    case .opened:
      breakerState.record(2)
      let isNewOutage = state.withLock { state in
        defer { state.outageStarted = state.outageStarted ?? now }
        return state.outageStarted == nil
      }
      var metadata: Logger.Metadata = [:]
      if let error {
        metadata.merge(errorMetadata(error)) { $1 }
      }
      metadata["pace.action"] = "\(Self.outageAction)"
      if isNewOutage {
        logger.error(
          "PostgreSQL unavailable: the circuit breaker opened; decisions follow the failure policy", metadata: metadata)
      } else {
        logger.info(
          "PostgreSQL still unavailable: the probe failed; the circuit breaker opened again", metadata: metadata)
      }
    case .halfOpened:
      breakerState.record(1)
      logger.info("circuit breaker half-open: one decision probes PostgreSQL")
    case .closed:
      breakerState.record(0)
      let (started, fallbacks) = state.withLock { state in
        defer {
          state.outageStarted = nil
          state.fallbacksInOutage = 0
        }
        return (state.outageStarted, state.fallbacksInOutage)
      }
      logger.notice(
        "PostgreSQL answers again: the circuit breaker closed",
        metadata: [
          "pace.outage_seconds": "\(started.map { Double($0.duration(to: now).paceNanoseconds) / 1e9 } ?? 0)",
          "pace.fallback_decisions": "\(fallbacks)",
        ])
    }
  }
}

/// Runs a migration `statement` within `timeout`, logging what it waits for every few seconds.
///
/// A database that is unreachable at startup makes PostgresNIO's pool wait for a connection
/// forever; here it is an error that says so.
func migrating(
  client: PostgresClient,
  timeout: Duration,
  logger: Logger,
  _ statement: @escaping @Sendable () async throws -> Void
) async throws {
  try checkSetting("timeout", timeout, of: "migrate")
  logger.info("migrating", metadata: ["pace.timeout": "\(timeout)"])
  let waiting = Task {
    var waited = Duration.zero
    while true {
      try await Task.sleep(for: .seconds(5))
      waited += .seconds(5)
      logger.warning(
        "migration waits for PostgreSQL", metadata: ["pace.waited": "\(waited)", "pace.timeout": "\(timeout)"])
    }
  }
  defer { waiting.cancel() }
  do {
    try await withTimeout(timeout, statement)
  } catch is DatabaseTimeout {
    let reason = "migrate: PostgreSQL did not answer within \(timeout) (is the server running and reachable?)"
    logger.error("migration gave up", metadata: ["pace.reason": "\(reason)"])
    throw PacePostgresError.unavailable(reason: reason)
  } catch {
    logger.error("migration failed", metadata: errorMetadata(error))
    throw error
  }
  logger.info("migrated")
}
#endif
