import Foundation
import Pace
import PaceMarbles

/// A recorded timeline of calls: when each happened and the value it carried.
///
/// Times are nanoseconds from the start of the recording; they never go backwards, and calls
/// at the same instant keep their order (they happened in one run-loop turn).
public struct Trace: Sendable, Equatable {
  /// Where the trace came from, for messages: a file path (escaped, see ``ToolError``),
  /// `--events`, or a bundled name.
  public var source: String
  /// The time of each call, in nanoseconds.
  public var times: [Int64]
  /// The value of each call.
  public var values: [String]
  /// The line (or, for `--events`, the position) each call was read from, for messages.
  public var lines: [Int]
  /// `# key: value` comments from the top of a CSV trace: `title`, `about`, `interval`, `fits`.
  public var metadata: [String: String]

  /// A trace of `events` (time in nanoseconds, value), in time order.
  public init(source: String, events: [(Int64, String)], metadata: [String: String] = [:]) {
    self.source = source
    self.times = events.map(\.0)
    self.values = events.map(\.1)
    self.lines = Array(1..<(events.count + 1))
    self.metadata = metadata
  }

  init(source: String, times: [Int64], values: [String], lines: [Int], metadata: [String: String]) {
    self.source = source
    self.times = times
    self.values = values
    self.lines = lines
    self.metadata = metadata
  }

  /// The number of calls.
  public var count: Int { times.count }

  /// The time from the first call to the last.
  public var span: Int64 { (times.last ?? 0) - (times.first ?? 0) }

  /// The trace's title, or its source.
  public var title: String { metadata["title"] ?? source }
}

/// Reads traces: CSV (`time_ms,value`) or JSON lines (`{"time_ms": 12.5, "value": "a"}`).
///
/// - CSV: one `time_ms,value` line per call. The `time_ms,value` header is optional; blank lines
///   and `#` comments are skipped, and `# key: value` comments before the first call are
///   metadata. The value is the rest of the line after the first comma, trimmed; it may be
///   double-quoted (`"a, b"`, with `""` for a quote). A line with only a time gets the value `x`.
/// - JSON lines: one object per line with a number `time_ms` and an optional `value` (a string,
///   or a number taken as written); other keys are ignored. Blank lines are skipped.
/// - Times are milliseconds, not negative, with at most 6 decimals (nanoseconds), at most
///   ``ToolLimits/maximumTime``, and never go backwards. Equal times are calls in one run-loop turn.
/// - A UTF-8 byte-order mark (as Excel's CSV export writes) is skipped; UTF-16 is refused.
///
/// The format comes from the extension (`.csv`; `.jsonl`, `.ndjson`, `.json`), else from the
/// first line (`{` means JSON lines).
public enum TraceReader {
  /// The value of a call whose line gives none.
  public static let defaultValue = "x"

