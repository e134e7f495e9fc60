#if PostgreSQL
import Logging
import Metrics
import Pace

/// When a ``PostgresRateLimitStore`` decides a busy key from a lease: a share of the key's permits
/// charged in the database in one decision and granted from memory, so that a hot key's allowed
/// requests cost a statement per lease rather than per request. Give it to
/// ``PostgresRateLimitStore/leasingHotKeys(_:metricsFactory:)``.
///
/// A key is busy on an instance once the instance decides it ``busyAfter`` times within
/// ``within``; the next decision asks the database for a lease of `⌊b / burstDivisor⌋` permits (a
/// token bucket's burst `b`, a fixed window's permits), its own among them. The bound on what the
/// fleet grants stays the limit's own (see <doc:SharedRateLimitsAndDebouncing>, "Hot keys"):
///
/// - A token bucket's lease takes the next `k` emission slots after the key's theoretical arrival
///   time, and each leased permit is granted no later than its slot starts, as a decision in the
///   database would have been: one that misses its slot expires. So every permit granted anywhere
///   in the fleet, from a lease or not, was granted within `[E - τ, E - T/P]` of the end `E` of
///   its slot, and any span of length `L` grants at most `b + L × P / T`, GCRA's own bound.
/// - A fixed window's lease is charged in its window and expires at the window's end: each window
///   grants at most its permits.
/// - A sliding window never leases: its log records each grant's time, and a permit charged at `t`
///   but granted later would leave the log a window after `t` while its grant still counts; a
///   window ending just after that could grant the limit's permits again beside it.
///
/// Leasing is opt-in: a leased permit that is not used in time expires rather than going back
/// (the database cannot tell which of its slots nobody else could have used), so an instance
/// whose demand falls short of its lease spends a share of the limit that it never grants; a
/// grant from a lease reports the lease's permits left as its `remaining`, not the key's; and a
/// key's other instances see its bucket up to two leases further drained.
public struct HotKeyLeasing: Sendable, Hashable {
  /// How many decisions of a key on one instance within ``within`` make it busy. 1 to 1,000,000.
  public let busyAfter: Int
  /// The span in which ``busyAfter`` decisions make a key busy: positive.
  public let within: Duration
  /// A lease takes the limit's burst (a fixed window's permits) divided by this, rounded down:
  /// 2 to 1,000,000. A limit whose lease would be a single permit (or less than a request's cost)
  /// is decided in the database as without leasing. With `n` instances leasing one key, keep
  /// `2n` below it: each holds up to two leases (the one in use and the next), all drained from
  /// the same bucket.
  public let burstDivisor: Int

  /// Leasing settings.
  ///
  /// - Parameters:
  ///   - busyAfter: Decisions within `within` that make a key busy; 64 by default.
  ///   - within: The span they are counted in; 100 ms by default.
  ///   - burstDivisor: A lease takes the burst (a window's permits) divided by it; 64 by default.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` naming the setting outside
  ///   its range.
  public init(
    busyAfter: Int = 64, within: Duration = .milliseconds(100), burstDivisor: Int = 64
  ) throws(PacePostgresError) {
    guard (1...1_000_000).contains(busyAfter) else {
      throw .invalid("HotKeyLeasing.busyAfter", busyAfter, "must be in 1...1000000")
    }
    try checkSetting("within", within, of: "HotKeyLeasing")
    guard (2...1_000_000).contains(burstDivisor) else {
      throw .invalid("HotKeyLeasing.burstDivisor", burstDivisor, "must be in 2...1000000")
    }
    self.busyAfter = busyAfter
    self.within = within
    self.burstDivisor = burstDivisor
  }

  /// The permits a lease of `limit` takes, or nil if `limit` does not lease (a sliding window,
  /// or a lease of fewer than 2 permits).
  func leaseSize(_ limit: RateLimit) -> Int? {
    guard limit.algorithm != .slidingWindow else { return nil }
    let size = (limit.algorithm == .tokenBucket ? limit.burst : limit.permits) / burstDivisor
    return size >= 2 ? size : nil
  }
}

