import PaceTestSupport
import Testing

@testable import Pace

/// Seeded random timelines of one key whose limit changes once, at a random instant, to another
/// limit of the same algorithm (1 to 10 permits, intervals of 1 to 100 ns), each request checked
/// against the history of what the limiter actually granted.
///
/// What is checked, for every request allowed at `t` after the change from `old` to `new`:
/// `allows(old, grants, t) || allows(new, grants, t)`, `grants` being every grant before `t`
/// since the timeline began; unless `new` both looks further back and allows more at once than
/// `old` (a longer window with more permits, a slower bucket with a larger burst): the key's state
/// holds only what `old` still counts, and a `limits:` closure cannot say when the limit changed,
/// so what `new` would count further back is unknown. A limiter made with `RateLimitPlans` is told
/// of each change and assumes that use: `KeyedRateLimiterPlanChangePropertyTests` checks it with no
/// exclusion. And for the windows, from `s + old.interval + new.interval`
/// on (`s` the change), every decision is `new`'s over the whole history, exactly.
@Suite(.offThePool) struct KeyedRateLimiterLimitChangePropertyTests {
  static func allows(_ limit: RateLimit, _ grants: [Int64], at t: Int64) -> Bool {
    RateLimitHistoryOracle.allows(limit, grants, at: t)
  }

  static func randomLimit(_ algorithm: RateLimit.Algorithm, _ random: inout SeededGenerator) -> RateLimit {
    let permits = Int.random(in: 1...10, using: &random)
    let interval = Duration.nanoseconds(Int64.random(in: 1...100, using: &random))
    switch algorithm {
    case .tokenBucket: return RateLimit(permits: permits, per: interval, burst: Int.random(in: 1...10, using: &random))
    case .slidingWindow: return .slidingWindow(permits: permits, per: interval)
    case .fixedWindow: return .fixedWindow(permits: permits, per: interval)
    }
  }

  /// Whether `new` looks further back than `old` and allows more at once.
  static func looksFurtherBackAndAllowsMore(_ old: RateLimit, _ new: RateLimit) -> Bool {
    guard new.burst > old.burst else { return false }
    if new.algorithm != .tokenBucket { return new.interval > old.interval }
    // Slower: fewer permits per nanosecond.
    return new.permits * Int(old.interval.paceNanoseconds) < old.permits * Int(new.interval.paceNanoseconds)
  }

  @Test(arguments: [RateLimit.Algorithm.tokenBucket, .slidingWindow, .fixedWindow], 0..<300)
  func everyGrantAfterAChangeIsOneTheOldOrTheNewLimitAllows(algorithm: RateLimit.Algorithm, seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let scheduler = TestScheduler()
    let old = Self.randomLimit(algorithm, &random)
    let new = Self.randomLimit(algorithm, &random)
    let current = LockedState(old)
    let limiter = KeyedRateLimiter<String>(limits: { _ in current.withLock { $0 } }, clock: scheduler)
    let change = Int64.random(in: 100...400, using: &random)
    let exactFrom = change + old.interval.paceNanoseconds + new.interval.paceNanoseconds
    let checked = !Self.looksFurtherBackAndAllowsMore(old, new)
    var grants: [Int64] = []
    var t: Int64 = 0
    while t < 1_000 {
      t += Int64.random(in: 0...6, using: &random)
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      if t >= change { current.withLock { $0 = new } }
      let allowed = limiter.tryAcquire("k").isAllowed
      if t >= change, allowed, checked {
        #expect(
          Self.allows(old, grants, at: t) || Self.allows(new, grants, at: t),
          "seed \(seed): granted at \(t) under \(new), after \(old) until \(change); grants \(grants.suffix(20))")
      }
      if t >= exactFrom, algorithm != .tokenBucket {
        #expect(
          allowed == Self.allows(new, grants, at: t),
          "seed \(seed): at \(t) under \(new), after \(old) until \(change); grants \(grants.suffix(20))")
      }
      if allowed { grants.append(t) }
    }
  }
}

