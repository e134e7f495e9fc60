import ArgumentParser
import Foundation
import Pace
import PaceMarbles

/// The `pace` command: try debounce, throttle and coalesce on real timelines before writing
/// code. The `pace` executable is `exit(PaceCLI.main(arguments))`.
public struct PaceCommand: ParsableCommand {
  public static let configuration = CommandConfiguration(
    commandName: "pace",
    abstract: "Try Pace's debounce, throttle and coalesce on recorded timelines before writing code.",
    discussion: """
      Every time shown comes from running Pace's real Debouncer, Throttler and Coalescer on a \
      TestScheduler in virtual time. Traces are CSV (time_ms,value) or JSON lines \
      ({"time_ms": 12.5, "value": "a"}). Durations look like 300ms, 1s, 1.5s or 250us.
      Limits: times up to 4000000000000ms (about 126 years), durations up to 1000000000s, trace \
      files up to 256 MiB, and a --step that draws at most 1000 columns.
      """,
    subcommands: [Demo.self, Simulate.self, Compare.self]
  )

  public init() {}
}

/// A subcommand whose work is a pure function from its options to the text it prints.
protocol ToolCommand: ParsableCommand {
  /// Does the work and returns what to print on standard output.
  func execute() throws(ToolError) -> String
}

extension ToolCommand {
  public func run() throws {
    print(try execute(), terminator: "")
  }
}

/// Where `simulate` and `compare` take their calls from: `--events` or `--trace`, exactly one.
struct TraceInput: ParsableArguments {
  @Option(help: "Calls as value@time_ms, like \"a@0 b@40 c@90\".")
  var events: String?

  @Option(help: "A trace file: CSV (time_ms,value) or JSON lines.")
  var trace: String?

  /// The calls, or the error naming the option to give.
  func load() throws(ToolError) -> Trace {
    try loadTrace(events: events, path: trace)
  }
}

/// What `simulate` and `compare` write besides their text: an SVG file, or JSON instead of text.
struct ResultOutput: ParsableArguments {
  @Option(help: "Also write the diagrams as SVG to this file.")
  var svg: String?

  @Flag(help: "Print the results as JSON instead of text.")
  var json = false
}

/// `pace demo`
public struct Demo: ToolCommand {
  public static let configuration = CommandConfiguration(
    abstract: "Run the bundled traces through every strategy and print marble diagrams and a summary.",
    discussion: """
      The traces: typing a search query, a button bashed five times, scrolling at 120 Hz, and a \
      "complete all" that posts one notification per item. They ship inside the tool; no files needed.
      """
  )

  public init() {}

  func execute() throws(ToolError) -> String {
    var entries: [(trace: Trace, interval: Duration, results: [SimulationResult])] = []
    for trace in try BundledTraces.all() {
      let interval = try BundledTraces.interval(of: trace)
      entries.append((trace, interval, try Simulator.runAll(trace, strategies: Strategy.all(interval: interval))))
    }
    return Report.demo(entries)
  }
}

/// `pace simulate`
public struct Simulate: ToolCommand {
  public static let configuration = CommandConfiguration(
    abstract: "Run one strategy over a trace: input and output diagrams, and every invocation with its time.",
    discussion: """
      Examples:
        pace simulate debounce --interval 300ms --events "a@0 b@40 c@90"
        pace simulate throttle --interval 100ms --no-trailing --trace scroll.csv
        pace simulate coalesce --interval 0ms --merge sum --trace notifications.jsonl
      """
  )

  @Argument(help: "The strategy: debounce, throttle or coalesce.")
  var strategy: String

  @Option(help: "The interval (the coalescing window for coalesce; 0ms means the next turn), like 300ms.")
  var interval: String

  @Flag(inversion: .prefixedNo, help: "Invoke on the leading edge. Default: off for debounce, on for throttle.")
  var leading: Bool?

  @Flag(inversion: .prefixedNo, help: "Invoke on the trailing edge. Default: on.")
  var trailing: Bool?

  @Option(name: .customLong("max-wait"), help: "Debounce only: the longest a call waits, like 1s.")
  var maxWait: String?

  @Option(help: "How covered calls combine: latest, first, sum or append.")
  var merge: String = "latest"

  @OptionGroup var input: TraceInput

