import Foundation
import PaceTestSupport
import Testing

@testable import PaceTool

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Runs `pace` in-process and returns its status and output.
func pace(_ arguments: String...) -> (status: Int32, output: String, errors: String) {
  var output = ""
  var errors = ""
  let status = PaceCLI.main(arguments, standardOutput: { output += $0 }, standardError: { errors += $0 })
  return (status, output, errors)
}

@Suite struct SimulateCommandTests {
  @Test func debounceOnInlineEvents() {
    let run = pace("simulate", "debounce", "--interval", "300ms", "--events", "a@0 b@40 c@90")
    #expect(run.status == 0)
    #expect(run.errors == "")
    #expect(
      run.output == """
        debounce 300ms, edges trailing, merge latest
        3 calls over 90ms; one column is 10ms

                    0         100ms     200ms     300ms
          calls     a---b----c------------------------------
          debounce  ---------------------------------------c

          #   time  value  calls  delay
          1  390ms  c      1-3    300ms to 390ms

        3 calls in, 1 invocation out (66.7% fewer); delay median 350ms, p95 390ms, max 390ms; 0 dropped

        """)
  }

  @Test func throttleLeadingOnlyWithAStep() {
    let run = pace(
      "simulate", "throttle", "--interval", "100ms", "--no-trailing", "--step", "20ms",
      "--events", "a@0 b@40 c@90 d@130 e@250")
    #expect(run.status == 0)
    #expect(
      run.output == """
        throttle 100ms, edges leading, merge latest
        5 calls over 250ms; one column is 20ms

                            0         200ms
          calls             a-b-c-d-----e
          throttle leading  a-----d-----e

          #   time  value  calls  delay
          1    0ms  a      1      0ms
          2  130ms  d      4      0ms
          3  250ms  e      5      0ms

        5 calls in, 3 invocations out (40.0% fewer); delay median 0ms, p95 0ms, max 0ms; 2 dropped

        """)
  }

  @Test func debounceBothWithMaxWaitAndAppend() {
    let run = pace(
      "simulate", "debounce", "--interval", "50ms", "--leading", "--max-wait", "100ms", "--merge", "append",
      "--events", "a@0 b@30 c@60 d@90 e@120")
    #expect(run.status == 0)
    #expect(run.output.hasPrefix("debounce 50ms, edges leading+trailing, maxWait 100ms, merge append\n"))
    #expect(
      run.output.contains(
        """
          #   time  value  calls  delay
          1    0ms  a      1      0ms
          2  100ms  bcd    2-4    10ms to 70ms
          3  170ms  e      5      50ms
        """))
  }

  @Test func coalesceSumsOneTurn() {
    let run = pace("simulate", "coalesce", "--interval", "0ms", "--merge", "sum", "--events", "1@5 1@5 1@5 2@8")
    #expect(run.status == 0)
    #expect(run.output.hasPrefix("coalesce on the next turn, merge sum\n"))
    #expect(
      run.output.contains(
        """
          #  time  value  calls  delay
          1   5ms  3      1-3    0ms
          2   8ms  2      4      0ms
        """))
  }

  @Test func jsonShape() throws {
    let run = pace("simulate", "debounce", "--interval", "300ms", "--events", "a@0 b@40 c@90", "--json")
    #expect(run.status == 0)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
    #expect(object["command"] as? String == "simulate")
    let strategy = try #require(object["strategy"] as? [String: Any])
    #expect(strategy["name"] as? String == "debounce")
    #expect(strategy["interval_ms"] as? Int == 300)
    #expect(strategy["leading"] as? Bool == false)
    #expect(strategy["max_wait_ms"] is NSNull)
    let summary = try #require(object["summary"] as? [String: Any])
    #expect(summary["calls"] as? Int == 3)
    #expect(summary["invocations"] as? Int == 1)
    #expect(summary["reduction"] as? Double == 0.6667)
    let delay = try #require(summary["delay_ms"] as? [String: Any])
    #expect(delay["median"] as? Int == 350)
    let invocations = try #require(object["invocations"] as? [[String: Any]])
    #expect(invocations.count == 1)
    #expect(invocations[0]["time_ms"] as? Int == 390)
    #expect(invocations[0]["value"] as? String == "c")
    #expect(invocations[0]["first_call"] as? Int == 0)
    #expect(invocations[0]["call_count"] as? Int == 3)
  }

  @Test func svgIsWellFormed() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("pace-\(UUID().uuidString).svg").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    let run = pace("simulate", "debounce", "--interval", "300ms", "--events", "a@0 <&>@40 c@90", "--svg", path)
    #expect(run.status == 0)
    let data = try #require(FileManager.default.contents(atPath: path))
    let checker = SVGChecker()
    let parser = XMLParser(data: data)
    parser.delegate = checker
    #expect(parser.parse(), "\(parser.parserError.map(String.init(describing:)) ?? "")")
    #expect(checker.root == "svg")
    #expect(checker.texts.contains("debounce"))
    #expect(checker.texts.contains("<&>"))
    #expect(checker.circles == 4)
  }
}

