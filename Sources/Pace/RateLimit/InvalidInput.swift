/// Why a keyed primitive refused one request's input: a key or a cost that came from outside the
/// program (a request header, a file, a database row).
///
/// Such input is answered, never trapped on: ``KeyedRateLimiter/decide(_:cost:)`` and the stores
/// throw this error, and a server answers it as a client error (PaceHummingbird's middleware
/// answers `400 Bad Request` with ``description`` as its body). Values a programmer configures
/// once (a limit, an interval) keep their preconditions.
public enum InvalidInput: Error, Sendable, Hashable, CustomStringConvertible {
  /// The key is empty; a key names what is limited or debounced.
  case emptyKey
  /// The key is longer than ``InputRules/maximumKeyBytes`` bytes of UTF-8.
  case keyTooLong(bytes: Int)
  /// The key contains a NUL character, which PostgreSQL's `text` cannot hold.
  case keyContainsNUL
  /// The cost is negative.
  case negativeCost(Int)
  /// The cost is larger than the limit's burst: such a request could never be allowed.
  case costAboveBurst(cost: Int, burst: Int)

  /// One short line, fit for a `400` response's body.
  public var description: String {
    switch self {
    case .emptyKey: "the key is empty"
    case .keyTooLong(let bytes): "the key is \(bytes) bytes long; at most \(InputRules.maximumKeyBytes)"
    case .keyContainsNUL: "the key contains a NUL character"
    case .negativeCost(let cost): "the cost \(cost) is negative"
    case .costAboveBurst(let cost, let burst): "the cost \(cost) is above the burst \(burst)"
    }
  }
}

/// The rules for keys and costs that come from requests, applied identically by
/// ``KeyedRateLimiter/decide(_:cost:)`` in memory and by every store (PacePostgres included), so
/// that moving a limit from memory to a database changes no decision.
///
/// **Keys** (`String` keys; other key types are the program's own values):
/// - not empty, and without NUL (`\0`);
/// - at most ``maximumKeyBytes`` bytes of UTF-8, counted as given;
/// - canonically equivalent spellings are one key: `"é"` as one scalar (NFC) and as `e` plus a
///   combining accent (NFD) share a bucket. Swift's `String` equality already says so in memory;
///   a store normalises keys to NFC before they reach its database.
///
/// **Costs**:
/// - negative: ``InvalidInput/negativeCost(_:)``;
/// - 0: a query. It takes nothing and gets the answer a cost of 1 would: allowed, with the
///   permits available now, only if one permit is available; so a cost chosen by a client never
///   passes a key that would refuse 1;
/// - above the limit's burst: ``InvalidInput/costAboveBurst(cost:burst:)``, since no wait would
///   ever let it through.
public enum InputRules {
  /// The longest key accepted, in bytes of UTF-8: long enough for any identifier, short enough
  /// for a database's primary-key index.
  public static let maximumKeyBytes = 1024

  /// Checks a key from a request against the rules.
  ///
  /// - Throws: ``InvalidInput/emptyKey``, ``InvalidInput/keyTooLong(bytes:)`` or
  ///   ``InvalidInput/keyContainsNUL``.
  public static func check(key: String) throws(InvalidInput) {
    var bytes = 0
    for byte in key.utf8 {
      if byte == 0 { throw .keyContainsNUL }
      bytes += 1
    }
    if bytes == 0 { throw .emptyKey }
    if bytes > maximumKeyBytes { throw .keyTooLong(bytes: bytes) }
  }
}