  @Option(help: "The length of one diagram column, like 10ms; at most 1000 columns. Default: fits the trace in 60.")
  var step: String?

  @OptionGroup var output: ResultOutput

  public init() {}

  func execute() throws(ToolError) -> String {
    let strategy = try parseStrategy()
    let step = try step.map { text throws(ToolError) in try parseDuration(text, option: "--step").paceNanoseconds }
    if let step, step <= 0 { throw ToolError("--step must be longer than 0ms") }
    let trace = try input.load()
    let result = try Simulator.run(trace, strategy: strategy)
    if let step, !output.json {
      try Report.checkWidth(step: step, horizon: TextDiagram.horizon([Lane(calls: trace), Lane(result)]))
    }
    if let svg = output.svg {
      let text = SVGDiagram.render(
        title: strategy.settings, subtitle: "\(trace.source): \(trace.count) calls",
        lanes: [Lane(calls: trace), Lane(result)])
      try write(text, to: svg)
    }
    if output.json { return JSONOutput.simulate(trace: trace, result: result) }
    return Report.simulate(trace: trace, result: result, step: step)
  }

  func parseStrategy() throws(ToolError) -> Strategy {
    guard let kind = Strategy.Kind(rawValue: strategy) else {
      throw ToolError("unknown strategy \(Excerpt.quoted(strategy)): use debounce, throttle or coalesce")
    }
    let interval = try parseDuration(self.interval, option: "--interval")
    guard let merge = MergeChoice(rawValue: merge) else {
      throw ToolError("--merge: unknown merge \(Excerpt.quoted(merge)): use latest, first, sum or append")
    }
    var maxWaitDuration: Duration?
    if let maxWait {
      guard kind == .debounce else { throw ToolError("--max-wait applies to debounce only") }
      maxWaitDuration = try parseDuration(maxWait, option: "--max-wait")
    }
    if kind == .coalesce, leading != nil || trailing != nil {
      throw ToolError("--leading and --trailing apply to debounce and throttle, not coalesce")
    }
    var edges: Edges = kind == .throttle ? .both : .trailing
    if let leading {
      if leading { edges.insert(.leading) } else { edges.remove(.leading) }
    }
    if let trailing {
      if trailing { edges.insert(.trailing) } else { edges.remove(.trailing) }
    }
    guard !edges.isEmpty else { throw ToolError("no edge left to invoke on: keep --leading or --trailing") }
    return Strategy(kind, interval: interval, edges: edges, maxWait: maxWaitDuration, merge: merge)
  }
}

/// `pace compare`
public struct Compare: ToolCommand {
  public static let configuration = CommandConfiguration(
    abstract: "Run a trace through every strategy and print a table of the trade-offs.",
    discussion: """
      Rows: debounce (trailing, leading, both, with maxWait), throttle (both edges, leading, trailing), \
      coalesce with a window of the interval and on the next turn. Columns: calls in, invocations out, \
      reduction, calls dropped, and the median, p95 and longest delay from a call to the invocation that covers it.
      """
  )

  @OptionGroup var input: TraceInput

  @Option(help: "The interval, like 300ms.")
  var interval: String

  @Option(name: .customLong("max-wait"), help: "The maxWait of the debounce maxWait row. Default: three intervals.")
  var maxWait: String?

  @OptionGroup var output: ResultOutput

  public init() {}

  func execute() throws(ToolError) -> String {
    let interval = try parseDuration(self.interval, option: "--interval")
    let maxWait = try maxWait.map { text throws(ToolError) in try parseDuration(text, option: "--max-wait") }
    let trace = try input.load()
    // Only the SVG draws invocations; the table and the JSON need the statistics alone.
    let results = try Simulator.runAll(
      trace, strategies: Strategy.all(interval: interval, maxWait: maxWait), keepingInvocations: output.svg != nil)
    if let svg = output.svg {
      let text = SVGDiagram.render(
        title: "\(trace.source): every strategy at \(DurationText.format(interval))", subtitle: "\(trace.count) calls",
        lanes: [Lane(calls: trace)] + results.map(Lane.init))
      try write(text, to: svg)
    }
    if output.json { return JSONOutput.compare(trace: trace, interval: interval, results: results) }
    return Report.compare(trace: trace, interval: interval, results: results)
  }
}

