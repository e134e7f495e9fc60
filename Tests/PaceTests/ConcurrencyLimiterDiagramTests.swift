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

/// The same diagrams through `ConcurrencyLimiter` itself on a `TestScheduler`: each call an
/// `acquire()` started at its instant, its permit released by a timer `hold` after its admission.
/// Time moves one step at a time, and only once every call that is no longer waiting has
/// recorded its answer, so each answer is recorded at the instant it was given.
@Suite(.timeLimit(.minutes(2))) struct ConcurrencyLimiterDriverDiagramTests {
  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  func run(
    critical: String = "", default standard: String = "", sheddable: String = "", hold: Int,
    _ makeLimiter: (TestScheduler) -> ConcurrencyLimiter
  ) async throws -> (admitted: String, refused: String) {
    typealias Diagram = ConcurrencyLimiterDiagramTests
    let scheduler = TestScheduler()
    let limiter = makeLimiter(scheduler)
    var arrivals: [(step: Int, name: Character, priority: AdmissionPriority)] = []
    for (line, priority) in [(critical, AdmissionPriority.critical), (standard, .default), (sheddable, .sheddable)] {
      arrivals += Diagram.parse(line).map { ($0.step, $0.name, priority) }
    }
    let answers = LockedBox<(admitted: [(step: Int, name: Character)], refused: [(step: Int, name: Character)])>(
      ([], []))
    let step = Duration.milliseconds(Diagram.step)
    var started = 0
    var tasks: [Task<Void, Never>] = []
    let lastArrival = arrivals.map(\.step).max() ?? 0
    var index = 0
    while index <= lastArrival || limiter.inFlightCount > 0 || limiter.waitingCount > 0, index < 1000 {
      defer { index += 1 }
      scheduler.advance(to: PaceInstant.zero.advanced(by: step * index))
      for arrival in arrivals where arrival.step == index {
        started += 1
        tasks.append(
          Task.immediate {
            do {
              let permit = try await limiter.acquire(priority: arrival.priority)
              let now = scheduler.now
              answers.withLock { $0.admitted.append((Int(now.nanoseconds / 100_000_000), arrival.name)) }
              scheduler.schedule(at: now.advanced(by: step * hold)) { permit.release() }
            } catch {
              let now = scheduler.now
              answers.withLock { $0.refused.append((Int(now.nanoseconds / 100_000_000), arrival.name)) }
            }
          })
      }
      // Every call not waiting has answered before time moves on.
      let deadline = ContinuousClock.now.advanced(by: .seconds(30))
      while answers.withLock({ $0.admitted.count + $0.refused.count }) < started - limiter.waitingCount {
        guard ContinuousClock.now < deadline else {
          Issue.record("calls not answered at step \(index)")
          break
        }
        await Task.yield()
      }
    }
    for task in tasks { await task.value }
    #expect(limiter.inFlightCount == 0)
    let (admitted, refused) = answers.withLock { $0 }
    return (Self.unordered(Diagram.render(admitted)), Self.unordered(Diagram.render(refused)))
  }

  /// The diagram with each group's names sorted: tasks answered at one instant record their
  /// answers in any order.
  static func unordered(_ diagram: String) -> String {
    var result = ""
    var group: [Character]?
    for character in diagram {
      switch character {
      case "[": group = []
      case "]":
        result += "[" + String(group!.sorted()) + "]"
        group = nil
      default:
        if group != nil { group!.append(character) } else { result.append(character) }
      }
    }
    return result
  }

  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func oldestFirst() async throws {
    let result = try await run(default: "[abcde]-f-h", hold: 5) {
      ConcurrencyLimiter(maximumInFlight: 2, maximumQueued: 2, maximumWait: .milliseconds(400), clock: $0)
    }
    #expect(result.admitted == "[ab]----h")
    #expect(result.refused == "e-f-[cd]")
  }

  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func newestFirst() async throws {
    let result = try await run(default: "[abcde]-f-h", hold: 5) {
      ConcurrencyLimiter(
        maximumInFlight: 2, maximumQueued: 2, order: .newestFirst, maximumWait: .milliseconds(400), clock: $0)
    }
    #expect(result.admitted == Self.unordered("[ab]----[hf]"))
    #expect(result.refused == "c-d-e")
  }

  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func priorityClasses() async throws {
    let result = try await run(critical: "---X", default: "-[de]g", sheddable: "[abc]-f", hold: 4) {
      ConcurrencyLimiter(
        maximumInFlight: 4, maximumQueued: 2, shares: PriorityShares(defaultPercent: 75, sheddablePercent: 50),
        clock: $0)
    }
    #expect(result.admitted == "[ab]d-Xeg")
    #expect(result.refused == Self.unordered("--[cf]"))
  }
  #endif
}
