// MARK: Several changes within one look-back

// A change assumes what the old limit could have let through before what the key's state
// records ("A change of plans" in KeyedRateLimiter+PlanChanges.swift). Where a key's limit changed
// more than once within the new limit's look-back, the limits before the old one let usage
// through too, and the state no longer records it faithfully: a limit with a shorter look-back
// between them dropped it, or a conversion kept only what that limit counts (a full window's
// count, a bucket's debt). So a limiter made with plans keeps each history's latest limits with
// the instants they ended (`LimitHistory`), and a change also assumes that each limit before the
// old one let through its maximum over its whole time in force, at the latest instants it
// allows: a sliding window of `P` per `W` `P` at its last instant and every `W` before; a fixed
// window `P` there and at the last instant of each window before; a token bucket its burst
// there and one permit each time it could have earned one before. A new window counts those
// that fall in it; a new token bucket replays them in time order, empty after a limit faster
// than itself (the bound a single change has: it owes at most its whole burst). What one limit
// let through over its time is at most its maximum there, and what several did at most the sum:
// so the new limit never counts less than the key's history holds. (A key whose limit went up
// and back down within one look-back is so taken to have used the first limit to its maximum.)
//
// A history keeps at most `maximumEarlierLimits` limits before the current one; the one before
// the oldest kept is unknown, and taken as having let through the new limit's maximum at the
// instant it ended (a window full then, a bucket empty then).
//
// Memory: one history for the default, and one per key whose own limit was set or taken away,
// each at most `maximumEarlierLimits` limits; a key given back the default keeps its own until
// its history is the default's (the default changed `maximumEarlierLimits + 1` times since).

extension KeyedRateLimiter {
  /// A limit a key had before its current one, and the instant it stopped being in force.
  struct EarlierLimit: Equatable {
    let rate: KeyRate
    let until: PaceInstant
  }

  /// The latest limits a key had before its current one, oldest first.
  struct LimitHistory: Equatable {
    /// At most ``maximumEarlierLimits``, in the order they were in force; the first of them was
    /// in force from `unknownBefore` (or from the start, if `nil`), each later one from the
    /// `until` of the one before it.
    var earlier: [EarlierLimit] = []
    /// When the oldest limit kept started; `nil` while no limit was dropped (the oldest was in
    /// force from the start).
    var unknownBefore: PaceInstant?

    /// `rate` was in force until `until`.
    mutating func append(_ rate: KeyRate, until: PaceInstant) {
      earlier.append(EarlierLimit(rate: rate, until: until))
      if earlier.count > KeyedRateLimiter.maximumEarlierLimits {
        unknownBefore = earlier.removeFirst().until
      }
    }

    /// Whether it says nothing beyond the current limit.
    var isEmpty: Bool { earlier.isEmpty && unknownBefore == nil }
  }

  /// The histories of the limits of a limiter made with plans: changed only as the plans tell
  /// the limiter of a change, under their lock.
  struct PlanHistories {
    /// The default's.
    var defaultLimits = LimitHistory()
    /// Those of the keys whose own limit was set or taken away; a key given back the default
    /// leaves once its history is the default's.
    var keys: [Key: LimitHistory] = [:]
  }

  /// How many limits before the current one a history keeps.
  static var maximumEarlierLimits: Int { 4 }

