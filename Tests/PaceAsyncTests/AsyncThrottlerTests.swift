import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `AsyncThrottler`: throttled async work whose callers get the result covering their call.
@Suite(.timeLimit(.minutes(3))) struct AsyncThrottlerTests {
  let scheduler = TestScheduler()

  @Test func invocationsAreExactlyOneIntervalApartWhileCallsContinue() async {
    let timeline = WorkTimeline<Int>()
    let throttler = AsyncThrottler(
      for: .milliseconds(100), staleWork: .discardResult, clock: timeline.scheduler, operation: timeline.operation)
    let calls = stride(from: Int64(0), through: 290, by: 30).map { ($0, Int($0)) }
    let invocations = await timeline.run(calls, through: throttler)
    #expect(invocations == [at(0, 0), at(100, 90), at(200, 180), at(300, 270)])
  }

  @Test func trailingOnlyInvokesAtEachWindowEnd() async {
    let timeline = WorkTimeline<[String]>()
    let throttler = AsyncThrottler(
      for: .milliseconds(100), edges: .trailing, merge: .append, clock: timeline.scheduler,
      operation: timeline.operation)
    let invocations = await timeline.run([(10, ["a"]), (60, ["b"]), (150, ["c"]), (400, ["d"])], through: throttler)
    #expect(invocations == [at(110, ["a", "b"]), at(210, ["c"]), at(500, ["d"])])
    #expect(await timeline.results() == [["a", "b"], ["a", "b"], ["c"], ["d"]])
  }

  @Test func theLeadingEdgeAnswersAtOnce() async throws {
    let refresh = AsyncThrottler(for: .seconds(1), clock: scheduler) { (_: Void) in "feed" }
    #expect(try await refresh() == "feed")
    #expect(scheduler.now == .zero)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func callsInAWindowShareTheTrailingResult() async throws {
    let work = GatedWork()
    let throttler = AsyncThrottler(for: .milliseconds(100), clock: scheduler, operation: work.run)
    let leading = Task.immediate { try await throttler("a") }
    #expect(await work.started.next() == "a")
    work.gate.open()
    #expect(try await leading.value == "A")

    scheduler.advance(by: .milliseconds(30))
    let second = Task.immediate { try await throttler("b") }
    scheduler.advance(by: .milliseconds(30))
    let third = Task.immediate { try await throttler("c") }
    scheduler.advance(to: ms(100))
    #expect(await work.started.next() == "c")
    #expect(try await second.value == "C")
    #expect(try await third.value == "C")
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCallForTheNextInvocationSupersedesTheLeadingWorkInFlight() async throws {
    let work = GatedWork()
    let throttler = AsyncThrottler(for: .milliseconds(100), clock: scheduler, operation: work.run)
    let leading = Task.immediate { try await throttler("a") }
    #expect(await work.started.next() == "a")
    scheduler.advance(by: .milliseconds(10))
    let trailing = Task.immediate { try await throttler("b") }
    await #expect(throws: CancellationError.self) { try await leading.value }
    #expect(await work.cancelled.next() == "a")
    work.gate.open()
    scheduler.advance(to: ms(100))
    #expect(try await trailing.value == "B")
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func leadingOnlyDropsTheOtherCallsOfAWindow() async throws {
    let throttler = AsyncThrottler(for: .milliseconds(100), edges: .leading, clock: scheduler) { (value: Int) in value }
    #expect(try await throttler(1) == 1)
    let dropped = Task.immediate { try await throttler(2) }
    await #expect(throws: CancellationError.self) { try await dropped.value }
    scheduler.advance(to: ms(100))
    #expect(try await throttler(3) == 3)
  }
  #endif
}
