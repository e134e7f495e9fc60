/// HTTP dates (RFC 9110, section 5.6.7), parsed without Foundation: the IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms a recipient must accept, RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
///
/// Anything else, an impossible date (February 30th, hour 24) included, is `nil`: never a trap.
public enum HTTPDate {
  private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
  private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
  private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

  /// The Unix time, in seconds, of an HTTP date; `nil` if `text` is none.
  ///
  /// - Parameters:
  ///   - text: The field's value.
  ///   - unixNow: The Unix time now, in seconds: an RFC 850 date's two-digit year is the one that
  ///     is not more than 50 years in the future (RFC 9110).
  /// - Returns: Seconds since 1970-01-01 00:00:00 UTC (negative before); `nil` for a date that
  ///   is not one, or one whose seconds do not fit in an `Int64` (a two-digit year read against a
  ///   `unixNow` near either end).
  public static func unixSeconds(parsing text: String, unixNow: Int64) -> Int64? {
    // A date is short: a longer value is not one, and is not worth splitting.
    guard text.utf8.count <= 64 else { return nil }
    let words = text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    switch words.count {
    case 6:
      // IMF-fixdate: day-name "," SP day SP month SP year SP time SP "GMT"
      guard words[0].hasSuffix(","), shortDays.contains(String(words[0].dropLast())), words[5] == "gmt",
        let day = number(words[1], digits: 2...2), let month = months.firstIndex(of: words[2]),
        let year = number(words[3], digits: 4...4)
      else { return nil }
      return unixSeconds(year: year, month: month + 1, day: day, time: words[4])
    case 4:
      // RFC 850: day-name-l "," SP day "-" month "-" 2DIGIT SP time SP "GMT"
      guard words[0].hasSuffix(","), longDays.contains(String(words[0].dropLast())), words[3] == "gmt" else {
        return nil
      }
      let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
      guard parts.count == 3, let day = number(parts[0], digits: 2...2), let month = months.firstIndex(of: parts[1]),
        let twoDigits = number(parts[2], digits: 2...2)
      else { return nil }
      return unixSeconds(year: fullYear(twoDigits, unixNow: unixNow), month: month + 1, day: day, time: words[2])
    case 5:
      // asctime: day-name SP month SP ( 2DIGIT / ( SP DIGIT )) SP time SP year
      guard shortDays.contains(words[0]), let month = months.firstIndex(of: words[1]),
        let day = number(words[2], digits: 1...2), let year = number(words[4], digits: 4...4)
      else { return nil }
      return unixSeconds(year: year, month: month + 1, day: day, time: words[3])
    default:
      return nil
    }
  }

  /// The year of an RFC 850 date's two digits: the one that is not more than 50 years ahead.
  static func fullYear(_ twoDigits: Int, unixNow: Int64) -> Int {
    let nowYear = civilYear(unixSeconds: unixNow)
    var year = nowYear - nowYear % 100 + twoDigits
    if year > nowYear + 50 { year -= 100 }
    return year
  }

  /// A decimal number of `digits` ASCII digits; `nil` otherwise.
  static func number(_ text: String, digits: ClosedRange<Int>) -> Int? {
    let bytes = text.utf8
    guard digits.contains(bytes.count) else { return nil }
    var value = 0
    for byte in bytes {
      guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
      value = value * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return value
  }

  /// The Unix time of a date and an `hh:mm:ss` time; `nil` if either is impossible.
  static func unixSeconds(year: Int, month: Int, day: Int, time: String) -> Int64? {
    let parts = time.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
    guard parts.count == 3, let hour = number(parts[0], digits: 2...2), let minute = number(parts[1], digits: 2...2),
      let second = number(parts[2], digits: 2...2), hour < 24, minute < 60, second <= 60,
      (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day)
    else { return nil }
    // A leap second counts as the second before it.
    let seconds = Int64(hour * 3600 + minute * 60 + min(second, 59))
    // An RFC 850 year read against a clock near either end of Int64 may fall past it: not a date.
    let (daySeconds, overflow) = daysFromCivil(year: year, month: month, day: day).multipliedReportingOverflow(
      by: 86_400)
    guard !overflow else { return nil }
    let (unixSeconds, past) = daySeconds.addingReportingOverflow(seconds)
    return past ? nil : unixSeconds
  }

  static func isLeap(_ year: Int) -> Bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
  }

  static func daysIn(month: Int, year: Int) -> Int {
    switch month {
    case 2: isLeap(year) ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
  }

  /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
  /// `days_from_civil`).
  static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
    let y = Int64(month <= 2 ? year - 1 : year)
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let m = Int64(month)
    let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  /// The Gregorian year of a Unix time (Howard Hinnant's `civil_from_days`).
  static func civilYear(unixSeconds: Int64) -> Int {
    let days = unixSeconds / 86_400 - (unixSeconds % 86_400 < 0 ? 1 : 0)
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    return Int(clamping: year)
  }
}
