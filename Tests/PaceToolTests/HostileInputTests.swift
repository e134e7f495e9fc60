import Foundation
import PaceTestSupport
import Testing

@testable import PaceTool

/// The tool at the edges (issue 8): each reproducer from the report, then a seeded fuzz run of
/// hostile traces and arguments through ``PaceCLI/main(_:standardOutput:standardError:)``.
@Suite(.offThePool) struct HostileInputTests {
  @Test(arguments: [
    // Durations that do not fit: an error naming the limit, never an overflow trap.
    (
      ["simulate", "debounce", "--interval", "9223372036.9s", "--events", "a@0"],
      "--interval: '9223372036.9s' is too large: the limit is 1000000000s (about 31 years)"
    ),
    (
      ["simulate", "debounce", "--interval", "1s", "--max-wait", "9223372036.9s", "--events", "a@0"],
      "--max-wait: '9223372036.9s' is too large: the limit is 1000000000s (about 31 years)"
    ),
    (
      ["simulate", "debounce", "--interval", "1s", "--step", "9223372036.9s", "--events", "a@0"],
      "--step: '9223372036.9s' is too large: the limit is 1000000000s (about 31 years)"
    ),
    (
      ["compare", "--interval", "4000000000s", "--json", "--events", "a@0"],
      "--interval: '4000000000s' is too large: the limit is 1000000000s (about 31 years)"
    ),
    (
      ["simulate", "debounce", "--interval", "1000000000.000000001s", "--events", "a@0"],
      "--interval: '1000000000.000000001s' is too large: the limit is 1000000000s (about 31 years)"
    ),
    // Times that do not fit.
    (
      ["simulate", "debounce", "--interval", "1s", "--events", "a@9223372036.9s"],
      "--events: event 1 'a@9223372036.9s': time 9223372036.9s"
        + " is too large: the limit is 4000000000000ms (about 126 years)"
    ),
    (
      ["simulate", "debounce", "--interval", "100ms", "--events", "a@9223372036854775807ns"],
      "--events: event 1 'a@9223372036854775807ns': time 9223372036854775807ns"
        + " is too large: the limit is 4000000000000ms (about 126 years)"
    ),
    (
      ["compare", "--interval", "100ms", "--events", "a@0 b@9223372036854"],
      "--events: event 2 'b@9223372036854': time 9223372036854"
        + " is too large: the limit is 4000000000000ms (about 126 years)"
    ),
    // A diagram wider than the limit: refused before anything is drawn, with a step that fits.
    (
      ["simulate", "throttle", "--interval", "10ms", "--step", "1us", "--events", "a@0 b@1000000"],
      "--step 1us would draw 1000000001 columns, more than the limit of 1000: use --step 2s or longer, "
        + "or leave --step out to fit 60 columns"
    ),
    (
      ["simulate", "throttle", "--interval", "10ms", "--step", "1min", "--events", "a@0 b@3999999999999"],
      "--step 60s would draw 66666667 columns, more than the limit of 1000: use --step 5000000s or longer, "
        + "or leave --step out to fit 60 columns"
    ),
    // Raw control characters never reach the terminal; long text is cut.
    (
      ["simulate", "de\u{1B}[2Jbounce", "--interval", "1s", "--events", "a@0"],
      #"unknown strategy 'de\u{1B}[2Jbounce': use debounce, throttle or coalesce"#
    ),
    (
      ["simulate", "debounce", "--interval", "1s", "--events", "a@0 b\u{0}@x"],
      #"--events: event 2 'b\0@x': 'x' is not a time: write milliseconds like 40, or a duration like 1.5s"#
    ),
    (
      ["compare", "--interval", "1s", "--\u{7}\u{1B}]0;title\u{7}"],
      #"Unknown option '--\u{7}\u{1B}]0;title\u{7}' (see pace --help)"#
    ),
  ])
  func reproducersAreOneLineErrors(arguments: [String], message: String) {
    let run = pace(arguments)
    #expect(run.status == 2)
    #expect(run.errors == "pace: error: \(message)\n")
    #expect(run.output == "")
  }

