import Pace
import PaceTestSupport
import Testing

@testable import PaceTool

@Suite(.offThePool) struct SimulatorTests {
  let trace = Trace(source: "test", events: [(0, "a"), (40_000_000, "b"), (90_000_000, "c"), (1_000_000_000, "d")])

  func invocations(_ strategy: Strategy) throws -> [Invocation] {
    try Simulator.run(trace, strategy: strategy).invocations
  }

  @Test func debounceTrailingCoversEachBurst() throws {
    #expect(
      try invocations(Strategy(.debounce, interval: .milliseconds(300))) == [
        Invocation(time: 390_000_000, value: "c", firstCall: 0, callCount: 3),
        Invocation(time: 1_300_000_000, value: "d", firstCall: 3, callCount: 1),
      ])
  }

  @Test func debounceLeadingDropsTheRestOfTheBurst() throws {
    let result = try Simulator.run(trace, strategy: Strategy(.debounce, interval: .milliseconds(300), edges: .leading))
    #expect(
      result.invocations == [
        Invocation(time: 0, value: "a", firstCall: 0, callCount: 1),
        Invocation(time: 1_000_000_000, value: "d", firstCall: 3, callCount: 1),
      ])
    #expect(result.statistics.dropped == 2)
    #expect(result.statistics.maxDelay == 0)
  }

  @Test func throttleKeepsACadence() throws {
    #expect(
      try invocations(Strategy(.throttle, interval: .milliseconds(50))) == [
        Invocation(time: 0, value: "a", firstCall: 0, callCount: 1),
        Invocation(time: 50_000_000, value: "b", firstCall: 1, callCount: 1),
        Invocation(time: 100_000_000, value: "c", firstCall: 2, callCount: 1),
        Invocation(time: 1_000_000_000, value: "d", firstCall: 3, callCount: 1),
      ])
  }

  @Test func mergesSumAndAppend() throws {
    let numbers = Trace(source: "n", events: [(0, "1"), (10_000_000, "2.5"), (20_000_000, "3")])
    let sum = try Simulator.run(numbers, strategy: Strategy(.debounce, interval: .milliseconds(100), merge: .sum))
    #expect(sum.invocations.map(\.value) == ["6.5"])
    let append = try Simulator.run(numbers, strategy: Strategy(.debounce, interval: .milliseconds(100), merge: .append))
    #expect(append.invocations.map(\.value) == ["12.53"])
    let first = try Simulator.run(
      numbers, strategy: Strategy(.throttle, interval: .milliseconds(15), edges: .trailing, merge: .first))
    #expect(first.invocations.map(\.value) == ["1", "3"])
  }

  @Test func sameInstantCallsAreOneTurn() throws {
    let burst = Trace(source: "b", events: [(5, "1"), (5, "1"), (5, "1"), (9, "1")])
    let result = try Simulator.run(burst, strategy: Strategy(.coalesce, interval: .zero, merge: .sum))
    #expect(
      result.invocations == [
        Invocation(time: 5, value: "3", firstCall: 0, callCount: 3),
        Invocation(time: 9, value: "1", firstCall: 3, callCount: 1),
      ])
  }

  @Test func statisticsUseNearestRank() {
    let delays: [Int64] = [10, 20, 30, 40]
    #expect(Statistics.nearestRank(50, of: delays) == 20)
    #expect(Statistics.nearestRank(95, of: delays) == 40)
    #expect(Statistics.nearestRank(50, of: [7]) == 7)
    let statistics = Statistics(
      trace: trace, invocations: [Invocation(time: 390_000_000, value: "c", firstCall: 0, callCount: 3)])
    #expect(statistics.dropped == 1)
    #expect(statistics.medianDelay == 350_000_000)
    #expect(statistics.p95Delay == 390_000_000)
    #expect(statistics.maxDelay == 390_000_000)
    #expect(statistics.reduction == 0.75)
  }

  @Test func sumNeedsNumbers() {
    #expect(throws: ToolError("--events: event 2: value 'b' is not a number, and --merge sum adds the values")) {
      try Simulator.run(
        try TraceReader.parseEvents("1@0 b@5"), strategy: Strategy(.debounce, interval: .milliseconds(10), merge: .sum))
    }
  }

  @Test func runAllKeepsTheOrderOfStrategies() throws {
    let strategies = Strategy.all(interval: .milliseconds(300))
    let results = try Simulator.runAll(trace, strategies: strategies)
    #expect(results.map(\.strategy) == strategies)
    #expect(
      strategies.map(\.label) == [
        "debounce", "debounce leading", "debounce both", "debounce maxWait", "throttle", "throttle leading",
        "throttle trailing", "coalesce", "coalesce next turn",
      ])
  }

  @Test func aLargeTraceRuns() throws {
    // 100,000 calls in bursts: a correctness check at scale, not a timing test.
    var events: [(Int64, String)] = []
    var time: Int64 = 0
    for index in 0..<100_000 {
      time += index % 20 == 19 ? 2_000_000_000 : 50_000_000
      events.append((time, "v"))
    }
    let big = Trace(source: "big", events: events)
    let result = try Simulator.run(big, strategy: Strategy(.debounce, interval: .milliseconds(300)))
    #expect(result.invocations.count == 5_001)  // 5,000 gaps split 5,001 bursts
    #expect(result.statistics.dropped == 0)
    #expect(result.statistics.maxDelay == 1_250_000_000)
  }
}

@Suite struct SelectionTests {
  @Test func selectionAgreesWithSorting() {
    var generator = SeededGenerator(seed: 42)
    for count in [1, 2, 3, 7, 100, 1_001] {
      for range in [Int64(3), 1_000_000] {
        let values = (0..<count).map { _ in Int64(generator.next() % UInt64(range)) }
        let sorted = values.sorted()
        let trace = Trace(source: "s", events: values.indices.map { (0, "\($0)") })
        // Each invocation covers one call; its time is the call's delay.
        let invocations = values.enumerated().map {
          Invocation(time: $0.element, value: "v", firstCall: $0.offset, callCount: 1)
        }
        let statistics = Statistics(trace: trace, invocations: invocations)
        #expect(statistics.medianDelay == Statistics.nearestRank(50, of: sorted))
        #expect(statistics.p95Delay == Statistics.nearestRank(95, of: sorted))
        #expect(statistics.maxDelay == sorted.last)
      }
    }
  }
}
