/// One thing that happens at a step of a marble diagram.
public enum MarbleEvent: Sendable, Hashable, CustomStringConvertible {
  /// A value: `a`, `7`, or a quoted `'word'`.
  case value(String)
  /// `|`: the timeline finishes.
  case finish
  /// `^`: the timeline fails.
  case failure
  /// `;`: a cancellation. On an input, the runner calls the primitive's `cancel()`.
  case cancel

  /// The marble token: `a`, `'word'`, `|`, `^` or `;`.
  public var description: String {
    switch self {
    case .value(let value): MarbleEvent.token(for: value)
    case .finish: "|"
    case .failure: "^"
    case .cancel: ";"
    }
  }

  /// Whether the event ends its timeline (`|` or `^`).
  public var isTerminal: Bool {
    self == .finish || self == .failure
  }

  /// A letter or digit stands for itself; anything else is quoted.
  static func token(for value: String) -> String {
    if value.count == 1, let character = value.first, isBareValue(character) { return value }
    return "'\(value)'"
  }

  /// A letter or digit that starts a grapheme of its own. `Character.isLetter` also holds for
  /// some combining marks (U+06DA), which stand alone only after a control character and would
  /// fuse with whatever a diagram writes before them.
  static func isBareValue(_ character: Character) -> Bool {
    guard character.isLetter || character.isNumber, let first = character.unicodeScalars.first else { return false }
    switch first.properties.generalCategory {
    case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
      .decimalNumber, .letterNumber, .otherNumber:
      return true
    default:
      return false
    }
  }

  /// Whether a value can be written in a diagram: not empty, no `'`, and not fusing with quotes.
  static func isRepresentable(_ value: String) -> Bool {
    guard !value.isEmpty, !value.contains("'") else { return false }
    // Quotes that fuse with the value's first or last scalar (a leading combining mark) vanish.
    let token = "'" + value + "'"
    return token.first == "'" && token.last == "'" && token.count == value.count + 2
  }
}

/// A timeline written as text, in the notation of swift-async-algorithms' validation diagrams.
///
/// ```
/// a--b--c---|         a at step 0, b at 3, c at 6, finish at 10
/// step: 100ms a-[bc]  a at 0 ms, b and c together at 100 ms
/// ```
///
/// | Token | Meaning |
/// | ----- | ------- |
/// | `-` | one step with no event |
/// | a letter or digit | a value, taking one step |
/// | `'word'` | a value of any text without `'`, taking one step |
/// | `[ab]` | several events in one step, in order; a group takes one step |
/// | `\|` | finish, taking one step; only `-` may follow |
/// | `^` | failure, taking one step; only `-` may follow |
/// | `;` | a cancellation, taking one step |
/// | space, newline | nothing: use them to align diagrams |
///
/// An optional header `step: 100ms` before the first token says how long a step is
/// (``stepLength``); the runner and ``MarbleTimeline`` need one, from the header or a parameter.
/// Anything else, such as `*` or swift-async-algorithms' `,` (delay next), is a
/// ``MarbleSyntaxError`` that names its column.
///
/// Two diagrams are equal when their events, length and step length are; compare only what
/// happens with ``events``.
public struct MarbleDiagram: Sendable, Hashable, CustomStringConvertible {
  /// An event at a step.
  public struct Entry: Sendable, Hashable {
    /// The step, from 0.
    public var step: Int
    /// What happens.
    public var event: MarbleEvent

    /// `event` at `step`.
    public init(step: Int, event: MarbleEvent) {
      self.step = step
      self.event = event
    }
  }

  /// The most steps ``MarbleTimeline/diagram(stepLength:origin:offGrid:)`` draws: a million, a
  /// megabyte of text per line. An event further out is a ``MarbleRenderError/tooLong(value:instant:stepLength:)``.
  public static let maximumLength = 1_000_000

  /// The events in order: by step, and in written order within a step.
  public private(set) var events: [Entry]
  /// The number of steps the diagram spans: `"a--"` spans 3.
  public private(set) var length: Int
  /// How long one step is, if the diagram says (`step: 100ms`).
  public var stepLength: Duration?

