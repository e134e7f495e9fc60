#if PostgreSQL
import Pace

/// The denials the database gave this instance, answered again locally until they expire.
///
/// When the database denies key K for a request whose stored form (cost and limit, ``StoredLimit``)
/// is A, saying "retry after W", the request becomes allowable no earlier than W after the
/// database decided.
/// The cache remembers the deadline `sent + W`, where `sent` is the instant this instance sent the
/// request, which is before the database decided: the local deadline is never later than the
/// database's. Until it, the same key and arithmetic are denied locally with the time left.
///
/// It cannot over-grant, and it cannot deny what the database would allow: it only ever denies, and
/// for every policy W is the time until the key frees enough if nothing else is granted, which
/// nothing but time shortens. Other instances' grants only add to what the key holds (a denial
/// writes nothing): a token bucket's theoretical arrival time (TAT) moves later, a sliding
/// window's log and a fixed window's count grow. The purge deletes a row only once it counts
/// nothing, after every cached deadline for it: a token bucket's denied request's deadline is at
/// most its TAT; a sliding window's is the expiry of a grant in the log, at most the row's
/// `expires`; a fixed window's is its window's end, the row's `window_end`. So whatever the
/// database would answer before the local deadline is a denial too. A cost of 0 is checked as a
/// cost of 1 (``StoredLimit``), so both share an entry: a key denied to cost 1 answers cost 0
/// locally with the same wait. An allowed decision is never cached. Only rows deleted or rewritten
/// by hand break this, until the cached deadlines pass.
///
/// A pure machine: `now` comes in; ``DenialCacheState`` is driven under a lock by the store.
struct DenialCacheState: Sendable {
  /// What a cached denial is for: the key and the stored form of its cost under its limit (its
  /// policy and arithmetic).
  struct Entry: Hashable, Sendable {
    let key: String
    let limit: StoredLimit
  }

  /// At most this many denials are remembered. A full cache forgets the expired ones, and all of
  /// them if that frees less than a quarter, so that its upkeep stays constant per denial
  /// (forgetting is always exact: the database decides again).
  let capacity: Int
  private(set) var deadlines: [Entry: ContinuousClock.Instant] = [:]

  init(capacity: Int) {
    precondition(capacity >= 0, "DenialCache: capacity must not be negative (got \(capacity))")
    self.capacity = capacity
  }

  /// The time left of a cached denial of `entry` at `now`, or nil if the database must decide.
  mutating func retryAfter(_ entry: Entry, now: ContinuousClock.Instant) -> Duration? {
    guard let deadline = deadlines[entry] else { return nil }
    guard now < deadline else {
      deadlines[entry] = nil
      return nil
    }
    return now.duration(to: deadline)
  }

  /// The database denied `entry`, asking to retry after `retryAfter`, for a request sent at `sent`.
  mutating func denied(
    _ entry: Entry, retryAfter: Duration, sent: ContinuousClock.Instant, now: ContinuousClock.Instant
  ) {
    let deadline = sent.advanced(by: retryAfter)
    guard deadline > now, capacity > 0 else { return }
    if deadlines[entry] == nil, deadlines.count >= capacity {
      deadlines = deadlines.filter { $0.value > now }
      if deadlines.count >= capacity - capacity / 4 { deadlines.removeAll(keepingCapacity: true) }
    }
    // A later answer for the same entry can only be a later deadline, unless it was sent earlier.
    deadlines[entry] = max(deadline, deadlines[entry] ?? deadline)
  }
}
#endif
