#if PostgreSQL
import Foundation
import Logging
import Metrics
import Pace

/// A debounced call not yet recorded in the database: its stored key and its payload's JSON.
struct PendingCall: Sendable, Equatable {
  let key: String
  let json: Data
}

/// The debouncer's failure policy apart from any task, lock or connection: its circuit breaker,
/// and the local outbox of calls made while the database was away.
///
/// A call asks the database while the breaker is closed (or probes it once the cool-down ends);
/// while it is open, or when a call found the database unavailable, the call is kept in the outbox
/// (if the policy keeps calls and there is room) or rejected at once. Kept calls are recorded in
/// call order once the database answers, before any newer call, so that a key's payloads keep
/// their order.
struct DebouncerOutboxMachine: Sendable {
  private(set) var breaker: CircuitBreakerMachine
  /// The most calls kept; 0 rejects every call made during an outage.
  let capacity: Int
  /// The kept calls, oldest first.
  private(set) var outbox: [PendingCall] = []
  /// Whether a delivery of the outbox is under way (one at a time, to keep the order).
  private(set) var delivering = false

  init(_ breaker: CircuitBreaker, capacity: Int) {
    self.breaker = CircuitBreakerMachine(breaker)
    self.capacity = capacity
  }

  /// What the driver does with a call.
  enum CallAction: Sendable, Equatable {
    /// Record it now (`admission` tells the breaker what the attempt was).
    case send(CircuitBreakerMachine.Admission)
    /// It was kept; deliver the outbox now (the database may answer: `admission`).
    case keptDeliver(CircuitBreakerMachine.Admission)
    /// It was kept; the database is away, or a delivery is under way.
    case kept
    /// Rejected at once: the breaker is open and nothing is kept, or the outbox is full.
    case rejected(outboxFull: Bool)
  }

  /// A call comes in at `now`.
  mutating func call(_ call: PendingCall, now: ContinuousClock.Instant) -> (
    CallAction, CircuitBreakerMachine.Transition?
  ) {
    let (admission, transition) = breaker.admit(now: now)
    if outbox.isEmpty && admission != .reject { return (.send(admission), transition) }
    guard capacity > 0 else {
      if admission != .reject { return (.send(admission), transition) }
      return (.rejected(outboxFull: false), transition)
    }
    guard outbox.count < capacity else {
      if admission == .probe { _ = breaker.probeEnded(succeeded: nil, now: now) }
      return (.rejected(outboxFull: true), transition)
    }
    outbox.append(call)
    if admission == .reject || delivering {
      // A probe the call does not use is given back: the next call or the worker probes.
      if admission == .probe { _ = breaker.probeEnded(succeeded: nil, now: now) }
      return (.kept, transition)
    }
    delivering = true
    return (.keptDeliver(admission), transition)
  }

  /// A call that the database could not record now (the breaker was told): kept if there is room.
  mutating func keep(_ call: PendingCall) -> Bool {
    guard outbox.count < capacity else { return false }
    outbox.append(call)
    return true
  }

  /// The worker found the database answering: deliver the outbox if there is one and nobody does.
  mutating func startDelivery() -> Bool {
    guard !outbox.isEmpty, !delivering else { return false }
    delivering = true
    return true
  }

  /// The next kept call to deliver, or nil (the delivery ends).
  mutating func nextToDeliver() -> PendingCall? {
    guard let first = outbox.first else {
      delivering = false
      return nil
    }
    return first
  }

  /// The first kept call was recorded.
  mutating func delivered() {
    if !outbox.isEmpty { outbox.removeFirst() }
  }

  /// The delivery stopped on a failure: the calls stay, in order.
  mutating func deliveryFailed() {
    delivering = false
  }

  /// A call or delivery admitted with `admission` ended: tells the breaker whether the database
  /// was `unavailable`, or nil if the caller was cancelled before anyone knew.
  mutating func ended(
    _ admission: CircuitBreakerMachine.Admission, unavailable: Bool?, now: ContinuousClock.Instant
  ) -> CircuitBreakerMachine.Transition? {
    switch admission {
    case .ask: unavailable.flatMap { breaker.asked(unavailable: $0, now: now) }
    case .probe: breaker.probeEnded(succeeded: unavailable.map { !$0 }, now: now)
    case .reject: nil
    }
  }
}

/// A debouncer's ``DebouncerOutboxMachine`` behind a lock, with its logs and metrics.
final class DebouncerOutbox: Sendable {
  private let machine: LockedState<DebouncerOutboxMachine>
  private let logger: Logger
  private let kept: Counter
  private let rejected: Counter
  private let breakerState: Gauge

  init(_ breaker: CircuitBreaker, capacity: Int, table: String, logger: Logger, factory: any MetricsFactory) {
    machine = LockedState(DebouncerOutboxMachine(breaker, capacity: capacity))
    self.logger = logger
    kept = Counter(label: "pace_debouncer_calls_kept_total", dimensions: [("table", table)], factory: factory)
    rejected = Counter(label: "pace_debouncer_calls_rejected_total", dimensions: [("table", table)], factory: factory)
    breakerState = Gauge(label: "pace_debouncer_breaker_state", dimensions: [("table", table)], factory: factory)
    breakerState.record(0)
  }

  /// How many calls are kept.
  var count: Int { machine.withLock { $0.outbox.count } }

  func call(_ call: PendingCall, now: ContinuousClock.Instant) -> DebouncerOutboxMachine.CallAction {
    let (action, transition) = machine.withLock { $0.call(call, now: now) }
    report(transition, error: nil)
    switch action {
    case .kept, .keptDeliver: kept.increment()
    case .rejected: rejected.increment()
    case .send: break
    }
    return action
  }

  func keep(_ call: PendingCall) -> Bool {
    let kept = machine.withLock { $0.keep(call) }
    (kept ? self.kept : rejected).increment()
    return kept
  }

  func ended(_ admission: CircuitBreakerMachine.Admission, unavailable: Bool?, error: (any Error)?) {
    report(machine.withLock { $0.ended(admission, unavailable: unavailable, now: .now) }, error: error)
  }

  func startDelivery() -> Bool { machine.withLock { $0.startDelivery() } }
  func nextToDeliver() -> PendingCall? { machine.withLock { $0.nextToDeliver() } }
  func delivered() { machine.withLock { $0.delivered() } }
  func deliveryFailed() { machine.withLock { $0.deliveryFailed() } }

  private func report(_ transition: CircuitBreakerMachine.Transition?, error: (any Error)?) {
    guard let transition else { return }
    switch transition {
    case .opened:
      breakerState.record(2)
      logger.warning(
        "PostgresDebouncer: the database is unavailable; the circuit breaker opened: calls are kept locally or rejected at once, as the debouncer's policy says",
        metadata: (error.map(errorMetadata) ?? [:]).merging(["pace.kept_calls": "\(count)"]) { $1 })
    case .halfOpened:
      breakerState.record(1)
      logger.info("PostgresDebouncer: circuit breaker half-open: one call probes the database")
    case .closed:
      breakerState.record(0)
      logger.info("PostgresDebouncer: the database records calls again: the circuit breaker closed")
    }
  }
}
#endif