/// The leases of one instance's busy keys: which keys are busy, the permits each lease has left,
/// and when they expire. A pure machine on one timeline of whole microseconds (`now`): the store's
/// driver (``HotKeyLeases``) passes an upper bound of the database's clock, so that a permit
/// granted before its deadline here was granted before it in the database's time.
struct HotKeyLeaseState: Sendable {
  /// One lease: `permits` charged in the database, granted in order.
  struct Lease: Equatable, Sendable {
    /// A token bucket's: the latest instant permit 0 may be granted, its slot's start; permit `j`
    /// may be granted until `start + ⌊j × interval / limitPermits⌋`. A fixed window's: nil.
    var start: Int64?
    /// A fixed window's: the window's end, when every permit left expires. A token bucket's: nil.
    var end: Int64?
    let permits: Int64
    /// The limit's interval in microseconds and its permits: one permit's emission interval.
    let interval: Int64
    let limitPermits: Int64
    /// The first permit neither granted nor expired.
    var next: Int64 = 0
    /// How many were granted.
    var granted: Int64 = 0

    /// A token bucket's lease of `permits`, its first slot starting at `start`.
    static func tokenBucket(permits: Int64, start: Int64, limit: RateLimit) -> Lease {
      Lease(
        start: start, end: nil, permits: permits, interval: limit.interval.wholeMicroseconds ?? .max,
        limitPermits: Int64(limit.permits))
    }

    /// A fixed window's lease of `permits`, expiring at `end`.
    static func fixedWindow(permits: Int64, end: Int64) -> Lease {
      Lease(start: nil, end: end, permits: permits, interval: 0, limitPermits: 1)
    }

    /// The latest instant permit `index` may be granted.
    func deadline(_ index: Int64) -> Int64 {
      guard let start else { return (end ?? .min) - 1 }
      // `index × interval` fits: the store refused a burst whose `burst × interval` does not.
      let (high, low) = index.multipliedFullWidth(by: interval)
      let offset = limitPermits.dividingFullWidth((high, low)).quotient
      let (sum, overflow) = start.addingReportingOverflow(offset)
      return overflow ? .max : sum
    }

    /// The first permit that may still be granted at `now` (`permits` if none).
    func firstUsable(now: Int64) -> Int64 {
      guard next < permits, now <= deadline(permits - 1) else { return permits }
      guard now > deadline(next) else { return next }
      // The least `j` with `start + ⌊j × interval / limitPermits⌋ >= now`: `j × interval >=
      // (now - start) × limitPermits`, which fits, as the last permit's deadline is not passed.
      guard let start else { return next }
      let behind = (now - start) * limitPermits
      let (quotient, remainder) = behind.quotientAndRemainder(dividingBy: interval)
      return Swift.max(next, quotient + (remainder == 0 ? 0 : 1))
    }

    /// The permits that may still be granted at `now`.
    func usable(now: Int64) -> Int64 { permits - firstUsable(now: now) }
  }

  /// What to do with a decision.
  enum Action: Equatable, Sendable {
    /// Granted from a lease, with `remaining` permits left in it; when `refill` is set, the
    /// caller also asks the database for the next lease of `refill` permits, kept ahead.
    case grant(remaining: Int, refill: Int?)
    /// Decided in the database: alone (`lease` nil), or with a lease of `lease` permits, the
    /// request's cost among them.
    case ask(lease: Int?)
  }

  /// A key's recent decisions and its leases.
  struct KeyState: Sendable {
    var limit: RateLimit
    /// The current span of activity and the decisions in it.
    var spanStart: Int64
    var decisions: Int
    /// The lease in use first, then at most one taken ahead of it.
    var leases: [Lease] = []
    /// A lease has been asked for and not answered.
    var asking = false
    /// No lease is asked before this (one was denied, or failed).
    var quietUntil: Int64 = .min
  }

  let settings: HotKeyLeasing
  /// At most this many keys are watched; a full table forgets the keys without a lease.
  let capacity: Int
  private(set) var keys: [String: KeyState] = [:]
  /// Permits that expired unused since the driver last asked (``takeExpired()``).
  private(set) var expired: Int64 = 0
  private let span: Int64

