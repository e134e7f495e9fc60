import PaceTestSupport
import Testing

@testable import Pace

/// `KeyedRateLimiterLimitChangePropertyTests` for a limiter made with `RateLimitPlans`, with no
/// exclusion: every pair of limits, of one algorithm or of two (the sliding 3 per 10 ns to
/// fixed 3 per 10 ns among them), a longer window with more permits and a slower bucket with a
/// larger burst included. Four keys, two under the default (changed with
/// `setDefaultLimit`) and two with limits of their own (changed with `setLimit`), one of each busy
/// throughout and one quiet for a while before the change (forgotten, if it was quiet long
/// enough) and called again after it.
///
/// One history is checked against a weaker oracle: a token bucket's that the new limit, replayed
/// over it, would put more than its whole burst in debt at the change (a use faster than the new
/// rate, sustained for long before it). No state of bounded size can say how long such a use went
/// on, so the limiter assumes at most an empty bucket (see `RateLimitPlans`): each grant after
/// the change is one the old limit allows, or the new one with its debt at the change capped at
/// its whole burst.
@Suite(.offThePool) struct KeyedRateLimiterPlanChangePropertyTests {
  typealias Oracle = KeyedRateLimiterLimitChangePropertyTests

  /// Whether `limit`, a token bucket, replayed over `grants` (debt allowed, except that it owes
  /// at most its whole burst at `s`) lets one more permit through at `t`; and whether it owed more
  /// than its whole burst at `s`.
  static func bucketAllows(_ limit: RateLimit, _ grants: [Int64], at t: Int64, debtCappedAt s: Int64)
    -> (allows: Bool, owedMoreAtTheChange: Bool)
  {
    let interval = limit.interval.paceNanoseconds
    var divisor = Int64(limit.permits)
    var b = interval
    while b != 0 { (divisor, b) = (b, divisor % b) }
    let perPermit = interval / divisor
    let perNanosecond = Int64(limit.permits) / divisor
    let capacity = Int64(limit.burst) * perPermit
    var deficit: Int64 = 0
    var last = grants.first ?? t
    var capped = false
    var owedMore = false
    for grant in grants {
      if !capped, grant >= s {
        deficit = max(0, deficit - (s - last) * perNanosecond)
        owedMore = deficit > capacity
        deficit = min(deficit, capacity)
        (last, capped) = (s, true)
      }
      deficit = max(0, deficit - (grant - last) * perNanosecond) + perPermit
      last = grant
    }
    if !capped {
      deficit = max(0, deficit - (s - last) * perNanosecond)
      owedMore = deficit > capacity
      deficit = min(deficit, capacity)
      last = s
    }
    deficit = max(0, deficit - (t - last) * perNanosecond)
    return (capacity - deficit >= perPermit, owedMore)
  }

