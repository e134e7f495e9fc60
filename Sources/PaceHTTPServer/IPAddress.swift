/// An IPv4 or IPv6 address, parsed from text a client may have written: a forwarding header, a
/// configured proxy range. Never traps: text that is no address is nil.
///
/// An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4 address it maps, so a client
/// seen through a dual-stack socket has one identity, not two.
package struct IPAddress: Hashable, Sendable, CustomStringConvertible {
  /// 4 bytes for IPv4, 16 for IPv6, in network order.
  package let bytes: [UInt8]

  /// The longest text considered: the longest address with brackets, a zone and a port is well
  /// under it; longer text is refused before it is read.
  package static let maximumTextBytes = 128

  package var isIPv4: Bool { bytes.count == 4 }

  /// The number of bits: 32 or 128.
  package var bitCount: Int { bytes.count * 8 }

  package init?(bytes: [UInt8]) {
    guard bytes.count == 4 || bytes.count == 16 else { return nil }
    if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
      self.bytes = Array(bytes[12...])
    } else {
      self.bytes = bytes
    }
  }

  /// Parses `text`: an IPv4 address (`192.0.2.1`, no leading zeros), an IPv6 address (`2001:db8::1`,
  /// an embedded IPv4 tail allowed), either with a port (`192.0.2.1:443`, `[2001:db8::1]:443`),
  /// IPv6 in brackets, and IPv6 with a zone (`fe80::1%eth0`, the zone ignored). Spaces around it
  /// are ignored.
  package init?(_ text: some StringProtocol) {
    // Measured before it is copied: a hostile header may be megabytes long.
    guard text.utf8.count <= Self.maximumTextBytes else { return nil }
    var utf8 = Substring(text).utf8[...]
    while let first = utf8.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { utf8.removeFirst() }
    while let last = utf8.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { utf8.removeLast() }
    if utf8.first == UInt8(ascii: "[") {
      // `[v6]` or `[v6]:port`.
      guard let close = utf8.firstIndex(of: UInt8(ascii: "]")) else { return nil }
      let rest = utf8[utf8.index(after: close)...]
      if !rest.isEmpty {
        guard rest.first == UInt8(ascii: ":"), Self.isPort(rest.dropFirst()) else { return nil }
      }
      guard let bytes = Self.parseIPv6(utf8[utf8.index(after: utf8.startIndex)..<close]) else { return nil }
      self.init(bytes: bytes)
      return
    }
    let colons = utf8.lazy.filter { $0 == UInt8(ascii: ":") }.count
    if colons == 0 {
      guard let bytes = Self.parseIPv4(utf8) else { return nil }
      self.init(bytes: bytes)
    } else if colons == 1 {
      // `v4:port`.
      let colon = utf8.firstIndex(of: UInt8(ascii: ":"))!
      guard Self.isPort(utf8[utf8.index(after: colon)...]), let bytes = Self.parseIPv4(utf8[..<colon]) else {
        return nil
      }
      self.init(bytes: bytes)
    } else {
      guard let bytes = Self.parseIPv6(utf8) else { return nil }
      self.init(bytes: bytes)
    }
  }

  /// This address with every bit after the first `prefixLength` cleared.
  package func masked(prefixLength: Int) -> IPAddress {
    let length = min(max(prefixLength, 0), bitCount)
    var masked = bytes
    for index in masked.indices {
      let bitsKept = min(max(length - index * 8, 0), 8)
      masked[index] &= bitsKept == 0 ? 0 : ~UInt8(0) << UInt8(8 - bitsKept)
    }
    return IPAddress(unmapped: masked)
  }

  private init(unmapped bytes: [UInt8]) {
    self.bytes = bytes
  }

  /// `192.0.2.1`, or IPv6 as RFC 5952 writes it: lowercase, no leading zeros, the longest run of
  /// two or more zero groups as `::` (the first of equal runs).
  package var description: String {
    if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
    let groups = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
    var bestStart = -1
    var bestLength = 0
    var index = 0
    while index < 8 {
      guard groups[index] == 0 else {
        index += 1
        continue
      }
      var end = index
      while end < 8, groups[end] == 0 { end += 1 }
      if end - index > bestLength {
        bestStart = index
        bestLength = end - index
      }
      index = end
    }
    func hex(_ range: Range<Int>) -> String {
      range.map { String(groups[$0], radix: 16) }.joined(separator: ":")
    }
    guard bestLength >= 2 else { return hex(0..<8) }
    return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
  }

  private static func isPort(_ digits: Substring.UTF8View.SubSequence) -> Bool {
    !digits.isEmpty && digits.count <= 5 && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
  }

  private static func parseIPv4(_ text: Substring.UTF8View.SubSequence) -> [UInt8]? {
    var bytes: [UInt8] = []
    var value = 0
    var digits = 0
    var leadingZero = false
    for character in text {
      switch character {
      case UInt8(ascii: "0")...UInt8(ascii: "9"):
        if leadingZero { return nil }
        if digits == 0 && character == UInt8(ascii: "0") { leadingZero = true }
        value = value * 10 + Int(character - UInt8(ascii: "0"))
        digits += 1
        if value > 255 { return nil }
      case UInt8(ascii: "."):
        guard digits > 0, bytes.count < 3 else { return nil }
        bytes.append(UInt8(value))
        value = 0
        digits = 0
        leadingZero = false
      default:
        return nil
      }
    }
    guard digits > 0, bytes.count == 3 else { return nil }
    bytes.append(UInt8(value))
    return bytes
  }

  private static func parseIPv6(_ whole: Substring.UTF8View.SubSequence) -> [UInt8]? {
    var text = whole
    if let percent = text.firstIndex(of: UInt8(ascii: "%")) {
      // A zone names an interface of the host that wrote it: no part of the client's identity.
      guard percent != text.startIndex, text.index(after: percent) != text.endIndex else { return nil }
      text = text[..<percent]
    }
    var head: [UInt16] = []
    var tail: [UInt16] = []
    var sawDoubleColon = false
    var index = text.startIndex
    if text.starts(with: "::".utf8) {
      sawDoubleColon = true
      index = text.index(index, offsetBy: 2)
      if index == text.endIndex { return [UInt8](repeating: 0, count: 16) }
    } else if text.first == UInt8(ascii: ":") {
      return nil
    }
    while index < text.endIndex {
      // One group, or an IPv4 tail.
      var end = index
      while end < text.endIndex, text[end] != UInt8(ascii: ":") { end = text.index(after: end) }
      let group = text[index..<end]
      if group.contains(UInt8(ascii: ".")) {
        guard end == text.endIndex, let v4 = parseIPv4(group) else { return nil }
        let words = [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
        if sawDoubleColon { tail += words } else { head += words }
        index = end
        break
      }
      guard !group.isEmpty, group.count <= 4 else { return nil }
      var word: UInt16 = 0
      for character in group {
        guard let digit = hexValue(character) else { return nil }
        word = word << 4 | UInt16(digit)
      }
      if sawDoubleColon { tail.append(word) } else { head.append(word) }
      if head.count + tail.count > 8 { return nil }
      index = end
      guard index < text.endIndex else { break }
      // At a colon: `::` once, else a single colon followed by more.
      index = text.index(after: index)
      if index < text.endIndex, text[index] == UInt8(ascii: ":") {
        guard !sawDoubleColon else { return nil }
        sawDoubleColon = true
        index = text.index(after: index)
      } else if index == text.endIndex {
        return nil  // a trailing single colon
      }
    }
    let count = head.count + tail.count
    guard sawDoubleColon ? count <= 7 : count == 8 else { return nil }
    let words = head + [UInt16](repeating: 0, count: 8 - count) + tail
    return words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
  }

  private static func hexValue(_ character: UInt8) -> UInt8? {
    switch character {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}

/// A CIDR range of addresses, such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a range
/// of one.
package struct IPAddressRange: Hashable, Sendable, CustomStringConvertible {
  /// The first address of the range: host bits are cleared (`10.1.2.3/8` is `10.0.0.0/8`).
  package let network: IPAddress
  /// How many leading bits every address of the range shares.
  package let prefixLength: Int

  package init(network: IPAddress, prefixLength: Int) {
    self.prefixLength = min(max(prefixLength, 0), network.bitCount)
    self.network = network.masked(prefixLength: self.prefixLength)
  }

  /// Parses `address/length` or a bare address; nil for anything else. An IPv4-mapped IPv6
  /// range (`::ffff:10.0.0.0/104`) is its IPv4 range.
  package init?(_ text: some StringProtocol) {
    guard text.utf8.count <= IPAddress.maximumTextBytes else { return nil }
    let text = Substring(text)
    guard let slash = text.firstIndex(of: "/") else {
      guard let address = IPAddress(text) else { return nil }
      self.init(network: address, prefixLength: address.bitCount)
      return
    }
    let lengthText = text[text.index(after: slash)...]
    guard !lengthText.isEmpty, lengthText.utf8.count <= 3,
      lengthText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
      let length = Int(lengthText)
    else { return nil }
    let addressText = text[..<slash]
    guard !addressText.contains("["), let address = IPAddress(addressText) else { return nil }
    // The length was written for the text's family: a mapped IPv6 range counts 96 bits more.
    let writtenAsIPv6 = addressText.contains(":")
    let bits = writtenAsIPv6 ? 128 : 32
    guard length <= bits else { return nil }
    if writtenAsIPv6 && address.isIPv4 {
      guard length >= 96 else { return nil }
      self.init(network: address, prefixLength: length - 96)
    } else {
      self.init(network: address, prefixLength: length)
    }
  }

  /// Whether `address` is in the range.
  package func contains(_ address: IPAddress) -> Bool {
    address.isIPv4 == network.isIPv4 && address.masked(prefixLength: prefixLength) == network
  }

  /// `10.0.0.0/8`; a range of one address is the address alone.
  package var description: String { prefixLength == network.bitCount ? "\(network)" : "\(network)/\(prefixLength)" }
}
