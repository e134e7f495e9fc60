#if PostgreSQL
import Pace

/// GCRA's arithmetic for one request, in whole microseconds.
///
/// Each permit advances the key's TAT by the emission interval `interval / permits`; a request is
/// allowed if the TAT it leads to is at most `burst` emission intervals ahead of now. The increment
/// rounds up and the tolerance down, so rounding never allows more than the rate.
struct GCRA: Equatable {
  /// How far `cost` permits advance the TAT.
  let increment: Int64
  /// How far ahead of now the TAT may be.
  let tolerance: Int64
  /// The rate's interval, in microseconds.
  let interval: Int64
  let permits: Int64

  init(cost: Int, limit: RateLimit) throws(PacePostgresError) {
    // InputRules checks the cost first; here it is checked again, as a thrown error, never a trap.
    guard cost >= 0, cost <= limit.burst else {
      throw .invalid(
        "PostgresRateLimitStore.tryAcquire.cost", cost, "must be in 0...\(limit.burst), the burst of \(limit)")
    }
    // Through Pace's saturating conversion: `Duration.components` traps beyond `Int64.max` seconds.
    guard let interval = limit.interval.wholeMicroseconds, interval > 0 else {
      throw .invalid(
        "PostgresRateLimitStore.tryAcquire.limit", limit,
        "must have a positive interval of fewer than Int64.max microseconds")
    }
    let permits = Int64(limit.permits)
    let (costTimesInterval, overflow) = Int64(cost).multipliedReportingOverflow(by: interval)
    let (burstTimesInterval, overflow2) = Int64(limit.burst).multipliedReportingOverflow(by: interval)
    guard !overflow, !overflow2 else {
      throw .invalid("PostgresRateLimitStore.tryAcquire.limit", limit, "must fit in 64-bit microseconds")
    }
    // Rounded up without `+ permits - 1`, which overflows for `Int.max` permits.
    let (quotient, remainder) = costTimesInterval.quotientAndRemainder(dividingBy: permits)
    self.increment = quotient + (remainder == 0 ? 0 : 1)
    self.tolerance = burstTimesInterval / permits
    self.interval = interval
    self.permits = permits
    guard increment <= tolerance, tolerance < Int64.max / 4 else {
      throw .invalid(
        "PostgresRateLimitStore.tryAcquire.limit", limit,
        "must have an emission interval of at least a microsecond and a burst's below Int64.max / 4 microseconds")
    }
  }

  /// The decision from the statement's answer.
  func decision(grantedTAT: Int64?, currentTAT: Int64?, now: Int64) -> RateLimitDecision {
    if let grantedTAT {
      // Whole permits left in the slack between the new TAT and the tolerance.
      let slack = max(0, tolerance - (grantedTAT - now))
      let remaining = interval.dividingFullWidth(slack.multipliedFullWidth(by: permits)).quotient
      return .allowed(remaining: Int(remaining))
    }
    // Allowed once now has reached TAT + increment - tolerance. A row that appeared after the
    // statement's snapshot is invisible to it; then the increment is a safe upper bound.
    guard let currentTAT else { return .limited(retryAfter: .microseconds(max(1, increment))) }
    let (end, pastTheEnd) = max(currentTAT, now).addingReportingOverflow(increment)
    // A TAT past the end of the timeline (the largest `Int64`): no wait lets the request through.
    guard !pastTheEnd else { return .limited(retryAfter: RateLimitDecision.never) }
    return .limited(retryAfter: .microseconds(max(1, end - now - tolerance)))
  }
}
#endif