@Suite struct CompareCommandTests {
  @Test func tableOverEveryStrategy() {
    let run = pace("compare", "--events", "a@0 b@40 c@90 d@1000", "--interval", "300ms")
    #expect(run.status == 0)
    #expect(
      run.output == """
        --events: 4 calls over 1000ms, interval 300ms

          strategy            calls  out  reduction  dropped  median    p95    max
          debounce                4    2      50.0%        0   300ms  390ms  390ms
          debounce leading        4    2      50.0%        2     0ms    0ms    0ms
          debounce both           4    3      25.0%        0     0ms  350ms  350ms
          debounce maxWait        4    2      50.0%        0   300ms  390ms  390ms
          throttle                4    3      25.0%        0     0ms  260ms  260ms
          throttle leading        4    2      50.0%        2     0ms    0ms    0ms
          throttle trailing       4    2      50.0%        0   260ms  300ms  300ms
          coalesce                4    2      50.0%        0   260ms  300ms  300ms
          coalesce next turn      4    4       0.0%        0     0ms    0ms    0ms

        out: invocations. median, p95, max: the delay from each call to the invocation that covers it
        (the first invocation at or after the call whose merged value includes it); dropped: calls no
        invocation covers, which a leading-only strategy ignores.
        debounce maxWait waits at most 900ms; coalesce runs one window after the first call.

        """)
  }

  @Test func jsonShape() throws {
    let run = pace("compare", "--events", "a@0 b@40", "--interval", "100ms", "--max-wait", "250ms", "--json")
    #expect(run.status == 0)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
    #expect(object["command"] as? String == "compare")
    #expect(object["interval_ms"] as? Int == 100)
    let results = try #require(object["results"] as? [[String: Any]])
    #expect(results.count == 9)
    let names = results.compactMap { ($0["strategy"] as? [String: Any])?["name"] as? String }
    #expect(names.first == "debounce")
    #expect(names.last == "coalesce next turn")
    let maxWait = try #require(results[3]["strategy"] as? [String: Any])
    #expect(maxWait["max_wait_ms"] as? Int == 250)
  }

  @Test func svgIsWellFormed() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("pace-\(UUID().uuidString).svg").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    #expect(
      pace("compare", "--trace", try bundledPath("scrolling-120hz.csv"), "--interval", "100ms", "--svg", path).status
        == 0)
    let data = try #require(FileManager.default.contents(atPath: path))
    let checker = SVGChecker()
    let parser = XMLParser(data: data)
    parser.delegate = checker
    #expect(parser.parse())
    #expect(checker.root == "svg")
    #expect(checker.texts.contains("coalesce next turn"))
  }

  func bundledPath(_ name: String) throws -> String {
    try #require(BundledTraces.url(named: name)).path
  }
}

@Suite struct DemoCommandTests {
  @Test func runsEveryBundledTraceThroughEveryStrategy() {
    let run = pace("demo")
    #expect(run.status == 0)
    #expect(run.errors == "")
    for title in [
      "1. Typing a search query", "2. A button bashed five times", "3. Scrolling at 120 Hz", "4. A \"complete all\"",
    ] {
      #expect(run.output.contains(title))
    }
    #expect(run.output.components(separatedBy: "\n  coalesce next turn  ").count == 5)
    #expect(run.output.contains("  complete-all.csv        36  coalesce next turn        2      94.4%     0ms     0ms"))
  }
}