  /// Reads the trace file at `path`.
  ///
  /// - Throws: ``ToolError`` naming the file, the line and the reason.
  public static func read(path: String) throws(ToolError) -> Trace {
    let name = ToolError.name(path)
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
      throw ToolError("\(name): no such file")
    }
    guard !isDirectory.boolValue else { throw ToolError("\(name): is a directory, not a trace file") }
    guard let file = FileHandle(forReadingAtPath: path) else { throw ToolError("\(name): cannot be read") }
    defer { try? file.close() }
    // Read in chunks up to the limit rather than all at once: the path may be a pipe or
    // /dev/zero, which never ends.
    var data = Data()
    do {
      while let chunk = try file.read(upToCount: 1 << 20), !chunk.isEmpty {
        data.append(chunk)
        if data.count > ToolLimits.maximumTraceBytes {
          throw ToolError("\(name): the trace is larger than the limit of \(ToolLimits.maximumTraceBytes >> 20) MiB")
        }
      }
    } catch let error as ToolError {
      throw error
    } catch {
      throw ToolError("\(name): cannot be read (\(Excerpt.escaped(error.localizedDescription, limit: 200)))")
    }
    return try parse(data, source: path)
  }

  /// Parses the bytes of a trace; `source` names it in messages and picks the format.
  public static func parse(_ data: Data, source: String) throws(ToolError) -> Trace {
    var bytes = [UInt8](data)
    let lowered = source.lowercased()
    let source = ToolError.name(source)
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
    if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) {
      throw ToolError("\(source): the trace is UTF-16; save it as UTF-8")
    }
    let isJSON: Bool
    if lowered.hasSuffix(".csv") {
      isJSON = false
    } else if lowered.hasSuffix(".jsonl") || lowered.hasSuffix(".ndjson") || lowered.hasSuffix(".json") {
      isJSON = true
    } else {
      isJSON = bytes.first { $0 != .space && $0 != .tab && $0 != .newline && $0 != .carriageReturn } == .openBrace
    }
    var reader = LineParser(bytes: bytes, source: source, isJSON: isJSON)
    return try reader.parse()
  }

  /// Parses `--events "a@0 b@40 c@1.5s"`: `value@time` separated by spaces, the time in
  /// milliseconds or with a unit. A missing value (`@40`) is `x`.
  public static func parseEvents(_ text: String) throws(ToolError) -> Trace {
    var times: [Int64] = []
    var values: [String] = []
    var positions: [Int] = []
    let tokens = text.split(whereSeparator: { $0.isWhitespace || $0 == "," })
    for (index, token) in tokens.enumerated() {
      let position = index + 1
      func fail(_ reason: String) -> ToolError {
        ToolError("--events: event \(position) \(Excerpt.quoted(token)): \(reason)")
      }
      guard let at = token.lastIndex(of: "@") else { throw fail("expected value@time, like a@40") }
      let value = String(token[..<at])
      let timeText = String(token[token.index(after: at)...])
      let time: Int64
      guard let firstCharacter = timeText.first, firstCharacter.isNumber || firstCharacter == "." else {
        throw fail("\(Excerpt.quoted(timeText)) is not a time: write milliseconds like 40, or a duration like 1.5s")
      }
      if let unit = timeText.last, unit.isLetter {
        do {
          time = try DurationText.parse(timeText).paceNanoseconds
        } catch  where error.reason == .tooLarge {
          throw fail(TimeError.tooLarge.text(for: timeText))
        } catch {
          throw fail(error.description)
        }
        guard time <= ToolLimits.maximumTime else { throw fail(TimeError.tooLarge.text(for: timeText)) }
      } else {
        switch parseMilliseconds(Array(timeText.utf8)[...]) {
        case .success(let nanos): time = nanos
        case .failure(let reason): throw fail(reason.text(for: timeText))
        }
      }
      if let previous = times.last, time < previous {
        throw fail(
          "time \(formatMilliseconds(time)) goes backwards (event \(position - 1) is at \(formatMilliseconds(previous)))"
        )
      }
      times.append(time)
      values.append(value.isEmpty ? defaultValue : value)
      positions.append(position)
    }
    guard !times.isEmpty else { throw ToolError("--events: no events given (write them like \"a@0 b@40 c@90\")") }
    return Trace(source: "--events", times: times, values: values, lines: positions, metadata: [:])
  }

  enum TimeError: Error {
    case notANumber
    case negative
    case tooPrecise
    case tooLarge

    /// The reason, quoting at most 60 characters of `time`, escaped.
    func text(for time: some StringProtocol) -> String {
      switch self {
      case .notANumber: "\(Excerpt.quoted(time)) is not a time in milliseconds"
      case .negative: "time \(Excerpt.escaped(time, limit: Excerpt.limit)) is negative"
      case .tooPrecise:
        "time \(Excerpt.escaped(time, limit: Excerpt.limit)) has more than 6 decimals (finer than a nanosecond)"
      case .tooLarge:
        "time \(Excerpt.escaped(time, limit: Excerpt.limit)) is too large: the limit is \(ToolLimits.maximumTimeText)"
      }
    }
  }

  /// Milliseconds such as `8.333` as exact nanoseconds.
  static func parseMilliseconds(_ bytes: ArraySlice<UInt8>) -> Result<Int64, TimeError> {
    guard !bytes.isEmpty else { return .failure(.notANumber) }
    if bytes.first == .minus { return .failure(.negative) }
    var whole: Int64 = 0
    var fraction: Int64 = 0
    var fractionDigits = 0
    var seenDot = false
    var digits = 0
    for byte in bytes {
      if byte == .dot {
        if seenDot { return .failure(.notANumber) }
        seenDot = true
        continue
      }
      guard byte >= .zero, byte <= .nine else { return .failure(.notANumber) }
      let digit = Int64(byte - .zero)
      digits += 1
      if seenDot {
        fractionDigits += 1
        if fractionDigits > 6 {
          if digit != 0 { return .failure(.tooPrecise) }
          continue
        }
        fraction = fraction * 10 + digit
      } else {
        let (times10, overflow1) = whole.multipliedReportingOverflow(by: 10)
        let (sum, overflow2) = times10.addingReportingOverflow(digit)
        if overflow1 || overflow2 { return .failure(.tooLarge) }
        whole = sum
      }
    }
    guard digits > 0 else { return .failure(.notANumber) }
    while fractionDigits < 6 {
      fraction *= 10
      fractionDigits += 1
    }
    let (wholeNanos, overflow) = whole.multipliedReportingOverflow(by: 1_000_000)
    if overflow || wholeNanos > ToolLimits.maximumTime - fraction { return .failure(.tooLarge) }
    return .success(wholeNanos + fraction)
  }
}

