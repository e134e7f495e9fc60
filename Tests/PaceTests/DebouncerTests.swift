import PaceTestSupport
import Testing

@testable import Pace

/// Debouncer on virtual time: every mode, with exact invocation times. Calls are made after
/// `advance(to:)`, so timers due at that instant have fired first.
@Suite struct DebouncerTests {
  let scheduler = TestScheduler()

  func debouncer<Value: Sendable>(
    _ interval: Int64 = 100, edges: Edges = .trailing, maximumWait: Int64? = nil, merge: Merge<Value> = .latest,
    into recorder: Recorder<Value>
  ) -> Debouncer<Value> {
    Debouncer(
      for: .milliseconds(interval), edges: edges, maximumWait: maximumWait.map { .milliseconds($0) }, merge: merge,
      scheduler: scheduler, perform: recorder.record
    )
  }

  /// Makes each `(ms, value)` call at its time, then runs the scheduler dry.
  func drive<Value: Sendable>(_ calls: [(Int64, Value)], into debouncer: Debouncer<Value>) {
    for (time, value) in calls {
      scheduler.advance(to: ms(time))
      debouncer.call(value)
    }
    scheduler.run()
  }

  // MARK: lodash's documented examples

  @Test func lodashDebouncesABurstIntoOneTrailingCallWithTheLatestValue() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, into: log)
    drive([(0, "a"), (0, "b"), (0, "c")], into: debounced)
    #expect(log.timeline == [at(32, "c")])
    #expect(scheduler.pendingCount == 0)
  }

  @Test func lodashLeadingAndTrailingInvokeOnceForASingleCall() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, edges: .both, into: log)
    drive([(0, "a")], into: debounced)
    #expect(log.timeline == [at(0, "a")])
  }

  @Test func lodashLeadingAndTrailingInvokeTwiceForABurst() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, edges: .both, into: log)
    drive([(0, "a"), (5, "b")], into: debounced)
    #expect(log.timeline == [at(0, "a"), at(37, "b")])
  }

  @Test func lodashLeadingOnlyInvokesOncePerQuietPeriod() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, edges: .leading, into: log)
    drive([(0, "a"), (10, "b"), (41, "c"), (100, "d")], into: debounced)
    #expect(log.timeline == [at(0, "a"), at(100, "d")])
  }

  @Test func lodashMaxWaitInATightLoop() {
    // Calls every 10 ms for 200 ms with wait 32, maximumWait 64: invocations every 64 ms, then the trailing one.
    let log = Recorder<Int>(clock: scheduler)
    let debounced = debouncer(32, maximumWait: 64, into: log)
    drive(stride(from: 0, through: 200, by: 10).map { ($0, Int($0)) }, into: debounced)
    #expect(log.timeline == [at(64, 60), at(128, 120), at(192, 190), at(232, 200)])
  }

  @Test func lodashQueuesATrailingCallForCallsAfterMaxWait() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, maximumWait: 64, into: log)
    drive([(0, "a"), (70, "b")], into: debounced)
    #expect(log.timeline == [at(32, "a"), at(102, "b")])
  }

  @Test func lodashCancelResetsTheLeadingEdge() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, edges: .both, into: log)
    debounced.call("a")
    debounced.call("b")
    debounced.cancel()
    #expect(!debounced.isPending)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(to: ms(5))
    debounced.call("c")
    scheduler.run()
    #expect(log.timeline == [at(0, "a"), at(5, "c")])
  }

  @Test func lodashFlushInvokesThePendingCallNow() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, into: log)
    debounced.call("a")
    scheduler.advance(to: ms(10))
    #expect(debounced.isPending)
    debounced.flush()
    #expect(log.timeline == [at(10, "a")])
    #expect(!debounced.isPending)
    scheduler.run()
    #expect(log.timeline == [at(10, "a")])
  }

  @Test func lodashCancelAndFlushDoNothingWhenNothingIsPending() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(32, into: log)
    debounced.flush()
    debounced.cancel()
    scheduler.run()
    #expect(log.count == 0)
    #expect(!debounced.isPending)
  }

  @Test func lodashRecursiveCallsFromPerform() {
    let log = Recorder<Int>(clock: scheduler)
    let holder = LockedState<Debouncer<Int>?>(nil)
    let debounced = Debouncer<Int>(for: .milliseconds(32), edges: .both, scheduler: scheduler) { value in
      log.record(value)
      if value < 3 { holder.withLock { $0 }?.call(value + 1) }
    }
    holder.withLock { $0 = debounced }
    debounced.call(1)
    scheduler.run()
    // 1 leads at 0 and calls 2, which waits for the trailing edge at 32. There 2 calls 3,
    // 32 ms after the last call (2, at 0): a new burst, so 3 leads at once, after 2 returns.
    #expect(log.timeline == [at(0, 1), at(32, 2), at(32, 3)])
    holder.withLock { $0 = nil }
  }

  // MARK: Every mode

  @Test func trailingWaitsForQuietAfterTheLastCall() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(into: log)
    drive([(0, "a"), (50, "b"), (120, "c"), (300, "d")], into: debounced)
    #expect(log.timeline == [at(220, "c"), at(400, "d")])
  }

  @Test func aCallExactlyAtTheDeadlineStartsTheNextBurst() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(edges: .both, into: log)
    drive([(0, "a"), (50, "b"), (150, "c")], into: debounced)
    #expect(log.timeline == [at(0, "a"), at(150, "b"), at(150, "c")])
  }

  @Test func maxWaitWithBothEdgesGivesAThrottleLikeCadence() {
    let log = Recorder<Int>(clock: scheduler)
    let debounced = debouncer(100, edges: .both, maximumWait: 200, into: log)
    drive(stride(from: 0, through: 450, by: 10).map { ($0, Int($0)) }, into: debounced)
    #expect(log.timeline == [at(0, 0), at(200, 190), at(400, 390), at(550, 450)])
  }

  @Test func maxWaitWithLeadingOnlyLeadsAgainOnceMaxWaitHasPassed() {
    let log = Recorder<Int>(clock: scheduler)
    let debounced = debouncer(100, edges: .leading, maximumWait: 200, into: log)
    drive(stride(from: 0, through: 450, by: 10).map { ($0, Int($0)) }, into: debounced)
    #expect(log.timeline == [at(0, 0), at(200, 200), at(400, 400)])
  }

  @Test func maxWaitBoundsHowLongAnyCallWaits() {
    let log = Recorder<[Int]>(clock: scheduler)
    let debounced = debouncer(100, maximumWait: 300, merge: .append, into: log)
    let calls = stride(from: Int64(0), through: 1000, by: 40).map { ($0, [Int($0)]) }
    drive(calls, into: debounced)
    for (time, value) in calls {
      let covering = log.timeline.first { $0.value.contains(value[0]) }!
      #expect(covering.ms - time <= 300)
    }
    #expect(log.values.flatMap { $0 } == calls.map { $0.1[0] })
  }

  @Test func mergePoliciesCombineTheCoveredCalls() {
    let latest = Recorder<Int>()
    let first = Recorder<Int>()
    let sum = Recorder<Int>()
    let union = Recorder<Set<Int>>()
    let append = Recorder<[Int]>()
    let custom = Recorder<Int>()
    let debouncers: [(Int) -> Void] = [
      debouncer(merge: .latest, into: latest).call,
      debouncer(merge: .first, into: first).call,
      debouncer(merge: .sum, into: sum).call,
      { [d = debouncer(merge: .union, into: union)] in d.call([$0]) },
      { [d = debouncer(merge: .append, into: append)] in d.call([$0]) },
      debouncer(merge: .custom(max), into: custom).call,
    ]
    for value in [3, 1, 4, 1, 5] { debouncers.forEach { $0(value) } }
    scheduler.run()
    #expect(latest.values == [5])
    #expect(first.values == [3])
    #expect(sum.values == [14])
    #expect(union.values == [[1, 3, 4, 5]])
    #expect(append.values == [[3, 1, 4, 1, 5]])
    #expect(custom.values == [5])
  }

  @Test func theLeadingInvocationGetsItsOwnValueAndTheTrailingOneOnlyLaterCalls() {
    let log = Recorder<[Int]>(clock: scheduler)
    let debounced = debouncer(edges: .both, merge: .append, into: log)
    drive([(0, [1]), (10, [2]), (20, [3])], into: debounced)
    #expect(log.timeline == [at(0, [1]), at(120, [2, 3])])
  }

  @Test func theLeadingInvocationRunsSynchronouslyInsideCall() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(edges: .leading, into: log)
    debounced.call("a")
    #expect(log.values == ["a"])
  }

  @Test func isPendingIsTrueExactlyWhileAnInvocationWaits() {
    let log = Recorder<String>(clock: scheduler)
    let debounced = debouncer(edges: .both, into: log)
    #expect(!debounced.isPending)
    debounced.call("a")
    #expect(!debounced.isPending)
    debounced.call("b")
    #expect(debounced.isPending)
    scheduler.advance(by: .milliseconds(100))
    #expect(!debounced.isPending)
  }

  @Test func voidDebouncerCallsWithoutAnArgument() {
    let log = Recorder<Void>(clock: scheduler)
    let debounced = Debouncer<Void>(for: .milliseconds(10), scheduler: scheduler, perform: log.record)
    debounced.call()
    debounced()
    scheduler.run()
    #expect(log.times == [ms(10)])
  }

  @Test func aBurstOfTenThousandCallsInOneIntervalArmsTheSchedulerAtMostTwice() {
    let counting = CountingScheduler()
    let log = Recorder<Int>()
    let debounced = Debouncer<Int>(for: .milliseconds(100), scheduler: counting, perform: log.record)
    for index in 0..<10_000 {
      counting.base.advance(to: PaceInstant(nanoseconds: Int64(index) * 9_000))  // 90 ms in all
      debounced.call(index)
    }
    #expect(counting.armCount <= 2)
    counting.base.run()
    #expect(counting.armCount <= 2)
    #expect(log.values == [9_999])
  }

  @Test func aReleasedDebouncerIsFreedAndNeverFires() {
    let log = Recorder<String>(clock: scheduler)
    weak var weakDebouncer: Debouncer<String>?
    do {
      let debounced = debouncer(into: log)
      weakDebouncer = debounced
      debounced.call("a")
      #expect(scheduler.pendingCount == 1)
    }
    #expect(weakDebouncer == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.run()
    #expect(log.count == 0)
  }
}