@Suite struct BadInputTests {
  @Test(arguments: [
    (
      ["simulate", "bounce", "--interval", "300ms", "--events", "a@0"],
      "pace: error: unknown strategy 'bounce': use debounce, throttle or coalesce\n"
    ),
    (
      ["simulate", "debounce", "--interval", "3OOms", "--events", "a@0"],
      "pace: error: --interval: '3OOms' is not a duration: unknown unit 'OOms' (write it like 300ms, 1.5s or 250us; units: ns, us, ms, s, min)\n"
    ),
    (
      ["compare", "--interval", "1.5.s", "--events", "a@0"],
      "pace: error: --interval: '1.5.s' is not a duration: the number is malformed (write it like 300ms, 1.5s or 250us; units: ns, us, ms, s, min)\n"
    ),
    (
      ["simulate", "debounce", "--interval", "300ms", "--trace", "/nonexistent/t.csv"],
      "pace: error: /nonexistent/t.csv: no such file\n"
    ),
    (
      ["simulate", "debounce", "--interval", "300ms", "--merge", "max", "--events", "a@0"],
      "pace: error: --merge: unknown merge 'max': use latest, first, sum or append\n"
    ),
    (
      ["simulate", "throttle", "--interval", "300ms", "--max-wait", "1s", "--events", "a@0"],
      "pace: error: --max-wait applies to debounce only\n"
    ),
    (
      ["simulate", "coalesce", "--interval", "0ms", "--leading", "--events", "a@0"],
      "pace: error: --leading and --trailing apply to debounce and throttle, not coalesce\n"
    ),
    (
      ["simulate", "debounce", "--interval", "300ms", "--no-trailing", "--events", "a@0"],
      "pace: error: no edge left to invoke on: keep --leading or --trailing\n"
    ),
    (
      ["simulate", "debounce", "--interval", "300ms"],
      "pace: error: give the calls with --events \"a@0 b@40\" or --trace FILE\n"
    ),
    (
      ["simulate", "debounce", "--interval", "300ms", "--events", "a@0", "--trace", "t.csv"],
      "pace: error: give either --events or --trace, not both\n"
    ),
    (
      ["simulate", "debounce", "--events", "a@0"],
      "pace: error: Missing expected argument '--interval <interval>' (see pace --help)\n"
    ),
    (["compare", "--interval", "300ms", "--bogus"], "pace: error: Unknown option '--bogus' (see pace --help)\n"),
    (["frobnicate"], "pace: error: Unexpected argument 'frobnicate' (see pace --help)\n"),
  ])
  func oneLineAndStatus2(arguments: [String], message: String) {
    var errors = ""
    var output = ""
    let status = PaceCLI.main(arguments, standardOutput: { output += $0 }, standardError: { errors += $0 })
    #expect(status == 2)
    #expect(errors == message)
    #expect(output == "")
  }

  @Test func badTraceFilesNameFileLineAndReason() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pace-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let cases = [
      ("bad.csv", "time_ms,value\n0,a\n4O,b\n", "bad.csv:3: '4O' is not a time in milliseconds"),
      ("back.csv", "0,a\n40,b\n30,c\n", "back.csv:3: time 30ms goes backwards (line 2 is at 40ms)"),
      ("empty.csv", "", "empty.csv: the trace is empty (no calls)"),
      ("bad.jsonl", "{\"time_ms\": 0}\n{\"time_ms\": }\n", "bad.jsonl:2: column 13: expected a value"),
    ]
    for (name, contents, reason) in cases {
      let path = directory.appendingPathComponent(name).path
      try contents.write(toFile: path, atomically: true, encoding: .utf8)
      let run = pace("compare", "--trace", path, "--interval", "300ms")
      #expect(run.status == 2)
      #expect(run.errors == "pace: error: \(directory.path)/\(reason)\n")
    }
  }

  @Test func helpIsNotAnError() {
    for arguments in [["simulate", "--help"], ["help", "simulate"]] {
      var output = ""
      var errors = ""
      let status = PaceCLI.main(arguments, standardOutput: { output += $0 }, standardError: { errors += $0 })
      #expect(status == 0)
      #expect(output.hasPrefix("OVERVIEW: Run one strategy over a trace"))
      #expect(output.contains("--max-wait"))
      #expect(errors == "")
    }
    let root = pace()
    #expect(root.status == 0)
    #expect(root.output.contains("SUBCOMMANDS:"))
  }
}

/// Exit statuses of the real executable, next to the test bundle when the package is built.
@Suite(.offThePool) struct ExecutableTests {
  static let executable = Bundle.main.bundleURL.appendingPathComponent("pace")

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: executable.path), "the pace executable is built"))
  func statuses() throws {
    #expect(try run(["demo"]).status == 0)
    let bad = try run(["simulate", "bounce", "--interval", "300ms", "--events", "a@0"])
    #expect(bad.status == 2)
    #expect(bad.errors == "pace: error: unknown strategy 'bounce': use debounce, throttle or coalesce\n")
    #expect(try run(["simulate", "debounce", "--interval", "300ms", "--bogus"]).status == 2)
    #expect(try run(["--help"]).status == 0)
  }

  func run(_ arguments: [String]) throws -> (status: Int32, errors: String) {
    let process = Process()
    process.executableURL = Self.executable
    process.arguments = arguments
    // Another directory: bundled traces must not depend on the working directory.
    process.currentDirectoryURL = FileManager.default.temporaryDirectory
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let data = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
  }
}

/// Collects what the SVG tests look at while checking that the XML parses.
final class SVGChecker: NSObject, XMLParserDelegate {
  var root: String?
  var texts: [String] = []
  var circles = 0
  private var text = ""

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    if root == nil { root = elementName }
    if elementName == "circle" { circles += 1 }
    text = ""
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    text += string
  }

  func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
    if elementName == "text" { texts.append(text) }
  }
}
