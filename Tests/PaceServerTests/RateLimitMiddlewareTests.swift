#if PostgreSQL && Hummingbird
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Pace
import PaceHummingbird
import PacePostgres
import PostgresNIO
import Testing

@Suite("RateLimitMiddleware, over real HTTP on loopback")
struct RateLimitMiddlewareTests {
  static let apiKey = HTTPField.Name("X-API-Key")!

  func application(limit: RateLimit, store: some RateLimitStore<String>) -> some ApplicationProtocol {
    let router = Router()
    router.add(middleware: RateLimitMiddleware(limit: limit, store: store) { request, _ in request.headers[Self.apiKey] })
    router.get("/") { _, _ in "ok" }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
  }

  @Test func answers429WithRetryAfterAndTheIETFFieldsInMemory() async throws {
    let limit = RateLimit(permits: 2, per: .seconds(60))
    try await application(limit: limit, store: InMemoryRateLimitStore<String>()).test(.live) { client in
      let first = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(first.status == .ok)
      #expect(first.headers[HTTPField.Name("RateLimit-Policy")!] == "\"default\";q=2;w=60")
      #expect(first.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=1;t=30")
      let second = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(second.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=0;t=60")
      let third = try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "a"])
      #expect(third.status == .tooManyRequests)
      let retryAfter = try #require(third.headers[.retryAfter].flatMap(Int.init))
      // 30 s after the first request, less the time since (seconds on a busy machine).
      #expect((1...30).contains(retryAfter))
      #expect(third.headers[HTTPField.Name("RateLimit")!] == "\"default\";r=0;t=\(retryAfter)")
      #expect(String(buffer: third.body).hasPrefix("Too many requests"))
      // Another key has its own permits; a request without a key is not limited.
      #expect(try await client.execute(uri: "/", method: .get, headers: [Self.apiKey: "b"]).status == .ok)
      let unkeyed = try await client.execute(uri: "/", method: .get)
      #expect(unkeyed.status == .ok && unkeyed.headers[HTTPField.Name("RateLimit")!] == nil)
    }
  }

  /// Two instances, each its own server and pool, share one key's limit through PostgreSQL.
  @Test func twoInstancesShareTheLimitThroughPostgreSQL() async throws {
    try await TestDatabase.withClients(2, connections: 2) { clients in
      let table = TestDatabase.uniqueTable("rl")
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table) }
      try await stores[0].migrate()
      let limit = RateLimit(permits: 3, per: .seconds(3600))
      try await application(limit: limit, store: stores[0]).test(.live) { one in
        try await application(limit: limit, store: stores[1]).test(.live) { two in
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
