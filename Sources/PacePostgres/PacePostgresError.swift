#if PostgreSQL
import Foundation
import Pace

/// Why a PostgreSQL-backed Pace primitive refused a call or could not complete it.
public enum PacePostgresError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The rate's arithmetic overflows 64-bit microseconds (an interval or cost near `Int64.max`), or
  /// a configured duration or count is out of its range (zero, negative, or `Int64.max`
  /// nanoseconds or more); the text names the setting.
  case rateOutOfRange(String)
  /// A payload's JSON encoding is larger than the debouncer's limit.
  case payloadTooLarge(bytes: Int, limit: Int)
  /// A stored payload does not decode as the debouncer's `Payload` (the table is shared with another type?).
  case undecodablePayload(key: String, description: String)
  /// A table name is not a plain SQL identifier (letters, digits and `_`, optionally `schema.table`).
  case invalidTableName(String)
  /// The database could not be reached, or did not answer in time; `reason` says which.
  case unavailable(reason: String)

  public var description: String {
    switch self {
    case .rateOutOfRange(let detail): "PacePostgres: the rate is out of range: \(detail)"
    case .payloadTooLarge(let bytes, let limit): "PacePostgres: the payload is \(bytes) bytes of JSON; at most \(limit)"
    case .undecodablePayload(let key, let description):
      "PacePostgres: a stored payload for key \"\(key)\" does not decode: \(description)"
    case .invalidTableName(let name): "PacePostgres: \"\(name)\" is not a plain SQL identifier"
    case .unavailable(let reason): "PacePostgres: the database is unavailable: \(reason)"
    }
  }
}

/// A key from a request as the database stores it: checked against `KeyPolicy` (not empty, no
/// NUL, at most `KeyPolicy.maximumBytes` bytes as given), then normalised to Unicode NFC, so that
/// canonically equivalent spellings share one row as they share one bucket in memory (Swift's
/// `String` equality).
func storedKey(_ key: String) throws(InvalidInput) -> String {
  // ASCII without NUL, within the length, is a valid key in NFC already: one pass over the bytes
  // instead of KeyPolicy's and then the normalisation's, which costs microseconds.
  let isPlainASCII = key.utf8.withContiguousStorageIfAvailable { bytes in
    !bytes.isEmpty && bytes.count <= KeyPolicy.maximumBytes && bytes.allSatisfy { $0 != 0 && $0 < 0x80 }
  }
  if isPlainASCII == true { return key }
  try KeyPolicy.check(key: key)
  if key.utf8.allSatisfy({ $0 < 0x80 }) { return key }
  return key.precomposedStringWithCanonicalMapping
}
#endif
