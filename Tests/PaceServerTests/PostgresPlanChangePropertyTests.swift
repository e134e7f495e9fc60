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
@Suite("PostgresRateLimitStore's plan changes on random timelines", .timeLimit(.minutes(5)))
struct PostgresPlanChangePropertyTests {
  static func randomLimit(_ algorithm: RateLimit.Algorithm, _ random: inout SeededGenerator) -> RateLimit {
    let permits = Int.random(in: 1...5, using: &random)
    // Divisors of an hour: fixed windows aligned to the Unix epoch start on the oracle's base too.
    let interval = Duration.seconds([1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20].randomElement(using: &random)!)
    switch algorithm {
    case .tokenBucket: return RateLimit(permits: permits, per: interval, burst: Int.random(in: 2...5, using: &random))
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
  /// looks back (the store sees only the limit its row was last written under, so several
  /// changes within one look-back are its bound: see the article). Every grant is one that some
  /// limit in force for the key at or before it allows over the key's whole history, a token
  /// bucket with its debt capped at its whole burst at each change.
  @Test(arguments: 0..<12)
  func everyGrantAfterUpToSixChangesIsOneThatALimitInForceAllows(seed: UInt64) async throws {
    try await TestDatabase.withClients { clients in
      // Exact answers asked for: a timeout no loaded machine reaches, not the default second.
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), timeout: .seconds(30))
      try await store.migrate()
      var random = SeededGenerator(seed: seed)
      let algorithms: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]
      let changes = Int.random(in: 1...6, using: &random)
      var limits: [RateLimit] = []
      while limits.count <= changes {
        let limit = Self.randomLimit(algorithms.randomElement(using: &random)!, &random)
        if Self.lookBack(limit) <= 20 { limits.append(limit) }
      }
      let apart = limits.map(Self.lookBack).max()! + 1
      var instants: [Int64] = []
      var time = Double(Int.random(in: 100...300, using: &random)) / 10
      for _ in 0..<changes {
        instants.append(PostgresPlanChangeTests.seconds(time))
        time += apart + Double(Int.random(in: 0...50, using: &random)) / 10
      }
      let end = PostgresPlanChangeTests.seconds(time)
      var grants: [Int64] = []
      var t: Int64 = 0
      while t < end {
        t += Int64(Int.random(in: 0...15, using: &random)) * 100_000
        let inForce = instants.filter { $0 <= t }
        let decision = try await store.tryAcquire(
          "k", cost: 1, limit: limits[inForce.count], databaseNow: PostgresPlanChangeTests.base + t)
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
