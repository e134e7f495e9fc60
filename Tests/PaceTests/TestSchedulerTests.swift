import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

@Suite struct TestSchedulerTests {
  @Test func startsAtZeroAndMovesOnlyWhenTold() {
    let scheduler = TestScheduler()
    #expect(scheduler.now == .zero)
    scheduler.advance(by: .milliseconds(250))
    #expect(scheduler.now == ms(250))
    scheduler.advance(to: ms(300))
    #expect(scheduler.now == ms(300))
  }

  @Test func runsDueWorkInDeadlineThenSchedulingOrderWithNowSetToTheDeadline() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    scheduler.schedule(at: ms(20)) { log.record("c") }
    scheduler.schedule(at: ms(10)) { log.record("a") }
    scheduler.schedule(at: ms(10)) { log.record("b") }
    scheduler.schedule(at: ms(30)) { log.record("d") }
    scheduler.advance(to: ms(25))
    #expect(log.timeline == [at(10, "a"), at(10, "b"), at(20, "c")])
    #expect(scheduler.now == ms(25))
    #expect(scheduler.pendingDeadlines == [ms(30)])
  }

  @Test func workMayScheduleMoreWorkThatRunsInTheSameAdvance() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    scheduler.schedule(at: ms(10)) {
      log.record("first")
      scheduler.schedule(after: .milliseconds(5)) { log.record("nested") }
      scheduler.schedule(after: .zero) { log.record("same instant") }
    }
    scheduler.advance(by: .milliseconds(100))
    #expect(log.timeline == [at(10, "first"), at(10, "same instant"), at(15, "nested")])
  }

  @Test func advanceByZeroRunsWhatIsDueNow() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    scheduler.enqueue { log.record("now") }
    #expect(log.count == 0)
    scheduler.advance()
    #expect(log.timeline == [at(0, "now")])
  }

  @Test func workScheduledInThePastRunsAtNow() {
    let scheduler = TestScheduler(now: ms(100))
    let log = Recorder<String>(clock: scheduler)
    scheduler.schedule(at: ms(50)) { log.record("late") }
    scheduler.advance()
    #expect(log.timeline == [at(100, "late")])
  }

  @Test func runRunsEverythingAndEndsAtTheLastDeadline() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    scheduler.schedule(at: ms(1000)) { log.record("b") }
    scheduler.schedule(at: ms(5)) { log.record("a") }
    scheduler.run()
    #expect(log.timeline == [at(5, "a"), at(1000, "b")])
    #expect(scheduler.now == ms(1000))
    #expect(scheduler.pendingCount == 0)
    #expect(scheduler.nextDeadline == nil)
  }

  @Test func cancelledWorkNeverRunsAndIsNotPending() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    let first = scheduler.schedule(at: ms(10)) { log.record("cancelled") }
    scheduler.schedule(at: ms(20)) { log.record("kept") }
    let third = scheduler.schedule(at: ms(30)) { log.record("cancelled too") }
    first.cancel()
    third.cancel()
    third.cancel()
    #expect(scheduler.pendingDeadlines == [ms(20)])
    #expect(scheduler.pendingCount == 1)
    #expect(scheduler.nextDeadline == ms(20))
    scheduler.run()
    #expect(log.values == ["kept"])
  }

  @Test func cancellingWorkThatAlreadyRanDoesNothing() {
    let scheduler = TestScheduler()
    let log = Recorder<String>(clock: scheduler)
    let work = scheduler.schedule(at: ms(10)) { log.record("ran") }
    scheduler.advance(to: ms(10))
    work.cancel()
    #expect(scheduler.pendingCount == 0)
    #expect(log.values == ["ran"])
  }

  @Test func manyJobsComeOutInOrder() {
    let scheduler = TestScheduler()
    let log = Recorder<Int>(clock: scheduler)
    var generator = SeededGenerator(seed: 7)
    var expected: [(Int64, Int)] = []
    for index in 0..<2_000 {
      let deadline = Int64.random(in: 0..<300, using: &generator)
      expected.append((deadline, index))
      scheduler.schedule(at: ms(deadline)) { log.record(index) }
    }
    scheduler.run()
    let sorted = expected.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
    #expect(log.timeline == sorted.map { at($0.0, $0.1) })
  }

  @Test func isAlwaysCurrent() {
    #expect(TestScheduler().isCurrent)
  }
}

@Suite struct PaceInstantTests {
  @Test func convertsDurationsBothWays() {
    #expect(PaceInstant(.milliseconds(1500)).nanoseconds == 1_500_000_000)
    #expect(PaceInstant(.milliseconds(-1500)).nanoseconds == -1_500_000_000)
    #expect(PaceInstant(.nanoseconds(-1)).nanoseconds == -1)
    #expect(ms(100).duration(to: ms(250)) == .milliseconds(150))
    #expect(ms(100).advanced(by: .seconds(1)) == ms(1100))
    #expect(ms(3).offset == .milliseconds(3))
  }

  @Test func saturatesInsteadOfOverflowing() {
    #expect(PaceInstant(.seconds(Int64.max)).nanoseconds == .max)
    #expect(PaceInstant(.seconds(Int64.min)).nanoseconds == .min)
    #expect(ms(1).advanced(by: .seconds(Int64.max)).nanoseconds == .max)
  }

  @Test func describesItselfBriefly() {
    #expect(ms(0).description == "0 ms")
    #expect(ms(300).description == "300 ms")
    #expect(ms(2000).description == "2 s")
    #expect(ms(1500).description == "1.5 s")
    #expect(PaceInstant(nanoseconds: 40_000).description == "40 µs")
  }

  /// Threads advancing one scheduler at once: each moves time forward from the instant it read,
  /// none trips over another that got further first, and time never goes back.
  @Test func threadsAdvancingAtOnceNeverMoveTimeBack() {
    let scheduler = TestScheduler()
    let fired = LockedState(0)
    for step in 1...1_000 { _ = scheduler.schedule(at: ms(Int64(step))) { fired.withLock { $0 += 1 } } }
    let backwards = LockedState(0)
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for _ in 0..<200 {
        let before = scheduler.now
        scheduler.advance(by: .milliseconds(1))
        if scheduler.now < before { backwards.withLock { $0 += 1 } }
      }
    }
    #expect(backwards.withLock { $0 } == 0)
    #expect(scheduler.now >= ms(200) && scheduler.now <= ms(1_600))
    scheduler.run()
    #expect(fired.withLock { $0 } == 1_000)
  }
}