  @Test(arguments: [RateLimit.Algorithm.tokenBucket, .slidingWindow, .fixedWindow])
  func everyGrantAfterAPlanChangeIsOneTheOldOrTheNewLimitAllows(algorithm: RateLimit.Algorithm) throws {
    var owedMore = 0
    for seed: UInt64 in 0..<300 { owedMore += try Self.check(algorithm, seed: seed) }
    // The weaker oracle checks some histories, and not most.
    if algorithm == .tokenBucket { #expect(owedMore > 0 && owedMore < 1_200 / 2) }
  }

  static let pairsOfAlgorithms: [(RateLimit.Algorithm, RateLimit.Algorithm)] = [
    (.slidingWindow, .fixedWindow), (.fixedWindow, .slidingWindow), (.slidingWindow, .tokenBucket),
    (.tokenBucket, .slidingWindow), (.fixedWindow, .tokenBucket), (.tokenBucket, .fixedWindow),
  ]

  @Test(arguments: pairsOfAlgorithms)
  func everyGrantAfterAChangeOfAlgorithmIsOneTheOldOrTheNewLimitAllows(
    old: RateLimit.Algorithm, new: RateLimit.Algorithm
  ) throws {
    for seed: UInt64 in 0..<300 { _ = try Self.check(old, new, seed: seed) }
  }

  /// The change of policy, and changes to a limit that looks further back and allows
  /// more, each over many timelines.
  @Test(arguments: [
    (
      RateLimit.slidingWindow(permits: 3, per: .nanoseconds(10)),
      RateLimit.fixedWindow(permits: 3, per: .nanoseconds(10))
    ),
    (.slidingWindow(permits: 3, per: .nanoseconds(10)), .fixedWindow(permits: 10, per: .nanoseconds(60))),
    (.fixedWindow(permits: 3, per: .nanoseconds(10)), .slidingWindow(permits: 10, per: .nanoseconds(60))),
    (RateLimit(permits: 3, per: .nanoseconds(10), burst: 3), .slidingWindow(permits: 10, per: .nanoseconds(60))),
    (RateLimit(permits: 3, per: .nanoseconds(10), burst: 3), .fixedWindow(permits: 10, per: .nanoseconds(60))),
    (.slidingWindow(permits: 3, per: .nanoseconds(10)), RateLimit(permits: 1, per: .nanoseconds(10), burst: 10)),
    (.fixedWindow(permits: 3, per: .nanoseconds(10)), RateLimit(permits: 6, per: .nanoseconds(10), burst: 10)),
  ])
  func everyGrantAfterAChangeToALimitThatLooksFurtherBackIsOneTheOldOrTheNewLimitAllows(old: RateLimit, new: RateLimit)
    throws
  {
    for seed: UInt64 in 0..<100 { _ = try Self.check(old.algorithm, new.algorithm, seed: seed, limits: (old, new)) }
  }

  /// Runs one seeded timeline of four keys, from a random limit of `oldAlgorithm` (or
  /// `limits.old`) to one of `newAlgorithm` (or `limits.new`); returns how many of them the new
  /// limit would have put more than a whole burst in debt at the change.
  static func check(
    _ oldAlgorithm: RateLimit.Algorithm, _ newAlgorithm: RateLimit.Algorithm? = nil, seed: UInt64,
    limits: (old: RateLimit, new: RateLimit)? = nil
  ) throws -> Int {
    var random = SeededGenerator(seed: seed)
    let scheduler = TestScheduler()
    let randomOld = Oracle.randomLimit(oldAlgorithm, &random)
    let randomNew = Oracle.randomLimit(newAlgorithm ?? oldAlgorithm, &random)
    let (old, new) = limits ?? (randomOld, randomNew)
    let plans = RateLimitPlans<String>(default: old, limits: ["own busy": old, "own quiet": old])
    let limiter = KeyedRateLimiter(plans: plans, clock: scheduler)
    let change = Int64.random(in: 100...400, using: &random)
    let quietFrom = Int64.random(in: 0...change, using: &random)
    let backAt = change + Int64.random(in: 0...30, using: &random)
    let keys = ["default busy", "own busy", "default quiet", "own quiet"]
    var grants: [String: [Int64]] = [:]
    var changedAt: Int64?
    var owedMore: Set<String> = []
    var t: Int64 = 0
    while t < 1_000 {
      t += Int64.random(in: 0...6, using: &random)
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      if t >= change, changedAt == nil {
        try plans.setDefaultLimit(new)
        try plans.setLimit(new, for: "own busy")
        try plans.setLimit(new, for: "own quiet")
        changedAt = t
        if new.algorithm == .tokenBucket {
          owedMore = Set(
            keys.filter { Self.bucketAllows(new, grants[$0, default: []], at: t, debtCappedAt: t).owedMoreAtTheChange })
        }
      }
      for key in keys where !key.hasSuffix("quiet") || t < quietFrom || t >= backAt {
        let allowed = limiter.tryAcquire(key).isAllowed
        let history = grants[key, default: []]
        if let s = changedAt {
          if allowed {
            let newAllows =
              owedMore.contains(key)
              ? Self.bucketAllows(new, history, at: t, debtCappedAt: s).allows : Oracle.allows(new, history, at: t)
            #expect(
              Oracle.allows(old, history, at: t) || newAllows,
              "seed \(seed), \(key): granted at \(t) under \(new), after \(old) until \(s); grants \(history.suffix(20))"
            )
          }
          let exactFrom = s + old.interval.paceNanoseconds + new.interval.paceNanoseconds
          if t >= exactFrom, new.algorithm != .tokenBucket {
            #expect(
              allowed == Oracle.allows(new, history, at: t),
              "seed \(seed), \(key): at \(t) under \(new), after \(old) until \(s); grants \(history.suffix(20))")
          }
        }
        if allowed { grants[key, default: []].append(t) }
      }
    }
    return owedMore.count
  }

  /// Several changes within one look-back: a key's limit changes 2 to 6 times (random limits of
  /// any algorithm, the changes 0 to 60 ns apart, so that several fall within one limit's
  /// look-back), on four keys as above. The property: every permit granted at `t` is one that
  /// SOME limit in force for the key at or before `t` (its first, or one a change gave it) allows
  /// over the key's whole history (`RateLimitHistoryOracle.allows`), a token bucket judged with
  /// its debt capped at its whole burst at each change (the bound a change assumes: see
  /// `RateLimitPlans`); and once every interval of those limits and the current window have passed
  /// since the last change, a window decides exactly as its limit over the whole history.
  @Test(arguments: [2, 3, 4, 5, 6], 0..<200 as Range<UInt64>)
  func everyGrantAfterSeveralPlanChangesIsOneThatALimitInForceAllows(changes: Int, seed: UInt64) throws {
    var random = SeededGenerator(seed: seed)
    let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
    let limits = (0...changes).map { _ in Oracle.randomLimit(algorithms.randomElement(using: &random)!, &random) }
    var instants: [Int64] = [Int64.random(in: 100...300, using: &random)]
    for _ in 1..<changes { instants.append(instants[instants.count - 1] + Int64.random(in: 0...60, using: &random)) }
    let scheduler = TestScheduler()
    let plans = RateLimitPlans<String>(default: limits[0], limits: ["own busy": limits[0], "own quiet": limits[0]])
    let limiter = KeyedRateLimiter(plans: plans, clock: scheduler)
    let quietFrom = Int64.random(in: 0...instants[0], using: &random)
    let backAt = instants[changes - 1] + Int64.random(in: 0...30, using: &random)
    let keys = ["default busy", "own busy", "default quiet", "own quiet"]
    var grants: [String: [Int64]] = [:]
    var changedAt: [Int64] = []
    var t: Int64 = 0
    while t < 1_200 {
      t += Int64.random(in: 0...6, using: &random)
      scheduler.advance(to: PaceInstant(nanoseconds: t))
      while changedAt.count < changes, t >= instants[changedAt.count] {
        let limit = limits[changedAt.count + 1]
        try plans.setDefaultLimit(limit)
        try plans.setLimit(limit, for: "own busy")
        try plans.setLimit(limit, for: "own quiet")
        changedAt.append(t)
      }
      let inForce = limits[0...changedAt.count]
      for key in keys where !key.hasSuffix("quiet") || t < quietFrom || t >= backAt {
        let allowed = limiter.tryAcquire(key).isAllowed
        let history = grants[key, default: []]
        if allowed, !changedAt.isEmpty {
          let someLimitAllows = inForce.contains { limit in
            limit.algorithm == .tokenBucket
              ? RateLimitHistoryOracle.bucketAllows(limit, history, at: t, debtCappedAt: changedAt)
              : Oracle.allows(limit, history, at: t)
          }
          #expect(
            someLimitAllows,
            "seed \(seed), \(key): granted at \(t) under \(Array(inForce)) changed at \(changedAt); grants \(history.suffix(20))"
          )
        }
        let current = limits[changedAt.count]
        if changedAt.count == changes, current.algorithm != .tokenBucket {
          let exactFrom = changedAt[changes - 1] + limits.reduce(0) { $0 + $1.interval.paceNanoseconds }
          if t >= exactFrom {
            #expect(
              allowed == Oracle.allows(current, history, at: t),
              "seed \(seed), \(key): at \(t) under \(current) after \(limits) changed at \(changedAt)")
          }
        }
        if allowed { grants[key, default: []].append(t) }
      }
    }
  }
}
