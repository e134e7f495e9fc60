import Pace

/// What a rate-limit middleware does with a key longer than `InputRules.maximumKeyBytes` (an API
/// key, a JWT): count it under its digest, or refuse it.
public enum LongKeyHandling: Sendable, Hashable {
  /// Counts the request against `sha256:` and the key's SHA-256 in hexadecimal (71 bytes). A
  /// short key that itself starts with `sha256:` is hashed too, so no key can be chosen to share a
  /// long key's bucket. The default.
  case hash
  /// Answers `400 Bad Request`, naming the key's length, as the limiter does.
  case refuse

  /// The prefix of a hashed key.
  package static let hashedPrefix = "sha256:"

  /// The key the limiter gets for `key`.
  ///
  /// Under ``hash``, a key over the limit, and a key that itself starts with ``hashedPrefix``,
  /// becomes ``hashedPrefix`` and its digest: every key that starts with the prefix is then a
  /// digest, so a short key cannot be chosen to share a long key's bucket. An empty key, or one
  /// with NUL, is left for the limiter to refuse.
  package func limiterKey(for key: String) -> String {
    guard self == .hash else { return key }
    do throws(InvalidInput) {
      try InputRules.check(key: key)
      return key.hasPrefix(Self.hashedPrefix) ? Self.hashed(key) : key
    } catch .keyTooLong {
      return Self.hashed(key)
    } catch {
      return key
    }
  }

  private static func hashed(_ key: String) -> String {
    hashedPrefix + SHA256.hex(key)
  }
}