/// Formats nanoseconds as milliseconds: `300ms`, `8.333ms`, `1250ms`.
func formatMilliseconds(_ nanoseconds: Int64) -> String {
  let sign = nanoseconds < 0 ? "-" : ""
  let magnitude = nanoseconds.magnitude
  // Round to the microsecond: tables need no more.
  let micros = (magnitude + 500) / 1_000
  return sign + DurationText.decimal(micros, per: 1_000) + "ms"
}

/// The line-by-line reader behind ``TraceReader``; works on bytes so a million lines take
/// well under a second.
private struct LineParser {
  let bytes: [UInt8]
  let source: String
  let isJSON: Bool

  var times: [Int64] = []
  var values: [String] = []
  var lines: [Int] = []
  var metadata: [String: String] = [:]

  init(bytes: [UInt8], source: String, isJSON: Bool) {
    self.bytes = bytes
    self.source = source
    self.isJSON = isJSON
  }

  mutating func parse() throws(ToolError) -> Trace {
    // One call per line at most: reserve once rather than grow a million-element array.
    let lineCount = bytes.withUnsafeBufferPointer { buffer in
      buffer.reduce(into: 1) { count, byte in if byte == .newline { count += 1 } }
    }
    times.reserveCapacity(lineCount)
    values.reserveCapacity(lineCount)
    lines.reserveCapacity(lineCount)
    var lineNumber = 0
    var start = 0
    var sawHeaderOrEvent = false
    while start < bytes.count {
      lineNumber += 1
      var end = start
      while end < bytes.count, bytes[end] != .newline { end += 1 }
      var lineEnd = end
      if lineEnd > start, bytes[lineEnd - 1] == .carriageReturn { lineEnd -= 1 }
      let line = trim(bytes[start..<lineEnd])
      start = end + 1

      if line.isEmpty { continue }
      if isJSON {
        let (time, value) = try parseJSONLine(line, lineNumber: lineNumber)
        try append(time: time, value: value, lineNumber: lineNumber)
        continue
      }
      if line.first == .hash {
        if !sawHeaderOrEvent { readMetadata(line) }
        continue
      }
      let comma = line.firstIndex(of: .comma)
      let timeField = trim(line[line.startIndex..<(comma ?? line.endIndex)])
      if !sawHeaderOrEvent,
        timeField.first.map({ !($0 >= .zero && $0 <= .nine) && $0 != .dot && $0 != .minus }) ?? false
      {
        let headerText = String(decoding: line, as: UTF8.self).lowercased().replacingOccurrences(of: " ", with: "")
        guard headerText == "time_ms,value" || headerText == "time_ms" else {
          throw ToolError.at(
            source, line: lineNumber,
            "expected 'time_ms,value' lines, got \(Excerpt.quoted(excerpt(of: line)))")
        }
        sawHeaderOrEvent = true
        continue
      }
      sawHeaderOrEvent = true
      let time = try parseTime(timeField, lineNumber: lineNumber)
      var value = TraceReader.defaultValue
      if let comma {
        let field = trim(line[(comma + 1)...])
        if !field.isEmpty { value = try unquote(field, lineNumber: lineNumber) }
      }
      try append(time: time, value: value, lineNumber: lineNumber)
    }
    guard !times.isEmpty else { throw ToolError("\(source): the trace is empty (no calls)") }
    return Trace(source: source, times: times, values: values, lines: lines, metadata: metadata)
  }

