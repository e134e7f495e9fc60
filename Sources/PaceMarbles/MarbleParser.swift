/// Reads marble notation into a ``MarbleDiagram``; see there for the notation.
struct MarbleParser {
  private let text: String
  private let characters: [Character]
  private var index = 0

  private var events: [MarbleDiagram.Entry] = []
  private var step = 0
  /// The column of the `|` or `^` that ended the timeline.
  private var endColumn: Int?

  init(_ text: String) {
    self.text = text
    self.characters = Array(text)
  }

  mutating func parse() throws(MarbleSyntaxError) -> MarbleDiagram {
    let stepLength = try parseHeader()
    var groupStart: Int?  // index of the open '['
    var groupCount = 0

    while index < characters.count {
      let character = characters[index]
      let column = index + 1
      switch character {
      case _ where character.isWhitespace:
        break
      case "-":
        if groupStart != nil { throw error(at: column, .stepInGroup) }
        step += 1
      case "[":
        if groupStart != nil { throw error(at: column, .nestedGroup) }
        groupStart = index
        groupCount = 0
      case "]":
        guard groupStart != nil else { throw error(at: column, .unmatchedGroupEnd) }
        if groupCount == 0 { throw error(at: groupStart! + 1, .emptyGroup) }
        groupStart = nil
        step += 1
      case "'":
        guard let close = characters[(index + 1)...].firstIndex(of: "'") else {
          throw error(at: column, .unterminatedValue)
        }
        if close == index + 1 { throw error(at: column, .emptyValue) }
        let value = String(characters[(index + 1)..<close])
        // A value whose first or last character fuses with a quote cannot be written back.
        guard MarbleEvent.isRepresentable(value) else {
          throw error(at: column, .unexpectedCharacter(characters[index + 1]))
        }
        try add(.value(value), column: column, inGroup: groupStart != nil)
        groupCount += 1
        index = close
      case "|", "^", ";":
        let event: MarbleEvent = character == "|" ? .finish : character == "^" ? .failure : .cancel
        try add(event, column: column, inGroup: groupStart != nil)
        groupCount += 1
      case ",":
        throw error(at: column, .delayNotSupported)
      case _ where MarbleEvent.isBareValue(character):
        try add(.value(String(character)), column: column, inGroup: groupStart != nil)
        groupCount += 1
      default:
        throw error(at: column, .unexpectedCharacter(character))
      }
      index += 1
    }
    if let groupStart { throw error(at: groupStart + 1, .unterminatedGroup) }
    return MarbleDiagram(events: events, length: step, stepLength: stepLength)
  }

  /// Reads an optional `step: <duration>` header, leaving `index` after it.
  private mutating func parseHeader() throws(MarbleSyntaxError) -> Duration? {
    var start = 0
    while start < characters.count, characters[start].isWhitespace { start += 1 }
    let keyword = Array("step:")
    guard characters.count >= start + keyword.count, Array(characters[start..<(start + keyword.count)]) == keyword
    else {
      return nil
    }
    var cursor = start + keyword.count
    while cursor < characters.count, characters[cursor].isWhitespace, characters[cursor] != "\n" { cursor += 1 }
    let durationStart = cursor
    // The number, optional spaces, then the unit's letters.
    while cursor < characters.count, characters[cursor].isNumber || characters[cursor] == "." { cursor += 1 }
    var unitStart = cursor
    while unitStart < characters.count, characters[unitStart] == " " { unitStart += 1 }
    var unitEnd = unitStart
    while unitEnd < characters.count, characters[unitEnd].isLetter { unitEnd += 1 }
    if unitEnd > unitStart { cursor = unitEnd }
    // Anything glued to the duration (`100msa`) belongs to it and makes it malformed.
    while cursor < characters.count, !characters[cursor].isWhitespace { cursor += 1 }
    let durationText = String(characters[durationStart..<cursor])
    let duration: Duration
    do {
      duration = try DurationText.parse(durationText)
    } catch {
      throw self.error(at: durationStart + 1, .malformedStepLength(error))
    }
    if duration == .zero { throw self.error(at: durationStart + 1, .zeroStepLength) }
    index = cursor
    return duration
  }

  private mutating func add(_ event: MarbleEvent, column: Int, inGroup: Bool) throws(MarbleSyntaxError) {
    if endColumn != nil { throw error(at: column, .eventAfterEnd) }
    events.append(MarbleDiagram.Entry(step: step, event: event))
    if event.isTerminal { endColumn = column }
    if !inGroup { step += 1 }
  }

  private func error(at column: Int, _ reason: MarbleSyntaxError.Reason) -> MarbleSyntaxError {
    MarbleSyntaxError(text: text, column: column, reason: reason)
  }
}
