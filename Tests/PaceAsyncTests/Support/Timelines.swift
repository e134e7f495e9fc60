import PaceTestSupport
import PaceTesting

@testable import Pace

// Pace's async tests run on PaceTesting's public harness (`VirtualTimeline`, `TestStream`,
// `TestScheduler.waitForSleepers`), the one users get. What is here is shorthand for tables of
// timed inputs, and white-box hooks that only Pace's own tests may use.

func at<Value>(_ milliseconds: Int64, _ value: Value) -> Emission<Value> {
  .value(value, at: ms(milliseconds))
}

struct TestFailure: Error, Equatable {}

/// Plays `inputs` (times in ms) into an operator over a `TestStream`, then fires every timer
/// left; returns what the operator emitted, with the virtual times.
func runTimeline<Input: Sendable, Sequence: AsyncSequence & Sendable>(
  _ inputs: [(Int64, TestStream<Input>.Event)],
  scheduler: TestScheduler = TestScheduler(),
  through operate: (TestStream<Input>, TestScheduler) -> Sequence
) async -> [Emission<Sequence.Element>] where Sequence.Element: Equatable & Sendable {
  let upstream = TestStream<Input>()
  let timeline = VirtualTimeline(scheduler: scheduler, operate(upstream, scheduler))
  for (time, event) in inputs {
    timeline.advance(to: max(ms(time), scheduler.now))
    switch event {
    case .element(let element):
      await upstream.send(element)
    case .finish:
      upstream.finish()
      await timeline.waitForEnd()
    case .failure(let error):
      upstream.fail(error)
      await timeline.waitForEnd()
    }
    if timeline.isFinished { return timeline.emissions }
  }
  timeline.runTimers()
  return timeline.emissions
}

// MARK: White-box hooks

/// The iterators of Pace's paced sequences, seen by the lifecycle tests: their queue can be
/// polled without suspending, and their tasks awaited.
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
