#if Hummingbird
import HTTPTypes
import Hummingbird
import PaceHTTPServer

extension ClientAddress {
  /// The client's IP address, or nil if the connection has none (a Unix socket, a test).
  ///
  /// The context must know the peer (`RemoteAddressRequestContext`):
  ///
  /// ```swift
  /// // Behind load balancers in 10.0.0.0/8 that append the client's address to X-Forwarded-For:
  /// let client = ClientAddress(trustedProxies: ["10.0.0.0/8", "fd00::/8"])
  /// let router = Router(context: AppContext.self)
  /// router.add(middleware: RateLimitMiddleware(limit: RateLimit(permits: 100, per: .seconds(60)), key: client.key))
  /// ```
  public func address(of request: Request, context: some RemoteAddressRequestContext) -> String? {
    address(peer: context.remoteAddress) { forwarded(request) }
  }

  /// The key a request counts against: `ip:` and the client's address (`ip:192.0.2.1`), or its
  /// network when the prefix is shorter (`ip:2001:db8:1:2::/64`); `ip:unknown` (one bucket
  /// shared by every such request) when the connection has no address.
  public func key<C: RemoteAddressRequestContext>(_ request: Request, _ context: C) -> String? {
    key(peer: context.remoteAddress) { forwarded(request) }
  }

  /// The field lines of the forwarding header trusted proxies write.
  private func forwarded(_ request: Request) -> [String] {
    request.headers[values: HTTPField.Name(forwardingHeaderName)!]
  }
}
#endif