  /// A diagram of `events`, which are sorted by step (keeping the order within a step).
  ///
  /// - Parameters:
  ///   - events: The events. Values must not be empty nor contain `'`.
  ///   - length: The steps spanned; at least one past the last event, which is the default.
  ///   - stepLength: How long one step is, if known.
  public init(events: [Entry], length: Int? = nil, stepLength: Duration? = nil) {
    for entry in events {
      precondition(entry.step >= 0, "MarbleDiagram: step \(entry.step) is negative")
      if case .value(let value) = entry.event {
        precondition(MarbleEvent.isRepresentable(value), "MarbleDiagram: value '\(value)' is empty or contains a quote")
      }
    }
    let sorted = events.enumerated().sorted { ($0.element.step, $0.offset) < ($1.element.step, $1.offset) }.map(
      \.element)
    self.events = sorted
    self.length = max(length ?? 0, (sorted.last?.step ?? -1) + 1)
    self.stepLength = stepLength
  }

  /// Parses marble notation, such as `"a--b--c---|"` or `"step: 10ms a-[bc]-|"`.
  ///
  /// - Throws: ``MarbleSyntaxError`` with the 1-based column of the first malformed token.
  public init(_ text: String) throws(MarbleSyntaxError) {
    var parser = MarbleParser(text)
    self = try parser.parse()
  }

  /// The events at each step, as one array per step; steps without events are empty.
  public var steps: [[MarbleEvent]] {
    var steps = Array(repeating: [MarbleEvent](), count: length)
    for entry in events { steps[entry.step].append(entry.event) }
    return steps
  }

  /// The diagram in canonical notation, without header: `"a--[bc]-|"`.
  ///
  /// Where two tokens would fuse into one grapheme (Hangul jamo written apart, `ᄀ` then `ᅡ`), a
  /// space keeps them apart, so the description always reads back to the same events.
  public var description: String {
    var text = ""
    for token in steps.lazy.map(Self.token(for:)) {
      if let last = text.last, let first = token.first, (String(last) + String(first)).count < 2 { text += " " }
      text += token
    }
    return text
  }

  /// The diagram with its `step:` header when it has a step length: `"step: 100ms a--b"`.
  public var descriptionWithHeader: String {
    guard let stepLength else { return description }
    return "step: \(DurationText.format(stepLength)) \(description)"
  }

  /// The token for one step: `-`, one event, or a `[group]`.
  static func token(for events: [MarbleEvent]) -> String {
    switch events.count {
    case 0: "-"
    case 1: events[0].description
    default: "[" + events.map(\.description).joined() + "]"
    }
  }

  /// The diagrams drawn one above the other with their steps aligned: wherever one diagram needs
  /// more than one character for a step (a `'word'` or a `[group]`), the others are padded with
  /// spaces, which marble notation ignores. Each line still parses to its diagram.
  ///
  /// ```
  /// a-'bc'-   d
  /// -e-   [fg]
  /// ```
  public static func aligned(_ diagrams: [MarbleDiagram]) -> [String] {
    let length = diagrams.map(\.length).max() ?? 0
    let tokens = diagrams.map { $0.steps.map(token(for:)) }
    var widths = Array(repeating: 1, count: length)
    for line in tokens {
      for (step, token) in line.enumerated() { widths[step] = max(widths[step], token.count) }
    }
    return tokens.map { line in
      var text = ""
      for (step, token) in line.enumerated() {
        text += token + String(repeating: " ", count: widths[step] - token.count)
      }
      // Trailing padding says nothing; drop it.
      while text.last == " " { text.removeLast() }
      return text
    }
  }

  /// Labelled diagrams, aligned under each other, one per line:
  ///
  /// ```
  /// input     a-b-c------d
  /// expected  -------c------d
  /// ```
  ///
  /// - Parameters:
  ///   - rows: A label and a diagram per line.
  ///   - indent: Text put before every line.
  public static func table(_ rows: [(label: String, diagram: MarbleDiagram)], indent: String = "") -> String {
    let labelWidth = rows.map(\.label.count).max() ?? 0
    let lines = aligned(rows.map(\.diagram))
    return zip(rows, lines).map { row, line in
      indent + row.label + String(repeating: " ", count: labelWidth - row.label.count + 2) + line
    }.joined(separator: "\n")
  }
}