/// `KeyedRateLimiter(limits:)` on timelines of 1 to 6 changes of any algorithm to any, the
/// closure answering each key's limit in force (no exclusion of a longer window with more permits
/// or a slower bucket with a larger burst): the limiter detects a change at the key's first
/// decision under the new limit and assumes the use its state no longer records, as a limiter
/// made with `RateLimitPlans` does at the change. Every limit is seen before the timeline begins
/// (another key's decision), as in a service whose plans are in use; a quiet key (forgotten, if
/// it is quiet long enough) comes back after one or more changes.
///
/// Checked, for every grant at `t` after the first change: SOME limit in force for the key at or
/// before `t` allows it over the key's whole history (`RateLimitHistoryOracle.allows`), a token
/// bucket judged with its debt capped at its whole burst at each change (the bound a change
/// assumes). The bounds of a closure, which is not told of changes, are kept out: the changes are
/// further apart than any limit's look-back (several changes within one look-back need the
/// history of limits that only `RateLimitPlans` keeps: `KeyedRateLimiterPlanChangePropertyTests`).
/// Fixed windows of several lengths are among the limits: a key's shard records the fixed window
/// a state not under its first was stored under.
@Suite(.offThePool) struct KeyedRateLimiterSeveralLimitChangesPropertyTests {
  typealias Oracle = KeyedRateLimiterLimitChangePropertyTests

  /// How far back `limit` counts, in nanoseconds: a window's length, a bucket's time from empty
  /// to full.
  static func lookBack(_ limit: RateLimit) -> Int64 {
    let interval = limit.interval.paceNanoseconds
    guard limit.algorithm == .tokenBucket else { return interval }
    return (Int64(limit.burst) * interval + Int64(limit.permits) - 1) / Int64(limit.permits)
  }

  /// `changes + 1` random limits of any algorithm, each looking back 150 ns at most (so that the
  /// timelines stay short), fixed windows of several lengths among them.
  static func limits(changes: Int, _ random: inout SeededGenerator) -> [RateLimit] {
    let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
    var limits: [RateLimit] = []
    while limits.count <= changes {
      let limit = Oracle.randomLimit(algorithms.randomElement(using: &random)!, &random)
      if lookBack(limit) > 150 { continue }
      limits.append(limit)
    }
    return limits
  }

