import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `TestScheduler` as a `Clock`.
@Suite struct TestSchedulerClockTests {
  let scheduler = TestScheduler()

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func sleepReturnsWhenTheSchedulerReachesTheDeadline() async throws {
    let woke = Signals<PaceInstant>()
    // `Task.immediate` runs the task up to its first suspension before returning, so the sleep is
    // registered here, at 0 ms.
    let sleeper = Task.immediate { [scheduler] in
      try await scheduler.sleep(until: ms(100))
      woke.post(scheduler.now)
    }
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(by: .milliseconds(99))
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(by: .milliseconds(1))
    #expect(scheduler.pendingCount == 0)
    try await sleeper.value
    #expect(await woke.next() == ms(100))
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func sleepForADurationIsMeasuredFromNow() async throws {
    scheduler.advance(to: ms(40))
    // Virtual time: this is TestScheduler's own Clock.sleep under test; only advance(to:) wakes it.
    let sleeper = Task.immediate { [scheduler] in try await scheduler.sleep(for: .milliseconds(60)) }
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(to: ms(100))
    try await sleeper.value
  }
  #endif

  @Test func aDeadlineInThePastReturnsAtOnce() async throws {
    scheduler.advance(to: ms(100))
    try await scheduler.sleep(until: ms(50))
    try await scheduler.sleep(until: ms(100))
    #expect(scheduler.pendingCount == 0)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func cancellingASleeperThrowsAndUnschedulesIt() async {
    let sleeper = Task.immediate { [scheduler] in try await scheduler.sleep(until: ms(100)) }
    #expect(scheduler.pendingCount == 1)
    sleeper.cancel()
    await #expect(throws: CancellationError.self) { try await sleeper.value }
    #expect(scheduler.pendingCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCancelledTaskDoesNotSleep() async {
    let sleeper = Task.immediate { [scheduler] in
      withUnsafeCurrentTask { $0?.cancel() }
      try await scheduler.sleep(until: ms(100))
    }
    await #expect(throws: CancellationError.self) { try await sleeper.value }
    #expect(scheduler.pendingCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func sleepersWakeInDeadlineOrder() async throws {
    let woke = Signals<Int>()
    let late = Task.immediate { [scheduler] in
      try await scheduler.sleep(until: ms(200))
      woke.post(200)
    }
    let early = Task.immediate { [scheduler] in
      try await scheduler.sleep(until: ms(100))
      woke.post(100)
    }
    scheduler.advance(to: ms(150))
    #expect(await woke.next() == 100)
    #expect(scheduler.pendingDeadlines == [ms(200)])
    scheduler.advance(to: ms(200))
    #expect(await woke.next() == 200)
    try await early.value
    try await late.value
  }
  #endif
}
