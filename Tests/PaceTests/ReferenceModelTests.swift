import PaceTestSupport
import Testing

@testable import Pace

/// The engines against simple reference models on thousands of seeded random timelines.
///
/// The models know nothing of timers, deadlines or re-arming: they step through time one
/// millisecond at a time and apply the documented rules. At each millisecond the time-based
/// rule applies before that millisecond's calls, as `advance(to:)` then `call` does.
@Suite(.offThePool) struct ReferenceModelTests {
  struct Call {
    var ms: Int64
    var value: Int
  }

  /// lodash's debounce, polled every millisecond.
  static func referenceDebounce(
    _ calls: [Call], interval: Int64, edges: Edges, maximumWait: Int64?
  ) -> [Event<[Int]>] {
    let maximumWait = maximumWait.map { max($0, interval) }
    var output: [Event<[Int]>] = []
    var lastCall: Int64?
    var lastInvoke: Int64 = 0
    var pending: [Int]?
    var active = false
    let end = (calls.last?.ms ?? 0) + 2 * (maximumWait ?? interval) + 2
    var next = calls.startIndex
    for t in 0...end {
      if active, let lastCall {
        let quiet = t - lastCall >= interval
        let overdue = maximumWait.map { t - lastInvoke >= $0 } ?? false
        if quiet || overdue {
          active = false
          if let merged = pending {
            output.append(Event(ms: t, value: merged))
            lastInvoke = t
          }
          pending = nil
        }
      }
      while next < calls.endIndex, calls[next].ms == t {
        let value = calls[next].value
        next += 1
        let isInvoking =
          lastCall.map { t - $0 >= interval || (maximumWait.map { t - lastInvoke >= $0 } ?? false) } ?? true
        lastCall = t
        if !active && isInvoking {
          active = true
          lastInvoke = t
          if edges.contains(.leading) {
            output.append(Event(ms: t, value: [value]))
          } else {
            pending = [value]
          }
        } else {
          active = true
          if edges.contains(.trailing) { pending = (pending ?? []) + [value] }
        }
      }
    }
    return output
  }

  /// The throttle's window rules, polled every millisecond.
  static func referenceThrottle(_ calls: [Call], interval: Int64, edges: Edges) -> [Event<[Int]>] {
    var output: [Event<[Int]>] = []
    var windowEnd: Int64?
    var pending: [Int]?
    let end = (calls.last?.ms ?? 0) + 3 * interval + 2
    var next = calls.startIndex
    for t in 0...end {
      if windowEnd == t {
        if let merged = pending {
          output.append(Event(ms: t, value: merged))
          pending = nil
          windowEnd = t + interval
        } else {
          windowEnd = nil
        }
      }
      while next < calls.endIndex, calls[next].ms == t {
        let value = calls[next].value
        next += 1
        if windowEnd == nil {
          windowEnd = t + interval
          if edges.contains(.leading) {
            output.append(Event(ms: t, value: [value]))
          } else {
            pending = [value]
          }
        } else if edges.contains(.trailing) {
          pending = (pending ?? []) + [value]
        }
      }
    }
    return output
  }

  static func randomTimeline(using generator: inout SeededGenerator) -> [Call] {
    let count = Int.random(in: 0...40, using: &generator)
    let span = Int64.random(in: 1...600, using: &generator)
    let times = (0..<count).map { _ in Int64.random(in: 0...span, using: &generator) }.sorted()
    return times.enumerated().map { Call(ms: $0.element, value: $0.offset) }
  }

  static func randomEdges(using generator: inout SeededGenerator) -> Edges {
    [.leading, .trailing, .both].randomElement(using: &generator)!
  }

  func run<P>(_ calls: [Call], on scheduler: TestScheduler, call: (Int) -> Void, _ primitive: P) {
    for entry in calls {
      scheduler.advance(to: ms(entry.ms))
      call(entry.value)
    }
    scheduler.run()
    withExtendedLifetime(primitive) {}
  }

  @Test(arguments: 0..<5)
  func debouncerMatchesTheReferenceModel(batch: UInt64) {
    var generator = SeededGenerator(seed: 0xDEB0 &+ batch)
    for round in 0..<1_000 {
      let calls = Self.randomTimeline(using: &generator)
      let interval = Int64.random(in: 1...80, using: &generator)
      let edges = Self.randomEdges(using: &generator)
      let maximumWait: Int64? = Bool.random(using: &generator) ? Int64.random(in: 1...200, using: &generator) : nil
      let scheduler = TestScheduler()
      let log = Recorder<[Int]>(clock: scheduler)
      let debouncer = Debouncer<[Int]>(
        for: .milliseconds(interval), edges: edges, maximumWait: maximumWait.map { .milliseconds($0) }, merge: .append,
        scheduler: scheduler, perform: log.record
      )
      run(calls, on: scheduler, call: { debouncer.call([$0]) }, debouncer)
      let expected = Self.referenceDebounce(calls, interval: interval, edges: edges, maximumWait: maximumWait)
      #expect(
        log.timeline == expected,
        "seed batch \(batch) round \(round): interval \(interval) edges \(edges) maximumWait \(String(describing: maximumWait)) calls \(calls.map { "\($0.value)@\($0.ms)" })"
      )
      if log.timeline != expected { return }
    }
  }

  @Test(arguments: 0..<5)
  func throttlerMatchesTheReferenceModel(batch: UInt64) {
    var generator = SeededGenerator(seed: 0x7407 &+ batch)
    for round in 0..<1_000 {
      let calls = Self.randomTimeline(using: &generator)
      let interval = Int64.random(in: 1...80, using: &generator)
      let edges = Self.randomEdges(using: &generator)
      let scheduler = TestScheduler()
      let log = Recorder<[Int]>(clock: scheduler)
      let throttler = Throttler<[Int]>(
        for: .milliseconds(interval), edges: edges, merge: .append, scheduler: scheduler, perform: log.record
      )
      run(calls, on: scheduler, call: { throttler.call([$0]) }, throttler)
      let expected = Self.referenceThrottle(calls, interval: interval, edges: edges)
      #expect(
        log.timeline == expected,
        "seed batch \(batch) round \(round): interval \(interval) edges \(edges) calls \(calls.map { "\($0.value)@\($0.ms)" })"
      )
      if log.timeline != expected { return }
    }
  }

  @Test func withATrailingEdgeEveryCallReachesExactlyOneInvocation() {
    var generator = SeededGenerator(seed: 42)
    for _ in 0..<500 {
      let calls = Self.randomTimeline(using: &generator)
      let expected = calls.map(\.value)
      let edges: Edges = Bool.random(using: &generator) ? .trailing : .both
      let interval = Int64.random(in: 1...50, using: &generator)
      #expect(
        Self.referenceDebounce(calls, interval: interval, edges: edges, maximumWait: nil).flatMap(\.value) == expected)
      #expect(Self.referenceThrottle(calls, interval: interval, edges: edges).flatMap(\.value) == expected)
    }
  }
}

/// The trait that keeps the synchronous suites off the cooperative pool does move them, where the
/// system has task executors.
@Suite(.offThePool) struct OffThePoolTraitTests {
  @Test func aSynchronousTestRunsOffThePool() {
    #expect(OffThePoolTrait.isCurrent == OffThePoolTrait.movesTests)
  }

  @Test(arguments: 0..<2) func soDoesEachCaseOfAParameterizedTest(_ index: Int) async {
    #expect(OffThePoolTrait.isCurrent == OffThePoolTrait.movesTests)
    await Task.yield()
    #expect(OffThePoolTrait.isCurrent == OffThePoolTrait.movesTests, "after a suspension too")
  }
}