  @Test(arguments: 1...6, 0..<25 as Range<UInt64>)
  func everyGrantAfterChangesIsOneThatALimitInForceAllows(changes: Int, seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let limits = Self.limits(changes: changes, &random)
    let apart = limits.map(Self.lookBack).max()! + 1
    var instants: [Int64] = [Int64.random(in: 100...300, using: &random)]
    for _ in 1..<changes + 1 {
      instants.append(instants[instants.count - 1] + apart + Int64.random(in: 0...60, using: &random))
    }
    let end = instants.removeLast() + 200
    let scheduler = TestScheduler()
    let inForce = LockedState(0)
    let limiter = KeyedRateLimiter<String>(
      limits: { key in
        if key.hasPrefix("seen ") { return limits[Int(key.dropFirst(5))!] }
        return limits[inForce.withLock { $0 }]
      }, clock: scheduler)
    for index in limits.indices { _ = limiter.tryAcquire("seen \(index)", cost: 0) }
    let quietFrom = Int64.random(in: 0...instants[0], using: &random)
    let backAt = Int64.random(in: instants[0]...end, using: &random)
    let keys = ["busy", "quiet"]
    var grants: [String: [Int64]] = [:]
    var changedAt: [Int64] = []
    var t: Int64 = 0
    while t < end {
      t += Int64.random(in: 0...6, using: &random)
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      while changedAt.count < changes, t >= instants[changedAt.count] {
        inForce.withLock { $0 += 1 }
        changedAt.append(t)
      }
      let earlier = limits[0...changedAt.count]
      for key in keys where key == "busy" || t < quietFrom || t >= backAt {
        let allowed = limiter.tryAcquire(key).isAllowed
        let history = grants[key, default: []]
        if allowed, !changedAt.isEmpty {
          let someLimitAllows = earlier.contains { limit in
            limit.algorithm == .tokenBucket
              ? RateLimitHistoryOracle.bucketAllows(limit, history, at: t, debtCappedAt: changedAt)
              : Oracle.allows(limit, history, at: t)
          }
          #expect(
            someLimitAllows,
            "seed \(seed), \(key): granted at \(t) under \(Array(earlier)) changed at \(changedAt); grants \(history.suffix(20))"
          )
        }
        if allowed { grants[key, default: []].append(t) }
      }
    }
  }

  /// Changes close together, 1 ns to the longest look-back apart: long limits with many permits
  /// and short ones with one alternate, each used in a burst as it comes into force and sparsely
  /// after, so that what a long limit let through is more than a short one after it records.
  /// A change after another within its look-back takes the new limit as used to its maximum at
  /// the earlier one; every grant is one that some limit in force at or before it allows.
  @Test(arguments: 2...6, 0..<40 as Range<UInt64>)
  func everyGrantAfterChangesWithinOneLookBackIsOneThatALimitInForceAllows(changes: Int, seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
    var limits: [RateLimit] = []
    while limits.count <= changes {
      let algorithm = algorithms.randomElement(using: &random)!
      let long = limits.count.isMultiple(of: 2)
      let permits = long ? Int.random(in: 10...20, using: &random) : 1
      let interval = Duration.nanoseconds(Int64.random(in: long ? 60...100 : 10...20, using: &random))
      let limit =
        switch algorithm {
        case .tokenBucket: RateLimit(permits: permits, per: interval, burst: long ? permits : 2)
        case .slidingWindow: RateLimit.slidingWindow(permits: permits, per: interval)
        case .fixedWindow: RateLimit.fixedWindow(permits: permits, per: interval)
        }
      if Self.lookBack(limit) <= 150 { limits.append(limit) }
    }
    let longest = limits.map(Self.lookBack).max()!
    var instants: [Int64] = [Int64.random(in: 5...50, using: &random)]
    for _ in 1..<changes {
      instants.append(instants[instants.count - 1] + Int64.random(in: 1...longest, using: &random))
    }
    let end = instants[instants.count - 1] + longest + 50
    let scheduler = TestScheduler()
    let inForce = LockedState(0)
    let drawn = limits
    let limiter = KeyedRateLimiter<String>(limits: { _ in drawn[inForce.withLock { $0 }] }, clock: scheduler)
    var grants: [Int64] = []
    var changedAt: [Int64] = []
    var t: Int64 = 0
    var bursts = 30
    while t < end {
      if bursts > 0 {
        bursts -= 1
      } else {
        let step = Int64.random(in: 5...30, using: &random)
        if changedAt.count < changes, instants[changedAt.count] <= t + step {
          t = Swift.max(t, instants[changedAt.count])
          bursts = 30
        } else {
          t += step
        }
      }
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      while changedAt.count < changes, t >= instants[changedAt.count] {
        inForce.withLock { $0 += 1 }
        changedAt.append(t)
      }
      guard limiter.tryAcquire("k").isAllowed else { continue }
      if !changedAt.isEmpty {
        let someLimitAllows = limits[0...changedAt.count].contains { limit in
          limit.algorithm == .tokenBucket
            ? RateLimitHistoryOracle.bucketAllows(limit, grants, at: t, debtCappedAt: changedAt)
            : Oracle.allows(limit, grants, at: t)
        }
        #expect(
          someLimitAllows,
          "seed \(seed): granted at \(t) under \(limits) changed at \(changedAt); grants \(grants.suffix(30))")
      }
      grants.append(t)
    }
  }
}
