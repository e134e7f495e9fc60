// MARK: A change of plans, and the usage a key's state no longer records

// A key's state holds only what its limit still counts: a sliding log's grants within its
// window, a fixed window's count, a bucket's permits owed. A new limit that looks further back
// and allows more at once than the old one (a longer window with more permits, a slower bucket
// with a larger burst) would count grants that state has dropped, or that a forgotten key's
// history held. So, when a limiter made with plans is told of a change, the part of the new
// limit's look-back that the state no longer records is taken as used at the old limit's
// maximum, at the latest instants that limit allows: the new limit never counts fewer than the
// key's history holds, and that assumed usage stops counting as time passes, as real grants do.
//
// - sliding window, `P1` per `W1` to `P2` per `W2`: `P1` granted at `s - W1`, `s - 2 W1`, …,
//   each instant the new window still counts at the change `s`; only the latest `⌈P2 / P1⌉`
//   matter (while more count, the window is full), so the log stays within `P2` entries;
// - fixed window: `P1` in each old window between the new window's start and the old window's;
// - token bucket: the new bucket empty at the change, filling at its rate. (A history that would
//   put the new bucket in debt beyond its whole burst, a faster use sustained for long before
//   the change, is not assumed: no state of bounded size could say how long it lasted.)
//
// Between algorithms, the same usage: what the old limit could have let through before what its
// state records (`unseenGrants`), at the latest instants, read by the new one. A window counts
// those grants that fall in it (a sliding log holds them, grouped into a bounded number of
// entries); a token bucket after a window is empty if the window is faster than it (any debt),
// else owes for the window's latest unseen grants what its rate has not repaid since.
//
// A decision reads its key's limit before it takes the shard's lock; one that read it before a
// change the shard has since applied would store the key's state under the old limit, without
// what the change assumed. Each shard keeps the plans' version of the latest change it applied
// (`Shard.planVersion`), and such a decision reads the limit again.
//
// A key whose limit changed more than once within the new limit's look-back counts what the
// limits before the old one let through too: see "Several changes within one look-back" in
// KeyedRateLimiter+LimitHistory.swift.
//
// A change of one key converts its state (or gives a key with none the state that assumed
// usage leaves). A change of the default converts the keys with state under it, and leaves the
// state a key with none starts from in every shard (`DefaultLimitChange`) until it is idle.

extension KeyedRateLimiter {
  /// The state a key with no state starts from under its plans' default, after the default
  /// changed to `rate` and until `until`: the usage its old limit could have let through that the
  /// new one still counts.
  @usableFromInline
  struct DefaultLimitChange {
    /// The new default's rate.
    @usableFromInline let rate: KeyRate
    /// A key with no state at the change, as it stands at the change.
    @usableFromInline let counter: RateLimitCounter
    /// When that key is idle: the change no longer matters from then on.
    @usableFromInline let until: PaceInstant
  }