  private mutating func append(time: Int64, value: String, lineNumber: Int) throws(ToolError) {
    if let previous = times.last, time < previous {
      throw ToolError.at(
        source, line: lineNumber,
        "time \(formatMilliseconds(time)) goes backwards (line \(lines.last!) is at \(formatMilliseconds(previous)))")
    }
    times.append(time)
    values.append(value)
    lines.append(lineNumber)
  }

  private func parseTime(_ field: ArraySlice<UInt8>, lineNumber: Int) throws(ToolError) -> Int64 {
    switch TraceReader.parseMilliseconds(field) {
    case .success(let nanos): return nanos
    case .failure(let error):
      throw ToolError.at(source, line: lineNumber, error.text(for: excerpt(of: field)))
    }
  }

  private func unquote(_ field: ArraySlice<UInt8>, lineNumber: Int) throws(ToolError) -> String {
    guard field.first == .quote else { return String(decoding: field, as: UTF8.self) }
    var result: [UInt8] = []
    var index = field.startIndex + 1
    while index < field.endIndex {
      if field[index] == .quote {
        if index + 1 < field.endIndex, field[index + 1] == .quote {
          result.append(.quote)
          index += 2
          continue
        }
        guard index + 1 == field.endIndex else {
          throw ToolError.at(source, line: lineNumber, "unexpected text after the closing quote of the value")
        }
        return String(decoding: result, as: UTF8.self)
      }
      result.append(field[index])
      index += 1
    }
    throw ToolError.at(source, line: lineNumber, "the quoted value is never closed")
  }

  private mutating func readMetadata(_ line: ArraySlice<UInt8>) {
    let text = String(decoding: line.dropFirst(), as: UTF8.self)
    guard let colon = text.firstIndex(of: ":") else { return }
    let key = text[..<colon].trimmingCharacters(in: .whitespaces)
    let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    guard !key.isEmpty, !key.contains(" ") else { return }
    metadata[key] = value
  }

  /// The start of `bytes` as text for a message: enough for ``Excerpt``, not the whole line.
  private func excerpt(of bytes: ArraySlice<UInt8>) -> String {
    String(decoding: bytes.prefix(4 * Excerpt.limit), as: UTF8.self)
  }

  private func trim(_ slice: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var lower = slice.startIndex
    var upper = slice.endIndex
    while lower < upper, slice[lower] == .space || slice[lower] == .tab { lower += 1 }
    while upper > lower, slice[upper - 1] == .space || slice[upper - 1] == .tab { upper -= 1 }
    return slice[lower..<upper]
  }

  // MARK: JSON lines

  /// A flat JSON object: `{"time_ms": 12.5, "value": "a"}`.
  private func parseJSONLine(_ line: ArraySlice<UInt8>, lineNumber: Int) throws(ToolError) -> (Int64, String) {
    var scanner = JSONScanner(bytes: line)
    func fail(_ reason: String) -> ToolError {
      ToolError.at(source, line: lineNumber, reason)
    }
    var time: Int64?
    var value: String?
    do {
      try scanner.expect(.openBrace, "a JSON object starting with '{'")
      scanner.skipSpaces()
      if scanner.peek == .closeBrace {
        scanner.index += 1
      } else {
        while true {
          scanner.skipSpaces()
          let key = try scanner.string()
          scanner.skipSpaces()
          try scanner.expect(.colon, "':' after the key \(Excerpt.quoted(key, limit: 30))")
          scanner.skipSpaces()
          let item = try scanner.value()
          switch key {
          case "time_ms":
            guard case .number(let raw) = item else { throw fail("\"time_ms\" must be a number") }
            switch TraceReader.parseMilliseconds(raw) {
            case .success(let nanos): time = nanos
            case .failure(let error): throw fail(error.text(for: excerpt(of: raw)))
            }
          case "value":
            switch item {
            case .string(let text): value = text
            case .number(let raw): value = String(decoding: raw, as: UTF8.self)
            case .other: throw fail("\"value\" must be a string or a number")
            }
          default:
            break
          }
          scanner.skipSpaces()
          if scanner.peek == .comma {
            scanner.index += 1
            continue
          }
          try scanner.expect(.closeBrace, "',' or '}'")
          break
        }
      }
      scanner.skipSpaces()
      if scanner.index < line.endIndex { throw JSONScanner.Failure(reason: "unexpected text after the object") }
    } catch let error as JSONScanner.Failure {
      throw fail("column \((error.index ?? scanner.index) - line.startIndex + 1): \(error.reason)")
    } catch let error as ToolError {
      throw error
    } catch {
      throw fail(Excerpt.escaped("\(error)", limit: 200))
    }
    guard let time else { throw fail("the object has no \"time_ms\"") }
    let text = value ?? TraceReader.defaultValue
    return (time, text.isEmpty ? TraceReader.defaultValue : text)
  }
}

