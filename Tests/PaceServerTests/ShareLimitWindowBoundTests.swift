#if PostgreSQL && Hummingbird
import InMemoryLogging
import Logging
import Pace
import PacePostgres
import PostgresNIO
import Testing

/// The bound the article states for a window around an outage under `.shareLimit`: the database
/// never learns what the instances granted while it was away, so a window that spans the outage
/// gets the database's `N` and the shares' `n × max(1, ⌊N / n⌋)`, and no more.
@Suite("A window around an outage, on a real PostgreSQL server", .databaseTestTimeLimit)
struct ShareLimitWindowBoundTests {
  @Test func aWindowSpanningAnOutageGrantsTheLimitPlusTheSharesAndNoMore() async throws {
    let cluster = try await TestCluster.make()
    defer { cluster.destroy() }
    var configuration = TestDatabase.configuration(cluster.url, connections: 4)
    configuration.options.connectTimeout = .milliseconds(500)
    let clients = (0..<2).map { _ in
      PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    }
    let logs = InMemoryLogHandler()
    let table = TestDatabase.uniqueTable("window_bound")
    // A sliding window: no epoch boundary can fall inside the test.
    let limit = RateLimit.slidingWindow(permits: 10, per: .seconds(3600))
    try await TestDatabase.running(clients) {
      let stores = try clients.enumerated().map { index, client in
        try PostgresRateLimitStore(
          client: client, table: table, whenUnavailable: .shareLimit(among: .instances(2)),
          timeout: .milliseconds(500), logger: Logger(label: "store-\(index)", factory: { _ in logs }))
      }
      try await stores[0].migrate()
      /// How many `store` grants the key before its first denial.
      func granted(_ store: PostgresRateLimitStore) async throws -> Int {
        var granted = 0
        while try await store.tryAcquire("pro", cost: 1, limit: limit).isAllowed { granted += 1 }
        return granted
      }
      var before = 0
      for _ in 0..<4 where try await stores[0].tryAcquire("pro", cost: 1, limit: limit).isAllowed { before += 1 }
      #expect(before == 4, "the database grants before the outage")

      try await cluster.stop()
      let during = [try await granted(stores[0]), try await granted(stores[1])]
      #expect(during == [5, 5], "each instance's share of 10 among 2")

      try await cluster.start()
      let clock = ContinuousClock()
      let back = clock.now
      while clock.now - back < .seconds(20),
        !logs.entries.contains(where: { "\($0.message)".contains("circuit breaker closed") })
      {
        _ = try await stores[0].tryAcquire("probe", cost: 0, limit: limit)
        try await Task.sleep(for: .milliseconds(20))  // real-time: waiting for the restarted server
      }
      let after = try await granted(stores[0])
      #expect(after == 6, "the database, which never learned the outage's grants, grants the rest of its 10")
      // N + n × max(1, ⌊N / n⌋) in the window: about twice the limit, and no more.
      #expect(before + during.reduce(0, +) + after == 20)
    }
  }
}
#endif