  init(settings: HotKeyLeasing, capacity: Int = 10_000) {
    self.settings = settings
    self.capacity = capacity
    self.span = settings.within.wholeMicroseconds ?? .max
  }

  /// The decision of `cost` permits of `key` under `limit` at `now`.
  mutating func decide(_ key: String, cost: Int, limit: RateLimit, now: Int64) -> Action {
    // A known key's state is changed where it is stored (through its index): a copy taken out
    // and written back would share its leases' storage, and copy it at each grant.
    let index = keys.index(forKey: key)
    if let index, keys.values[index].limit != limit {
      // The key's limit changed (its plan): the old limit's leases grant nothing under the new one.
      Self.drop(&keys.values[index], expired: &expired)
      keys.values[index] = KeyState(limit: limit, spanStart: now, decisions: 0)
    }
    guard let size = settings.leaseSize(limit), cost <= size else { return .ask(lease: nil) }
    guard let index else {
      if keys.count >= capacity { forgetIdleKeys(now: now) }
      let busy = settings.busyAfter <= 1
      keys[key] = KeyState(limit: limit, spanStart: now, decisions: 1, asking: busy)
      return .ask(lease: busy ? size : nil)
    }
    return Self.decide(
      &keys.values[index], cost: cost, size: size, now: now, settings: settings, span: span, expired: &expired)
  }

  /// ``decide(_:cost:limit:now:)`` for a key known under `limit`, whose lease size is `size`.
  private static func decide(
    _ state: inout KeyState, cost: Int, size: Int, now: Int64, settings: HotKeyLeasing, span: Int64,
    expired: inout Int64
  ) -> Action {
    // A grant from a lease, the first one that still has permits in time.
    let checked = Int64(Swift.max(cost, 1))
    while let lease = state.leases.first {
      let index = lease.firstUsable(now: now)
      if index + checked <= lease.permits {
        // A cost of 0 takes nothing, and is answered as a cost of 1 would be.
        if cost > 0 {
          state.leases[0].next = index + checked
          state.leases[0].granted += checked
        } else {
          state.leases[0].next = index
        }
        // One lease is kept ahead of the one in use, so that a slow round trip does not leave the
        // key without one: its slots follow this one's, so they do not start passing meanwhile.
        var refill: Int? = nil
        if !state.asking, state.leases.count == 1, now >= state.quietUntil {
          state.asking = true
          refill = size
        }
        return .grant(remaining: Int(state.leases[0].usable(now: now)), refill: refill)
      }
      expired += lease.permits - lease.granted
      state.leases.removeFirst()
    }
    if now - state.spanStart >= span {
      state.spanStart = now
      state.decisions = 0
    }
    state.decisions += 1
    let busy = state.decisions >= settings.busyAfter && !state.asking && now >= state.quietUntil
    if busy { state.asking = true }
    return .ask(lease: busy ? size : nil)
  }

  /// The database granted the lease asked for `key` under `limit`; `requested` permits of it go
  /// to the request that asked (its own decision, at the database's instant), none for a refill.
  mutating func leased(_ key: String, limit: RateLimit, lease: Lease, requested: Int64, now: Int64) -> Int? {
    guard var state = keys[key], state.limit == limit else {
      // The key's limit changed while the lease was asked for, or the key was forgotten.
      expired += lease.permits - Swift.min(requested, lease.permits)
      return requested > 0 ? Int(lease.permits - requested) : nil
    }
    var lease = lease
    lease.next = requested
    lease.granted = requested
    state.asking = false
    state.leases.append(lease)
    keys[key] = state
    return requested > 0 ? Int(lease.usable(now: now)) : nil
  }

  /// The database denied the lease asked for `key` (or could not answer): no lease is asked for
  /// it again within the busy span, so that a key at its limit is not asked twice per decision.
  mutating func notLeased(_ key: String, limit: RateLimit, now: Int64) {
    guard var state = keys[key], state.limit == limit else { return }
    state.asking = false
    state.quietUntil = now.addingReportingOverflow(span).overflow ? .max : now + span
    keys[key] = state
  }

  /// The permits that expired since the last call.
  mutating func takeExpired() -> Int64 {
    defer { expired = 0 }
    return expired
  }

