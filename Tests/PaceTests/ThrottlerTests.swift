import PaceTestSupport
import Testing

@testable import Pace

/// Throttler on virtual time, with exact invocation times.
@Suite struct ThrottlerTests {
  let scheduler = TestScheduler()

  func throttler<Value: Sendable>(
    _ interval: Int64 = 100, edges: Edges = .both, merge: Merge<Value> = .latest, into recorder: Recorder<Value>
  ) -> Throttler<Value> {
    Throttler(
      for: .milliseconds(interval), edges: edges, merge: merge, scheduler: scheduler, perform: recorder.record
    )
  }

  func drive<Value: Sendable>(_ calls: [(Int64, Value)], into throttler: Throttler<Value>) {
    for (time, value) in calls {
      scheduler.advance(to: ms(time))
      throttler.call(value)
    }
    scheduler.run()
  }

  @Test func invocationsAreExactlyOneIntervalApartWhileCallsContinue() {
    // lodash would drift here (0, 100, 220); Pace keeps the cadence.
    let log = Recorder<Int>(clock: scheduler)
    let throttled = throttler(into: log)
    drive(stride(from: Int64(0), through: 290, by: 30).map { ($0, Int($0)) }, into: throttled)
    #expect(log.timeline == [at(0, 0), at(100, 90), at(200, 180), at(300, 270)])
  }

  @Test func quietAfterAWindowWithNoCalls() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(into: log)
    drive([(0, "a"), (50, "b"), (250, "c")], into: throttled)
    #expect(log.timeline == [at(0, "a"), at(100, "b"), at(250, "c")])
    #expect(scheduler.now == ms(350))
  }

  @Test func trailingOnlyInvokesAtEachWindowEnd() {
    let log = Recorder<[String]>(clock: scheduler)
    let throttled = throttler(edges: .trailing, merge: .append, into: log)
    drive([(10, ["a"]), (60, ["b"]), (150, ["c"]), (400, ["d"])], into: throttled)
    #expect(log.timeline == [at(110, ["a", "b"]), at(210, ["c"]), at(500, ["d"])])
  }

  @Test func leadingOnlyInvokesOncePerWindowAndDropsTheRest() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(edges: .leading, into: log)
    drive([(0, "a"), (50, "b"), (100, "c"), (150, "d"), (230, "e")], into: throttled)
    #expect(log.timeline == [at(0, "a"), at(100, "c"), at(230, "e")])
  }

  @Test func aCallExactlyAtTheWindowEndFallsInTheNextWindow() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(into: log)
    drive([(0, "a"), (50, "b"), (100, "c")], into: throttled)
    #expect(log.timeline == [at(0, "a"), at(100, "b"), at(200, "c")])
  }

  @Test func mergeFirstKeepsTheWindowsFirstCall() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(merge: .first, into: log)
    drive([(0, "a"), (10, "b"), (20, "c")], into: throttled)
    #expect(log.timeline == [at(0, "a"), at(100, "b")])
  }

  @Test func everyValueReachesExactlyOneInvocationWithAppend() {
    let log = Recorder<[Int]>(clock: scheduler)
    let throttled = throttler(merge: .append, into: log)
    let calls = (0..<50).map { (Int64($0 * 7), [$0]) }
    drive(calls, into: throttled)
    #expect(log.values.flatMap { $0 } == Array(0..<50))
  }

  @Test func flushInvokesNowAndTheWindowKeepsItsEnd() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(into: log)
    throttled.call("a")
    scheduler.advance(to: ms(10))
    throttled.call("b")
    #expect(throttled.isPending)
    throttled.flush()
    #expect(!throttled.isPending)
    scheduler.advance(to: ms(20))
    throttled.call("c")
    scheduler.run()
    #expect(log.timeline == [at(0, "a"), at(10, "b"), at(100, "c")])
  }

  @Test func cancelDropsThePendingCallAndTheNextCallLeads() {
    let log = Recorder<String>(clock: scheduler)
    let throttled = throttler(into: log)
    throttled.call("a")
    throttled.call("b")
    throttled.cancel()
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(to: ms(30))
    throttled.call("c")
    scheduler.run()
    #expect(log.timeline == [at(0, "a"), at(30, "c")])
  }

  @Test func performMayCallTheThrottlerAgain() {
    let log = Recorder<Int>(clock: scheduler)
    let holder = LockedState<Throttler<Int>?>(nil)
    let throttled = Throttler<Int>(for: .milliseconds(100), scheduler: scheduler) { value in
      log.record(value)
      if value < 3 { holder.withLock { $0 }?.call(value + 1) }
    }
    holder.withLock { $0 = throttled }
    throttled.call(1)
    scheduler.run()
    #expect(log.timeline == [at(0, 1), at(100, 2), at(200, 3)])
    holder.withLock { $0 = nil }
  }

  @Test func voidThrottlerCallsWithoutAnArgument() {
    let log = Recorder<Void>(clock: scheduler)
    let throttled = Throttler<Void>(for: .milliseconds(10), scheduler: scheduler, perform: log.record)
    throttled.call()
    throttled()
    scheduler.run()
    #expect(log.times == [ms(0), ms(10)])
  }

  @Test func aBurstOfTenThousandCallsInOneIntervalArmsTheSchedulerAtMostTwice() {
    let counting = CountingScheduler()
    let log = Recorder<Int>()
    let throttled = Throttler<Int>(for: .milliseconds(100), scheduler: counting, perform: log.record)
    for index in 0..<10_000 {
      counting.base.advance(to: PaceInstant(nanoseconds: Int64(index) * 9_000))
      throttled.call(index)
    }
    #expect(counting.armCount <= 2)
    counting.base.run()
    #expect(log.values == [0, 9_999])
  }

  @Test func aReleasedThrottlerIsFreedAndNeverFires() {
    let log = Recorder<String>(clock: scheduler)
    weak var weakThrottler: Throttler<String>?
    do {
      let throttled = throttler(edges: .trailing, into: log)
      weakThrottler = throttled
      throttled.call("a")
    }
    #expect(weakThrottler == nil)
    scheduler.run()
    #expect(log.count == 0)
  }
}