  /// Adds to `counter`, loaded at `now` under a new limit, what the old limit `old` could have
  /// let through before what the state records and the new limit still counts (see "A change of
  /// plans" above). Nothing for a limit that looks no further back or allows no more at once.
  @usableFromInline
  static func addUnseenUsage(to counter: inout RateLimitCounter, from old: KeyRate, at now: PaceInstant) {
    switch (old, counter) {
    case (.slidingWindow(let old), .slidingWindow(var log)):
      let new = log.rate
      guard new.nanoseconds > old.nanoseconds, new.permits > old.permits else { return }
      let (edge, overflow) = now.nanoseconds.subtractingReportingOverflow(old.nanoseconds)
      guard !overflow else { return }
      // `P1` at `edge - i * W1` counts at `now` while `(i + 1) * W1 < W2`.
      let counted = (new.nanoseconds &- 1) / old.nanoseconds
      let needed = Int64(new.permits / old.permits + (new.permits % old.permits == 0 ? 0 : 1))
      var steps: ContiguousArray<SlidingWindowLog.Grant> = []
      var time = edge
      for _ in 0..<Swift.min(counted, needed) {
        steps.append(SlidingWindowLog.Grant(time: time, cost: old.permits))
        let (earlier, beforeTheStart) = time.subtractingReportingOverflow(old.nanoseconds)
        if beforeTheStart { break }
        time = earlier
      }
      steps.reverse()
      let assumed = steps.count &* old.permits
      var used = assumed
      for grant in log.grants[log.head...] where grant.time > edge {
        steps.append(grant)
        used &+= grant.cost
      }
      Self.dropEarliest(of: &steps, used: &used, assumed: assumed, permits: new.permits)
      log.grants = steps
      log.head = 0
      log.used = used
      counter = .slidingWindow(log)
    case (.fixedWindow(let old), .fixedWindow(var window)):
      let permits = window.rate.permits
      guard permits > old.permits else { return }
      let newStart = window.windowStart.nanoseconds
      let oldStart = FixedWindowCounter(rate: old, now: now).windowStart.nanoseconds
      guard newStart < oldStart else { return }
      let (span, overflow) = oldStart.subtractingReportingOverflow(newStart)
      let windows = overflow ? Int64.max : (span &- 1) / old.nanoseconds &+ 1
      let (unseen, tooMany) = windows.multipliedReportingOverflow(by: Int64(old.permits))
      window.used = tooMany || unseen >= Int64(permits) ? permits : Swift.min(permits, window.used &+ Int(unseen))
      counter = .fixedWindow(window)
    case (.tokenBucket(let old), .tokenBucket(var bucket)):
      let new = bucket.rate
      guard new.burst > old.burst else { return }
      // Slower: fewer permits per nanosecond, compared exactly.
      let newPace = UInt64(new.unitsPerNanosecond).multipliedFullWidth(by: UInt64(old.unitsPerPermit))
      let oldPace = UInt64(old.unitsPerNanosecond).multipliedFullWidth(by: UInt64(new.unitsPerPermit))
      guard (newPace.high, newPace.low) < (oldPace.high, oldPace.low) else { return }
      bucket.refill(now: now)
      if bucket.level.balance > 0 { bucket.level = TokenBucketLevel(balance: 0, updated: now) }
      counter = .tokenBucket(bucket)
    case (.tokenBucket, _):
      // Bucket to bucket is above; a window's is below.
      addUnseenUsageAcrossAlgorithms(to: &counter, from: old, at: now)
    case (.slidingWindow(let window), .tokenBucket(var bucket)), (.fixedWindow(let window), .tokenBucket(var bucket)):
      // The old limit's latest window before what the state records.
      guard let latest = unseenGrants(of: old, at: now, from: .min, upTo: window.permits).first else { return }
      let new = bucket.rate
      bucket.refill(now: now)
      // Faster than the new bucket: sustained for long, it would leave the new bucket any debt.
      let oldPace = UInt64(window.permits).multipliedFullWidth(by: UInt64(new.unitsPerPermit))
      let newPace = UInt64(window.nanoseconds).multipliedFullWidth(by: UInt64(new.unitsPerNanosecond))
      if (oldPace.high, oldPace.low) > (newPace.high, newPace.low) {
        if bucket.level.balance > 0 { bucket.level = TokenBucketLevel(balance: 0, updated: now) }
      } else {
        // As slow: only the latest window can still be owed for (each one before it is repaid
        // before the next); what it let through, less what the new rate repaid since.
        let used = UInt64(latest.cost).multipliedFullWidth(by: UInt64(new.unitsPerPermit))
        let since = UInt64(bitPattern: now.nanoseconds &- latest.time)
        let repaid = since.multipliedFullWidth(by: UInt64(new.unitsPerNanosecond))
        let owed = Self.saturatingDifference(used, repaid)
        let (balance, overflow) = bucket.level.balance.subtractingReportingOverflow(owed)
        bucket.level = TokenBucketLevel(balance: overflow ? .min : balance, updated: now)
      }
      counter = .tokenBucket(bucket)
    default:
      addUnseenUsageAcrossAlgorithms(to: &counter, from: old, at: now)
    }
  }

  /// The most grouped into one assumed grant: a log that assumed usage leaves holds at most this
  /// many entries beyond the ones the key's state records.
  @usableFromInline static var maximumUnseenGrants: Int { 64 }