  @Test func timesAndIntervalsAtTheLimitsRun() {
    // The latest call plus three of the longest intervals stays short of Int64.max: no deadline
    // saturates, so nothing depends on how the engine treats the end of time.
    let run = pace(["compare", "--interval", "1000000000s", "--events", "a@0 b@4000000000000 c@4000000000000"])
    #expect(run.status == 0)
    #expect(run.errors == "")
    let simulate = pace([
      "simulate", "debounce", "--interval", "1000000000s", "--max-wait", "1000000000s", "--json",
      "--events", "a@4000000000s",
    ])
    #expect(simulate.status == 0)
    #expect(simulate.output.contains("\"time_ms\": 5000000000000"))
  }

  @Test func aByteOrderMarkIsAccepted() throws {
    let trace = try TraceReader.parse(
      Data([0xEF, 0xBB, 0xBF] + Array("time_ms,value\r\n0,a\r\n40,b\r\n".utf8)), source: "excel.csv")
    #expect(trace.values == ["a", "b"])
    let json = try TraceReader.parse(Data([0xEF, 0xBB, 0xBF] + Array("{\"time_ms\": 5}\n".utf8)), source: "t.jsonl")
    #expect(json.times == [5_000_000])
    #expect(throws: ToolError("utf16.csv: the trace is UTF-16; save it as UTF-8")) {
      try TraceReader.parse(Data([0xFF, 0xFE, 0x30, 0x00]), source: "utf16.csv")
    }
  }

  @Test func aTenMegabyteValueMakesAShortMessage() throws {
    let huge = String(repeating: "v", count: 10_000_000)
    let text = "time_ms,value\n0,a\n1\(huge)\u{0}\u{1B}[31m,b\n"
    let expected = "t.csv:3: '1" + String(repeating: "v", count: 59) + "…' is not a time in milliseconds"
    #expect(throws: ToolError(expected)) {
      try TraceReader.parse(Data(text.utf8), source: "t.csv")
    }
    #expect(throws: ToolError(#"t.csv:1: expected 'time_ms,value' lines, got 'time\0\u{1B}[31m,value'"#)) {
      try TraceReader.parse(Data("time\u{0}\u{1B}[31m,value\n".utf8), source: "t.csv")
    }
  }

  @Test func valuesAreEscapedInTextOutput() {
    let run = pace(["simulate", "debounce", "--interval", "10ms", "--events", "\u{1B}[31m@0"])
    #expect(run.status == 0)
    #expect(run.output.contains(#"\u{1B}[31m"#))
    #expect(!run.output.unicodeScalars.contains("\u{1B}"))
  }

  @Test func aNeverEndingFileIsCutAtTheLimit() {
    let run = pace(["compare", "--interval", "1s", "--trace", "/dev/zero"])
    #expect(run.status == 2)
    #expect(run.errors == "pace: error: /dev/zero: the trace is larger than the limit of 256 MiB\n")
  }

  @Test func anSVGToADeviceIsWrittenInPlace() throws {
    // An atomic write would rename a file over the device; run as root, it did.
    let null = pace(["simulate", "debounce", "--interval", "1s", "--events", "a@0", "--svg", "/dev/null"])
    #expect(null.status == 0)
    #expect(
      try FileManager.default.attributesOfItem(atPath: "/dev/null")[.type] as? FileAttributeType
        == .typeCharacterSpecial)
    #if os(Linux)
    let full = pace(["simulate", "debounce", "--interval", "1s", "--events", "a@0", "--svg", "/dev/full"])
    #expect(full.status == 2)
    #expect(full.errors.hasPrefix("pace: error: /dev/full: cannot write the SVG file ("))
    #expect(
      try FileManager.default.attributesOfItem(atPath: "/dev/full")[.type] as? FileAttributeType
        == .typeCharacterSpecial)
    #endif
  }

  // MARK: Fuzz

  /// Generated runs (400; more in CI's fuzz step): hostile traces (CSV and JSON lines, truncated and oversized lines,
  /// huge, negative and NaN times, NUL bytes, escape codes, byte-order marks, CRLF) and hostile
  /// arguments, each through the tool's entry point. Every run ends with status 0 and output,
  /// or status 2 and one short, escaped line on standard error; output stays proportional to
  /// the input.
  @Test func fuzz() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pace-fuzz-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    // Tens of seconds of synchronous work: on a thread of its own, not the cooperative pool's.
    let failures = await offTheCooperativePool { Self().fuzz(runs: fuzzRuns(400), in: directory) }
    #expect(failures.isEmpty, "\(failures)")
  }

  func fuzz(runs: Int, in directory: URL) -> Failures {
    var failures = Failures()
    var fuzzer = HostileInputs(seed: 2_026)
    var statuses: [Int32: Int] = [:]
    for index in 0..<runs {
      var arguments = fuzzer.arguments()
      var inputBytes = arguments.reduce(0) { $0 + $1.utf8.count }
      if arguments.contains("@trace") {
        let isJSON = fuzzer.random.next(upTo: 3) == 0
        let bytes = isJSON ? fuzzer.jsonTrace() : fuzzer.csvTrace()
        let path = directory.appendingPathComponent("t\(index).\(isJSON ? "jsonl" : "csv")").path
        do {
          try Data(bytes).write(to: URL(fileURLWithPath: path))
        } catch {
          failures.record(error, "run \(index): writing the trace")
          continue
        }
        arguments = arguments.map { $0 == "@trace" ? path : $0 }
        inputBytes += bytes.count
      }
      let run = pace(arguments)
      statuses[run.status, default: 0] += 1
      let context = "run \(index): \(arguments.map { String($0.prefix(80)) })"
      failures.check(run.status == 0 || run.status == 2, context)
      if run.status == 2 {
        failures.check(run.output == "", context)
        failures.check(run.errors.hasPrefix("pace: error: ") && run.errors.hasSuffix("\n"), context)
        let line = run.errors.dropLast()
        failures.check(!line.contains("\n"), context)
        failures.check(line.unicodeScalars.allSatisfy(isPrintable), context)
        failures.check(line.unicodeScalars.count <= PaceCLI.maximumErrorLength + 20, context)
      } else {
        failures.check(run.errors == "", context)
        failures.check(!run.output.isEmpty, context)
        failures.check(run.output.unicodeScalars.allSatisfy { $0 == "\n" || isPrintable($0) }, context)
        failures.check(run.output.utf8.count <= 200 * inputBytes + 200_000, context)
      }
    }
    // The generator reaches both outcomes often; a change that made every run fail would show here.
    failures.check(statuses[0, default: 0] > runs / 5, "statuses \(statuses)")
    failures.check(statuses[2, default: 0] > runs / 5, "statuses \(statuses)")
    return failures
  }

  func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
    !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
      || scalar.properties.generalCategory == .format && scalar != "\u{200D}")
  }

  func pace(_ arguments: [String]) -> (status: Int32, output: String, errors: String) {
    var output = ""
    var errors = ""
    let status = PaceCLI.main(arguments, standardOutput: { output += $0 }, standardError: { errors += $0 })
    return (status, output, errors)
  }
}

