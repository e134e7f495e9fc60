#if PostgreSQL && Hummingbird
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import Logging
import MetricsTestKit
import Pace
import PaceHTTPServer
import PaceHummingbird
import PacePostgres
import PostgresNIO
import Testing

@Suite("RateLimitMiddleware, over real HTTP on loopback", .databaseTestTimeLimit)
struct RateLimitMiddlewareTests {
  static let apiKey = HTTPField.Name("X-API-Key")!

  func application(_ limiter: KeyedRateLimiter<String>) -> some ApplicationProtocol {
    application(RateLimitMiddleware(limiter: limiter) { request, _ in request.headers[Self.apiKey] })
  }

  func application(_ limiter: StoreBackedRateLimiter<String>) -> some ApplicationProtocol {
    application(RateLimitMiddleware(limiter: limiter) { request, _ in request.headers[Self.apiKey] })
  }

  func application(_ middleware: RateLimitMiddleware<BasicRequestContext>) -> some ApplicationProtocol {
    let router = Router()
    router.add(middleware: middleware)
    router.get("/") { _, _ in "ok" }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
  }

  @Test func answers429WithRetryAfterAndTheIETFFieldsInMemory() async throws {
    // On virtual time: the limiter's clock stands still, so Retry-After is exact.
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<String>(permits: 2, per: .seconds(60), clock: scheduler)
    try await application(limiter).test(.live) { client in
      let first = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(first.status == .ok)
      #expect(first.headers[HTTPField.Name("RateLimit-Policy")!] == "\"default\";q=2;w=60")
      #expect(first.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=1;t=30")
      let second = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(second.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=0;t=60")
      let third = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(third.status == .tooManyRequests)
      // The first permit comes back 30 s after it was taken.
      #expect(third.headers[.retryAfter] == "30")
      #expect(third.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=0;t=30")
      scheduler.advance(by: .seconds(30))
      #expect(try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"]).status == .ok)
      #expect(String(buffer: third.body).hasPrefix("Too many requests"))
      // Another key has its own permits; a request without a key is not limited.
      #expect(try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "b"]).status == .ok)
      let unkeyed = try await client.execute(uri: "/", method: .get)
      #expect(unkeyed.status == .ok && unkeyed.headers[HTTPField.Name("RateLimit")!] == nil)
    }
  }

  /// A fixed window's `t` is when the key's window ends, for an allowed request as for a limited
  /// one: virtual time, windows of 10 s from the scheduler's origin.
  @Test func aFixedWindowsFieldsSayWhenTheWindowEnds() async throws {
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<String>(limit: .fixedWindow(permits: 2, per: .seconds(10)), clock: scheduler)
    scheduler.advance(by: .milliseconds(3_500))
    try await application(limiter).test(.live) { client in
      let first = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(first.headers[HTTPField.Name("RateLimit-Policy")!] == "\"default\";q=2;w=10")
      #expect(first.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=1;t=7")
      scheduler.advance(by: .seconds(4))
      let second = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(second.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=0;t=3")
      let third = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(third.status == .tooManyRequests)
      #expect(third.headers[.retryAfter] == "3")
      scheduler.advance(by: .milliseconds(2_500))
      let next = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(next.status == .ok)
      #expect(next.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=1;t=10")
    }
  }

  /// The convenience initializer limits in memory with a limiter of its own.
  @Test func aLimitAloneMeansAnInMemoryLimiter() async throws {
    let middleware = RateLimitMiddleware<BasicRequestContext>(limit: RateLimit(permits: 5, per: .seconds(1), burst: 2))
    {
      _, _ in "k"
    }
    #expect(middleware.policyName == "default" && middleware.policies.count == 1)
    guard case .inMemory(let limiter) = middleware.policies[0].decider else {
      Issue.record("a limit alone is decided in memory")
      return
    }
    #expect(limiter.limit(for: "k") == RateLimit(permits: 5, per: .seconds(1), burst: 2))
    #expect(try await limiter.decide("k") == .allowed(remaining: 1))
  }

  /// Two instances, each its own server and pool, share one key's limit through PostgreSQL.
  @Test func twoInstancesShareTheLimitThroughPostgreSQL() async throws {
    try await TestDatabase.withClients(2, connections: 2) { clients in
      let table = TestDatabase.uniqueTable("rl")
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table, timeout: .seconds(30)) }
      try await stores[0].migrate()
      let limiters = stores.map { StoreBackedRateLimiter(permits: 3, per: .seconds(3600), store: $0) }
      try await application(limiters[0]).test(.live) { one in
        try await application(limiters[1]).test(.live) { two in
          var statuses: [HTTPResponse.Status] = []
          for request in 0..<6 {
            let client: any TestClientProtocol = request.isMultiple(of: 2) ? one : two
            statuses.append(try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "shared"]).status)
          }
          #expect(statuses == [.ok, .ok, .ok, .tooManyRequests, .tooManyRequests, .tooManyRequests])
        }
      }
    }
  }

  static let cost = HTTPField.Name("X-Cost")!

  /// A server whose cost and key come from the request, as in issue 19's reports.
  func hostileApplication(
    _ limiter: PolicyLimiter, logs: InMemoryLogHandler, metrics: TestMetrics
  ) -> some ApplicationProtocol {
    let policy = RateLimitPolicy<BasicRequestContext>(
      name: "default", decider: limiter, key: { input in input.0.headers[Self.apiKey].map { "key:\($0)" } },
      cost: { input in input.0.headers[Self.cost].flatMap { Int($0) } ?? 1 })
    return application(
      RateLimitMiddleware(
        policies: [policy], longKeys: .refuse, logger: Logger(label: "test", factory: { _ in logs }),
        metricsFactory: metrics))
  }

  /// Hostile requests get a 400 with the reason, never a crash or an empty 500, in memory and
  /// through PostgreSQL alike (long keys refused, as `LongKeyHandling.refuse` says); a limiter that
  /// cannot decide gets a 503.
  @Test func hostileRequestsGet400InMemoryAndThroughPostgreSQL() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("rl"), timeout: .seconds(30))
      try await store.migrate()
      let limiters: [PolicyLimiter] = [
        .inMemory(KeyedRateLimiter(permits: 3, per: .seconds(3600))),
        .storeBacked(StoreBackedRateLimiter(permits: 3, per: .seconds(3600), store: store)),
      ]
      for limiter in limiters {
        let logs = InMemoryLogHandler()
        let metrics = TestMetrics()
        try await hostileApplication(limiter, logs: logs, metrics: metrics).test(.live) { client in
          let negative = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a", Self.cost: "-5"])
          #expect(negative.status == .badRequest)
          #expect(String(buffer: negative.body) == "Bad request: the cost -5 is negative\n")
          let tooMuch = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a", Self.cost: "4"])
          #expect(String(buffer: tooMuch.body) == "Bad request: the cost 4 is above the burst 3\n")
          let long = String(repeating: "x", count: 1021)  // 1,025 bytes with its "key:" prefix
          let longKey = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: long])
          #expect(longKey.status == .badRequest)
          #expect(String(buffer: longKey.body) == "Bad request: the key is 1025 bytes long; at most 1024\n")
          // None of them took a permit.
          let fine = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
          #expect(fine.headers[HTTPField.Name("RateLimit")!]?.hasPrefix("\"default\";r=2;") == true)
          let query = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a", Self.cost: "0"])
          #expect(
            query.status == .ok && query.headers[HTTPField.Name("RateLimit")!]?.hasPrefix("\"default\";r=2;") == true)
        }
        let invalid = try metrics.expectCounter(
          "pace_http_rate_limit_responses_total", [("policy", "default"), ("outcome", "invalid")])
        #expect(invalid.totalValue == 3)
        // One line for the burst of invalid requests, not one each.
        #expect(logs.entries.filter { $0.message.description.contains("invalid request") }.count == 1)
      }
    }
  }

  @Test func aLimiterThatCannotDecideGets503() async throws {
    let port = try TestDatabase.closedPort()
    try await TestDatabase.withClients(port: port) { clients in
      let store = try PostgresRateLimitStore(client: clients[0], timeout: .milliseconds(200))
      let limiter = PolicyLimiter.storeBacked(StoreBackedRateLimiter(permits: 3, per: .seconds(3600), store: store))
      let logs = InMemoryLogHandler()
      let metrics = TestMetrics()
      try await hostileApplication(limiter, logs: logs, metrics: metrics).test(.live) { client in
        let response = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers[.retryAfter] == "1")
        #expect(String(buffer: response.body).hasPrefix("Service unavailable"))
      }
      #expect(logs.entries.contains { $0.level == .error && $0.message.description.contains("could not decide") })
      let unavailable = try metrics.expectCounter(
        "pace_http_rate_limit_responses_total", [("policy", "default"), ("outcome", "unavailable")])
      #expect(unavailable.totalValue == 1)
    }
  }
}
#endif