/// Just enough JSON for one flat object per line.
private struct JSONScanner {
  struct Failure: Error {
    var reason: String
    /// Where the problem starts, if not where the scanner stopped.
    var index: Int?
  }

  enum Item {
    case string(String)
    case number(ArraySlice<UInt8>)
    case other
  }

  let bytes: ArraySlice<UInt8>
  var index: Int

  init(bytes: ArraySlice<UInt8>) {
    self.bytes = bytes
    self.index = bytes.startIndex
  }

  var peek: UInt8? { index < bytes.endIndex ? bytes[index] : nil }

  mutating func skipSpaces() {
    while let byte = peek, byte == .space || byte == .tab { index += 1 }
  }

  mutating func expect(_ byte: UInt8, _ what: String) throws {
    guard peek == byte else {
      let found = peek.map { Excerpt.quoted(String(decoding: [$0], as: UTF8.self)) } ?? "the end of the line"
      throw Failure(reason: "expected \(what), found \(found)")
    }
    index += 1
  }

  mutating func value() throws -> Item {
    switch peek {
    case .quote?:
      return .string(try string())
    case let byte? where byte == .minus || (byte >= .zero && byte <= .nine):
      let start = index
      while let byte = peek,
        byte == .minus || byte == .plus || byte == .dot || byte == UInt8(ascii: "e")
          || byte == UInt8(ascii: "E") || (byte >= .zero && byte <= .nine)
      {
        index += 1
      }
      return .number(bytes[start..<index])
    default:
      // true, false, null, arrays and objects: skip a simple literal.
      let start = index
      while let byte = peek, byte != .comma, byte != .closeBrace { index += 1 }
      if start == index { throw Failure(reason: "expected a value") }
      return .other
    }
  }

  mutating func string() throws -> String {
    let start = index
    try expect(.quote, "'\"'")
    var result: [UInt8] = []
    while let byte = peek {
      index += 1
      switch byte {
      case .quote:
        return String(decoding: result, as: UTF8.self)
      case .backslash:
        guard let escaped = peek else { break }
        index += 1
        switch escaped {
        case UInt8(ascii: "n"): result.append(.newline)
        case UInt8(ascii: "t"): result.append(.tab)
        case UInt8(ascii: "r"): result.append(.carriageReturn)
        case UInt8(ascii: "b"): result.append(0x08)
        case UInt8(ascii: "f"): result.append(0x0C)
        case UInt8(ascii: "u"):
          guard index + 4 <= bytes.endIndex,
            let scalarValue = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16)
          else { throw Failure(reason: "malformed \\u escape") }
          index += 4
          let scalar = Unicode.Scalar(scalarValue) ?? "\u{FFFD}"
          result.append(contentsOf: Array(String(Character(scalar)).utf8))
        default: result.append(escaped)  // \" \\ \/
        }
      default:
        result.append(byte)
      }
    }
    throw Failure(reason: "a string is never closed", index: start)
  }
}

extension UInt8 {
  static let newline = UInt8(ascii: "\n")
  static let carriageReturn = UInt8(ascii: "\r")
  static let space = UInt8(ascii: " ")
  static let tab = UInt8(ascii: "\t")
  static let comma = UInt8(ascii: ",")
  static let dot = UInt8(ascii: ".")
  static let minus = UInt8(ascii: "-")
  static let plus = UInt8(ascii: "+")
  static let hash = UInt8(ascii: "#")
  static let quote = UInt8(ascii: "\"")
  static let backslash = UInt8(ascii: "\\")
  static let colon = UInt8(ascii: ":")
  static let openBrace = UInt8(ascii: "{")
  static let closeBrace = UInt8(ascii: "}")
  static let zero = UInt8(ascii: "0")
  static let nine = UInt8(ascii: "9")
}
