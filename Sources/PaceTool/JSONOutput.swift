import Pace
import PaceMarbles

/// The `--json` output, written by hand so keys keep a stable order and a million
/// invocations print quickly.
///
/// ```json
/// {"command": "simulate", "trace": {...}, "strategy": {...}, "summary": {...}, "invocations": [...]}
/// {"command": "compare", "trace": {...}, "interval_ms": 300, "results": [{"strategy": {...}, "summary": {...}}]}
/// ```
///
/// Times and delays are milliseconds (numbers, up to nanosecond precision); a delay is `null`
/// when no call was covered.
enum JSONOutput {
  static func simulate(trace: Trace, result: SimulationResult) -> String {
    var json = "{\n"
    json += "  \"command\": \"simulate\",\n"
    json += "  \"trace\": \(traceObject(trace)),\n"
    json += "  \"strategy\": \(strategyObject(result.strategy)),\n"
    json += "  \"summary\": \(summaryObject(result.statistics)),\n"
    json += "  \"invocations\": ["
    for (index, invocation) in result.invocations.enumerated() {
      json += index == 0 ? "\n" : ",\n"
      json +=
        "    {\"time_ms\": \(milliseconds(invocation.time)), \"value\": \(string(invocation.value)), "
        + "\"first_call\": \(invocation.firstCall), \"call_count\": \(invocation.callCount)}"
    }
    json += result.invocations.isEmpty ? "]\n" : "\n  ]\n"
    json += "}\n"
    return json
  }

  static func compare(trace: Trace, interval: Duration, results: [SimulationResult]) -> String {
    var json = "{\n"
    json += "  \"command\": \"compare\",\n"
    json += "  \"trace\": \(traceObject(trace)),\n"
    json += "  \"interval_ms\": \(milliseconds(interval.paceNanoseconds)),\n"
    json += "  \"results\": [\n"
    json += results.map { result in
      "    {\"strategy\": \(strategyObject(result.strategy)), \"summary\": \(summaryObject(result.statistics))}"
    }.joined(separator: ",\n")
    json += "\n  ]\n}\n"
    return json
  }

  static func traceObject(_ trace: Trace) -> String {
    "{\"source\": \(string(trace.source)), \"calls\": \(trace.count), \"first_ms\": \(milliseconds(trace.times.first ?? 0)), "
      + "\"last_ms\": \(milliseconds(trace.times.last ?? 0))}"
  }

  static func strategyObject(_ strategy: Strategy) -> String {
    var fields = [
      "\"name\": \(string(strategy.label))",
      "\"primitive\": \(string(strategy.kind.rawValue))",
      "\"interval_ms\": \(milliseconds(strategy.interval.paceNanoseconds))",
    ]
    if strategy.kind != .coalesce {
      fields.append("\"leading\": \(strategy.edges.contains(.leading))")
      fields.append("\"trailing\": \(strategy.edges.contains(.trailing))")
    }
    if strategy.kind == .debounce {
      fields.append("\"max_wait_ms\": \(strategy.maxWait.map { milliseconds($0.paceNanoseconds) } ?? "null")")
    }
    fields.append("\"merge\": \(string(strategy.merge.rawValue))")
    return "{" + fields.joined(separator: ", ") + "}"
  }

  static func summaryObject(_ statistics: Statistics) -> String {
    let reduction = (statistics.reduction * 10_000).rounded() / 10_000
    return "{\"calls\": \(statistics.calls), \"invocations\": \(statistics.invocations), "
      + "\"reduction\": \(formatNumber(reduction)), \"dropped\": \(statistics.dropped), "
      + "\"delay_ms\": {\"median\": \(optional(statistics.medianDelay)), \"p95\": \(optional(statistics.p95Delay)), "
      + "\"max\": \(optional(statistics.maxDelay))}}"
  }

  static func optional(_ nanoseconds: Int64?) -> String {
    nanoseconds.map(milliseconds) ?? "null"
  }

  /// Nanoseconds as a JSON number of milliseconds: `300`, `8.333`.
  static func milliseconds(_ nanoseconds: Int64) -> String {
    (nanoseconds < 0 ? "-" : "") + DurationText.decimal(nanoseconds.magnitude, per: 1_000_000)
  }

  /// The characters a JSON string escapes by name.
  static let namedEscapes: [Unicode.Scalar: String] = [
    "\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
  ]

  static func string(_ text: String) -> String {
    let escaped = escaping(text.unicodeScalars, namedEscapes) { scalar, output in
      if scalar.value < 0x20 {
        output += unicodeEscape(UInt16(scalar.value))
      } else if scalar.value >= 0x7F && !Excerpt.isPlain(String(scalar)) {
        // Valid JSON either way, but `jq` or a terminal would show bidirectional overrides and
        // C1 controls raw: escape them, as UTF-16 code units (a pair above the BMP).
        for unit in String(scalar).utf16 { output += unicodeEscape(unit) }
      } else {
        output.unicodeScalars.append(scalar)
      }
    }
    return "\"" + escaped + "\""
  }

  /// `\u001b` for 0x1B.
  static func unicodeEscape(_ unit: UInt16) -> String {
    let hex = String(unit, radix: 16)
    return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
  }
}
