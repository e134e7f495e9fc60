import Pace

/// Reads and writes durations the way people type them: `300ms`, `1s`, `1.5s`, `250us`, `0ms`.
///
/// Marble headers (`step: 100ms`), ``MarbleDiagram`` descriptions and the `pace` tool all use
/// this one spelling. Units are `ns`, `us` (or `µs`), `ms`, `s` and `min`; the number may have a
/// fraction, down to one nanosecond. A unit is required: a bare `300` is rejected rather than
/// guessed.
public enum DurationText {
  /// Parses `text` such as `"300ms"` or `"1.5 s"`.
  ///
  /// - Throws: ``DurationSyntaxError`` saying what is wrong: no number, no unit, an unknown unit,
  ///   a negative sign, more precision than a nanosecond, or a value too large for `Duration`.
  public static func parse(_ text: String) throws(DurationSyntaxError) -> Duration {
    let trimmed = text.trimmingWhitespace
    guard !trimmed.isEmpty else { throw DurationSyntaxError(text: text, reason: .empty) }
    if trimmed.hasPrefix("-") { throw DurationSyntaxError(text: text, reason: .negative) }

    let number = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
    let unit = String(trimmed.dropFirst(number.count).trimmingWhitespace)

    let parts = number.split(separator: ".", omittingEmptySubsequences: false)
    guard !number.isEmpty, parts.count <= 2, parts.contains(where: { !$0.isEmpty }) else {
      throw DurationSyntaxError(text: text, reason: .notANumber)
    }
    guard !unit.isEmpty else { throw DurationSyntaxError(text: text, reason: .missingUnit) }
    guard let nanosPerUnit = unitNanoseconds[unit] else {
      throw DurationSyntaxError(text: text, reason: .unknownUnit(unit))
    }

    // Exact decimal arithmetic: 8.333ms is 8,333,000 ns, never a rounded Double.
    var nanos: Int64 = 0
    for digit in parts[0].utf8 {
      let (times10, overflow1) = nanos.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
      if overflow1 || overflow2 { throw DurationSyntaxError(text: text, reason: .tooLarge) }
      nanos = sum
    }
    let (scaled, overflow) = nanos.multipliedReportingOverflow(by: nanosPerUnit)
    if overflow { throw DurationSyntaxError(text: text, reason: .tooLarge) }
    nanos = scaled

    // The fraction is `numerator / 10^digits` units; trailing zeros say nothing. A unit is at
    // most 6e10 ns, so a fraction that is a whole number of nanoseconds has at most 11 digits
    // left: more is finer than a nanosecond, and 18 keep the numerator in a UInt64.
    var fraction = parts.count == 2 ? parts[1].utf8 : Substring().utf8
    while fraction.last == UInt8(ascii: "0") { fraction.removeLast() }
    guard fraction.count <= 18 else { throw DurationSyntaxError(text: text, reason: .tooPrecise) }
    var numerator: UInt64 = 0
    var denominator: UInt64 = 1
    for digit in fraction {
      numerator = numerator * 10 + UInt64(digit - UInt8(ascii: "0"))
      denominator *= 10
    }
    // Below one unit, so the quotient fits; checked rather than trusted, all the same.
    let (quotient, remainder) = denominator.dividingFullWidth(UInt64(nanosPerUnit).multipliedFullWidth(by: numerator))
    guard remainder == 0 else { throw DurationSyntaxError(text: text, reason: .tooPrecise) }
    let (sum, sumOverflow) = nanos.addingReportingOverflow(Int64(quotient))
    if sumOverflow { throw DurationSyntaxError(text: text, reason: .tooLarge) }
    nanos = sum
    return .nanoseconds(nanos)
  }

  /// The longest duration ``parse(_:)`` reads: `Int64.max` nanoseconds, `9223372036.854775807s`
  /// (about 292 years), the most a `PaceInstant` offset holds.
  public static let maximum = Duration.nanoseconds(Int64.max)

  /// The shortest exact spelling of `duration`: `"0ms"`, `"300ms"`, `"1s"`, `"1.5s"`,
  /// `"8.333ms"`, `"250us"`, `"40ns"`. ``parse(_:)`` reads it back to the same duration.
  public static func format(_ duration: Duration) -> String {
    let nanos = duration.paceNanoseconds
    if nanos == 0 { return "0ms" }
    let sign = nanos < 0 ? "-" : ""
    let magnitude = nanos.magnitude
    let (unit, size): (String, UInt64) =
      if magnitude >= 1_000_000_000 { ("s", 1_000_000_000) } else if magnitude >= 1_000_000 {
        ("ms", 1_000_000)
      } else if magnitude >= 1_000 { ("us", 1_000) } else { ("ns", 1) }
    return sign + decimal(magnitude, per: size) + unit
  }

  /// `value / size` as a decimal with no trailing zeros: `decimal(1_500, per: 1_000) == "1.5"`.
  /// The package's one decimal formatter for durations (the tool's times and JSON use it too).
  package static func decimal(_ value: UInt64, per size: UInt64) -> String {
    let whole = value / size
    var remainder = value % size
    guard remainder != 0 else { return String(whole) }
    var fraction = ""
    var place = size
    while remainder != 0 {
      place /= 10
      fraction.append(Character(String(remainder / place)))
      remainder %= place
    }
    return "\(whole).\(fraction)"
  }

  private static let unitNanoseconds: [String: Int64] = [
    "ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000,
  ]
}

/// Why a duration such as `"3OOms"` could not be read. Its description is one sentence for a
/// person: `'3OOms' is not a duration: the number is malformed (write it like 300ms, 1.5s or 250us)`.
public struct DurationSyntaxError: Error, Hashable, CustomStringConvertible {
  /// What went wrong.
  public enum Reason: Hashable, Sendable {
    /// Nothing but whitespace.
    case empty
    /// No number, or a malformed one such as `1.2.3`.
    case notANumber
    /// A number with no unit, such as `300`.
    case missingUnit
    /// A unit Pace does not know, such as `300 msec`.
    case unknownUnit(String)
    /// A minus sign: durations here are never negative.
    case negative
    /// A fraction finer than a nanosecond, such as `0.5ns`.
    case tooPrecise
    /// More than `Int64.max` nanoseconds (about 292 years).
    case tooLarge
  }

  /// The text as given. ``description`` quotes at most 60 characters of it, escaped.
  public var text: String
  /// What went wrong.
  public var reason: Reason

  /// An error for `text`.
  public init(text: String, reason: Reason) {
    self.text = text
    self.reason = reason
  }

  /// The reason alone, for messages that already quote the text.
  public var explanation: String {
    switch reason {
    case .empty: "no duration given"
    case .notANumber: "the number is malformed"
    case .missingUnit: "the unit is missing"
    case .unknownUnit(let unit): "unknown unit \(Excerpt.quoted(unit, limit: 20))"
    case .negative: "durations must not be negative"
    case .tooPrecise: "it is finer than a nanosecond"
    case .tooLarge: "it is too large: the limit is \(DurationText.format(DurationText.maximum)) (about 292 years)"
    }
  }

  public var description: String {
    "\(Excerpt.quoted(text)) is not a duration: \(explanation) "
      + "(write it like 300ms, 1.5s or 250us; units: ns, us, ms, s, min)"
  }
}

extension StringProtocol {
  var trimmingWhitespace: SubSequence {
    let start = firstIndex { !$0.isWhitespace } ?? endIndex
    let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? start
    return self[start..<Swift.max(start, end)]
  }
}
