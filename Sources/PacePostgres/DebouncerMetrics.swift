#if PostgreSQL
import Metrics

/// The debouncer's metrics, made once per debouncer (a factory may register a metric per label
/// and dimensions, so making them per call would cost a lookup each time).
struct DebouncerMetrics: Sendable {
  /// Calls recorded.
  let calls: Counter
  /// Handler runs that returned.
  let succeeded: Counter
  /// Handler runs that threw.
  let failed: Counter
  /// Failed attempts: handlers that threw and payloads that did not decode.
  let failures: Counter
  /// Executions moved to the dead-letter table.
  let deadLetters: Counter
  /// How late a handler started after its key was due.
  let lag: Metrics.Timer

  init(table: String, factory: any MetricsFactory) {
    let table = ("table", table)
    calls = Counter(label: "pace_debouncer_calls_total", dimensions: [table], factory: factory)
    succeeded = Counter(
      label: "pace_debouncer_executions_total", dimensions: [table, ("outcome", "succeeded")], factory: factory)
    failed = Counter(
      label: "pace_debouncer_executions_total", dimensions: [table, ("outcome", "failed")], factory: factory)
    failures = Counter(label: "pace_debouncer_failures_total", dimensions: [table], factory: factory)
    deadLetters = Counter(label: "pace_debouncer_dead_letters_total", dimensions: [table], factory: factory)
    lag = Metrics.Timer(label: "pace_debouncer_lag_seconds", dimensions: [table], factory: factory)
  }
}
#endif