/// Hostile traces and argument lists, from a seed.
struct HostileInputs {
  var random: SeededGenerator
  /// Whether this run mixes in hostile pieces; the other half are well formed, so the runs that
  /// get through to the engine and the renderers are as many as those stopped at the door.
  var hostile = true

  init(seed: UInt64) { random = SeededGenerator(seed: seed) }

  mutating func pick<T>(_ choices: [T]) -> T { choices[random.next(upTo: choices.count)] }

  /// `true` one time in `n` on a hostile run, never on a well-formed one.
  mutating func odd(_ n: Int) -> Bool { hostile && random.next(upTo: n) == 0 }

  static let goodDurations = ["0ms", "1ns", "10ms", "40ms", "300ms", "1s", "1.5s", "8.333ms", "1000000000s", "2min"]

  static let durations = [
    "0ms", "1ns", "10ms", "300ms", "1s", "1.5s", "8.333ms", "1000000000s", "1000000000.000000001s", "4000000000s",
    "9223372036.9s", "9223372036854775807ns", "-1s", "1.5.s", "", " ", "ms", "300", "1e3ms", "NaN", "inf s",
    "0.00000000005min", "٣ms", "\u{0}ms", "3\u{1B}[31mms", String(repeating: "9", count: 5_000) + "ms",
  ]

