#if Vapor
import NIOCore
import Vapor

/// Where a request's client address comes from: the connection's peer, or a trusted proxy's
/// `X-Forwarded-For`; the default key of ``RateLimitMiddleware``.
///
/// Vapor's `Request.peerAddress` believes `Forwarded` and `X-Forwarded-For` from any client, so a
/// client that sends a new address with each request gets a new bucket with each. This reads the
/// headers only when the connection comes from a proxy you named:
///
/// ```swift
/// // Behind a load balancer at 10.0.0.2 that appends the client's address to X-Forwarded-For:
/// let address = ClientAddress.forwarded(byTrustedProxies: ["10.0.0.2"])
/// app.grouped(RateLimitMiddleware(limit: limit, key: address.key))
/// ```
public struct ClientAddress: Sendable, Hashable {
  /// The proxies whose `X-Forwarded-For` is believed, as IP addresses in canonical form.
  public let trustedProxies: Set<String>

  /// The connection's peer address; every forwarding header is ignored.
  public static let peer = ClientAddress(trustedProxies: [])

  /// The client as a trusted proxy reports it: for a connection from one of `trustedProxies`, the
  /// last address of `X-Forwarded-For` that is not itself a trusted proxy; for any other
  /// connection, its peer address.
  ///
  /// - Parameter trustedProxies: IP addresses (IPv4 or IPv6; no ranges). An address that does
  ///   not parse is left out.
  public static func forwarded(byTrustedProxies trustedProxies: [String]) -> ClientAddress {
    ClientAddress(trustedProxies: Set(trustedProxies.compactMap(canonical)))
  }

  private init(trustedProxies: Set<String>) {
    self.trustedProxies = trustedProxies
  }

  /// The client's IP address, or nil if the connection has none (a Unix socket, an in-memory test).
  public func address(of request: Request) -> String? {
    guard let peer = request.remoteAddress?.ipAddress.flatMap(Self.canonical) else { return nil }
    guard trustedProxies.contains(peer) else { return peer }
    // Each proxy appends the address it saw: read from the right, past the trusted ones. An entry
    // that is no address means a proxy misbehaved; the proxy itself is the key then.
    let hops = request.headers[.xForwardedFor]
      .flatMap { $0.split(separator: ",") }
      .map { $0.trimmingCharacters(in: .whitespaces) }
    for hop in hops.reversed() {
      guard let address = Self.canonical(hop) else { return peer }
      if !trustedProxies.contains(address) { return address }
    }
    return hops.first.flatMap(Self.canonical) ?? peer
  }

  /// The key ``RateLimitMiddleware`` counts a request against: `ip:` and the client's address, or
  /// `ip:unknown` (one bucket shared by every such request) when the connection has none.
  public func key(_ request: Request) -> String? {
    "ip:\(address(of: request) ?? "unknown")"
  }

  /// `address` as the system prints it (`::1` for `0:0:0:0:0:0:0:1`), or nil if it is no IP address.
  static func canonical(_ address: String) -> String? {
    (try? SocketAddress(ipAddress: address, port: 0))?.ipAddress
  }
}
#endif
