import PaceTestSupport
import Testing

@testable import Pace

/// The diagrams of the ConcurrencyLimiter article, run through the limiter's machine. One
/// character is 100 ms; a call holds its place for `hold` from its admission. At one instant,
/// places are released first, then waiting calls reach their maximum wait, then calls arrive:
/// the critical line's first, then the default line's, then the sheddable line's, each group left
/// to right. Keep them in sync with the article.
@Suite struct ConcurrencyLimiterDiagramTests {
  static let step: Int64 = 100

  /// The calls of each marble line, as (instant in steps, name).
  static func parse(_ line: String) -> [(step: Int, name: Character)] {
    var calls: [(Int, Character)] = []
    var index = 0
    var inGroup = false
    for character in line {
      switch character {
      case "-": index += 1
      case "[": inGroup = true
      case "]":
        inGroup = false
        index += 1
      default:
        calls.append((index, character))
        if !inGroup { index += 1 }
      }
    }
    return calls
  }

  /// One marble line of the names at each step: `-` for none, a group for several.
  static func render(_ events: [(step: Int, name: Character)]) -> String {
    guard let last = events.map(\.step).max() else { return "" }
    return (0...last).map { step in
      let names = events.filter { $0.step == step }.map { String($0.name) }.joined()
      return names.isEmpty ? "-" : names.count == 1 ? names : "[\(names)]"
    }.joined()
  }

  /// The admissions and refusals of the calls of `lines` (critical, default, sheddable).
  static func run(
    critical: String = "", default standard: String = "", sheddable: String = "",
    _ configuration: ConcurrencyLimiterStateMachine.Configuration, hold: Int
  ) -> (admitted: String, refused: String) {
    var machine = ConcurrencyLimiterStateMachine(configuration)
    var arrivals: [(step: Int, name: Character, priority: AdmissionPriority)] = []
    for (line, priority) in [(critical, AdmissionPriority.critical), (standard, .default), (sheddable, .sheddable)] {
      arrivals += parse(line).map { ($0.step, $0.name, priority) }
    }
    let end = (arrivals.map(\.step).max() ?? 0) + hold + 100
    var names: [UInt64: Character] = [:]
    var releases: [Int: Int] = [:]
    var wakeAt: PaceInstant?
    var admitted: [(step: Int, name: Character)] = []
    var refused: [(step: Int, name: Character)] = []
    func record(_ action: ConcurrencyLimiterStateMachine.Action, at step: Int) {
      for id in action.admitted {
        admitted.append((step, names[id]!))
        releases[step + hold, default: 0] += 1
      }
      for refusal in action.refused { refused.append((step, names[refusal.id]!)) }
      wakeAt = action.wakeAt
    }
    for step in 0...end {
      let now = PaceInstant.zero.advanced(by: .milliseconds(Int64(step) * Self.step))
      for _ in 0..<(releases.removeValue(forKey: step) ?? 0) { record(machine.release(now: now), at: step) }
      if let deadline = wakeAt, deadline <= now { record(machine.timerFired(now: now), at: step) }
      for arrival in arrivals where arrival.step == step {
        let id = UInt64(names.count + 1)
        names[id] = arrival.name
        record(machine.enqueue(id: id, priority: arrival.priority, now: now), at: step)
      }
    }
    return (render(admitted), render(refused))
  }

  @Test func oldestFirst() {
    let result = Self.run(
      default: "[abcde]-f-h",
      .init(maximumInFlight: 2, maximumQueued: 2, order: .oldestFirst, maximumWait: .milliseconds(400)), hold: 5)
    #expect(result.admitted == "[ab]----h")
    #expect(result.refused == "e-f-[cd]")
  }

  @Test func newestFirst() {
    let result = Self.run(
      default: "[abcde]-f-h",
      .init(maximumInFlight: 2, maximumQueued: 2, order: .newestFirst, maximumWait: .milliseconds(400)), hold: 5)
    #expect(result.admitted == "[ab]----[hf]")
    #expect(result.refused == "c-d-e")
  }

  @Test func priorityClasses() {
    let result = Self.run(
      critical: "---X", default: "-[de]g", sheddable: "[abc]-f",
      .init(
        maximumInFlight: 4, maximumQueued: 2, shares: PriorityShares(defaultPercent: 75, sheddablePercent: 50)),
      hold: 4)
    #expect(result.admitted == "[ab]d-Xeg")
    #expect(result.refused == "--[cf]")
  }
}