  static let times = [
    "0", "0", "1", "40", "40", "90", "1.5", "0.000001", "0.0000001", "-5", "-0", "4000000000000",
    "4000000000000.000001",
    "9223372036854", "9223372036854775807", "99999999999999999999999", "1e3", "NaN", "inf", "", " ", ".", "1.2.3",
    "0x10", "٣", "\u{0}", "1,5", "00000000000000000000000001",
  ]

  static let values = [
    "a", "b", "c", "1", "2.5", "", "x y", "\u{0}", "\u{1B}[31m", "é", "👩‍💻", "\u{202E}evil", "\"quoted, value\"",
    "\"unterminated", "\"a\"\"b\"", "'", ",", "\r", "\u{FEFF}", "nan", "1e308", "-1e308",
  ]

  mutating func duration() -> String {
    odd(2) ? pick(Self.durations) : pick(Self.goodDurations)
  }

  mutating func time() -> String {
    odd(2) ? pick(Self.times) : String(random.next(upTo: 5_000))
  }

  /// A value; even a well-formed run has odd characters and the occasional huge value.
  mutating func value() -> String {
    random.next(upTo: 40) == 0
      ? String(repeating: pick(["v", "\u{0}", "é"]), count: random.next(upTo: 200_000)) : pick(Self.values)
  }

  /// `--events` text: mostly well formed and in order, with hostile tokens mixed in.
  mutating func events() -> String {
    var tokens: [String] = []
    var time = 0
    for _ in 0..<random.next(upTo: 30) {
      switch hostile ? random.next(upTo: 20) : 10 {
      case 0: tokens.append("\(value())@\(self.time())")
      case 1: tokens.append("\(value())@\(duration())")
      case 2: tokens.append(pick(["@", "a@", "@@", "a", "a@b@c", "\u{0}", "\u{1B}[2J"]))
      default:
        time += random.next(upTo: 400)
        tokens.append("\(pick(["a", "b", "c", "1", "2"]))@\(time)")
      }
    }
    return tokens.joined(separator: pick([" ", " ", ",", "\n", "\t", "  "]))
  }

  mutating func arguments() -> [String] {
    hostile = random.next(upTo: 2) == 0
    var arguments: [String]
    switch hostile ? random.next(upTo: 10) : random.next(upTo: 9) {
    case 0...4:
      arguments = [
        "simulate",
        hostile ? pick(["debounce", "throttle", "bogus", ""]) : pick(["debounce", "throttle", "coalesce"]),
      ]
    case 5...8: arguments = ["compare"]
    default: arguments = [pick(["demo", "help", "--help", "", "-", "--", "\u{1B}[2J", "simulate"])]
    }
    if !odd(12) { arguments += ["--interval", duration()] }
    if odd(3) || (arguments.contains("debounce") && random.next(upTo: 3) == 0) {
      arguments += ["--max-wait", duration()]
    }
    if random.next(upTo: 4) == 0 { arguments += ["--step", duration()] }
    if odd(3) || (arguments.contains("throttle") && random.next(upTo: 3) == 0) {
      arguments += [pick(["--leading", "--no-leading", "--trailing", "--no-trailing"])]
    }
    if random.next(upTo: 4) == 0 {
      arguments += ["--merge", odd(2) ? pick(["sum", "max", ""]) : pick(["latest", "first", "append"])]
    }
    if random.next(upTo: 3) == 0 { arguments.append("--json") }
    switch hostile ? random.next(upTo: 10) : random.next(upTo: 9) {
    case 0...4: arguments += ["--trace", "@trace"]
    case 5...8: arguments += ["--events", events()]
    default: arguments += [pick(["--events", "--trace", "--interval=", "--bogus", "-x", "--trace=/dev/null", "--"])]
    }
    if odd(10) { arguments.shuffle(using: &random) }
    return arguments
  }

