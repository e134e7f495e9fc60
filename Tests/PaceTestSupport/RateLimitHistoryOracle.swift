import Pace

/// Whether a limit, applied to a key's whole history, lets one more permit through: the oracle
/// of the tests of limit changes (in memory and on a store), where every permit granted must be
/// one that the old limit or the new one would allow.
public enum RateLimitHistoryOracle {
  /// Whether `limit`, applied to the key's whole history `grants` (every grant, each of cost 1,
  /// taken whatever the limit would have said; instants in multiples of `unit`), lets one more
  /// permit through at `t`:
  /// - sliding window: fewer than `permits` grants in `(t - interval, t]`;
  /// - fixed window: fewer than `permits` grants in the window of `t`;
  /// - token bucket: the bucket replayed over every grant (debt allowed) holds a permit at `t`.
  ///
  /// `limit.interval` must be a whole number of `unit`s.
  public static func allows(
    _ limit: RateLimit, _ grants: [Int64], at t: Int64, unit: Duration = .nanoseconds(1)
  ) -> Bool {
    let interval = nanoseconds(limit.interval) / nanoseconds(unit)
    switch limit.algorithm {
    case .slidingWindow:
      return grants.filter { $0 > t - interval && $0 <= t }.count < limit.permits
    case .fixedWindow:
      return grants.filter { $0 / interval == t / interval }.count < limit.permits
    case .tokenBucket:
      return bucketAllows(limit, grants, at: t, debtCappedAt: [], unit: unit)
    }
  }

  /// Whether `limit`, a token bucket, replayed over `grants` (debt allowed, except that it owes
  /// at most its whole burst at each instant of `caps`, the bound a change of limit assumes of a
  /// slower bucket) lets one more permit through at `t`; instants in multiples of `unit`, of which
  /// `limit.interval` must be a whole number.
  public static func bucketAllows(
    _ limit: RateLimit, _ grants: [Int64], at t: Int64, debtCappedAt caps: [Int64], unit: Duration = .nanoseconds(1)
  ) -> Bool {
    let interval = nanoseconds(limit.interval) / nanoseconds(unit)
    var divisor = Int64(limit.permits)
    var b = interval
    while b != 0 { (divisor, b) = (b, divisor % b) }
    let perPermit = interval / divisor
    let perUnit = Int64(limit.permits) / divisor
    let capacity = Int64(limit.burst) * perPermit
    var deficit: Int64 = 0
    // Every grant and cap in time order (a cap before a grant at the same instant).
    let events = (caps.filter { $0 <= t }.map { ($0, true) } + grants.map { ($0, false) }).sorted {
      $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 && !$1.1)
    }
    var last = events.first?.0 ?? t
    for (time, isCap) in events {
      deficit = max(0, deficit - (time - last) * perUnit)
      last = time
      deficit = isCap ? min(deficit, capacity) : deficit + perPermit
    }
    deficit = max(0, deficit - (t - last) * perUnit)
    return capacity - deficit >= perPermit
  }

  private static func nanoseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
  }
}
