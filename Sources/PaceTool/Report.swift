import PaceMarbles

/// The text the commands print; pure functions of their inputs, so tests compare exact output.
enum Report {
  /// The widest a diagram gets, in columns, when the tool chooses the step.
  static let maxColumns = 60

  /// Refuses a `--step` that would draw more than ``ToolLimits/maximumColumns`` columns up to
  /// `horizon`, suggesting the shortest step that fits.
  static func checkWidth(step: Int64, horizon: Int64) throws(ToolError) {
    let columns = horizon / step + 1
    guard columns > Int64(ToolLimits.maximumColumns) else { return }
    let fitting = TextDiagram.step(horizon: horizon, maxColumns: ToolLimits.maximumColumns)
    throw ToolError(
      "--step \(DurationText.format(.nanoseconds(step))) would draw \(columns) columns, more than the limit of "
        + "\(ToolLimits.maximumColumns): use --step \(DurationText.format(.nanoseconds(fitting))) or longer, "
        + "or leave --step out to fit \(maxColumns) columns")
  }

  /// The diagrams of `trace` and `results` with a ruler, labels, and a stats column per lane.
  ///
  /// - Parameters:
  ///   - step: The step in nanoseconds; chosen to fit ``maxColumns`` if `nil`.
  ///   - stats: Whether to add the invocations, dropped calls and delays to the right.
  static func diagrams(trace: Trace, results: [SimulationResult], step: Int64? = nil, stats: Bool) -> (
    lines: [String], step: Int64
  ) {
    let lanes = [Lane(calls: trace)] + results.map(Lane.init)
    let horizon = TextDiagram.horizon(lanes)
    let step = step ?? TextDiagram.step(horizon: horizon, maxColumns: maxColumns)
    let columns = Int(horizon / step) + 1
    let labelWidth = lanes.map(\.label.count).max()! + 2
    let rendered = lanes.map { TextDiagram.render($0, step: step, columns: columns) }

    var table = TextTable(headers: ["out", "dropped", "median", "max"], alignments: [.right, .right, .right, .right])
    if stats {
      table.rows.append([String(trace.count), "", "", ""])
      for result in results {
        let statistics = result.statistics
        table.rows.append([
          String(statistics.invocations), String(statistics.dropped),
          statistics.medianDelay.map(formatMilliseconds) ?? "-", statistics.maxDelay.map(formatMilliseconds) ?? "-",
        ])
      }
    }
    let statLines = stats ? table.render() : []
    func pad(_ text: String, _ width: Int) -> String {
      text + String(repeating: " ", count: max(0, width - text.count))
    }

    var lines: [String] = []
    let ruler = pad("", labelWidth) + pad(TextDiagram.ruler(step: step, columns: columns), columns)
    lines.append(trimmed("  " + ruler + (stats ? "   " + statLines[0] : "")))
    for (index, lane) in lanes.enumerated() {
      let row = pad(lane.label, labelWidth) + rendered[index].text
      lines.append(trimmed("  " + row + (stats ? "   " + statLines[index + 1] : "")))
    }
    if rendered.contains(where: \.marked) {
      lines.append("  (o: one event with a longer value; *: several events in one column)")
    }
    return (lines, step)
  }

  // MARK: simulate

  static func simulate(trace: Trace, result: SimulationResult, step: Int64?) -> String {
    let statistics = result.statistics
    let (diagramLines, usedStep) = diagrams(trace: trace, results: [result], step: step, stats: false)
    var lines = [
      result.strategy.settings,
      "\(trace.count) \(plural(trace.count, "call")) over \(formatMilliseconds(trace.span)); one column is \(DurationText.format(.nanoseconds(usedStep)))",
      "",
    ]
    lines += diagramLines
    lines.append("")

    var table = TextTable(
      headers: ["#", "time", "value", "calls", "delay"], alignments: [.right, .right, .left, .left, .left])
    let shown = result.invocations.prefix(40)
    for (index, invocation) in shown.enumerated() {
      let first = invocation.firstCall
      let last = first + invocation.callCount - 1
      let calls = invocation.callCount == 1 ? "\(first + 1)" : "\(first + 1)-\(last + 1)"
      let shortest = invocation.time - trace.times[last]
      let longest = invocation.time - trace.times[first]
      let delay =
        shortest == longest
        ? formatMilliseconds(longest) : "\(formatMilliseconds(shortest)) to \(formatMilliseconds(longest))"
      table.rows.append([
        String(index + 1), formatMilliseconds(invocation.time), Excerpt.escaped(invocation.value, limit: 24), calls,
        delay,
      ])
    }
    if result.invocations.isEmpty {
      lines.append("  no invocations")
    } else {
      lines += table.render(indent: "  ")
      if result.invocations.count > shown.count {
        lines.append("  … and \(result.invocations.count - shown.count) more (--json lists them all)")
      }
    }
    lines.append("")
    lines.append(summary(statistics))
    return lines.joined(separator: "\n") + "\n"
  }

