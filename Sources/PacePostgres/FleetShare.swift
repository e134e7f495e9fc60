#if PostgreSQL
import Pace

extension PostgresRateLimitStore {
  /// How many instances share the database's limits, for the
  /// ``FailureMode/shareLimit(among:)`` failure policy: a configured count, or one the
  /// store learns while the database is healthy.
  ///
  /// ```swift
  /// // Three replicas, always:
  /// .shareLimit(among: .instances(3))
  /// // As many as have a heartbeat in the store's table (3 until the first one is counted):
  /// .shareLimit(among: .learned(assuming: 3))
  /// ```
  ///
  /// An instance is one store: each ``PostgresRateLimitStore`` counts once.
  public struct FleetSize: Sendable, Hashable {
    /// The count used until one is learned, or always if ``heartbeatInterval`` is nil.
    public let assumedCount: Int
    /// How often ``PostgresRateLimitStore/run()`` registers the store and counts the live
    /// instances; nil for a configured count.
    public let heartbeatInterval: Duration?

    /// Exactly `count` instances. Positive.
    public static func instances(_ count: Int) -> FleetSize {
      precondition(count > 0, "FleetSize.instances: count must be positive (got \(count))")
      return FleetSize(assumedCount: count, heartbeatInterval: nil)
    }

    /// The instances that registered a heartbeat within the last three `heartbeatInterval`s,
    /// counted by each store's ``PostgresRateLimitStore/run()`` every `heartbeatInterval`;
    /// `count` until the store has counted once.
    ///
    /// The fleet settles for one ``liveSpan`` after the store's first heartbeat, and after a
    /// heartbeat that failed: instances that started with it, or could not write their row while
    /// the database was away, may not be counted yet (three started together count 1, 2 and 3).
    /// Meanwhile a count raises the one in force (`count`, or the last settled one) but never
    /// lowers it. The count in force when an outage starts is the one the outage uses: an
    /// instance that starts during the outage assumes `count`, and the others do not know of it.
    ///
    /// - Parameters:
    ///   - count: The count until one is learned. Positive.
    ///   - heartbeatInterval: How often each store registers and counts; five seconds by default.
    ///     Positive, below a year.
    public static func learned(assuming count: Int, heartbeatInterval: Duration = .seconds(5)) -> FleetSize {
      precondition(count > 0, "FleetSize.learned: count must be positive (got \(count))")
      precondition(
        heartbeatInterval > .zero && heartbeatInterval < .seconds(31_536_000),
        "FleetSize.learned: heartbeatInterval must be positive and below a year (got \(heartbeatInterval))")
      return FleetSize(assumedCount: count, heartbeatInterval: heartbeatInterval)
    }

    /// How recent a heartbeat must be to count: three intervals, so that an instance that misses
    /// two heartbeats (a pause, a slow statement) still counts, and one that stopped leaves the
    /// count within three.
    public var liveSpan: Duration? { heartbeatInterval.map { $0 * 3 } }
  }
}

/// One instance's share of a limit: the limit divided by the instance count, in whole
/// microseconds.
///
/// A token bucket keeps its exact rate (`permits` per `interval × n`) and gets `burst / n`
/// (rounded down, at least 1); a window gets `permits / n` per window (rounded down, at least 1).
/// Rounding down keeps `n` shares within the limit; the "at least 1" lets a limit smaller than the
/// fleet still allow something, and then `n` shares allow up to `n` per window (or `n` bursts of
/// one) where the limit says fewer.
struct ShareLimit: Hashable, Sendable {
  let algorithm: RateLimit.Algorithm
  /// The share's permits: per `interval` for a token bucket (whose interval is the limit's times
  /// `n`), per window for the window policies.
  let permits: Int64
  /// In microseconds.
  let interval: Int64
  /// The most one request may take: the share's bucket, or its window's permits.
  let burst: Int64

