#if PostgreSQL
import Pace

/// A lower bound on the database's clock less this process's monotonic clock, in microseconds,
/// learned from the decisions' answers: the database read its clock (`decided`) before its answer
/// arrived here (`received`), so the difference was at least `decided - received` then.
///
/// The store sends each batch its callers' deadline on the database's clock with it, this bound
/// added to the deadline here: never later than the instant the callers stop waiting, so a
/// statement that reaches the database late (a server starved of CPU, a slow network) has only
/// what is left of its callers' wait, not its whole budget, and cannot take after they were
/// answered. The bound is below the true difference by the time the best answer took to come
/// back, so the database may stop that much early; never late.
///
/// The database's clock is a wall clock, which NTP slews and may step: the bound is lowered by
/// ``driftPerMillion`` of the time since its sample, and an answer that gives a higher bound
/// replaces it at once. A step back of the database's clock leaves the bound too high until it
/// has decayed: meanwhile a batch's deadline may come after its callers stop waiting, and the
/// budget alone (measured from the statement's arrival) bounds it, as without a deadline.
struct DatabaseClockBound: Sendable {
  /// How far apart the two clocks are assumed to drift, at most: 100 µs per second.
  static let driftPerMillion: Int64 = 100

  /// The best sample: the difference, and when it was taken on this process's clock.
  struct Sample: Sendable, Equatable {
    let difference: Int64
    let at: Int64
  }

  /// The best sample; nil before the first answer.
  private(set) var sample: Sample?

  init() {}

  /// The bound at `now` (microseconds on this process's clock); nil before any answer.
  func lowerBound(at now: Int64) -> Int64? {
    guard let sample else { return nil }
    let elapsed = max(0, now.subtractingSaturating(sample.at))
    return sample.difference.subtractingSaturating(elapsed / (1_000_000 / Self.driftPerMillion))
  }

  /// `deadline` (microseconds on this process's clock) on the database's clock, never later than
  /// the true instant; nil before any answer.
  func databaseInstant(of deadline: Int64, now: Int64) -> Int64? {
    lowerBound(at: now).map { deadline.addingSaturating($0) }
  }

  /// An answer that the database decided at `decided` (its clock, microseconds since the Unix
  /// epoch) arrived here at `received`.
  mutating func note(decided: Int64, received: Int64) {
    let difference = decided.subtractingSaturating(received)
    if let bound = lowerBound(at: received), bound >= difference { return }
    sample = Sample(difference: difference, at: received)
  }
}

extension ContinuousClock.Instant {
  /// Whole microseconds from `origin` to this instant, rounded down or up; saturated at the
  /// extremes. The timeline the leases and the clock bound measure this process's clock on.
  func microseconds(since origin: Self, roundingUp: Bool) -> Int64 {
    let (seconds, attoseconds) = origin.duration(to: self).components
    let (whole, fraction) = attoseconds.quotientAndRemainder(dividingBy: 1_000_000_000_000)
    let rounded = whole + (roundingUp && fraction > 0 ? 1 : 0) - (!roundingUp && fraction < 0 ? 1 : 0)
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
    guard !overflow else { return seconds < 0 ? .min : .max }
    return scaled.addingSaturating(rounded)
  }
}
#endif
