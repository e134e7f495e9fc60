#if PostgreSQL
import Crypto
import Pace
import Tracing

/// The names of PacePostgres's spans and of their attributes: OpenTelemetry's where it has one
/// (`db.*`, `error.type`), Pace's own under `pace.` otherwise.
enum TraceNames {
  /// A store decision: ``PostgresRateLimitStore/tryAcquire(_:cost:limit:)``.
  static let decision = "pace.rate_limit.store.decide"
  /// A debounced execution of ``PostgresDebouncer``, and its steps.
  static let execution = "pace.debounce.execute"
  static let claim = "pace.debounce.claim"
  static let run = "pace.debounce.run"
  static let settle = "pace.debounce.settle"

  static let databaseSystem = "db.system.name"
  static let batchSize = "db.operation.batch.size"
  static let roundTrips = "pace.rate_limit.round_trips"
  static let keyHash = "pace.rate_limit.key.hash"
  static let algorithm = "pace.rate_limit.algorithm"
  static let permits = "pace.rate_limit.permits"
  static let cost = "pace.rate_limit.cost"
  static let decided = "pace.rate_limit.decision"
  static let answeredBy = "pace.rate_limit.answered_by"
  static let remaining = "pace.rate_limit.remaining"
  static let retryAfter = "pace.rate_limit.retry_after"
  static let debounceKeyHash = "pace.debounce.key.hash"
  static let attempt = "pace.debounce.attempt"
  static let payloads = "pace.debounce.payloads"
  static let lateness = "pace.debounce.lateness"
  static let outcome = "pace.debounce.outcome"
  static let errorType = "error.type"
}

/// What a span may say of a key: the first 16 hexadecimal digits of its SHA-256, the same on
/// every instance, so that one key's spans can be found together without the key itself (an API
/// key, an address) reaching the tracing backend.
func tracedKey(_ key: String) -> String {
  let digest = SHA256.hash(data: Array(key.utf8))
  let hex: [UInt8] = Array("0123456789abcdef".utf8)
  var text: [UInt8] = []
  text.reserveCapacity(16)
  for byte in digest.prefix(8) {
    text.append(hex[Int(byte >> 4)])
    text.append(hex[Int(byte & 0x0f)])
  }
  return String(decoding: text, as: UTF8.self)
}

extension Duration {
  /// Seconds, as OpenTelemetry writes a duration.
  var tracedSeconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}

/// A store decision's span while it records; every method does nothing otherwise.
struct DecisionTrace {
  let span: (any Span)?

  /// Whether an instrument is bootstrapped (or bound to the task): without one, a decision
  /// starts no span, whose no-op tracer and span would cost it more than its own work in memory.
  static var isOn: Bool { type(of: InstrumentationSystem.instrument) != NoOpInstrument.self }

  init(_ span: any Span) {
    self.span = span.isRecording ? span : nil
  }

  private init() { span = nil }

  /// Records nothing: a decision on a test's timeline.
  static let off = DecisionTrace()

  func asked(key: String, cost: Int, limit: RateLimit) {
    guard let span else { return }
    span.attributes[TraceNames.databaseSystem] = "postgresql"
    span.attributes[TraceNames.keyHash] = tracedKey(key)
    span.attributes[TraceNames.algorithm] = String(describing: limit.algorithm)
    span.attributes[TraceNames.permits] = limit.permits
    span.attributes[TraceNames.cost] = cost
  }

  /// Who answered: `denial_cache`, `database` or `failure_mode`; the database with how many
  /// statements and in a batch of how many decisions.
  func answered(by source: String, roundTrips: Int = 0, batchSize: Int? = nil) {
    guard let span else { return }
    span.attributes[TraceNames.answeredBy] = source
    span.attributes[TraceNames.roundTrips] = roundTrips
    if let batchSize { span.attributes[TraceNames.batchSize] = batchSize }
  }

  func decided(_ decision: RateLimitDecision, cost: Int) {
    guard let span else { return }
    switch decision {
    case .allowed(let remaining):
      span.attributes[TraceNames.decided] = cost == 0 ? "question" : "allowed"
      span.attributes[TraceNames.remaining] = remaining
    case .limited(let retryAfter):
      span.attributes[TraceNames.decided] = cost == 0 ? "question" : "limited"
      if retryAfter != RateLimitDecision.never {
        span.attributes[TraceNames.retryAfter] = retryAfter.tracedSeconds
      }
    }
  }

  func failed(_ error: any Error) {
    guard let span else { return }
    span.attributes[TraceNames.errorType] = String(describing: type(of: error))
    span.recordError(error)
    span.setStatus(SpanStatus(code: .error))
  }
}
#endif