  init(_ limit: RateLimit, instances: Int) throws(PacePostgresError) {
    precondition(instances > 0, "ShareLimit: instances must be positive (got \(instances))")
    let n = Int64(instances)
    guard let interval = limit.interval.wholeMicroseconds, interval > 0 else {
      throw .invalid(
        "PostgresRateLimitStore.tryAcquire.limit", limit,
        "must have a positive interval of fewer than Int64.max microseconds")
    }
    algorithm = limit.algorithm
    switch limit.algorithm {
    case .tokenBucket:
      let (scaled, overflow) = interval.multipliedReportingOverflow(by: n)
      guard !overflow, scaled < Int64.max / 4 else {
        throw .invalid(
          "PostgresRateLimitStore.tryAcquire.limit", limit,
          "must fit in 64-bit microseconds divided among \(instances) instances (its interval times \(instances))")
      }
      self.permits = Int64(limit.permits)
      self.interval = scaled
      self.burst = max(1, Int64(limit.burst) / n)
    case .slidingWindow, .fixedWindow:
      guard interval < Int64.max / 4 else {
        throw .invalid(
          "PostgresRateLimitStore.tryAcquire.limit", limit, "must have a window below Int64.max / 4 microseconds")
      }
      self.permits = max(1, Int64(limit.permits) / n)
      self.interval = interval
      self.burst = self.permits
    }
  }

  /// `a × b / c`, rounded down or up, or nil if it does not fit in an `Int64` (`a`, `b` not
  /// negative, `c` positive).
  static func scaled(_ a: Int64, by b: Int64, dividedBy c: Int64, roundingUp: Bool = false) -> Int64? {
    guard a >= 0, b >= 0, c > 0 else { return nil }
    let product = UInt64(a).multipliedFullWidth(by: UInt64(b))
    guard product.high < UInt64(c) else { return nil }
    let (quotient, remainder) = UInt64(c).dividingFullWidth(product)
    let rounded = roundingUp && remainder != 0 ? quotient + 1 : quotient
    return rounded <= UInt64(Int64.max) ? Int64(rounded) : nil
  }

  /// How far `cost` permits advance a token bucket's TAT: rounded up, so rounding never allows more.
  func increment(_ cost: Int64) -> Int64 {
    Self.scaled(cost, by: interval, dividedBy: permits, roundingUp: true) ?? .max / 4
  }

  /// How far ahead of now a token bucket's TAT may be: the increment of a whole burst, rounded up
  /// as every increment is, so that a cost of the burst fits a full bucket; at most `burst`
  /// increments of one permit, so rounding never allows more.
  var tolerance: Int64 { increment(burst) }
}

/// Each key's share of its limit on this instance while the database is away: a pure machine
/// (`now`, microseconds of the Unix epoch, comes in), driven under a lock by the store.
///
/// Each key and share limit has a tally of its own, with the exact semantics of the in-memory
/// limiters: a token bucket's TAT (GCRA), a sliding window's grants, a fixed window's count. A
/// tally starts as a key no one has used: full. A tally whose key would decide as a fresh one (a
/// TAT passed, every grant expired, a window past) is forgotten when the table fills, so idle keys
/// take no memory.
struct FleetShareState: Sendable {
  /// A grant of a sliding window: its instant and its cost.
  struct Grant: Sendable, Equatable {
    let at: Int64
    let cost: Int64
  }

  enum Tally: Sendable, Equatable {
    case bucket(tat: Int64)
    /// Oldest first from `head` (the ones before it expired, dropped in bulk, so that a decision
    /// costs what expired since the last one); `used` is the sum of the live ones' costs.
    case sliding(grants: [Grant], head: Int, used: Int64)
    case fixed(window: Int64, count: Int64)
  }

  struct Slot: Hashable, Sendable {
    let key: String
    let share: ShareLimit
  }

  /// At most this many tallies: a full table forgets its idle ones, and all of them if that frees
  /// less than a quarter (each forgotten tally starts full again: the bound in
  /// <doc:SharedRateLimitsAndDebouncing> holds for up to this many busy keys).
  let capacity: Int
  private(set) var tallies: [Slot: Tally] = [:]

  init(capacity: Int) {
    precondition(capacity > 0, "FleetShareState: capacity must be positive (got \(capacity))")
    self.capacity = capacity
  }

