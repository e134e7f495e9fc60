#if PostgreSQL
/// Why a PostgreSQL-backed Pace primitive refused a call or could not complete it.
public enum PacePostgresError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The key is empty; a key names what is limited or debounced, so it needs at least one character.
  case emptyKey
  /// The key is longer than ``maximumKeyBytes`` bytes of UTF-8 (it would bloat the primary key index).
  case keyTooLong(bytes: Int)
  /// `cost` is not positive, or larger than the limit's burst (such a request could never be allowed).
  case invalidCost(cost: Int, burst: Int)
  /// The rate's arithmetic overflows 64-bit microseconds (an interval or cost near `Int64.max`).
  case rateOutOfRange(String)
  /// A payload's JSON encoding is larger than the debouncer's limit.
  case payloadTooLarge(bytes: Int, limit: Int)
  /// A stored payload does not decode as the debouncer's `Payload` (the table is shared with another type?).
  case undecodablePayload(key: String, description: String)
  /// A table name is not a plain SQL identifier (letters, digits and `_`, optionally `schema.table`).
  case invalidTableName(String)
  /// The database could not be reached, or did not answer in time; `reason` says which.
  case unavailable(reason: String)

  /// The longest key accepted, in bytes of UTF-8.
  public static let maximumKeyBytes = 1024

  public var description: String {
    switch self {
    case .emptyKey: "PacePostgres: the key is empty"
    case .keyTooLong(let bytes): "PacePostgres: the key is \(bytes) bytes long; at most \(Self.maximumKeyBytes)"
    case .invalidCost(let cost, let burst): "PacePostgres: cost \(cost) is not in 1...\(burst) (the burst)"
    case .rateOutOfRange(let detail): "PacePostgres: the rate is out of range: \(detail)"
    case .payloadTooLarge(let bytes, let limit): "PacePostgres: the payload is \(bytes) bytes of JSON; at most \(limit)"
    case .undecodablePayload(let key, let description):
      "PacePostgres: a stored payload for key \"\(key)\" does not decode: \(description)"
    case .invalidTableName(let name): "PacePostgres: \"\(name)\" is not a plain SQL identifier"
    case .unavailable(let reason): "PacePostgres: the database is unavailable: \(reason)"
    }
  }
}

extension PacePostgresError {
  /// Checks a key before it reaches SQL: not empty, at most ``maximumKeyBytes``.
  static func validate(key: String) throws(PacePostgresError) {
    if key.isEmpty { throw .emptyKey }
    let bytes = key.utf8.count
    if bytes > maximumKeyBytes { throw .keyTooLong(bytes: bytes) }
  }
}
#endif
