import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `.debounced` on virtual time, with exact emission times.
@Suite struct AsyncDebouncedTests {
  typealias Event = TestStream<String>.Event

  func debounce(
    _ inputs: [(Int64, Event)], _ interval: Int64 = 300, edges: Edges = .trailing, maximumWait: Int64? = nil
  ) async -> [Emission<String>] {
    await runTimeline(inputs) { upstream, scheduler in
      upstream.debounced(
        for: .milliseconds(interval), edges: edges, maximumWait: maximumWait.map { .milliseconds($0) },
        clock: scheduler
      )
    }
  }

  // MARK: Timelines of the core tests

  @Test func aBurstEmitsItsLastElementOnceTheIntervalHasPassedWithNoElement() async {
    let log = await debounce([(0, .element("s")), (100, .element("sw")), (200, .element("swi"))])
    #expect(log == [at(500, "swi")])
  }

  @Test func marbles() async {
    let step: Int64 = 100
    let emitted = await runTimeline(Marbles.parse("a-b-c-------d---|", step: step)) { upstream, scheduler in
      upstream.debounced(for: .milliseconds(300), clock: scheduler)
    }
    #expect(Marbles.render(emitted, step: step) == "-------c-------d|")
  }

  @Test func leadingEmitsTheFirstElementOfEachBurst() async {
    let log = await debounce(
      [(0, .element("a")), (100, .element("b")), (200, .element("c")), (600, .element("d"))], edges: .leading)
    #expect(log == [at(0, "a"), at(600, "d")])
  }

  @Test func aLoneElementWithBothEdgesIsEmittedOnce() async {
    let log = await debounce([(0, .element("a"))], edges: .both)
    #expect(log == [at(0, "a")])
  }

  @Test func bothEdgesEmitTheFirstAndTheLastElementOfABurst() async {
    let log = await debounce([(0, .element("a")), (100, .element("b")), (150, .element("c"))], edges: .both)
    #expect(log == [at(0, "a"), at(450, "c")])
  }

  @Test func maxWaitBoundsTheWaitWhileElementsKeepComing() async {
    // lodash: debounce(f, 100, { maximumWait: 250 }) called every 50 ms from 0 to 600 ms.
    let inputs = stride(from: Int64(0), through: 600, by: 50).map { ($0, Event.element("\($0)")) }
    let log = await debounce(inputs, 100, maximumWait: 250)
    #expect(log == [at(250, "200"), at(500, "450"), at(700, "600")])
  }

  @Test func appendMergesEveryElementOfABurst() async {
    let inputs: [(Int64, TestStream<[Int]>.Event)] = [
      (0, .element([1])), (100, .element([2])), (200, .element([3])), (600, .element([4])),
    ]
    let log = await runTimeline(inputs) { upstream, scheduler in
      upstream.debounced(for: .milliseconds(300), merge: .append, clock: scheduler)
    }
    #expect(log == [at(500, [1, 2, 3]), at(900, [4])])
  }

  // MARK: The end of the base sequence

  @Test func finishingDeliversThePendingElementThenFinishes() async {
    let log = await debounce([(0, .element("a")), (100, .element("b")), (200, .finish)])
    #expect(log == [at(200, "b"), .finished(at: ms(200))])
  }

  @Test func finishingWithNothingPendingFinishesAtOnce() async {
    let log = await debounce([(0, .element("a")), (500, .finish)])
    #expect(log == [at(300, "a"), .finished(at: ms(500))])
  }

  @Test func aFailureDeliversThePendingElementThenThrows() async {
    let log = await debounce([(0, .element("a")), (100, .element("b")), (200, .failure(TestFailure()))])
    #expect(log == [at(200, "b"), .failed(at: ms(200))])
  }

  @Test func aFailureWithNothingPendingThrowsAtOnce() async {
    let log = await debounce([(0, .element("a")), (500, .failure(TestFailure()))])
    #expect(log == [at(300, "a"), .failed(at: ms(500))])
  }

  @Test func theErrorThrownIsTheBaseSequencesError() async throws {
    let scheduler = TestScheduler()
    let upstream = TestStream<String>()
    var iterator = upstream.debounced(for: .milliseconds(300), clock: scheduler).makeAsyncIterator()
    upstream.fail(TestFailure())
    await #expect(throws: TestFailure.self) { try await iterator.next() }
    #expect(try await iterator.next() == nil)
  }

  @Test func anEmptyBaseSequenceFinishes() async {
    let log = await debounce([(0, .finish)])
    #expect(log == [.finished(at: ms(0))])
  }

  // MARK: Against the synchronous Debouncer

  @Test(arguments: 0..<4)
  func emitsWhatADebouncerInvokesOnRandomTimelines(batch: UInt64) async {
    for seed in batch * 50..<(batch + 1) * 50 {
      var random = SeededGenerator(seed: seed)
      let interval = Int64.random(in: 1...80, using: &random)
      let maximumWait: Int64? = Bool.random(using: &random) ? Int64.random(in: 1...200, using: &random) : nil
      let edges = [Edges.leading, .trailing, .both].randomElement(using: &random)!
      var time: Int64 = 0
      let calls = (0..<Int.random(in: 1...30, using: &random)).map { index -> (Int64, Int) in
        time += [0, 1, 5, 10, 40, 100].randomElement(using: &random)!
        return (time, index)
      }

      let expected = invocations(of: calls, interval: interval, edges: edges, maximumWait: maximumWait)
      let inputs = calls.map { ($0, TestStream<Int>.Event.element($1)) }
      let emitted = await runTimeline(inputs) { upstream, scheduler in
        upstream.debounced(
          for: .milliseconds(interval), edges: edges, maximumWait: maximumWait.map { .milliseconds($0) },
          clock: scheduler
        )
      }
      #expect(
        emitted == expected,
        "seed \(seed): interval \(interval), maximumWait \(String(describing: maximumWait)), \(edges)")
    }
  }

  /// What a `Debouncer` with the same settings invokes for `calls`, and when.
  func invocations(of calls: [(Int64, Int)], interval: Int64, edges: Edges, maximumWait: Int64?) -> [Emission<Int>] {
    let scheduler = TestScheduler()
    let log = Log<Emission<Int>>()
    let debouncer = Debouncer<Int>(
      for: .milliseconds(interval), edges: edges, maximumWait: maximumWait.map { .milliseconds($0) },
      scheduler: scheduler
    ) { log.append(.value($0, at: scheduler.now)) }
    for (time, value) in calls {
      scheduler.advance(to: ms(time))
      debouncer.call(value)
    }
    scheduler.run()
    return log.all
  }
}