  /// Decides a request of `cost` for `key` under `share` at `now`, by the cost rule: a cost of 0
  /// answers what a cost of 1 would get and takes nothing; a cost above the share's burst (but not
  /// the limit's) is denied for the limit's `interval`, by when the database may decide again.
  mutating func decide(
    key: String, cost: Int, share: ShareLimit, limitInterval: Duration, now: Int64
  ) -> RateLimitDecision {
    let cost = Int64(cost)
    guard cost <= share.burst else { return .limited(retryAfter: limitInterval) }
    let slot = Slot(key: key, share: share)
    if tallies[slot] == nil, tallies.count >= capacity { forgetIdle(now: now) }
    // Taken out of the table, so that its grants are not shared and change in place.
    var tally = tallies.removeValue(forKey: slot) ?? Self.fresh(share)
    let decision = Self.decide(&tally, cost: cost, share: share, now: now)
    if !Self.isIdle(tally, share: share, now: now) { tallies[slot] = tally }
    return decision
  }

  private static func fresh(_ share: ShareLimit) -> Tally {
    switch share.algorithm {
    case .tokenBucket: .bucket(tat: 0)
    case .slidingWindow: .sliding(grants: [], head: 0, used: 0)
    case .fixedWindow: .fixed(window: .min, count: 0)
    }
  }

  private static func decide(_ tally: inout Tally, cost: Int64, share: ShareLimit, now: Int64) -> RateLimitDecision {
    let asked = max(cost, 1)
    switch tally {
    case .bucket(let tat):
      let start = max(tat, now)
      let tolerance = share.tolerance
      let next = start + share.increment(asked)
      guard next - now <= tolerance else {
        return .limited(retryAfter: .microseconds(max(1, next - tolerance - now)))
      }
      let level = cost == 0 ? start : next
      if cost > 0 { tally = .bucket(tat: next) }
      let remaining = ShareLimit.scaled(tolerance - (level - now), by: share.permits, dividedBy: share.interval)
      return .allowed(remaining: Int(min(remaining ?? share.burst, share.burst)))
    case .sliding(var grants, var head, var used):
      tally = .bucket(tat: 0)  // lets go of the grants, so that appending does not copy them
      while head < grants.count, grants[head].at + share.interval <= now {
        used -= grants[head].cost
        head += 1
      }
      if head >= 64, head * 2 >= grants.count {
        grants.removeFirst(head)
        head = 0
      }
      defer { tally = .sliding(grants: grants, head: head, used: used) }
      guard used + asked <= share.permits else {
        var freed: Int64 = 0
        for grant in grants[head...] {
          freed += grant.cost
          if used - freed + asked <= share.permits {
            return .limited(retryAfter: .microseconds(max(1, grant.at + share.interval - now)))
          }
        }
        return .limited(retryAfter: .microseconds(share.interval))  // unreachable: asked <= permits
      }
      if cost > 0 {
        grants.append(Grant(at: now, cost: cost))
        used += cost
      }
      return .allowed(remaining: Int(share.permits - used))
    case .fixed(let window, let count):
      let current = now >= 0 ? now / share.interval : (now + 1) / share.interval - 1
      let counted = window == current ? count : 0
      guard counted + asked <= share.permits else {
        return .limited(retryAfter: .microseconds(max(1, (current + 1) * share.interval - now)))
      }
      let taken = counted + cost
      tally = .fixed(window: current, count: taken)
      return .allowed(remaining: Int(share.permits - taken))
    }
  }

  /// Whether `tally` decides as a fresh one would, so that forgetting it changes nothing.
  private static func isIdle(_ tally: Tally, share: ShareLimit, now: Int64) -> Bool {
    switch tally {
    case .bucket(let tat): tat <= now
    case .sliding(let grants, _, _): grants.last.map { $0.at + share.interval <= now } ?? true
    case .fixed(let window, let count):
      count == 0 || window < (now >= 0 ? now / share.interval : (now + 1) / share.interval - 1)
    }
  }

  private mutating func forgetIdle(now: Int64) {
    tallies = tallies.filter { !Self.isIdle($0.value, share: $0.key.share, now: now) }
    if tallies.count >= capacity - capacity / 4 { tallies.removeAll(keepingCapacity: true) }
  }
}
#endif
