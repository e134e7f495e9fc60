#if Hummingbird || Vapor
/// How a policy names, in its `RateLimit` members, the partition a request was counted in: the
/// `pk` parameter of draft-ietf-httpapi-ratelimit-headers-11, a byte sequence that never reveals
/// the key itself.
///
/// A client that sends requests under several keys (API keys, tenants) tells their quotas apart
/// by `pk`; anyone who reads the fields learns only that two answers share a partition. The
/// partition key is a keyed hash (HMAC-SHA256, its first 16 bytes) of the key the policy counts,
/// with a secret of the server's: without the secret, a key cannot be confirmed by hashing a
/// guess. Every instance of a server that shares its limits must use the same secret, so that
/// one key has one `pk` everywhere.
///
/// ```swift
/// // Vapor:
/// let perKey = RateLimitPolicy("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) { request in
///   request.headers.first(name: "X-API-Key")
/// }
/// .disclosingPartitionKeys(.hmacSHA256(secret: Array("a secret of 16 bytes or more".utf8)))
/// // RateLimit: "per-key";r=99;t=1;pk=:bPx1…==:
/// ```
public struct RateLimitPartitionKeys: Sendable, Hashable {
  /// The HMAC key, padded to SHA-256's block: what the inner and outer pads are made of.
  private let blockKey: [UInt8]

  /// Partition keys made by HMAC-SHA256 with `secret`, truncated to 16 bytes.
  ///
  /// - Precondition: `secret` has at least 16 bytes (a value the program configures once; read it
  ///   from the server's secrets, never from a request).
  public static func hmacSHA256(secret: some Collection<UInt8>) -> Self {
    precondition(secret.count >= 16, "RateLimitPartitionKeys.hmacSHA256: the secret needs at least 16 bytes")
    var key = secret.count > 64 ? SHA256.digest(secret) : Array(secret)
    key.append(contentsOf: repeatElement(0, count: 64 - key.count))
    return Self(blockKey: key)
  }

  private init(blockKey: [UInt8]) {
    self.blockKey = blockKey
  }

  /// The partition key of `key`: 16 bytes.
  package func partitionKey(for key: String) -> [UInt8] {
    let inner = SHA256.digest(blockKey.map { $0 ^ 0x36 } + Array(key.utf8))
    let outer = SHA256.digest(blockKey.map { $0 ^ 0x5C } + inner)
    return Array(outer.prefix(16))
  }

  /// `key`'s partition key as a Structured Fields byte sequence: `:base64:`.
  package func fieldValue(for key: String) -> String {
    ":" + Self.base64(partitionKey(for: key)) + ":"
  }

  /// RFC 4648 base64 with padding, what a Structured Fields byte sequence holds.
  static func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
      let count = min(3, bytes.count - index)
      var group: UInt32 = 0
      for offset in 0..<3 { group = group << 8 | UInt32(offset < count ? bytes[index + offset] : 0) }
      for position in 0..<4 {
        let sextet = Int(group >> UInt32(18 - 6 * position) & 0x3F)
        out.append(position <= count ? alphabet[sextet] : UInt8(ascii: "="))
      }
      index += 3
    }
    return String(decoding: out, as: UTF8.self)
  }
}

extension RateLimitPolicy {
  /// This policy with `pk`, the partition key of draft -11, in its `RateLimit` members: a keyed
  /// hash of the key each request counts against (``RateLimitPartitionKeys``), never the key.
  /// Without it (the default) the members carry no `pk`.
  public func disclosingPartitionKeys(_ partitionKeys: RateLimitPartitionKeys) -> Self {
    var policy = self
    policy.partitionKeys = partitionKeys
    return policy
  }
}
#endif
