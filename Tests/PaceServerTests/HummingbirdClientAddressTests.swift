#if PostgreSQL && Hummingbird && Vapor
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Pace
import PaceHummingbird
import Testing

/// A request context that knows the peer, as `ClientAddress` needs.
struct AddressContext: RequestContext, RemoteAddressRequestContext {
  var coreContext: CoreRequestContextStorage
  let remoteAddress: SocketAddress?

  init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    remoteAddress = source.channel.remoteAddress
  }
}

@Suite("PaceHummingbird's ClientAddress, over real HTTP on loopback", .timeLimit(.minutes(2)))
struct HummingbirdClientAddressTests {
  func application(_ address: ClientAddress, permits: Int) -> some ApplicationProtocol {
    let router = Router(context: AddressContext.self)
    router.add(
      middleware: RateLimitMiddleware(limit: RateLimit(permits: permits, per: .seconds(3600)), key: address.key))
    router.get("/") { _, _ in "ok" }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
  }

  /// A middleware given no key counts the peer's address, for a context that knows it.
  @Test func withoutAKeyThePeerIsTheKey() async throws {
    let router = Router(context: AddressContext.self)
    router.add(middleware: RateLimitMiddleware(limit: RateLimit(permits: 1, per: .seconds(3600))))
    router.get("/") { _, _ in "ok" }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    try await app.test(.live) { client in
      let forwarded = HTTPField.Name("X-Forwarded-For")!
      let first = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.1"])
      let second = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.2"])
      #expect(first.status == .ok && second.status == .tooManyRequests)
    }
  }

  /// `forwarded(byTrustedProxies:)`, as on Vapor: through a trusted peer, each forwarded client
  /// has its own key.
  @Test func forwardedByTrustedProxiesReadsTheHeader() async throws {
    try await application(.forwarded(byTrustedProxies: ["127.0.0.1"]), permits: 1).test(.live) { client in
      let forwarded = HTTPField.Name("X-Forwarded-For")!
      let first = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.1"])
      let second = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.2"])
      let again = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.1"])
      #expect(first.status == .ok && second.status == .ok && again.status == .tooManyRequests)
    }
  }

  /// Without trusted proxies the peer is the client, whatever it forwards.
  @Test func thePeerIsTheClientByDefault() async throws {
    try await application(.peer, permits: 1).test(.live) { client in
      let forwarded = HTTPField.Name("X-Forwarded-For")!
      let first = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.1"])
      let second = try await client.execute(uri: "/", method: .get, headers: [forwarded: "198.51.100.2"])
      #expect(first.status == .ok && second.status == .tooManyRequests)
    }
  }

  /// Through a trusted range, 100 addresses of one /64 are one client; another /64 is another.
  @Test func addressesOfOneSlash64AreOneClient() async throws {
    let address = ClientAddress(trustedProxies: ["127.0.0.0/8"])
    try await application(address, permits: 3).test(.live) { client in
      let forwarded = HTTPField.Name("X-Forwarded-For")!
      var allowed = 0
      for host in 1...100 {
        let response = try await client.execute(
          uri: "/", method: .get, headers: [forwarded: "2001:db8:aa:bb:\(String(host, radix: 16))::1"])
        if response.status == .ok { allowed += 1 }
      }
      #expect(allowed == 3)
      let other = try await client.execute(uri: "/", method: .get, headers: [forwarded: "[2001:db8:aa:bc::1]:5000"])
      #expect(other.status == .ok)
    }
  }
}
#endif