  private static func drop(_ state: inout KeyState, expired: inout Int64) {
    for lease in state.leases { expired += lease.permits - lease.granted }
    state.leases = []
  }

  /// Forgets the keys with no lease and no lease asked for; all of them if that frees less than a
  /// quarter (a table full of leased keys forgets their leases, which then expire).
  private mutating func forgetIdleKeys(now: Int64) {
    keys = keys.filter { !$0.value.leases.isEmpty || $0.value.asking }
    guard keys.count >= capacity - capacity / 4 else { return }
    for (_, state) in keys { for lease in state.leases { expired += lease.permits - lease.granted } }
    keys.removeAll(keepingCapacity: true)
  }
}

/// The driver of ``HotKeyLeaseState`` for a store: its lock, its clock and its metrics.
///
/// Its timeline is microseconds since it was made, on the continuous clock. A lease's deadlines
/// are placed on it from the instant its decision was sent, before the database decided: the
/// database's instant `t` becomes `sent + (t - decided)`, never later than when the database's
/// clock reads `t` (the clocks tick at the same rate), so no permit is granted later in the
/// database's time than its deadline.
final class HotKeyLeases: Sendable {
  let settings: HotKeyLeasing
  let state: LockedState<HotKeyLeaseState>
  private let origin = ContinuousClock.now
  private let taken: Counter
  private let leasedPermits: Counter
  private let expiredPermits: Counter
  private let denied: Counter

  init(_ settings: HotKeyLeasing, table: String, factory: any MetricsFactory) {
    self.settings = settings
    self.state = LockedState(HotKeyLeaseState(settings: settings))
    let dimensions = [("table", table)]
    taken = Counter(label: "pace_rate_limit_leases_total", dimensions: dimensions, factory: factory)
    leasedPermits = Counter(label: "pace_rate_limit_leased_permits_total", dimensions: dimensions, factory: factory)
    expiredPermits = Counter(
      label: "pace_rate_limit_lease_expired_permits_total", dimensions: dimensions, factory: factory)
    denied = Counter(label: "pace_rate_limit_leases_denied_total", dimensions: dimensions, factory: factory)
  }

  /// `instant` on the leases' timeline, rounded up (a grant's instant) or down (a send's).
  func micros(_ instant: ContinuousClock.Instant, roundingUp: Bool) -> Int64 {
    instant.microseconds(since: origin, roundingUp: roundingUp)
  }

  func decide(_ key: String, cost: Int, limit: RateLimit, now: Int64) -> HotKeyLeaseState.Action {
    let (action, expired) = state.withLock { state in
      (state.decide(key, cost: cost, limit: limit, now: now), state.takeExpired())
    }
    if expired > 0 { expiredPermits.increment(by: expired) }
    return action
  }

  /// The database granted a lease of `permits` to `key`: `granted` (its TAT after the lease, or
  /// a fixed window's end) and `decided` are the database's microseconds, `sent` the instant on
  /// this timeline the decision was sent (the database's chosen instant in tests).
  func leased(
    _ key: String, limit: RateLimit, permits: Int64, amount: Int64, granted: Int64, decided: Int64,
    sent: Int64, requested: Int64, now: Int64
  ) -> Int? {
    let lease: HotKeyLeaseState.Lease
    if limit.algorithm == .tokenBucket {
      // The lease's slots start where the TAT stood before it (`granted - amount`).
      lease = .tokenBucket(permits: permits, start: sent + (granted - amount - decided), limit: limit)
    } else {
      lease = .fixedWindow(permits: permits, end: sent + (granted - decided))
    }
    taken.increment()
    leasedPermits.increment(by: permits)
    let (remaining, expired) = state.withLock { state in
      (state.leased(key, limit: limit, lease: lease, requested: requested, now: now), state.takeExpired())
    }
    if expired > 0 { expiredPermits.increment(by: expired) }
    return remaining
  }

  /// The lease asked for `key` was not granted: `wasDenied` by the database, else not answered.
  func notLeased(_ key: String, limit: RateLimit, now: Int64, wasDenied: Bool = false) {
    if wasDenied { denied.increment() }
    state.withLock { $0.notLeased(key, limit: limit, now: now) }
  }
}
#endif
