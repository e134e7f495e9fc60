import CoreMetrics
import Pace

/// What ``PacedRequests`` counts, for an app's or a server's dashboards (swift-metrics).
///
/// | Counter | Dimensions | Counts |
/// | --- | --- | --- |
/// | `pace_http_client_rate_limited_total` | | every 429 answered, retried or final |
/// | `pace_http_client_retries_total` | `reason`: `rate_limited` (429), `unavailable` (503), `server_error` (other 5xx), `other_status`, `connection_error` | every retry sent, by what the attempt before it ended with |
/// | `pace_http_client_retry_budget_withdrawals_total` | `result`: `granted`, `refused` | every retry asked of the ``RetryBudget`` |
/// | `pace_http_client_breaker_refusals_total` | | every send an open breaker refused at once |
/// | `pace_http_client_breaker_probes_total` | | every send let through a half-open breaker as a probe |
/// | `pace_http_client_breaker_transitions_total` | `to`: `open`, `closed` | every opening and closing of a key's breaker that a send's outcome made |
/// | `pace_http_client_concurrency_limit_changes_total` | `direction`: `increased`, `decreased` | every change of a key's adaptive concurrency limit |
/// | `pace_http_client_concurrency_waits_total` | | every attempt that waited for a place under its key's concurrency limit |
/// | `pace_http_client_concurrency_hedges_held_total` | | every hedge not sent because its key's concurrency limit had no place free |
///
/// Counters have no key dimension: keys (origins, routes, credentials) are unbounded, a
/// dashboard's series must not be.
struct PacedRequestsMetrics: Sendable {
  let rateLimited: Counter
  let retriesRateLimited: Counter
  let retriesUnavailable: Counter
  let retriesServerError: Counter
  let retriesOtherStatus: Counter
  let retriesConnectionError: Counter
  let withdrawalsGranted: Counter
  let withdrawalsRefused: Counter
  let breakerRefusals: Counter
  let breakerProbes: Counter
  let breakerOpened: Counter
  let breakerClosed: Counter
  let concurrencyLimitIncreases: Counter
  let concurrencyLimitDecreases: Counter
  let concurrencyWaits: Counter
  let concurrencyHedgesHeld: Counter

  init(factory: any MetricsFactory) {
    rateLimited = Counter(label: "pace_http_client_rate_limited_total", factory: factory)
    func retries(_ reason: String) -> Counter {
      Counter(label: "pace_http_client_retries_total", dimensions: [("reason", reason)], factory: factory)
    }
    retriesRateLimited = retries("rate_limited")
    retriesUnavailable = retries("unavailable")
    retriesServerError = retries("server_error")
    retriesOtherStatus = retries("other_status")
    retriesConnectionError = retries("connection_error")
    func withdrawals(_ result: String) -> Counter {
      Counter(
        label: "pace_http_client_retry_budget_withdrawals_total", dimensions: [("result", result)], factory: factory)
    }
    withdrawalsGranted = withdrawals("granted")
    withdrawalsRefused = withdrawals("refused")
    breakerRefusals = Counter(label: "pace_http_client_breaker_refusals_total", factory: factory)
    func transitions(_ state: String) -> Counter {
      Counter(label: "pace_http_client_breaker_transitions_total", dimensions: [("to", state)], factory: factory)
    }
    breakerProbes = Counter(label: "pace_http_client_breaker_probes_total", factory: factory)
    breakerOpened = transitions("open")
    breakerClosed = transitions("closed")
    func limitChanges(_ direction: String) -> Counter {
      Counter(
        label: "pace_http_client_concurrency_limit_changes_total", dimensions: [("direction", direction)],
        factory: factory)
    }
    concurrencyLimitIncreases = limitChanges("increased")
    concurrencyLimitDecreases = limitChanges("decreased")
    concurrencyWaits = Counter(label: "pace_http_client_concurrency_waits_total", factory: factory)
    concurrencyHedgesHeld = Counter(label: "pace_http_client_concurrency_hedges_held_total", factory: factory)
  }

  /// Counts an opening or a closing of a key's breaker, as its `record` reported it (a probe that
  /// fails opens it again); half-open comes with time, and is counted by its probes.
  func recordBreakerChange(to new: CircuitBreakerState) {
    switch new {
    case .open: breakerOpened.increment()
    case .closed: breakerClosed.increment()
    case .halfOpen: break
    }
  }

  /// Counts a retry after an attempt that ended with `outcome`.
  func recordRetry(after outcome: RetryStrategy.Outcome) {
    switch outcome {
    case .connectionError: retriesConnectionError.increment()
    case .status(429): retriesRateLimited.increment()
    case .status(503): retriesUnavailable.increment()
    case .status(500...599): retriesServerError.increment()
    case .status: retriesOtherStatus.increment()
    }
  }
}
