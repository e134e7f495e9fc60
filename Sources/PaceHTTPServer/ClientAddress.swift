#if Hummingbird || Vapor
import NIOCore

/// A request's client, as a rate-limit key: the connection's peer, or what a trusted proxy
/// forwards; each IPv6 client keyed by its /64. The default key of every policy.
///
/// A framework's own notion of the client often believes `Forwarded` and `X-Forwarded-For` from
/// any client (Vapor's `Request.peerAddress` does), so a client that sends a new address with each
/// request would get a new bucket with each. This reads the forwarding header only for a
/// connection from a proxy you named, by address or range:
///
/// ```swift
/// // Behind load balancers in 10.0.0.0/8 that append the client's address to X-Forwarded-For:
/// let address = ClientAddress(trustedProxies: ["10.0.0.0/8", "fd00::/8"])
/// // Vapor:
/// app.grouped(RateLimitMiddleware(limit: limit, key: address.key))
/// ```
///
/// The header is read from the right, past the trusted ranges: the first address that is not a
/// proxy's is the client. An entry that is no address means a proxy misbehaved; the peer is the
/// key then.
///
/// A client holds many addresses at once: an IPv6 customer is given a /64 (2^64 addresses), so
/// IPv6 addresses are keyed by their first ``ipv6PrefixLength`` bits (64 by default), IPv4 by
/// their first ``ipv4PrefixLength`` (32, the whole address). An IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`) is its IPv4 address.
///
/// PaceHummingbird and PaceVapor read a request with it: `key(_:_:)` and `address(of:context:)`
/// (the context must know the peer, `RemoteAddressRequestContext`), `key(_:)` and `address(of:)`.
public struct ClientAddress: Sendable, Hashable {
  private let rule: ClientAddressRule

  /// The connection's peer address; every forwarding header is ignored.
  public static let peer = ClientAddress()

  /// The ranges whose forwarding header is believed, as CIDR text: `10.0.0.0/8`, or an address
  /// alone for a range of one.
  public var trustedProxies: [String] { rule.trustedProxies.map(\.description) }
  /// How many leading bits of an IPv4 address name a client.
  public var ipv4PrefixLength: Int { rule.ipv4PrefixLength }
  /// How many leading bits of an IPv6 address name a client.
  public var ipv6PrefixLength: Int { rule.ipv6PrefixLength }

  /// A client address read through the proxies in `trustedProxies`.
  ///
  /// - Parameters:
  ///   - trustedProxies: CIDR ranges (`10.0.0.0/8`, `2001:db8::/32`) or single addresses, IPv4 or
  ///     IPv6; an entry that does not parse is left out.
  ///   - header: The header the proxies write: `X-Forwarded-For` by default, or `Forwarded`.
  ///     Only that one is read: a client could write the other.
  ///   - ipv4PrefixLength: The leading bits of an IPv4 address that name a client, 0...32; 32 by
  ///     default.
  ///   - ipv6PrefixLength: The leading bits of an IPv6 address that name a client, 0...128; 64 by
  ///     default.
  public init(
    trustedProxies: [String] = [], header: ForwardingHeader = .xForwardedFor, ipv4PrefixLength: Int = 32,
    ipv6PrefixLength: Int = 64
  ) {
    rule = ClientAddressRule(
      trustedProxies: trustedProxies.compactMap { IPAddressRange($0) }, header: header.header,
      ipv4PrefixLength: ipv4PrefixLength, ipv6PrefixLength: ipv6PrefixLength)
  }

  /// The client as a trusted proxy reports it, through `X-Forwarded-For`.
  ///
  /// - Parameter trustedProxies: IP addresses or CIDR ranges, IPv4 or IPv6. An entry that does
  ///   not parse is left out.
  public static func forwarded(byTrustedProxies trustedProxies: [String]) -> ClientAddress {
    ClientAddress(trustedProxies: trustedProxies)
  }

  /// The forwarding header trusted proxies write.
  public enum ForwardingHeader: Sendable, Hashable {
    /// `X-Forwarded-For: client, proxy1`.
    case xForwardedFor
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239).
    case forwarded

    var header: PaceHTTPServer.ForwardingHeader {
      switch self {
      case .xForwardedFor: .xForwardedFor
      case .forwarded: .forwarded
      }
    }
  }

  // MARK: For the frameworks' translations

  /// The name of the forwarding header trusted proxies write.
  package var forwardingHeaderName: String { rule.header.name }

  /// The client's IP address as text, for a connection from `peer` whose request has the
  /// forwarding header's field lines `forwarded()` (read only for a trusted peer); nil for a
  /// connection without an address (a Unix socket, an in-memory test).
  package func address(peer: SocketAddress?, forwarded: () -> [String]) -> String? {
    clientAddress(peer: peer, forwarded: forwarded)?.description
  }

  /// The key a request counts against: `ip:` and the client's address (`ip:192.0.2.1`), or its
  /// network when the prefix is shorter (`ip:2001:db8:1:2::/64`); `ip:unknown` (one bucket shared
  /// by every such request) when the connection has no address.
  package func key(peer: SocketAddress?, forwarded: () -> [String]) -> String? {
    if let peer, case .v4 = peer, let text = peer.ipAddress, let key = rule.peerKey(ipv4Text: text) {
      return key
    }
    return rule.key(for: clientAddress(peer: peer, forwarded: forwarded))
  }

  /// The client's IP address, for a connection from `peer` whose request has the forwarding
  /// header's field lines `forwarded()`; nil for a connection without an address.
  package func ipAddress(peer: SocketAddress?, forwarded: () -> [String]) -> IPAddress? {
    clientAddress(peer: peer, forwarded: forwarded)
  }

  private func clientAddress(peer: SocketAddress?, forwarded: () -> [String]) -> IPAddress? {
    rule.clientAddress(
      peer: peer?.ipAddress.flatMap { IPAddress($0) }, values: rule.trustedProxies.isEmpty ? [] : forwarded())
  }
}
#endif
