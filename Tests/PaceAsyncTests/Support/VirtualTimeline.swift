@testable import Pace

/// What an operator emitted, and at which virtual time.
enum Emission<Value: Equatable & Sendable>: Equatable, CustomStringConvertible {
  case value(Value, at: PaceInstant)
  case finished(at: PaceInstant)
  case failed(at: PaceInstant)

  var description: String {
    switch self {
    case .value(let value, let time): "\(value)@\(time)"
    case .finished(let time): "|@\(time)"
    case .failed(let time): "^@\(time)"
    }
  }

  var value: Value? {
    if case .value(let value, _) = self { return value }
    return nil
  }
}

func ms(_ milliseconds: Int64) -> PaceInstant {
  PaceInstant(.milliseconds(milliseconds))
}

func at<Value>(_ milliseconds: Int64, _ value: Value) -> Emission<Value> {
  .value(value, at: ms(milliseconds))
}

struct TestFailure: Error, Equatable {}

/// The iterators of Pace's paced sequences, seen by the tests: their queue can be polled without
/// suspending, and their tasks awaited.
protocol PacedIterator<Element>: AsyncIteratorProtocol where Element: Sendable {
  func pollForTesting() -> PacedPoll<Element>
  var tasksForTesting: [Task<Void, Never>] { get }
}

enum PacedPoll<Element> {
  case element(Element)
  case end((any Error)?)
  case empty
}

extension AsyncPacingStorage {
  func pollForTesting() -> PacedPoll<Element> {
    switch poll() {
    case .element(let element): .element(element)
    case .end(let error): .end(error)
    case .empty: .empty
    }
  }
}

extension AsyncDebouncedSequence.Iterator: PacedIterator {
  func pollForTesting() -> PacedPoll<Element> { handle.storage.pollForTesting() }
  var tasksForTesting: [Task<Void, Never>] { handle.storage.tasksForTesting }
}

extension AsyncThrottledSequence.Iterator: PacedIterator {
  func pollForTesting() -> PacedPoll<Element> { handle.storage.pollForTesting() }
  var tasksForTesting: [Task<Void, Never>] { handle.storage.tasksForTesting }
}

/// Drives an operator over a ``TestUpstream`` on a ``TestScheduler`` and records each emission
/// with the virtual time it happened at.
///
/// Deterministic without yielding: an element is sent with `await upstream.send(_:)`, which
/// returns once the operator has processed it; time moves one timer deadline at a time, and the
/// operator's timers fire synchronously inside `advance`; after each step the operator's queue
/// is polled, so each emission is recorded at the exact instant it was made. After the upstream
/// ends, the rest is read with the ordinary `await next()` without moving time.
struct VirtualTimeline<Input: Sendable, Sequence: AsyncSequence>
where Sequence.AsyncIterator: PacedIterator, Sequence.Element: Equatable {
  typealias Output = Sequence.Element

  let scheduler: TestScheduler
  let upstream = TestUpstream<Input>()
  private(set) var iterator: Sequence.AsyncIterator
  private(set) var log: [Emission<Output>] = []
  private(set) var ended = false

  init(scheduler: TestScheduler = TestScheduler(), _ operate: (TestUpstream<Input>, TestScheduler) -> Sequence) {
    self.scheduler = scheduler
    iterator = operate(upstream, scheduler).makeAsyncIterator()
    drain()  // the first poll starts reading the upstream
  }

  /// Runs `inputs` (times in ms) and then every timer left; returns the emissions.
  static func run(
    _ inputs: [(Int64, TestUpstream<Input>.Event)],
    scheduler: TestScheduler = TestScheduler(),
    through operate: (TestUpstream<Input>, TestScheduler) -> Sequence
  ) async -> [Emission<Output>] {
    var timeline = VirtualTimeline(scheduler: scheduler, operate)
    for (time, event) in inputs {
      await timeline.play(event, at: ms(time))
      if timeline.ended { return timeline.log }
    }
    timeline.runTimers()
    return timeline.log
  }

  mutating func play(_ event: TestUpstream<Input>.Event, at time: PaceInstant) async {
    advance(to: time)
    switch event {
    case .element(let element):
      await upstream.send(element)
      drain()
    case .finish:
      upstream.finish()
      await readToEnd()
    case .failure(let error):
      upstream.fail(error)
      await readToEnd()
    }
  }

  /// Moves time to `target` one timer deadline at a time, recording emissions on the way.
  mutating func advance(to target: PaceInstant) {
    while let deadline = scheduler.nextDeadline, deadline <= target {
      scheduler.advance(to: max(deadline, scheduler.now))
      drain()
    }
    scheduler.advance(to: max(target, scheduler.now))
    drain()
  }

  /// Fires every timer left, in order.
  mutating func runTimers() {
    while let deadline = scheduler.nextDeadline {
      scheduler.advance(to: max(deadline, scheduler.now))
      drain()
    }
  }

  /// Records what the operator has queued, without suspending.
  mutating func drain() {
    while !ended {
      switch iterator.pollForTesting() {
      case .element(let element):
        log.append(.value(element, at: scheduler.now))
      case .end(let error):
        log.append(error == nil ? .finished(at: scheduler.now) : .failed(at: scheduler.now))
        ended = true
      case .empty:
        return
      }
    }
  }

  /// Reads with `await next()` until the sequence ends; time does not move meanwhile.
  mutating func readToEnd() async {
    while !ended {
      do {
        if let element = try await iterator.next() {
          log.append(.value(element, at: scheduler.now))
        } else {
          log.append(.finished(at: scheduler.now))
          ended = true
        }
      } catch {
        log.append(.failed(at: scheduler.now))
        ended = true
      }
    }
  }
}

/// ``VirtualTimeline/run(_:scheduler:through:)`` with its types inferred.
func runTimeline<Input: Sendable, Sequence: AsyncSequence>(
  _ inputs: [(Int64, TestUpstream<Input>.Event)],
  scheduler: TestScheduler = TestScheduler(),
  through operate: (TestUpstream<Input>, TestScheduler) -> Sequence
) async -> [Emission<Sequence.Element>] where Sequence.AsyncIterator: PacedIterator, Sequence.Element: Equatable {
  await VirtualTimeline<Input, Sequence>.run(inputs, scheduler: scheduler, through: operate)
}

// MARK: Marble diagrams

/// Marble diagrams, in swift-async-algorithms' notation: one character per step, `-` nothing,
/// a letter a value, `|` finish, `^` failure, `[ab]` several events in one step.
enum Marbles {
  static func parse(_ diagram: String, step: Int64) -> [(Int64, TestUpstream<String>.Event)] {
    var events: [(Int64, TestUpstream<String>.Event)] = []
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