  /// Adds to `counter`, loaded at `now` under a new limit after `old` and converted with
  /// ``addUnseenUsage(to:from:at:)``, the usage that the limits before `old` in `history` could
  /// have let through and the state no longer records (see "Several changes within one
  /// look-back" above). Nothing for an empty history.
  static func addEarlierUsage(
    to counter: inout RateLimitCounter, history: LimitHistory, latest old: KeyRate, at now: PaceInstant
  ) {
    if history.isEmpty { return }
    // The grants each earlier limit is assumed to have let through, latest limit first, each
    // latest first; and whether that limit is one a new bucket takes as leaving it empty.
    let cap: Int
    let lookBackStart: Int64
    switch counter {
    case .slidingWindow(let log):
      cap = log.rate.permits
      let (start, overflow) = now.nanoseconds.subtractingReportingOverflow(log.rate.nanoseconds &- 1)
      lookBackStart = overflow ? .min : start
    case .fixedWindow(let window):
      cap = window.rate.permits
      lookBackStart = window.windowStart.nanoseconds
    case .tokenBucket(let bucket):
      cap = bucket.rate.burst
      lookBackStart = .min
    }
    var spans: [(grants: [SlidingWindowLog.Grant], last: Int64, empties: Bool)] = []
    for index in history.earlier.indices.reversed() {
      let limit = history.earlier[index]
      let first =
        index > 0 ? history.earlier[index - 1].until.nanoseconds : history.unknownBefore?.nanoseconds ?? .min
      let last = limit.until.nanoseconds &- 1
      if last >= Swift.max(first, lookBackStart) {
        let grants = spanGrants(of: limit.rate, first: Swift.max(first, lookBackStart), last: last, upTo: cap)
        var empties = false
        if case .tokenBucket(let bucket) = counter { empties = isFaster(limit.rate, than: bucket.rate) }
        spans.append((grants, last, empties))
      }
    }
    if let unknown = history.unknownBefore, unknown.nanoseconds > .min {
      let last = unknown.nanoseconds &- 1
      if last >= lookBackStart {
        spans.append(([SlidingWindowLog.Grant(time: last, cost: cap)], last, true))
      }
    }
    if spans.isEmpty { return }
    switch counter {
    case .slidingWindow(var log):
      var grants = ContiguousArray(log.grants[log.head...])
      var assumed = 0
      for span in spans {
        for grant in span.grants {
          grants.append(grant)
          assumed = saturatingSum(assumed, grant.cost)
        }
      }
      grants.sort { $0.time < $1.time }
      var used = 0
      for grant in grants { used = saturatingSum(used, grant.cost) }
      dropEarliest(of: &grants, used: &used, assumed: assumed, permits: log.rate.permits)
      log.grants = grants
      log.head = 0
      log.used = used
      counter = .slidingWindow(log)
    case .fixedWindow(var window):
      var used = window.used
      for span in spans {
        for grant in span.grants where grant.time >= lookBackStart { used = saturatingSum(used, grant.cost) }
      }
      window.used = Swift.min(window.rate.permits, used)
      counter = .fixedWindow(window)
    case .tokenBucket(var bucket):
      // The spans replayed in time order on a bucket of the new rate, full before the first.
      let rate = bucket.rate
      guard let earliest = spans.last?.last else { return }
      var replay = TokenBucket(rate: rate, level: rate.full(at: PaceInstant(nanoseconds: earliest)))
      for span in spans.reversed() {
        if span.empties {
          replay.refill(now: PaceInstant(nanoseconds: span.last))
          replay.level = TokenBucketLevel(balance: 0, updated: PaceInstant(nanoseconds: span.last))
          continue
        }
        for grant in span.grants.reversed() {
          replay.refill(now: PaceInstant(nanoseconds: grant.time))
          let (owed, overflow) = Int64(Swift.min(grant.cost, rate.burst)).multipliedReportingOverflow(
            by: rate.unitsPerPermit)
          let balance = overflow ? 0 : replay.level.balance &- owed
          // At most a whole burst owed: the bound of a single change.
          replay.level = TokenBucketLevel(balance: Swift.max(0, balance), updated: replay.level.updated)
        }
      }
      replay.refill(now: now)
      let debt = rate.capacity &- replay.level.balance
      bucket.refill(now: now)
      if debt > 0, bucket.level.balance > 0 {
        bucket.level = TokenBucketLevel(balance: Swift.max(0, bucket.level.balance &- debt), updated: now)
      }
      counter = .tokenBucket(bucket)
    }
  }

