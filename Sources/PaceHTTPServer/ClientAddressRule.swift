/// Which forwarding header a trusted proxy writes.
package enum ForwardingHeader: Sendable, Hashable {
  /// `X-Forwarded-For: client, proxy1, proxy2`.
  case xForwardedFor
  /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239): each element's `for`.
  case forwarded

  /// The field's name.
  package var name: String {
    switch self {
    case .xForwardedFor: "X-Forwarded-For"
    case .forwarded: "Forwarded"
    }
  }
}

/// How a request's client address becomes a rate-limit key, in no framework's types: which
/// proxies are believed, which header they write, and how many leading bits of an address name a
/// client.
package struct ClientAddressRule: Sendable, Hashable {
  /// The proxies whose forwarding header is believed.
  package let trustedProxies: [IPAddressRange]
  /// The header they write.
  package let header: ForwardingHeader
  /// The leading bits of an IPv4 address that name a client: 32 by default.
  package let ipv4PrefixLength: Int
  /// The leading bits of an IPv6 address that name a client: 64 by default, one customer's
  /// allocation, so the 2^64 addresses of a /64 are one client.
  package let ipv6PrefixLength: Int

  /// The most entries of a forwarding header read, from the right: a chain of proxies is short,
  /// and a header of millions of entries costs no more than this.
  package static let maximumHops = 64

  package init(
    trustedProxies: [IPAddressRange], header: ForwardingHeader, ipv4PrefixLength: Int, ipv6PrefixLength: Int
  ) {
    precondition((0...32).contains(ipv4PrefixLength), "ClientAddress: an IPv4 prefix length is 0...32")
    precondition((0...128).contains(ipv6PrefixLength), "ClientAddress: an IPv6 prefix length is 0...128")
    self.trustedProxies = trustedProxies
    self.header = header
    self.ipv4PrefixLength = ipv4PrefixLength
    self.ipv6PrefixLength = ipv6PrefixLength
  }

  /// Whether `address` is a trusted proxy's.
  package func isTrusted(_ address: IPAddress) -> Bool {
    trustedProxies.contains { $0.contains(address) }
  }

  /// The client's address: for a connection from a trusted proxy, the last address of the
  /// forwarding header (its field lines `values`, in order) that is not itself a trusted proxy's;
  /// for any other connection, `peer`.
  ///
  /// Each proxy appends the address it saw, so the header is read from the right, past the
  /// trusted ones. An entry that is no address means a proxy misbehaved: the peer is the client
  /// then. A chain of trusted proxies only: the leftmost of them read.
  package func clientAddress(peer: IPAddress?, values: [String]) -> IPAddress? {
    guard let peer else { return nil }
    guard isTrusted(peer) else { return peer }
    var last: IPAddress?
    var hops = 0
    for value in values.reversed() {
      // On bytes, not characters: a combining mark cannot glue itself to a comma there.
      var rest = Substring(value).utf8[...]
      repeat {
        let entry: Substring.UTF8View
        if let comma = rest.lastIndex(of: UInt8(ascii: ",")) {
          entry = rest[rest.index(after: comma)...]
          rest = rest[..<comma]
        } else {
          entry = rest
          rest = rest[rest.startIndex..<rest.startIndex]
        }
        hops += 1
        guard hops <= Self.maximumHops else { return last ?? peer }
        guard let address = address(in: Substring(entry)) else { return peer }
        if !isTrusted(address) { return address }
        last = address
      } while !rest.isEmpty
    }
    return last ?? peer
  }

  /// The address of one header entry: the whole entry for `X-Forwarded-For`, its `for` parameter
  /// for `Forwarded`.
  func address(in entry: Substring) -> IPAddress? {
    switch header {
    case .xForwardedFor:
      return IPAddress(entry)
    case .forwarded:
      for pair in entry.utf8.split(separator: UInt8(ascii: ";"), maxSplits: 8) {
        let trimmed = pair.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let equals = trimmed.firstIndex(of: UInt8(ascii: "=")),
          trimmed.distance(from: trimmed.startIndex, to: equals) == 3,
          String(Substring(trimmed[..<equals])).lowercased() == "for"
        else { continue }
        var value = Substring(trimmed[trimmed.index(after: equals)...])
        while value.last == " " || value.last == "\t" { value = value.dropLast() }
        if value.utf8.count >= 2, value.utf8.first == UInt8(ascii: "\""), value.utf8.last == UInt8(ascii: "\"") {
          value = Substring(value.utf8.dropFirst().dropLast())
        }
        return IPAddress(value)
      }
      return nil
    }
  }

  /// The key of a peer whose IPv4 address NIO wrote as `ipv4Text` (dotted decimal without leading
  /// zeros, as `inet_ntop` writes it: the address's own text), when no proxy is trusted and the
  /// whole address names a client: ``key(for:)`` without parsing the text and writing it again.
  /// Nil when the key needs the address parsed.
  package func peerKey(ipv4Text: String) -> String? {
    guard trustedProxies.isEmpty, ipv4PrefixLength == 32 else { return nil }
    return "ip:" + ipv4Text
  }

  /// The key for `address`: `ip:` and the address, or its network and prefix length when the
  /// prefix is shorter than the address (`ip:2001:db8:1:2::/64`); `ip:unknown` for none.
  package func key(for address: IPAddress?) -> String {
    guard let address else { return "ip:unknown" }
    let length = address.isIPv4 ? ipv4PrefixLength : ipv6PrefixLength
    if length == address.bitCount { return "ip:\(address)" }
    return "ip:\(address.masked(prefixLength: length))/\(length)"
  }
}
