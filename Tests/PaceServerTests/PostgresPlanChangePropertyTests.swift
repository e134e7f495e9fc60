#if PostgreSQL && Hummingbird
import Foundation
import Pace
@testable import PacePostgres
import PaceTestSupport
import PostgresNIO
import Testing

/// `PostgresPlanChangeTests` on random timelines: random limits of every pair of algorithms, a
/// key busy at random instants with its limit changed once between two of its decisions; every
/// grant is one the old limit or the new one, applied to the key's whole history, allows. Fewer
/// seeds than in memory (`KeyedRateLimiterPlanChangePropertyTests`): each decision is a round trip.
///
/// Left out: a slower token bucket with a larger burst, which assumes the key owed at most its
/// whole new burst at the change (the bound the store shares with memory).
@Suite("PostgresRateLimitStore's plan changes on random timelines", .databaseTestTimeLimit)
struct PostgresPlanChangePropertyTests {
  static func randomLimit(
    _ algorithm: RateLimit.Algorithm, _ random: inout SeededGenerator, permits: ClosedRange<Int> = 1...5,
    // Divisors of an hour: fixed windows aligned to the Unix epoch start on the oracle's base too.
    intervals: [Int] = [1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20]
  ) -> RateLimit {
    let permits = Int.random(in: permits, using: &random)
    let interval = Duration.seconds(intervals.randomElement(using: &random)!)
    switch algorithm {
    case .tokenBucket:
      let burst = permits > 5 ? permits : Int.random(in: 2...5, using: &random)
      return RateLimit(permits: permits, per: interval, burst: burst)
    case .slidingWindow: return .slidingWindow(permits: permits, per: interval)
    case .fixedWindow: return .fixedWindow(permits: permits, per: interval)
    }
  }

  /// A slower token bucket with a larger burst than `old`, also a bucket.
  static func slowerBucketWithALargerBurst(_ old: RateLimit, _ new: RateLimit) -> Bool {
    guard old.algorithm == .tokenBucket, new.algorithm == .tokenBucket, new.burst > old.burst else { return false }
    return new.permits * Int(old.interval.paceNanoseconds / 1000) < old.permits
      * Int(new.interval.paceNanoseconds / 1000)
  }