  /// Adds to `counter`, loaded at `now` under a new limit after `old` and converted with
  /// ``addUnseenUsage(to:from:at:)``, the new limit used to its maximum at `change`, the key's
  /// previous change of limit, before which its state records nothing (see "A limit that changes
  /// unannounced" below). Not inlined: only a change of limit takes it.
  ///
  /// A token bucket empty at `change` would owe, at `now`, for the grants since too, which its
  /// state records only in part, and in time order: so a bucket that would not be full again by
  /// now is taken as empty now (the most a bucket can owe at a change, its whole burst).
  @usableFromInline
  static func addUsage(
    to counter: inout RateLimitCounter, beforeEarlierChange change: PaceInstant, latest old: KeyRate,
    at now: PaceInstant
  ) {
    guard case .tokenBucket(var bucket) = counter else {
      addEarlierUsage(to: &counter, history: LimitHistory(earlier: [], unknownBefore: change), latest: old, at: now)
      return
    }
    var emptyThen = TokenBucket(rate: bucket.rate, level: TokenBucketLevel(balance: 0, updated: change))
    emptyThen.refill(now: now)
    if emptyThen.level.balance < bucket.rate.capacity {
      bucket.level = TokenBucketLevel(balance: 0, updated: now)
      counter = .tokenBucket(bucket)
    }
  }

  /// Whether `rate`, sustained, lets through more permits per nanosecond than `bucket`.
  static func isFaster(_ rate: KeyRate, than bucket: TokenBucketRate) -> Bool {
    let permits: UInt64
    let nanoseconds: UInt64
    switch rate {
    case .slidingWindow(let window), .fixedWindow(let window):
      (permits, nanoseconds) = (UInt64(window.permits), UInt64(window.nanoseconds))
      // `permits / nanoseconds` against `perNanosecond / perPermit`.
      let old = permits.multipliedFullWidth(by: UInt64(bucket.unitsPerPermit))
      let new = nanoseconds.multipliedFullWidth(by: UInt64(bucket.unitsPerNanosecond))
      return (old.high, old.low) > (new.high, new.low)
    case .tokenBucket(let old):
      let oldPace = UInt64(old.unitsPerNanosecond).multipliedFullWidth(by: UInt64(bucket.unitsPerPermit))
      let newPace = UInt64(bucket.unitsPerNanosecond).multipliedFullWidth(by: UInt64(old.unitsPerPermit))
      return (oldPace.high, oldPace.low) > (newPace.high, newPace.low)
    }
  }

  /// The most `rate` could have let through from `first` to `last` (both included), each grant
  /// at the latest instant it allows, latest first: at most `cap` permits' worth (more fill any
  /// window of `cap`), in at most ``maximumUnseenGrants`` grants beyond the first (a group at the
  /// latest instant of its members).
  ///
  /// - sliding window, `P` per `W`: `P` at `last`, `last - W`, …;
  /// - fixed window: `P` at `last`, and at the last instant of each window before `last`'s;
  /// - token bucket: its burst at `last`, and one permit each time it could have earned one
  ///   before: the `k`-th at `last - ⌈k / rate⌉`.
  static func spanGrants(of rate: KeyRate, first: Int64, last: Int64, upTo cap: Int) -> [SlidingWindowLog.Grant] {
    let firstCost: Int
    let count: UInt64
    let cost: Int
    let time: (UInt64) -> Int64
    switch rate {
    case .slidingWindow(let window):
      firstCost = window.permits
      cost = window.permits
      let step = UInt64(window.nanoseconds)
      count = UInt64(bitPattern: last &- first) / step
      time = { k in Int64(bitPattern: UInt64(bitPattern: last) &- k &* step) }
    case .fixedWindow(let window):
      firstCost = window.permits
      cost = window.permits
      let step = UInt64(window.nanoseconds)
      let start = FixedWindowCounter(rate: window, now: PaceInstant(nanoseconds: last)).windowStart.nanoseconds
      if start == .min || start &- 1 < first {
        count = 0
        time = { _ in last }
      } else {
        let latest = start &- 1
        count = UInt64(bitPattern: latest &- first) / step &+ 1
        time = { k in Int64(bitPattern: UInt64(bitPattern: latest) &- (k &- 1) &* step) }
      }
    case .tokenBucket(let bucket):
      firstCost = bucket.burst
      cost = 1
      let perPermit = UInt64(bucket.unitsPerPermit)
      let perNanosecond = UInt64(bucket.unitsPerNanosecond)
      let span = UInt64(bitPattern: last &- first)
      let earned = span.multipliedFullWidth(by: perNanosecond)
      count = earned.high >= perPermit ? .max : perPermit.dividingFullWidth(earned).quotient
      time = { k in
        let units = k.multipliedFullWidth(by: perPermit)
        let (quotient, remainder) = perNanosecond.dividingFullWidth(units)
        return Int64(bitPattern: UInt64(bitPattern: last) &- quotient &- (remainder == 0 ? 0 : 1))
      }
    }
    var grants = [SlidingWindowLog.Grant(time: last, cost: Swift.min(firstCost, cap))]
    let left = cap &- firstCost
    guard left > 0 else { return grants }
    grants += groupedGrants(count: count, cost: cost, upTo: left, time: time)
    return grants
  }

