#if PostgreSQL
import Foundation
import Pace

/// Why a PostgreSQL-backed Pace primitive refused a call or could not complete it.
public enum PacePostgresError: Error, Sendable, Hashable, CustomStringConvertible {
  /// A setting is out of its range: a configured duration or count (zero, negative, or
  /// `Int64.max` nanoseconds or more), a fill factor, a `maximumWait` shorter than `quiet`, a
  /// circuit breaker's threshold, or a limit whose arithmetic overflows 64-bit microseconds.
  ///
  /// `name` is the setting's owner and path (`PostgresRateLimitStore.TableOptions.fillfactor`),
  /// `value` the value given, `rule` what the value must be (`must be in 10...100`); the
  /// description reads `PostgresRateLimitStore: TableOptions.fillfactor must be in 10...100 (got 5)`.
  case invalidSetting(name: String, value: String, rule: String)
  /// A setting out of its range, as text. PacePostgres throws
  /// ``invalidSetting(name:value:rule:)`` instead, which names the setting, its value and its rule.
  @available(*, deprecated, message: "PacePostgres throws invalidSetting(name:value:rule:) instead")
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
    case .invalidSetting(let name, let value, let rule):
      if let dot = name.firstIndex(of: ".") {
        "\(name[..<dot]): \(name[name.index(after: dot)...]) \(rule) (got \(value))"
      } else {
        "PacePostgres: \(name) \(rule) (got \(value))"
      }
    case .payloadTooLarge(let bytes, let limit): "PacePostgres: the payload is \(bytes) bytes of JSON; at most \(limit)"
    case .undecodablePayload(let key, let description):
      "PacePostgres: a stored payload for key \"\(key)\" does not decode: \(description)"
    case .invalidTableName(let name): "PacePostgres: \"\(name)\" is not a plain SQL identifier"
    case .unavailable(let reason): "PacePostgres: the database is unavailable: \(reason)"
    default:
      // The deprecated `rateOutOfRange(_:)`, read without naming it: the package builds without
      // deprecation warnings.
      "PacePostgres: the rate is out of range: \(Mirror(reflecting: self).children.first.map { "\($0.value)" } ?? "")"
    }
  }

  /// A setting `name` (its owner and path) whose `value` breaks `rule`.
  static func invalid(_ name: String, _ value: some Any, _ rule: String) -> PacePostgresError {
    .invalidSetting(name: name, value: "\(value)", rule: rule)
  }
}

/// A key from a request as the database stores it: checked against `InputRules` (not empty, no
/// NUL, at most `InputRules.maximumKeyBytes` bytes as given), then normalised to Unicode NFC, so that
/// canonically equivalent spellings share one row as they share one bucket in memory (Swift's
/// `String` equality).
func storedKey(_ key: String) throws(InvalidInput) -> String {
  // ASCII without NUL, within the length, is a valid key in NFC already: one pass over the bytes
  // instead of InputRules's and then the normalisation's, which costs microseconds.
  let isPlainASCII = key.utf8.withContiguousStorageIfAvailable { bytes in
    !bytes.isEmpty && bytes.count <= InputRules.maximumKeyBytes && bytes.allSatisfy { $0 != 0 && $0 < 0x80 }
  }
  if isPlainASCII == true { return key }
  try InputRules.check(key: key)
  if key.utf8.allSatisfy({ $0 < 0x80 }) { return key }
  return key.precomposedStringWithCanonicalMapping
}
#endif
