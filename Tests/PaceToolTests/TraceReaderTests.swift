import Foundation
import PaceMarbles
import Testing

@testable import PaceTool

@Suite struct TraceReaderTests {
  func csv(_ text: String, source: String = "t.csv") throws(ToolError) -> Trace {
    try TraceReader.parse(Data(text.utf8), source: source)
  }

  func error(_ body: () throws(ToolError) -> Trace) -> String? {
    do {
      _ = try body()
      return nil
    } catch {
      return error.message
    }
  }

  @Test func csvWithHeaderCommentsAndFractions() throws {
    let trace = try csv(
      """
      # title: Typing
      # interval: 300ms
      time_ms,value

      0,s
      8.333,"a, b"
      8.333,
      # a comment between calls
      1250.5,\"say \"\"hi\"\"\"\r
      """)
    #expect(trace.times == [0, 8_333_000, 8_333_000, 1_250_500_000])
    #expect(trace.values == ["s", "a, b", "x", "say \"hi\""])
    #expect(trace.lines == [5, 6, 7, 9])
    #expect(trace.metadata == ["title": "Typing", "interval": "300ms"])
    #expect(trace.title == "Typing")
  }

  @Test func csvHeaderIsOptional() throws {
    #expect(try csv("0,a\n40,b\n").values == ["a", "b"])
  }

  @Test func jsonLines() throws {
    let trace = try csv(
      """
      {"time_ms": 0, "value": "a"}
      {"value": 7, "time_ms": 12.5, "note": "ignored"}

      {"time_ms": 40, "value": "tab\\tquote\\" \\u00e9"}
      {"time_ms": 41}
      """, source: "t.jsonl")
    #expect(trace.times == [0, 12_500_000, 40_000_000, 41_000_000])
    #expect(trace.values == ["a", "7", "tab\tquote\" é", "x"])
    #expect(trace.lines == [1, 2, 4, 5])
  }

  @Test func formatIsSniffedWithoutAnExtension() throws {
    #expect(try csv("{\"time_ms\": 5, \"value\": \"j\"}\n", source: "trace").values == ["j"])
    #expect(try csv("5,c\n", source: "trace").values == ["c"])
  }

  @Test(arguments: [
    ("time_ms,value\n0,a\n3O,c\n", "t.csv:3: '3O' is not a time in milliseconds"),
    ("0,a\n40,b\n30,c\n", "t.csv:3: time 30ms goes backwards (line 2 is at 40ms)"),
    ("0,a\n-5,b\n", "t.csv:2: time -5 is negative"),
    ("0.1234567,a\n", "t.csv:1: time 0.1234567 has more than 6 decimals (finer than a nanosecond)"),
    ("time,value\n0,a\n", "t.csv:1: expected 'time_ms,value' lines, got 'time,value'"),
    ("0,\"open\n", "t.csv:1: the quoted value is never closed"),
    ("0,\"a\"b\n", "t.csv:1: unexpected text after the closing quote of the value"),
    ("", "t.csv: the trace is empty (no calls)"),
    ("# only comments\ntime_ms,value\n\n", "t.csv: the trace is empty (no calls)"),
  ])
  func csvErrorsNameFileLineAndReason(text: String, message: String) {
    #expect(error { () throws(ToolError) in try csv(text) } == message)
  }

  @Test(arguments: [
    (
      "{\"time_ms\": 0}\n{\"time_ms\": 12.5 \"value\": \"b\"}\n",
      "t.jsonl:2: column 18: expected ',' or '}', found '\"'"
    ),
    ("{\"value\": \"a\"}\n", "t.jsonl:1: the object has no \"time_ms\""),
    ("{\"time_ms\": \"5\"}\n", "t.jsonl:1: \"time_ms\" must be a number"),
    ("[1, 2]\n", "t.jsonl:1: column 1: expected a JSON object starting with '{', found '['"),
    ("{\"time_ms\": 5, \"value\": \"a}\n", "t.jsonl:1: column 25: a string is never closed"),
    ("{\"time_ms\": 9}\n{\"time_ms\": 5}\n", "t.jsonl:2: time 5ms goes backwards (line 1 is at 9ms)"),
  ])
  func jsonErrorsNameFileLineAndReason(text: String, message: String) {
    #expect(error { () throws(ToolError) in try csv(text, source: "t.jsonl") } == message)
  }

  @Test func missingFileAndDirectory() {
    #expect(
      error { () throws(ToolError) in try TraceReader.read(path: "/nonexistent/trace.csv") }
        == "/nonexistent/trace.csv: no such file")
    #expect(
      error { () throws(ToolError) in try TraceReader.read(path: "/tmp") } == "/tmp: is a directory, not a trace file")
  }

  @Test func events() throws {
    let trace = try TraceReader.parseEvents("a@0 b@40 'c'@1.5s @2s")
    #expect(trace.times == [0, 40_000_000, 1_500_000_000, 2_000_000_000])
    #expect(trace.values == ["a", "b", "'c'", "x"])
    #expect(trace.source == "--events")
  }

  @Test(arguments: [
    ("a@0 b", "--events: event 2 'b': expected value@time, like a@40"),
    (
      "a@0 b@4o",
      "--events: event 2 'b@4o': '4o' is not a duration: unknown unit 'o' (write it like 300ms, 1.5s or 250us; units: ns, us, ms, s, min)"
    ),
    ("a@0 b@x", "--events: event 2 'b@x': 'x' is not a time: write milliseconds like 40, or a duration like 1.5s"),
    ("a@50 b@40", "--events: event 2 'b@40': time 40ms goes backwards (event 1 is at 50ms)"),
    ("  ", "--events: no events given (write them like \"a@0 b@40 c@90\")"),
  ])
  func eventErrors(text: String, message: String) {
    #expect(error { () throws(ToolError) in try TraceReader.parseEvents(text) } == message)
  }

  @Test func bundledTracesLoadFromTheResourceBundle() throws {
    let traces = try BundledTraces.all()
    #expect(traces.map(\.source) == BundledTraces.names)
    #expect(traces.map(\.count) == [12, 5, 144, 36])
    #expect(
      traces.allSatisfy { $0.metadata["title"] != nil && $0.metadata["interval"] != nil && $0.metadata["fits"] != nil })
  }
}