/// `text` as a duration of at most ``ToolLimits/maximumDuration``; errors start with `option`.
func parseDuration(_ text: String, option: String) throws(ToolError) -> Duration {
  let duration: Duration
  do {
    duration = try DurationText.parse(text)
  } catch  where error.reason == .tooLarge {
    throw ToolError("\(option): \(Excerpt.quoted(text)) is too large: the limit is \(ToolLimits.maximumDurationText)")
  } catch {
    throw ToolError("\(option): \(error)")
  }
  guard duration.paceNanoseconds <= ToolLimits.maximumDuration else {
    throw ToolError("\(option): \(Excerpt.quoted(text)) is too large: the limit is \(ToolLimits.maximumDurationText)")
  }
  return duration
}

func loadTrace(events: String?, path: String?) throws(ToolError) -> Trace {
  switch (events, path) {
  case (let events?, nil): return try TraceReader.parseEvents(events)
  case (nil, let path?): return try TraceReader.read(path: path)
  case (nil, nil): throw ToolError("give the calls with --events \"a@0 b@40\" or --trace FILE")
  case (.some, .some): throw ToolError("give either --events or --trace, not both")
  }
}

func write(_ text: String, to path: String) throws(ToolError) {
  // An atomic write renames a temporary file over the path: right for a file, wrong for
  // /dev/stdout or a pipe, which it would replace (as root, even /dev/full). Those are written in place.
  let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
  let type = try? FileManager.default.attributesOfItem(atPath: resolved)[.type] as? FileAttributeType
  do {
    if let type, type != .typeRegular {
      try Data(text.utf8).write(to: URL(fileURLWithPath: resolved))
    } else {
      try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
  } catch {
    let reason = Excerpt.escaped(error.localizedDescription, limit: 200)
    throw ToolError("\(ToolError.name(path)): cannot write the SVG file (\(reason))")
  }
}

/// The entry point, with the exit status spelled out: 0 on success and for `--help`, 2 for any
/// bad input — the tool's own messages and swift-argument-parser's alike, whose default
/// would be 64 — with one line on standard error and no stack trace. The line quotes at most
/// 60 characters of any offending text, with control characters escaped.
public enum PaceCLI {
  /// The status for bad input.
  public static let badInputStatus: Int32 = 2

  /// Runs `pace` with `arguments` (without the program name), writing to the given streams.
  public static func main(
    _ arguments: [String],
    standardOutput: (String) -> Void = { print($0, terminator: "") },
    // `try?`: with standard error closed there is nowhere to say so, and `write(_:)` would trap.
    standardError: (String) -> Void = { try? FileHandle.standardError.write(contentsOf: Data($0.utf8)) }
  ) -> Int32 {
    // swift-argument-parser's own outcomes: help (status 0) or a usage error (status 2).
    func argumentParserOutcome(_ error: any Error) -> Int32 {
      if PaceCommand.exitCode(for: error) == .success {
        standardOutput(PaceCommand.fullMessage(for: error) + "\n")
        return 0
      }
      standardError(errorLine(PaceCommand.message(for: error) + " (see pace --help)"))
      return badInputStatus
    }
    var command: any ParsableCommand
    do {
      command = try PaceCommand.parseAsRoot(arguments)
    } catch {
      return argumentParserOutcome(error)
    }
    guard let toolCommand = command as? any ToolCommand else {
      // `pace`, `pace --help` and `pace help simulate`: commands whose run() shows help.
      do {
        try command.run()
        return 0
      } catch {
        return argumentParserOutcome(error)
      }
    }
    do {
      standardOutput(try toolCommand.execute())
      return 0
    } catch {
      standardError(errorLine(error.message))
      return badInputStatus
    }
  }

  /// The longest error line, for messages that quote an argument swift-argument-parser echoes.
  static let maximumErrorLength = 500

  /// `message` as one line on standard error: the tool's messages are already escaped, and this
  /// is the net under swift-argument-parser's, which echo arguments whole and raw.
  static func errorLine(_ message: String) -> String {
    let oneLine = message.split(whereSeparator: \.isNewline).joined(separator: " ")
    return "pace: error: \(Excerpt.escaped(oneLine, limit: maximumErrorLength))\n"
  }
}
