import PaceMarbles

/// One timeline in a diagram: a label and events (time in nanoseconds, value).
struct Lane {
  var label: String
  var times: [Int64]
  var values: [String]

  init(label: String, times: [Int64], values: [String]) {
    self.label = label
    self.times = times
    self.values = values
  }

  init(calls trace: Trace) {
    self.init(label: "calls", times: trace.times, values: trace.values)
  }

  init(_ result: SimulationResult) {
    self.init(
      label: result.strategy.label, times: result.invocations.map(\.time), values: result.invocations.map(\.value))
  }
}

/// Marble diagrams for a terminal: one character per step, so lanes line up whatever the data.
///
/// Each column is one step of time; an event goes in the column that contains its time. A
/// column shows `-` when empty, the value when it holds one event whose value is a single
/// letter or digit (plain marble notation), `o` for one event with a longer value, and `*` for
/// several events. Without `o` and `*` a line is a valid marble diagram.
enum TextDiagram {
  /// Step lengths a person reads easily, in nanoseconds.
  static let niceSteps: [Int64] = {
    var steps: [Int64] = []
    var scale: Int64 = 1_000  // 1 µs
    // Up to 5e18 ns: the longest trace the tool reads (ToolLimits.maximumTime) still gets a round step.
    while scale <= 100_000_000_000_000_000 {
      steps += [1, 2, 5, 10, 20, 25, 50].map { $0 * scale }
      let (next, overflow) = scale.multipliedReportingOverflow(by: 100)
      if overflow { break }
      scale = next
    }
    return steps.sorted()
  }()

  /// The smallest nice step that fits the time from 0 to `horizon` in `maxColumns` columns.
  static func step(horizon: Int64, maxColumns: Int) -> Int64 {
    for step in niceSteps where horizon / step + 1 <= Int64(maxColumns) { return step }
    return max(1, horizon / Int64(maxColumns - 1) + 1)
  }

  /// The last time on any lane.
  static func horizon(_ lanes: [Lane]) -> Int64 {
    lanes.compactMap(\.times.last).max() ?? 0
  }

  /// The characters of one lane over `columns` columns of `step` nanoseconds.
  static func render(_ lane: Lane, step: Int64, columns: Int) -> (text: String, marked: Bool) {
    var marked = false
    var cells = [Character](repeating: "-", count: columns)
    var counts = [UInt8](repeating: 0, count: columns)
    for (time, value) in zip(lane.times, lane.values) {
      let column = Int(time / step)
      guard column < columns else { continue }
      if counts[column] == 0 {
        if value.count == 1, let character = value.first, character.isLetter || character.isNumber {
          cells[column] = character
        } else {
          cells[column] = "o"
          marked = true
        }
        counts[column] = 1
      } else {
        cells[column] = "*"
        marked = true
      }
    }
    return (String(cells), marked)
  }

  /// A ruler: the time at every tenth column, like `0         500ms     1s`.
  static func ruler(step: Int64, columns: Int) -> String {
    var cells = [Character](repeating: " ", count: columns + 10)
    for column in stride(from: 0, to: columns, by: 10) {
      let label = column == 0 ? "0" : DurationText.format(.nanoseconds(Int64(column) * step))
      guard label.count < 10 else { continue }
      for (offset, character) in label.enumerated() { cells[column + offset] = character }
    }
    var line = String(cells)
    while line.last == " " { line.removeLast() }
    return line
  }
}

/// A fixed-width text table: left-aligned text columns, right-aligned number columns.
struct TextTable {
  enum Alignment { case left, right }

  var headers: [String]
  var alignments: [Alignment]
  var rows: [[String]] = []

  func render(indent: String = "") -> [String] {
    var widths = headers.map(\.count)
    for row in rows {
      for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    func line(_ cells: [String]) -> String {
      var text = indent
      for (index, cell) in cells.enumerated() {
        let padding = String(repeating: " ", count: widths[index] - cell.count)
        if index > 0 { text += "  " }
        text += alignments[index] == .left ? cell + padding : padding + cell
      }
      while text.last == " " { text.removeLast() }
      return text
    }
    return [line(headers)] + rows.map(line)
  }
}

/// `83.3%`.
func formatPercent(_ fraction: Double) -> String {
  let tenths = (fraction * 1000).rounded()
  return "\(Int(tenths) / 10).\(abs(Int(tenths)) % 10)%"
}
