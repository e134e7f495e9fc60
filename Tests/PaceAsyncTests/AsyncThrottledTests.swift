import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `.throttled` on virtual time, with exact emission times: the Throttler timelines, through the
/// async operator.
@Suite struct AsyncThrottledTests {
  typealias Event = TestStream<String>.Event

  func throttleValues<Value: Sendable & Equatable>(
    _ inputs: [(Int64, TestStream<Value>.Event)], _ interval: Int64 = 100, edges: Edges = .both,
    merge: Merge<Value> = .latest
  ) async -> [Emission<Value>] {
    await runTimeline(inputs) { upstream, scheduler in
      upstream.throttled(for: .milliseconds(interval), edges: edges, merge: merge, clock: scheduler)
    }
  }

  func throttle(
    _ inputs: [(Int64, Event)], _ interval: Int64 = 100, edges: Edges = .both, merge: Merge<String> = .latest
  ) async -> [Emission<String>] {
    await throttleValues(inputs, interval, edges: edges, merge: merge)
  }

  // MARK: Timelines of the core tests

  @Test func emissionsAreExactlyOneIntervalApartWhileElementsContinue() async {
    let inputs = stride(from: Int64(0), through: 290, by: 30).map { ($0, TestStream<Int>.Event.element(Int($0))) }
    let log = await throttleValues(inputs)
    #expect(log == [at(0, 0), at(100, 90), at(200, 180), at(300, 270)])
  }

  @Test func marbles() async {
    let step: Int64 = 100
    let emitted = await runTimeline(Marbles.parse("abcdefg----h--", step: step)) { upstream, scheduler in
      upstream.throttled(for: .milliseconds(300), clock: scheduler)
    }
    #expect(Marbles.render(emitted, step: step) == "a--c--f--g--h")
  }

  @Test func quietAfterAWindowWithNoElements() async {
    let log = await throttle([(0, .element("a")), (50, .element("b")), (250, .element("c"))])
    #expect(log == [at(0, "a"), at(100, "b"), at(250, "c")])
  }

  @Test func trailingOnlyEmitsAtEachWindowEnd() async {
    let inputs: [(Int64, TestStream<[String]>.Event)] = [
      (10, .element(["a"])), (60, .element(["b"])), (150, .element(["c"])), (400, .element(["d"])),
    ]
    let log = await throttleValues(inputs, edges: .trailing, merge: .append)
    #expect(log == [at(110, ["a", "b"]), at(210, ["c"]), at(500, ["d"])])
  }

  @Test func leadingOnlyEmitsOncePerWindowAndDropsTheRest() async {
    let log = await throttle(
      [(0, .element("a")), (50, .element("b")), (100, .element("c")), (150, .element("d")), (230, .element("e"))],
      edges: .leading)
    #expect(log == [at(0, "a"), at(100, "c"), at(230, "e")])
  }

  @Test func anElementExactlyAtTheWindowEndFallsInTheNextWindow() async {
    let log = await throttle([(0, .element("a")), (50, .element("b")), (100, .element("c"))])
    #expect(log == [at(0, "a"), at(100, "b"), at(200, "c")])
  }

  @Test func mergeFirstKeepsTheWindowsFirstElement() async {
    let log = await throttle([(0, .element("a")), (10, .element("b")), (20, .element("c"))], merge: .first)
    #expect(log == [at(0, "a"), at(100, "b")])
  }

  @Test func everyElementReachesExactlyOneEmissionWithAppend() async {
    let inputs = (0..<50).map { (Int64($0 * 7), TestStream<[Int]>.Event.element([$0])) }
    let log = await throttleValues(inputs, merge: .append)
    #expect(log.compactMap(\.value).flatMap { $0 } == Array(0..<50))
  }

  // MARK: The end of the base sequence

  @Test func finishingDeliversThePendingTrailingElementThenFinishes() async {
    // swift-async-algorithms #248, #266, #413: the last element must not be dropped.
    let log = await throttle([(0, .element("a")), (50, .element("b")), (60, .finish)])
    #expect(log == [at(0, "a"), at(60, "b"), .finished(at: ms(60))])
  }

  @Test func finishingATrailingOnlyThrottleDeliversItsOnlyElement() async {
    let log = await throttle([(10, Event.element("a")), (20, .finish)], edges: .trailing)
    #expect(log == [at(20, "a"), .finished(at: ms(20))])
  }

  @Test func finishingWithNothingPendingFinishesAtOnce() async {
    let log = await throttle([(0, .element("a")), (50, .finish)])
    #expect(log == [at(0, "a"), .finished(at: ms(50))])
  }

  @Test func aFailureDeliversThePendingElementThenThrows() async {
    let log = await throttle([(0, .element("a")), (50, .element("b")), (60, .failure(TestFailure()))])
    #expect(log == [at(0, "a"), at(60, "b"), .failed(at: ms(60))])
  }

  // MARK: Against the synchronous Throttler

  @Test(arguments: 0..<4)
  func emitsWhatAThrottlerInvokesOnRandomTimelines(batch: UInt64) async {
    for seed in batch * 50..<(batch + 1) * 50 {
      var random = SeededGenerator(seed: seed)
      let interval = Int64.random(in: 1...80, using: &random)
      let edges = [Edges.leading, .trailing, .both].randomElement(using: &random)!
      var time: Int64 = 0
      let calls = (0..<Int.random(in: 1...30, using: &random)).map { index -> (Int64, [Int]) in
        time += [0, 1, 5, 10, 40, 100].randomElement(using: &random)!
        return (time, [index])
      }

      let scheduler = TestScheduler()
      let invoked = Log<Emission<[Int]>>()
      let throttler = Throttler<[Int]>(
        for: .milliseconds(interval), edges: edges, merge: .append, scheduler: scheduler
      ) { invoked.append(.value($0, at: scheduler.now)) }
      for (time, value) in calls {
        scheduler.advance(to: ms(time))
        throttler.call(value)
      }
      scheduler.run()

      let emitted = await throttleValues(calls.map { ($0, .element($1)) }, interval, edges: edges, merge: .append)
      #expect(emitted == invoked.all, "seed \(seed): interval \(interval), \(edges)")
    }
  }
}