  /// `addUnseenUsage` into a window of another algorithm than `old`'s: the grants
  /// ``unseenGrants(of:at:from:upTo:)`` assumes that the new window counts at `now`.
  @usableFromInline
  static func addUnseenUsageAcrossAlgorithms(
    to counter: inout RateLimitCounter, from old: KeyRate, at now: PaceInstant
  ) {
    switch counter {
    case .slidingWindow(var log):
      // Counted while later than `now - W2`.
      let (start, overflow) = now.nanoseconds.subtractingReportingOverflow(log.rate.nanoseconds &- 1)
      let unseen = unseenGrants(of: old, at: now, from: overflow ? .min : start, upTo: log.rate.permits)
      guard !unseen.isEmpty else { return }
      // What the state records converts to grants at `now`, after every assumed one.
      var grants = ContiguousArray(unseen.reversed())
      var used = 0
      for grant in grants { used = saturatingSum(used, grant.cost) }
      let assumed = used
      for grant in log.grants[log.head...] {
        grants.append(grant)
        used = saturatingSum(used, grant.cost)
      }
      // A log's grants are in time order (its idle time is its last grant's end). A state idle
      // under its old limit but kept for a longer one records a window before `now`'s, so some
      // assumed grants may be later than what it records: counted twice (stricter, never
      // looser), but in order.
      grants.sort { $0.time < $1.time }
      dropEarliest(of: &grants, used: &used, assumed: assumed, permits: log.rate.permits)
      log.grants = grants
      log.head = 0
      log.used = used
      counter = .slidingWindow(log)
    case .fixedWindow(var window):
      let permits = window.rate.permits
      var used = window.used
      for grant in unseenGrants(of: old, at: now, from: window.windowStart.nanoseconds, upTo: permits) {
        used = saturatingSum(used, grant.cost)
      }
      window.used = Swift.min(permits, used)
      counter = .fixedWindow(window)
    case .tokenBucket:
      return
    }
  }

