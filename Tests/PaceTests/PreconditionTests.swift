import Dispatch
import Pace
import Testing

/// Bad parameters stop the process with a message that names the parameter.
@Suite struct PreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aNegativeDebounceIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Debouncer<Int>(for: .milliseconds(-1), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Debouncer: interval must not be negative"))
  }

  @Test func aNegativeMaxWaitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Debouncer<Int>(for: .zero, maximumWait: .seconds(-1), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Debouncer: maximumWait must not be negative"))
  }

  @Test func emptyEdgesNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Throttler<Int>(for: .seconds(1), edges: [], scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Throttler: edges must not be empty"))
  }

  @Test func aNegativeThrottleIntervalNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Throttler<Int>(for: .seconds(-2), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Throttler: interval must not be negative"))
  }

  @Test func aNegativeCoalescerWindowNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Coalescer<Int>(window: .seconds(-2), scheduler: TestScheduler()) { _ in }
    }
    #expect(Self.message(result).contains("Coalescer: window must not be negative"))
  }

  // MARK: A main-actor closure on a scheduler that runs it off the main thread

  @Test func aMainActorClosureOnAnotherQueueIsRefusedAtOnce() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      final class Model: Sendable {}
      let io = DispatchQueue(label: "io")
      _ = Debouncer<Int>(for: .seconds(1), scheduler: .queue(io), owner: Model()) { _, _ in }
    }
    #expect(
      Self.message(result).contains(
        "Debouncer: perform is main-actor isolated, but the scheduler runs it on the queue 'io', off the main thread"
      ))
  }

  @Test func aMainActorClosureOnAClockSchedulerIsRefusedAtOnce() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Throttler<Int>(for: .seconds(1), scheduler: ClockScheduler(ContinuousClock())) { @MainActor _ in }
    }
    #expect(
      Self.message(result).contains(
        "Throttler: perform is main-actor isolated, but a ClockScheduler runs it in a task, off the main thread"
      ))
  }

  @Test func aMainActorClosureRunOffTheMainThreadIsRefusedWhenItRuns() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let scheduler = TestScheduler()
      let reload = Coalescer(scheduler: scheduler) { @MainActor in }
      // Advanced on another thread: the run would be off the main thread.
      let done = DispatchSemaphore(value: 0)
      DispatchQueue(label: "background").async {
        reload()
        scheduler.advance()
        done.signal()
      }
      done.wait()
    }
    #expect(
      Self.message(result).contains(
        "Coalescer: perform is main-actor isolated, but its scheduler ran it off the main thread"
      ))
  }

  @Test func advancingATestSchedulerBackwardsIsRefused() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let scheduler = TestScheduler(now: PaceInstant(.seconds(1)))
      scheduler.advance(to: .zero)
    }
    #expect(Self.message(result).contains("is before now"))
  }
}
