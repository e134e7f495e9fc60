#if Vapor
import PaceHTTPServer
import Vapor

extension ClientAddress {
  /// The client's IP address, or nil if the connection has none (a Unix socket, an in-memory test).
  public func address(of request: Request) -> String? {
    address(peer: request.remoteAddress) { request.headers[forwardingHeaderName] }
  }

  /// The key ``RateLimitMiddleware`` counts a request against: `ip:` and the client's address
  /// (`ip:192.0.2.1`), or its network when the prefix is shorter (`ip:2001:db8:1:2::/64`);
  /// `ip:unknown` (one bucket shared by every such request) when the connection has none.
  ///
  /// ```swift
  /// // Behind load balancers in 10.0.0.0/8 that append the client's address to X-Forwarded-For:
  /// let address = ClientAddress(trustedProxies: ["10.0.0.0/8", "fd00::/8"])
  /// app.grouped(RateLimitMiddleware(limit: limit, key: address.key))
  /// ```
  public func key(_ request: Request) -> String? {
    key(peer: request.remoteAddress) { request.headers[forwardingHeaderName] }
  }
}
#endif