  /// The grants `old` could have let through at `start` or later, before what a key's state
  /// under it records at `now`, each at the latest instant it allows, latest first: at most `cap`
  /// permits' worth (more would fill any window of `cap`), in at most ``maximumUnseenGrants``
  /// grants (a group at the latest instant of its members, so counted at least as long).
  ///
  /// - sliding window, `P` per `W`: `P` at `now - W`, `now - 2 W`, … (the state records the
  ///   grants after `now - W`);
  /// - fixed window: `P` at the last instant of each window before the current one (whose count
  ///   the state records);
  /// - token bucket: beyond the permits owed at `now` (which the state records), one more each
  ///   time the bucket could have earned it: the `k`-th at `now - ⌈k / rate⌉`.
  @usableFromInline
  static func unseenGrants(of old: KeyRate, at now: PaceInstant, from start: Int64, upTo cap: Int)
    -> [SlidingWindowLog.Grant]
  {
    // The `k`-th (from 1) of `count` items, each of `cost`, at `time(k)`, latest first.
    let count: UInt64
    let cost: Int
    let time: (UInt64) -> Int64
    switch old {
    case .slidingWindow(let rate), .fixedWindow(let rate):
      var latest: Int64
      if case .slidingWindow = old {
        let (edge, overflow) = now.nanoseconds.subtractingReportingOverflow(rate.nanoseconds)
        if overflow { return [] }
        latest = edge
      } else {
        let windowStart = FixedWindowCounter(rate: rate, now: now).windowStart.nanoseconds
        if windowStart == .min { return [] }
        latest = windowStart &- 1
      }
      guard latest >= start else { return [] }
      let window = UInt64(rate.nanoseconds)
      count = UInt64(bitPattern: latest &- start) / window &+ 1
      cost = rate.permits
      time = { k in Int64(bitPattern: UInt64(bitPattern: latest) &- (k &- 1) &* window) }
    case .tokenBucket(let rate):
      guard now.nanoseconds > start else { return [] }
      let perPermit = UInt64(rate.unitsPerPermit)
      let perNanosecond = UInt64(rate.unitsPerNanosecond)
      // The `k`-th fits while `⌈k perPermit / perNanosecond⌉ <= now - start`.
      let span = UInt64(bitPattern: now.nanoseconds &- start)
      let earned = span.multipliedFullWidth(by: perNanosecond)
      count = earned.high >= perPermit ? .max : perPermit.dividingFullWidth(earned).quotient
      cost = 1
      time = { k in
        let units = k.multipliedFullWidth(by: perPermit)
        let (quotient, remainder) = perNanosecond.dividingFullWidth(units)
        return Int64(bitPattern: UInt64(bitPattern: now.nanoseconds) &- quotient &- (remainder == 0 ? 0 : 1))
      }
    }
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

  /// Drops the earliest of the `assumed` permits that open `grants` (in time order), as many as
  /// `used` has beyond a full window of `permits`: while any of them counts, so do the later
  /// ones, which fill the window, so every decision is the same, and the window never reports
  /// fewer than 0 available.
  @usableFromInline
  static func dropEarliest(
    of grants: inout ContiguousArray<SlidingWindowLog.Grant>, used: inout Int, assumed: Int, permits: Int
  ) {
    var excess = Swift.min(used &- permits, assumed)
    var dropped = 0
    while excess > 0, dropped < grants.count {
      let cost = grants[dropped].cost
      if cost > excess {
        grants[dropped].cost = cost &- excess
        used &-= excess
        break
      }
      excess &-= cost
      used &-= cost
      dropped &+= 1
    }
    grants.removeFirst(dropped)
  }

  /// `a + b`, at most `Int.max`.
  @usableFromInline
  static func saturatingSum(_ a: Int, _ b: Int) -> Int {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : sum
  }

  /// `a - b` for 128-bit `a` and `b`, 0 if `b` is larger, at most `Int64.max`.
  @usableFromInline
  static func saturatingDifference(
    _ a: (high: UInt64, low: UInt64), _ b: (high: UInt64, low: UInt64)
  ) -> Int64 {
    guard (a.high, a.low) > (b.high, b.low) else { return 0 }
    let (low, borrow) = a.low.subtractingReportingOverflow(b.low)
    let high = a.high &- b.high &- (borrow ? 1 : 0)
    return high > 0 || low > UInt64(Int64.max) ? .max : Int64(low)
  }

  /// The state a key with no state starts from at `now` under the default `rate`, if the default
  /// changed recently enough to leave it owing; forgets the change once it no longer matters.
  @inlinable
  func defaultChangeCounter(in shard: inout Shard, rate: KeyRate, now: PaceInstant) -> RateLimitCounter? {
    guard let change = shard.defaultChange else { return nil }
    guard now < change.until else {
      shard.defaultChange = nil
      return nil
    }
    guard change.rate == rate else { return nil }
    var counter = change.counter
    counter.refill(now: now)
    return counter
  }

  /// Applies a change of the plans this limiter was made with, as the plans make it (under their
  /// lock, so that no decision reads the new limit before this is done): converts the state of
  /// every key it changes to the new limit at once, with the usage the state no longer records
  /// (see "A change of plans" above). Never calls the plans: their lock is held.
  func planChanged(_ change: RateLimitPlanChange<Key>) {
    let now = clock.now()
    let origin = clock.unixNanosecondsAtOrigin
    let old = KeyLimit(change.old, unixNanosecondsAtOrigin: origin).rate
    let new = KeyLimit(change.new, unixNanosecondsAtOrigin: origin).rate
    if let key = change.key {
      let history = planHistories.withLock { histories -> LimitHistory in
        let history = histories.keys[key] ?? histories.defaultLimits
        var after = history
        after.append(old, until: now)
        histories.keys[key] = change.newIsDefault && after == histories.defaultLimits ? nil : after
        return history
      }
      let hash = key.hashValue
      let index = Self.shardIndex(hash: hash)
      let arming = shards.withLock(index) { shard -> ShardTimer<Key>.Arming? in
        changeLimit(
          of: key, hash: hash, from: old, to: new, oldIsDefault: change.oldIsDefault, history: history, now: now,
          in: &shard)
        shard.planVersion = Swift.max(shard.planVersion, change.version)
        return shard.timer.reserveIfNeeded()
      }
      if arming != nil { carryOut(Effects(arming: arming), shard: index) }
      return
    }
    // The keys given back the default that have a history of their own are changed with it.
    let (history, ownHistories) = planHistories.withLock {
      histories -> (LimitHistory, [Key: LimitHistory]) in
      let history = histories.defaultLimits
      let own = histories.keys.filter { change.ownLimits[$0.key] == nil }
      histories.defaultLimits.append(old, until: now)
      for (key, var keyHistory) in own {
        keyHistory.append(old, until: now)
        histories.keys[key] = keyHistory == histories.defaultLimits ? nil : keyHistory
      }
      return (history, own)
    }
    var counter = loadCounter(level: nil, log: nil, rate: new, now: now)
    Self.addUnseenUsage(to: &counter, from: old, at: now)
    Self.addEarlierUsage(to: &counter, history: history, latest: old, at: now)
    let record = counter.isIdle ? nil : DefaultLimitChange(rate: new, counter: counter, until: counter.idleTime ?? .max)
    for index in shards.indices {
      let arming = shards.withLock(index) { shard -> ShardTimer<Key>.Arming? in
        shard.defaultChange = record
        shard.planVersion = Swift.max(shard.planVersion, change.version)
        // Collected first: a key found idle under the new limit leaves the table.
        var keys: [Key] = []
        shard.buckets.forEachSlot { slot in
          let key = shard.buckets.key(at: slot)
          if change.ownLimits[key] == nil, ownHistories[key] == nil { keys.append(key) }
        }
        for key in keys {
          changeLimit(
            of: key, hash: key.hashValue, from: old, to: new, oldIsDefault: false, history: history, now: now,
            in: &shard)
        }
        return shard.timer.reserveIfNeeded()
      }
      if arming != nil { carryOut(Effects(arming: arming), shard: index) }
    }
    for (key, keyHistory) in ownHistories {
      let hash = key.hashValue
      let index = Self.shardIndex(hash: hash)
      let arming = shards.withLock(index) { shard -> ShardTimer<Key>.Arming? in
        changeLimit(
          of: key, hash: hash, from: old, to: new, oldIsDefault: false, history: keyHistory, now: now, in: &shard)
        return shard.timer.reserveIfNeeded()
      }
      if arming != nil { carryOut(Effects(arming: arming), shard: index) }
    }
  }

  /// Converts `key`'s state from `old` to `new` at `now`, with the usage it no longer records; a
  /// key with no state gets the state that usage leaves, if any. A key with waiting requests is
  /// granted them under `new` from its next check.
  func changeLimit(
    of key: Key, hash: Int, from old: KeyRate, to new: KeyRate, oldIsDefault: Bool, history: LimitHistory,
    now: PaceInstant, in shard: inout Shard
  ) {
    let slot = shard.buckets.index(of: key, hash: hash)
    var level = slot.map { shard.buckets.unsafeValuePointer(at: $0).pointee.level }
    var log = shard.logs.isEmpty ? nil : shard.logs.removeValue(forKey: key)
    var bucketRate = shard.bucketRates.isEmpty ? nil : shard.bucketRates[key]
    if slot == nil, oldIsDefault, let owed = defaultChangeCounter(in: &shard, rate: old, now: now) {
      // A key with no state under a default that changed recently owes what that change left.
      var stored = TokenBucketLevel(balance: 0, updated: now)
      var logs: [Key: SlidingWindowLog] = [:]
      var rates: [Key: TokenBucketRate] = [:]
      store(owed, of: key, into: &stored, logs: &logs, bucketRates: &rates)
      (level, log, bucketRate) = (stored, logs[key], rates[key])
    }
    var counter = loadCounter(level: level, log: log, bucketRate: bucketRate, rate: new, now: now)
    counter.refill(now: now)
    Self.addUnseenUsage(to: &counter, from: old, at: now)
    Self.addEarlierUsage(to: &counter, history: history, latest: old, at: now)
    let waiting = !shard.queues.isEmpty && shard.queues[key] != nil
    if waiting { shard.queues[key]?.rate = new }
    guard let slot else {
      if counter.isIdle { return }
      let checkAt = counter.idleTime
      var stored = TokenBucketLevel(balance: 0, updated: now)
      store(counter, of: key, into: &stored, logs: &shard.logs, bucketRates: &shard.bucketRates)
      noteStoredFixedRate(of: key, counter, in: &shard)
      _ = shard.buckets.indexInserting(key, hash: hash, (level: stored, checkAt: checkAt ?? .max))
      if let checkAt { shard.timer.add(checkAt, for: key) }
      return
    }
    if counter.isIdle, !waiting {
      shard.buckets.remove(at: slot)
      shard.removeSideEntries(of: key)
      return
    }
    let entry = shard.buckets.unsafeValuePointer(at: slot)
    store(counter, of: key, into: &entry.pointee.level, logs: &shard.logs, bucketRates: &shard.bucketRates)
    noteStoredFixedRate(of: key, counter, in: &shard)
    // While requests wait, the key's entry is their turn's, which its next firing recomputes.
    if waiting { return }
    let next = counter.idleTime
    entry.pointee.checkAt = next ?? .max
    if let next { shard.timer.add(next, for: key) }
  }
}