  /// `count` grants of `cost`, the `k`-th (from 1) at `time(k)`, latest first: at most `cap`
  /// permits' worth, grouped into at most ``maximumUnseenGrants`` (each at the latest instant of
  /// its members).
  static func groupedGrants(count: UInt64, cost: Int, upTo cap: Int, time: (UInt64) -> Int64)
    -> [SlidingWindowLog.Grant]
  {
    let needed = UInt64(cap / cost + (cap % cost == 0 ? 0 : 1))
    let items = Swift.min(count, needed)
    guard items > 0 else { return [] }
    let groups = Swift.min(items, UInt64(maximumUnseenGrants))
    let perGroup = items / groups + (items % groups == 0 ? 0 : 1)
    var grants: [SlidingWindowLog.Grant] = []
    var first: UInt64 = 1
    while first <= items {
      let members = Swift.min(perGroup, items - first + 1)
      let (permits, overflow) = Int(members).multipliedReportingOverflow(by: cost)
      grants.append(SlidingWindowLog.Grant(time: time(first), cost: overflow ? .max : permits))
      first += members
    }
    return grants
  }
}

// MARK: A limit that changes unannounced

// A limiter with a `limits` closure is not told when a key's limit changes. It finds out at the
// key's first decision under another limit than the one its state was stored under (a bucket's
// rate and a sliding log's are in its state; a fixed window's is the first fixed window the
// key's shard decided under, unless the shard's `fixedRates` names another), and applies the
// rule of "A change of plans" (KeyedRateLimiter+PlanChanges.swift): the part of the new look-back
// that the state no longer records is taken as used at the old limit's maximum, the change taken
// as made at that decision, which is later than it was: stricter, never looser.
//
// So that a key idle under its old limit still has its state when its limit changes, a key is
// forgotten only once idle under every limit the limiter has decided under (`SeenLimits`): its
// last grant, at the latest instant its state allows, older than the longest look-back among
// them. A bucket's rate or a fixed window's length counts only where it is not the only one seen
// (then it is the key's own, and its state says when it is idle), so a limiter whose keys share
// one limit keeps them no longer than before. No key's state grows: the shards and the
// limiter note what they saw.
//
// Where a key's limit changes again, the state holds only what the limit it was stored under
// counts since the key's last change: what the limits before that let through is not recorded.
// So a shard records, for a key whose limit changed, when it found the change (`limitChanges`,
// while the key is tracked: no entry for a key whose limit never changed), and a change after it
// takes the new limit as used to its maximum then (a window full then, a bucket empty then), as a
// limiter made with plans takes a limit before the earliest it keeps.
//
// What is left: a limit the limiter never decided under before a key was forgotten.
// `RateLimitPlans` is told of each change, which covers it.