  @Test(arguments: 0..<20)
  func everyGrantAfterAChangeIsOneTheOldOrTheNewLimitAllows(seed: UInt64) async throws {
    try await TestDatabase.withClients { clients in
      // Exact answers asked for: a timeout no loaded machine reaches, not the default second.
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), timeout: .seconds(30))
      try await store.migrate()
      let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
      var random = SeededGenerator(seed: seed)
      for from in algorithms {
        for to in algorithms {
          let old = Self.randomLimit(from, &random)
          let new = Self.randomLimit(to, &random)
          if Self.slowerBucketWithALargerBurst(old, new) { continue }
          let change = Double(Int.random(in: 200...600, using: &random)) / 10
          let timeline = PostgresPlanChangeTests.Timeline(
            store: store, key: "k-\(from)-\(to)", old: old, new: new, change: change)
          var tenths = 0
          while tenths < 1_200 {
            tenths += Int.random(in: 0...15, using: &random)
            try await timeline.request(at: Double(tenths) / 10)
          }
        }
      }
    }
  }

  /// How far back `limit` counts, in seconds: a window's length, a bucket's time from empty to
  /// full.
  static func lookBack(_ limit: RateLimit) -> Double {
    let interval = Double(limit.interval.components.seconds)
    return limit.algorithm == .tokenBucket ? interval * Double(limit.burst) / Double(limit.permits) : interval
  }

  /// Up to six changes of any algorithm to any on one key, further apart than any of its limits
  /// looks back. Every grant is one that some limit in force for the key at or before it allows
  /// over the key's whole history, a token bucket with its debt capped at its whole burst at each
  /// change.
  @Test(arguments: 0..<12)
  func everyGrantAfterUpToSixChangesIsOneThatALimitInForceAllows(seed: UInt64) async throws {
    try await Self.checkChanges(seed: seed, closeTogether: false)
  }

  /// The same with the changes close together, 0.1 s to the longest look-back apart: the row
  /// records only the limit it was written under, and when its limit changed, so a change after
  /// another within its look-back takes the new limit as used to its maximum at the earlier one.
  @Test(arguments: 0..<64)
  func everyGrantAfterSeveralChangesWithinOneLookBackIsOneThatALimitInForceAllows(seed: UInt64) async throws {
    try await Self.checkChanges(seed: seed, closeTogether: true)
  }

  static func checkChanges(seed: UInt64, closeTogether: Bool) async throws {
    try await TestDatabase.withClients { clients in
      // Exact answers asked for: a timeout no loaded machine reaches, not the default second.
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), timeout: .seconds(30))
      try await store.migrate()
      var random = SeededGenerator(seed: seed)
      let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
      let changes = Int.random(in: closeTogether ? 2...6 : 1...6, using: &random)
      var limits: [RateLimit] = []
      while limits.count <= changes {
        let algorithm = algorithms.randomElement(using: &random)!
        // Close together, long limits with many permits and short ones with one alternate: what a
        // long one let through, a short one after it no longer records, and the long one after
        // that counts (more than the short one's maximum over its look-back).
        let limit =
          !closeTogether
          ? Self.randomLimit(algorithm, &random)
          : limits.count.isMultiple(of: 2)
            ? Self.randomLimit(algorithm, &random, permits: 10...20, intervals: [15, 16, 18, 20])
            : Self.randomLimit(algorithm, &random, permits: 1...1, intervals: [4, 5])
        if Self.lookBack(limit) <= 20 { limits.append(limit) }
      }
      let longest = limits.map(Self.lookBack).max()!
      var instants: [Int64] = []
      var time = Double(Int.random(in: closeTogether ? 5...50 : 100...300, using: &random)) / 10
      for _ in 0..<changes {
        instants.append(TestDatabase.microseconds(time))
        time +=
          closeTogether
          ? Double(Int.random(in: 1...max(1, Int(longest * 10)), using: &random)) / 10
          : longest + 1 + Double(Int.random(in: 0...50, using: &random)) / 10
      }
      let end = TestDatabase.microseconds(time + (closeTogether ? longest + 10 : 0))
      var grants: [Int64] = []
      var t: Int64 = 0
      var bursts = 0
      while t < end {
        let step = Int64(Int.random(in: closeTogether ? 5...30 : 0...15, using: &random)) * 100_000
        if closeTogether, bursts == 0,
          let change = instants.first(where: { $0 > t && $0 <= t + step }) ?? (t == 0 ? 0 : nil)
        {
          // Close together, each limit is used in a burst as it comes into force, sparsely
          // after: a long limit's burst is more than a short one after it records, and more
          // than its maximum spread over the next limit's look-back.
          bursts = 30
          t = change
        }
        if bursts > 0 {
          bursts -= 1
          t += 10_000
        } else {
          t += step
        }
        let inForce = instants.filter { $0 <= t }
        let decision = try await store.tryAcquire(
          "k", cost: 1, limit: limits[inForce.count], databaseNow: TestDatabase.chosenInstant + t)
        guard decision.isAllowed else { continue }
        if !inForce.isEmpty {
          let allowed = limits[0...inForce.count].contains { limit in
            limit.algorithm == .tokenBucket
              ? RateLimitHistoryOracle.bucketAllows(limit, grants, at: t, debtCappedAt: inForce, unit: .microseconds(1))
              : PostgresPlanChangeTests.allows(limit, grants, at: t)
          }
          #expect(
            allowed,
            "seed \(seed): granted at \(Double(t) / 1e6) s under \(limits) changed at \(instants.map { Double($0) / 1e6 }); grants \(grants.suffix(20).map { Double($0) / 1e6 })"
          )
        }
        grants.append(t)
      }
    }
  }
}
#endif
