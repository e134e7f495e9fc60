/// Base64 (RFC 4648 section 4) as a Structured Fields Byte Sequence carries it, read without
/// Foundation: RFC 9651 section 4.2.7 asks a parser to accept a missing `=` padding and pad bits
/// that are not zero.
enum Base64 {
  /// The bytes `text` encodes; `nil` when it is not base64: a character outside the alphabet, `=`
  /// anywhere but at the end, more than two of them, or a length no encoding has.
  static func decode(_ text: String) -> [UInt8]? {
    var symbols = Array(text.utf8)
    var padding = 0
    while symbols.last == UInt8(ascii: "=") {
      symbols.removeLast()
      padding += 1
    }
    guard padding <= 2, symbols.count % 4 != 1 else { return nil }
    // With padding, the whole is a multiple of 4.
    guard padding == 0 || (symbols.count + padding) % 4 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(symbols.count * 3 / 4)
    var buffer: UInt32 = 0
    var bits = 0
    for symbol in symbols {
      guard let value = value(of: symbol) else { return nil }
      buffer = (buffer << 6 | UInt32(value)) & 0xFFFF
      bits += 6
      if bits >= 8 {
        bits -= 8
        bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
      }
    }
    return bytes
  }

  private static func value(of symbol: UInt8) -> UInt8? {
    switch symbol {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): symbol - UInt8(ascii: "A")
    case UInt8(ascii: "a")...UInt8(ascii: "z"): symbol - UInt8(ascii: "a") + 26
    case UInt8(ascii: "0")...UInt8(ascii: "9"): symbol - UInt8(ascii: "0") + 52
    case UInt8(ascii: "+"): 62
    case UInt8(ascii: "/"): 63
    default: nil
    }
  }
}
