/// A response's status and header fields, in no HTTP library's types: what ``PacedRequests`` reads
/// to pace and retry. The URLSession and AsyncHTTPClient glue make one from their own responses.
public struct ResponseHead: Sendable {
  /// The status code, such as 200 or 429.
  public var status: Int
  /// The header fields, in order, as received: a name may appear several times.
  public var headerFields: [(name: String, value: String)]

  /// A response head.
  ///
  /// - Parameters:
  ///   - status: The status code.
  ///   - headerFields: The header fields, in order; names in any case.
  public init(status: Int, headerFields: [(name: String, value: String)]) {
    self.status = status
    self.headerFields = headerFields
  }

  /// Every value of the field `name`, in order, the name compared without regard to ASCII case.
  public func values(of name: String) -> [String] {
    headerFields.compactMap { field in Self.namesMatch(field.name, name) ? field.value : nil }
  }

  /// The field `name`'s value: its lines joined by `", "`, as HTTP combines a list field; `nil`
  /// when the response has none.
  public subscript(name: String) -> String? {
    let values = values(of: name)
    return values.isEmpty ? nil : values.joined(separator: ", ")
  }

  /// Whether a cache answered rather than the server: its `Age` is above 0 (RFC 9111 section 5.1:
  /// the first member of the field, a non-negative integer; a value that is not one is ignored).
  /// The rate-limit fields of such an answer are not current (draft-ietf-httpapi-ratelimit-headers-11,
  /// section 7.3), and ``PacedRequests`` does not learn from them.
  public var isFromCache: Bool {
    guard let first = values(of: "Age").first else { return false }
    let member = ServerRateLimitFields.trimmed(first.split(separator: ",", omittingEmptySubsequences: false)[0][...])
    guard !member.isEmpty, member.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
      return false
    }
    return member.utf8.contains { $0 != UInt8(ascii: "0") }
  }

  /// Whether two field names are the same, ignoring ASCII case.
  static func namesMatch(_ lhs: String, _ rhs: String) -> Bool {
    let left = lhs.utf8
    let right = rhs.utf8
    guard left.count == right.count else { return false }
    return zip(left, right).allSatisfy { lowercased($0) == lowercased($1) }
  }

  static func lowercased(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
  }
}