/// A malformed marble diagram: where (the 1-based column) and why.
///
/// Its description shows the diagram with a caret under the column:
///
/// ```
/// column 4: '-' inside a group; a group is a single step
///   a-[b-c]
///       ^
/// ```
public struct MarbleSyntaxError: Error, Hashable, CustomStringConvertible {
  /// What is wrong at ``column``.
  public enum Reason: Hashable, Sendable {
    /// A character that is not marble notation, such as `*`. Values other than a letter or
    /// digit must be quoted.
    case unexpectedCharacter(Character)
    /// A `'` that is never closed.
    case unterminatedValue
    /// `''`: a value must have at least one character.
    case emptyValue
    /// A `[` inside a group.
    case nestedGroup
    /// A `[` that is never closed.
    case unterminatedGroup
    /// A `]` with no `[` before it.
    case unmatchedGroupEnd
    /// `[]`: write `-` for a step with no event.
    case emptyGroup
    /// A `-` inside a group: a group is one step.
    case stepInGroup
    /// An event after `|` or `^`; only `-` may follow the end.
    case eventAfterEnd
    /// swift-async-algorithms' `,` (delay next): Pace's steps have no order below a step.
    case delayNotSupported
    /// The `step:` header's duration does not parse.
    case malformedStepLength(DurationSyntaxError)
    /// A `step:` header of zero: steps must take time.
    case zeroStepLength
  }

  /// The diagram as given.
  public var text: String
  /// The 1-based column (in characters) of the offending token.
  public var column: Int
  /// What is wrong.
  public var reason: Reason

  /// An error at `column` of `text`.
  public init(text: String, column: Int, reason: Reason) {
    self.text = text
    self.column = column
    self.reason = reason
  }

  /// The reason as a phrase, such as `"'-' inside a group; a group is a single step"`.
  public var explanation: String {
    switch reason {
    case .unexpectedCharacter(let character):
      "unexpected \(Excerpt.quoted(String(character), limit: 12)); a value that is not a letter or digit is quoted, "
        + "like \(Excerpt.quoted(String(character), limit: 12))"
    case .unterminatedValue: "the quoted value is never closed with '"
    case .emptyValue: "empty value ''; a value has at least one character"
    case .nestedGroup: "'[' inside a group; groups do not nest"
    case .unterminatedGroup: "the group is never closed with ']'"
    case .unmatchedGroupEnd: "']' without a '[' before it"
    case .emptyGroup: "empty group []; write '-' for a step with no event"
    case .stepInGroup: "'-' inside a group; a group is a single step"
    case .eventAfterEnd: "an event after the end ('|' or '^'); only '-' may follow"
    case .delayNotSupported: "',' (delay next) is not supported: events in one step are simply written in order"
    case .malformedStepLength(let error): "the step length \(error)"
    case .zeroStepLength: "the step length must be longer than zero"
    }
  }

  public var description: String {
    // Newlines in the diagram would break the caret line: show the diagram's line of the column,
    // and of a long line only the stretch around the column, escaped, so the message stays short.
    let characters = Array(text)
    let target = min(max(column - 1, 0), characters.count)
    var lineStart = 0
    for index in 0..<target where characters[index].isNewline { lineStart = index + 1 }
    let lineEnd = characters[target...].firstIndex(where: \.isNewline) ?? characters.count
    let halfWindow = Excerpt.limit / 2
    let windowStart = max(lineStart, target - halfWindow)
    let windowEnd = min(lineEnd, max(target, windowStart) + halfWindow)
    var line = windowStart > lineStart ? "…" : ""
    var caretOffset = line.count
    for index in windowStart..<windowEnd {
      let shown = Self.shown(characters[index])
      if index < target { caretOffset += shown.count }
      line += shown
    }
    if windowEnd < lineEnd { line += "…" }
    let caret = String(repeating: " ", count: caretOffset) + "^"
    return "column \(column): \(explanation)\n  \(line)\n  \(caret)"
  }

  /// A character of the diagram as the caret line shows it: escaped if it is a control character.
  private static func shown(_ character: Character) -> String {
    Excerpt.isPlain(String(character)) && character.unicodeScalars.count <= 8
      ? String(character) : Excerpt.escaped(String(character), limit: 12)
  }
}
