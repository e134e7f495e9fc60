#if PostgreSQL
/// An exponential backoff: `base` after the first failure, doubling after each further one, never
/// more than `cap`.
struct Backoff: Sendable, Hashable {
  /// The wait after the first failure.
  let base: Duration
  /// The longest wait.
  let cap: Duration

  init(base: Duration, cap: Duration) {
    precondition(base >= .zero, "Backoff: base must not be negative (got \(base))")
    precondition(cap >= base, "Backoff: cap must not be shorter than base (got \(cap))")
    self.base = base
    self.cap = cap
  }

  /// The wait after `failures` consecutive failures; zero before the first.
  func delay(afterFailures failures: Int) -> Duration {
    guard failures > 0 else { return .zero }
    var (delay, doublings) = (base, 1)
    // Stops at the cap: a long run of failures neither overflows nor loops long.
    while doublings < failures && delay < cap && delay > .zero {
      delay *= 2
      doublings += 1
    }
    return min(delay, cap)
  }
}

/// What a debouncer does with an execution that failed: a handler that threw, or a payload that
/// does not decode.
///
/// An attempt is one claim of the key: the `attempts` column counts them from the key's last
/// acknowledgement (or dead letter), so an execution lost with a stopped instance counts too.
struct DebouncerRetryPolicy: Sendable, Hashable {
  /// The attempts an execution gets before its payloads go to the dead-letter table.
  let maximumAttempts: Int
  /// The wait before each retry.
  let backoff: Backoff

  init(maximumAttempts: Int, backoff: Backoff) {
    precondition(maximumAttempts > 0, "PostgresDebouncer: maximumAttempts must be positive (got \(maximumAttempts))")
    self.maximumAttempts = maximumAttempts
    self.backoff = backoff
  }

  /// What to do after a failed attempt.
  enum Decision: Sendable, Hashable {
    /// Release the key, due again after the wait, with its payloads untouched.
    case retry(after: Duration)
    /// Move the execution's payloads to the dead-letter table.
    case deadLetter
  }

  /// The decision after attempt number `attempt` (from 1) failed.
  func afterFailure(attempt: Int) -> Decision {
    attempt >= maximumAttempts ? .deadLetter : .retry(after: backoff.delay(afterFailures: max(attempt, 1)))
  }
}
#endif
