/// Where a circuit breaker is for one key.
///
/// ```
/// closed ──(failure ratio reached, with the minimum of calls)──▶ open(until:)
/// open ──(until passes: the next call)──▶ halfOpen
/// halfOpen ──(every probe succeeds)──▶ closed
/// halfOpen ──(a probe fails)──▶ open(until:)
/// ```
public enum CircuitBreakerState: Sendable, Hashable {
  /// Calls go through; their outcomes are counted over the window.
  case closed
  /// Calls are refused at once until `until`, on the breaker's clock.
  case open(until: PaceInstant)
  /// A set number of probe calls go through; the rest are refused until the probes report.
  case halfOpen
}

/// What became of a call that a circuit breaker let through, as its caller reports it.
public enum CircuitBreakerOutcome: Sendable, Hashable {
  /// The call succeeded.
  case success
  /// The call failed in a way that counts against the key (a connection error, a 5xx).
  case failure
  /// The call says nothing of the key's health: a 429 with `Retry-After` (pacing, not failure),
  /// a cancellation, a client error. A probe reported `ignored` frees its place for another.
  case ignored
}

/// Why a circuit breaker refused a call.
public enum CircuitBreakerError: Error, Sendable, Hashable {
  /// The breaker is open: no call goes through until `until` on its clock, `retryAfter` from the
  /// refusal.
  case open(until: PaceInstant, retryAfter: Duration)
  /// The breaker is half-open and all its probes are out: a call may go through once they report.
  case probesInFlight
}
