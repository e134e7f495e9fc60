import PaceTesting

// MARK: Marble diagrams

/// Marble diagrams, in swift-async-algorithms' notation: one character per step, `-` nothing,
/// a letter a value, `|` finish, `^` failure, `[ab]` several events in one step.
enum Marbles {
  static func parse(_ diagram: String, step: Int64) -> [(Int64, TestStream<String>.Event)] {
    var events: [(Int64, TestStream<String>.Event)] = []
    var index: Int64 = 0
    var inGroup = false
    for character in diagram {
      switch character {
      case " ": continue
      case "[":
        inGroup = true
        continue
      case "]": inGroup = false
      case "-": break
      case "|": events.append((index * step, .finish))
      case "^": events.append((index * step, .failure(TestFailure())))
      default: events.append((index * step, .element(String(character))))
      }
      if !inGroup { index += 1 }
    }
    return events
  }

  static func render(_ log: [Emission<String>], step: Int64) -> String {
    var tokens: [Int64: [String]] = [:]
    var last: Int64 = -1
    for emission in log {
      let (token, time): (String, PaceInstant) =
        switch emission {
        case .value(let value, let time): (value, time)
        case .finished(let time): ("|", time)
        case .failed(let time): ("^", time)
        }
      let nanosPerStep = step * 1_000_000
      guard time.nanoseconds % nanosPerStep == 0 else { return "off-step emission: \(emission)" }
      let index = time.nanoseconds / nanosPerStep
      tokens[index, default: []].append(token)
      last = max(last, index)
    }
    guard last >= 0 else { return "" }
    return (0...last).map { index in
      guard let group = tokens[index] else { return "-" }
      return group.count == 1 ? group[0] : "[" + group.joined() + "]"
    }.joined()
  }
}
