#if PostgreSQL && Hummingbird
import MetricsTestKit
import Pace
import PacePostgres
import PostgresNIO
import Testing

/// `pace_rate_limit_decisions_total` counts requests: a cost of 0 (a question, which stacked
/// policies ask before they charge) is counted as `question`, never as `allowed` or `denied`.
@Suite("The store's decision counters count requests, not questions", .databaseTestTimeLimit)
struct StoreDecisionCountersTests {
  @Test func aQuestionIsCountedApart() async throws {
    try await TestDatabase.withClients { clients in
      let metrics = TestMetrics()
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), timeout: .seconds(30), metricsFactory: metrics)
      try await store.migrate()
      let limit = RateLimit(permits: 1, per: .seconds(3600))
      // Asked, then taken; asked, then refused (by the database, then by this instance's memory
      // of the denial).
      #expect(try await store.tryAcquire("k", cost: 0, limit: limit) == .allowed(remaining: 1))
      #expect(try await store.tryAcquire("k", cost: 1, limit: limit) == .allowed(remaining: 0))
      #expect(try await store.tryAcquire("k", cost: 0, limit: limit).isAllowed == false)
      #expect(try await store.tryAcquire("k", cost: 1, limit: limit).isAllowed == false)
      #expect(try await store.tryAcquire("k", cost: 0, limit: limit).isAllowed == false)
      func count(_ outcome: String) throws -> Int64 {
        try metrics.expectCounter("pace_rate_limit_decisions_total", [("table", store.table), ("outcome", outcome)])
          .totalValue
      }
      #expect(try count("allowed") == 1)
      #expect(try count("denied") == 1)
      #expect(try count("question") == 3)
    }
  }
}
#endif
