#if PostgreSQL
import Pace

/// When decisions stop going to an unavailable database, and how they find it again.
///
/// After ``failureThreshold`` consecutive failures that mean unavailability (the SQLSTATE table in
/// <doc:SharedRateLimitsAndDebouncing>), the breaker opens: for ``coolDown`` every decision goes
/// straight to the failure policy, without waiting for the database. Then the first decision
/// starts a probe in the background (a decision that takes nothing) and follows the policy itself,
/// so no request waits for an outage; the probe's success closes the breaker, its failure opens
/// it for another ``coolDown``. One probe is out at a time.
public struct CircuitBreaker: Sendable, Hashable {
  /// How many consecutive unavailability failures open the breaker. Positive.
  public var failureThreshold: Int
  /// How long the breaker stays open before it lets one probe through. Positive.
  public var coolDown: Duration

  /// A breaker that opens after `failureThreshold` consecutive failures, for `coolDown`.
  ///
  /// The defaults open after 5 failures (one unlucky statement does not switch an instance to its
  /// failure policy) and probe every half second, so decisions return to the database within a
  /// second of its recovery.
  ///
  /// The values are checked where the breaker is used: a store's or a debouncer's initialiser
  /// throws ``PacePostgresError/invalidSetting(name:value:rule:)`` for a threshold that is not positive or a
  /// cool-down that is not positive or is `Int64.max` nanoseconds or more.
  public init(failureThreshold: Int = 5, coolDown: Duration = .milliseconds(500)) {
    self.failureThreshold = failureThreshold
    self.coolDown = coolDown
  }
}

extension CircuitBreaker {
  /// Throws ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the setting if the breaker cannot work
  /// as configured.
  func check(of owner: String) throws(PacePostgresError) {
    guard failureThreshold > 0 else {
      throw .invalid("\(owner).circuitBreaker.failureThreshold", failureThreshold, "must be positive")
    }
    try checkSetting("circuitBreaker.coolDown", coolDown, of: owner)
  }
}

/// The breaker's state, apart from any clock or lock: `now` comes in, decisions come out.
struct CircuitBreakerMachine: Sendable {
  /// Where the breaker is.
  enum State: Sendable, Equatable {
    /// Decisions go to the database; `failures` consecutive ones failed so far.
    case closed(failures: Int)
    /// Decisions go to the failure policy until `until`.
    case open(until: ContinuousClock.Instant)
    /// One probe goes to the database at a time; `probing` while it is out.
    case halfOpen(probing: Bool)
  }

  /// What one decision should do.
  enum Admission: Sendable, Equatable {
    /// Ask the database.
    case ask
    /// Ask the database as the one probe; report back with ``CircuitBreakerMachine/probeEnded(succeeded:now:)``.
    case probe
    /// Go straight to the failure policy.
    case reject
  }

  /// A change of state worth logging and counting.
  enum Transition: Sendable, Equatable {
    case opened
    case halfOpened
    case closed
  }

  let configuration: CircuitBreaker
  private(set) var state = State.closed(failures: 0)

  init(_ configuration: CircuitBreaker) {
    self.configuration = configuration
  }

  /// Admits a decision at `now`; `transition` is set when the cool-down has just ended.
  mutating func admit(now: ContinuousClock.Instant) -> (Admission, Transition?) {
    switch state {
    case .closed:
      return (.ask, nil)
    case .open(let until):
      guard now >= until else { return (.reject, nil) }
      state = .halfOpen(probing: true)
      return (.probe, .halfOpened)
    case .halfOpen(let probing):
      if probing { return (.reject, nil) }
      state = .halfOpen(probing: true)
      return (.probe, nil)
    }
  }

  /// A decision admitted with `.ask` ended: `unavailable` if the database could not decide.
  mutating func asked(unavailable: Bool, now: ContinuousClock.Instant) -> Transition? {
    guard case .closed(let failures) = state else { return nil }  // a probe decides the state now
    guard unavailable else {
      state = .closed(failures: 0)
      return nil
    }
    if failures + 1 >= configuration.failureThreshold {
      state = .open(until: now.advanced(by: configuration.coolDown))
      return .opened
    }
    state = .closed(failures: failures + 1)
    return nil
  }

  /// The probe ended: the database answered (`succeeded`), could not decide, or the probe was
  /// cancelled before it knew (`succeeded: nil`), which lets the next decision probe.
  mutating func probeEnded(succeeded: Bool?, now: ContinuousClock.Instant) -> Transition? {
    switch succeeded {
    case true?:
      state = .closed(failures: 0)
      return .closed
    case false?:
      state = .open(until: now.advanced(by: configuration.coolDown))
      return .opened
    case nil:
      state = .halfOpen(probing: false)
      return nil
    }
  }
}
#endif
