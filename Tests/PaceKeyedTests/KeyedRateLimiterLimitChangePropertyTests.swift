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
