#if PostgreSQL && Hummingbird
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Pace
import PaceHummingbird
import PacePostgres
import PostgresNIO
import Testing

@Suite("RateLimitMiddleware, over real HTTP on loopback", .timeLimit(.minutes(2)))
struct RateLimitMiddlewareTests {
  static let apiKey = HTTPField.Name("X-API-Key")!

  func application(_ limiter: KeyedRateLimiter<String>) -> some ApplicationProtocol {
    let router = Router()
    router.add(middleware: RateLimitMiddleware(limiter: limiter) { request, _ in request.headers[Self.apiKey] })
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

  /// The convenience initializer limits in memory with a limiter of its own.
  @Test func aLimitAloneMeansAnInMemoryLimiter() async throws {
    let middleware = RateLimitMiddleware<BasicRequestContext>(limit: RateLimit(permits: 5, per: .seconds(1), burst: 2)) {
      _, _ in "k"
    }
    #expect(middleware.limit == RateLimit(permits: 5, per: .seconds(1), burst: 2))
    #expect(try await middleware.limiter.decide("k") == .allowed(remaining: 1))
  }

  /// Two instances, each its own server and pool, share one key's limit through PostgreSQL.
  @Test func twoInstancesShareTheLimitThroughPostgreSQL() async throws {
    try await TestDatabase.withClients(2, connections: 2) { clients in
      let table = TestDatabase.uniqueTable("rl")
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table) }
      try await stores[0].migrate()
      let limiters = stores.map { KeyedRateLimiter(permits: 3, per: .seconds(3600), store: $0) }
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
}
#endif
