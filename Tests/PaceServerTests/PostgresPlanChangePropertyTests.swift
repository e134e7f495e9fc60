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
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
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
}
#endif