  /// `12 calls in, 2 invocations out (83.3% fewer); delay median 300ms, p95 520ms, max 520ms; 0 dropped`.
  static func summary(_ statistics: Statistics) -> String {
    var text =
      "\(statistics.calls) \(plural(statistics.calls, "call")) in, "
      + "\(statistics.invocations) \(plural(statistics.invocations, "invocation")) out "
      + "(\(formatPercent(statistics.reduction)) fewer)"
    if let median = statistics.medianDelay, let p95 = statistics.p95Delay, let max = statistics.maxDelay {
      text +=
        "; delay median \(formatMilliseconds(median)), p95 \(formatMilliseconds(p95)), max \(formatMilliseconds(max))"
    }
    text += "; \(statistics.dropped) dropped"
    return text
  }

  // MARK: compare

  static func compare(trace: Trace, interval: Duration, results: [SimulationResult]) -> String {
    var lines = [
      "\(trace.source): \(trace.count) \(plural(trace.count, "call")) over \(formatMilliseconds(trace.span)), interval \(DurationText.format(interval))",
      "",
    ]
    lines += comparisonTable(results).render(indent: "  ")
    lines.append("")
    lines += legend(results)
    return lines.joined(separator: "\n") + "\n"
  }

  static func comparisonTable(_ results: [SimulationResult]) -> TextTable {
    var table = TextTable(
      headers: ["strategy", "calls", "out", "reduction", "dropped", "median", "p95", "max"],
      alignments: [.left, .right, .right, .right, .right, .right, .right, .right])
    for result in results {
      let statistics = result.statistics
      table.rows.append([
        result.strategy.label, String(statistics.calls), String(statistics.invocations),
        formatPercent(statistics.reduction),
        String(statistics.dropped), statistics.medianDelay.map(formatMilliseconds) ?? "-",
        statistics.p95Delay.map(formatMilliseconds) ?? "-", statistics.maxDelay.map(formatMilliseconds) ?? "-",
      ])
    }
    return table
  }

  static func legend(_ results: [SimulationResult]) -> [String] {
    var lines = [
      "out: invocations. median, p95, max: the delay from each call to the invocation that covers it",
      "(the first invocation at or after the call whose merged value includes it); dropped: calls no",
      "invocation covers, which a leading-only strategy ignores.",
    ]
    if let maxWait = results.lazy.compactMap(\.strategy.maxWait).first {
      lines.append(
        "debounce maxWait waits at most \(DurationText.format(maxWait)); coalesce runs one window after the first call."
      )
    }
    return lines
  }

  // MARK: demo

  static func demo(_ traces: [(trace: Trace, interval: Duration, results: [SimulationResult])]) -> String {
    var lines = [
      "pace demo: recorded traces through every strategy, on Pace's real engine in virtual time.",
      "One line per strategy; one character per column of time. Columns on the right: invocations",
      "out, calls dropped, and the median and longest delay from a call to the invocation covering it.",
    ]
    for (number, entry) in traces.enumerated() {
      let trace = entry.trace
      let (diagramLines, step) = diagrams(trace: trace, results: entry.results, stats: true)
      lines.append("")
      lines.append("\(number + 1). \(trace.title)")
      if let about = trace.metadata["about"] { lines.append("   \(about)") }
      lines.append(
        "   \(trace.count) calls over \(formatMilliseconds(trace.span)); interval \(DurationText.format(entry.interval)); "
          + "one column is \(DurationText.format(.nanoseconds(step)))")
      lines.append("")
      lines += diagramLines
    }
    lines.append("")
    lines.append("Summary: the strategy that fits each trace")
    var table = TextTable(
      headers: ["trace", "calls", "strategy", "out", "reduction", "median", "max"],
      alignments: [.left, .right, .left, .right, .right, .right, .right])
    for entry in traces {
      let fits = entry.trace.metadata["fits"] ?? "debounce"
      guard let result = entry.results.first(where: { $0.strategy.label == fits }) ?? entry.results.first else {
        continue
      }
      let statistics = result.statistics
      table.rows.append([
        entry.trace.source, String(statistics.calls),
        result.strategy.interval == .zero ? fits : "\(fits) \(DurationText.format(result.strategy.interval))",
        String(statistics.invocations), formatPercent(statistics.reduction),
        statistics.medianDelay.map(formatMilliseconds) ?? "-", statistics.maxDelay.map(formatMilliseconds) ?? "-",
      ])
    }
    lines += table.render(indent: "  ")
    lines.append("")
    lines.append("Try your own: pace simulate debounce --interval 300ms --events \"a@0 b@40 c@90\"")
    lines.append("              pace compare --trace my-trace.csv --interval 300ms")
    return lines.joined(separator: "\n") + "\n"
  }

  static func plural(_ count: Int, _ word: String) -> String {
    count == 1 ? word : word + "s"
  }

  static func trimmed(_ text: String) -> String {
    var text = text
    while text.last == " " { text.removeLast() }
    return text
  }
}