  /// A CSV trace: metadata, a header, lines in order, and hostile bytes here and there.
  mutating func csvTrace() -> [UInt8] {
    var lines: [String] = []
    if random.next(upTo: 4) == 0 { lines.append("# title: \(value())") }
    if random.next(upTo: 2) == 0 {
      lines.append(odd(2) ? "time,value" : pick(["time_ms,value", "TIME_MS, VALUE", "time_ms"]))
    }
    var time = 0
    for _ in 0..<random.next(upTo: 60) {
      switch hostile ? random.next(upTo: 24) : 10 {
      case 0: lines.append("\(self.time()),\(value())")
      case 1: lines.append(pick(["", "#", "# note", ",", ",,", "\u{0}", "\u{1B}[2J", "   ", "\"", "\t0,a"]))
      case 2: lines.append(String("\(time),\(value())".prefix(random.next(upTo: 6))))  // truncated
      default:
        time += random.next(upTo: 300)
        lines.append("\(time)\(pick(["", ".5", ".000001"])),\(value())")
      }
    }
    var bytes = Array(lines.joined(separator: pick(["\n", "\r\n", "\n\n"])).utf8)
    if random.next(upTo: 5) == 0 { bytes = [0xEF, 0xBB, 0xBF] + bytes }
    if odd(15) { bytes = [0xFF, 0xFE] + bytes }
    if odd(8), !bytes.isEmpty {
      for _ in 0..<random.next(upTo: 5) {
        bytes[random.next(upTo: bytes.count)] = UInt8(truncatingIfNeeded: random.next())
      }
    }
    return bytes
  }

  /// A JSON-lines trace, with malformed objects, escapes and odd numbers mixed in.
  mutating func jsonTrace() -> [UInt8] {
    var lines: [String] = []
    var time = 0
    for _ in 0..<random.next(upTo: 60) {
      switch hostile ? random.next(upTo: 20) : 10 {
      case 0: lines.append("{\"time_ms\": \(self.time()), \"value\": \"\(value())\"}")
      case 1:
        lines.append(
          pick([
            "{", "}", "{\"time_ms\": }", "{\"time_ms\": \"5\"}", "{\"value\": \"a\"}", "[1, 2]", "{\"time_ms\": 1e3}",
            "{\"time_ms\": NaN}", "{\"time_ms\": 5, \"value\": \"\\u0000\\u001b[31m\"}",
            "{\"time_ms\": 5, \"value\": \"\\ud83d\"}",
            "{\"time_ms\": 5, \"value\": \"\\u12\"}", "{\"time_ms\": 5, \"value\": {\"nested\": [1, 2]}}",
            "{\"time_ms\": 5 \"value\": 1}",
            "{\"time_ms\": 5, \"value\": \"a}", "{\"\u{0}\": 1}",
          ]))
      default:
        time += random.next(upTo: 300)
        lines.append("{\"time_ms\": \(time), \"value\": \(pick(["\"a\"", "\"b\"", "3", "2.5", "true", "null"]))}")
      }
    }
    var bytes = Array(lines.joined(separator: pick(["\n", "\r\n"])).utf8)
    if odd(6) { bytes = Array(bytes.prefix(random.next(upTo: bytes.count + 1))) }
    return bytes
  }
}
