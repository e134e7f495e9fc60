import PaceTesting
import Testing

@testable import Pace

/// `AsyncDebouncer`: debounced async work whose callers get the result covering their call.
@Suite(.timeLimit(.minutes(3))) struct AsyncDebouncerTests {
  let scheduler = TestScheduler()

  // MARK: Timing: the Debouncer's, invocation by invocation

  @Test func aBurstInvokesOnceWithItsLastInputAndEveryCallerSharesTheResult() async {
    let timeline = WorkTimeline<String>()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: timeline.scheduler, operation: timeline.operation)
    let invocations = await timeline.run([(0, "s"), (100, "sw"), (200, "swi"), (900, "swift")], through: search)
    #expect(invocations == [at(500, "swi"), at(1200, "swift")])
    #expect(await timeline.results() == ["swi", "swi", "swi", "swift"])
  }

  @Test func bothEdgesInvokeAtOnceAndAtTheEndOfTheBurst() async {
    let timeline = WorkTimeline<String>()
    let debouncer = AsyncDebouncer(
      for: .milliseconds(300), edges: .both, staleWork: .discardResult, clock: timeline.scheduler,
      operation: timeline.operation)
    let invocations = await timeline.run([(0, "a"), (1000, "b"), (1100, "c")], through: debouncer)
    #expect(invocations == [at(0, "a"), at(1000, "b"), at(1400, "c")])
  }

  @Test func maxWaitBoundsTheWaitWhileCallsKeepComing() async {
    let timeline = WorkTimeline<String>()
    let debouncer = AsyncDebouncer(
      for: .milliseconds(100), maximumWait: .milliseconds(250), staleWork: .discardResult, clock: timeline.scheduler,
      operation: timeline.operation)
    let calls = stride(from: Int64(0), through: 600, by: 50).map { ($0, "\($0)") }
    let invocations = await timeline.run(calls, through: debouncer)
    #expect(invocations == [at(250, "200"), at(500, "450"), at(700, "600")])
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func appendGivesTheInvocationEveryInputOfTheBurst() async throws {
    let debouncer = AsyncDebouncer(for: .milliseconds(300), merge: .append, clock: scheduler) { (batch: [Int]) in
      batch
    }
    let first = Task.immediate { try await debouncer([1]) }
    let second = Task.immediate { try await debouncer([2]) }
    scheduler.advance(by: .milliseconds(300))
    #expect(try await first.value == [1, 2])
    #expect(try await second.value == [1, 2])
  }
  #endif

  // MARK: Stale work

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aNewerCallCancelsTheWorkInFlight() async throws {
    let work = GatedWork()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler, operation: work.run)
    let swi = Task.immediate { try await search("swi") }
    scheduler.advance(by: .milliseconds(300))
    #expect(await work.started.next() == "swi")

    let swift = Task.immediate { try await search("swift") }  // supersedes "swi" at once
    await #expect(throws: CancellationError.self) { try await swi.value }
    #expect(await work.cancelled.next() == "swi")

    scheduler.advance(by: .milliseconds(300))
    #expect(await work.started.next() == "swift")
    work.gate.open()
    #expect(try await swift.value == "SWIFT")
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func discardResultLetsStaleWorkFinishButNobodyGetsItsResult() async throws {
    let work = GatedWork()
    let save = AsyncDebouncer(for: .milliseconds(300), staleWork: .discardResult, clock: scheduler, operation: work.run)
    let first = Task.immediate { try await save("draft 1") }
    scheduler.advance(by: .milliseconds(300))
    #expect(await work.started.next() == "draft 1")

    let second = Task.immediate { try await save("draft 2") }
    await #expect(throws: CancellationError.self) { try await first.value }
    work.gate.open()
    #expect(await work.finished.next() == "draft 1")  // it ran to its end

    scheduler.advance(by: .milliseconds(300))
    #expect(try await second.value == "DRAFT 2")
    #expect(work.cancelled.queued.isEmpty)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCallDroppedByALeadingOnlyEdgeThrowsAtOnceAndSupersedesNothing() async throws {
    let work = GatedWork()
    let submit = AsyncDebouncer(for: .milliseconds(300), edges: .leading, clock: scheduler, operation: work.run)
    let first = Task.immediate { try await submit("tap 1") }
    #expect(await work.started.next() == "tap 1")  // the leading edge answers at once
    scheduler.advance(by: .milliseconds(100))
    let second = Task.immediate { try await submit("tap 2") }
    await #expect(throws: CancellationError.self) { try await second.value }
    work.gate.open()
    #expect(try await first.value == "TAP 1")
  }
  #endif

  // MARK: Cancellation and errors

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCallersCancellationEndsItsWaitOnly() async throws {
    let invoked = Log<String>()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      invoked.append(query)
      return query.uppercased()
    }
    let first = Task.immediate { try await search("a") }
    let second = Task.immediate { try await search("ab") }
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    scheduler.advance(by: .milliseconds(300))
    #expect(try await second.value == "AB")
    #expect(invoked.all == ["ab"])
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func anInvocationThatNobodyWaitsForIsSkipped() async {
    let invoked = Log<String>()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      invoked.append(query)
      return query
    }
    let caller = Task.immediate { try await search("a") }
    caller.cancel()
    _ = await caller.result
    scheduler.advance(by: .milliseconds(300))
    #expect(search.pacer.invocationCountForTesting == 0)
    #expect(scheduler.pendingCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func workThatNobodyWaitsForAnyMoreIsCancelled() async {
    let work = GatedWork()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler, operation: work.run)
    let caller = Task.immediate { try await search("a") }
    scheduler.advance(by: .milliseconds(300))
    #expect(await work.started.next() == "a")
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    #expect(await work.cancelled.next() == "a")
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func theOperationsErrorReachesEveryCoveredCaller() async {
    let failing = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (_: Int) -> Int in throw TestFailure() }
    let first = Task.immediate { try await failing(1) }
    let second = Task.immediate { try await failing(2) }
    scheduler.advance(by: .milliseconds(300))
    await #expect(throws: TestFailure.self) { try await first.value }
    await #expect(throws: TestFailure.self) { try await second.value }
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func cancelEndsEveryWaitAndTheNextCallLeadsAgain() async throws {
    let work = GatedWork()
    let search = AsyncDebouncer(for: .milliseconds(300), edges: .both, clock: scheduler, operation: work.run)
    let first = Task.immediate { try await search("a") }
    #expect(await work.started.next() == "a")
    let second = Task.immediate { try await search("ab") }  // pending for the trailing edge
    #expect(search.isPending)
    search.cancel()
    #expect(!search.isPending)
    #expect(scheduler.pendingCount == 0)
    await #expect(throws: CancellationError.self) { try await first.value }
    await #expect(throws: CancellationError.self) { try await second.value }
    #expect(await work.cancelled.next() == "a")

    work.gate.open()
    let third = Task.immediate { try await search("abc") }  // leads again
    #expect(await work.started.next() == "abc")
    #expect(try await third.value == "ABC")
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func flushStartsThePendingInvocationNow() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
    let caller = Task.immediate { try await search("a") }
    search.flush()
    #expect(try await caller.value == "a")
    #expect(scheduler.now == .zero)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func voidInputCallsWithoutAnArgument() async throws {
    let counter = Log<Void>()
    let reload = AsyncDebouncer(for: .milliseconds(10), clock: scheduler) {
      counter.append(())
      return 7
    }
    let first = Task.immediate { try await reload() }
    let second = Task.immediate { try await reload.call() }
    scheduler.advance(by: .milliseconds(10))
    #expect(try await first.value == 7)
    #expect(try await second.value == 7)
    #expect(counter.all.count == 1)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aReleasedDebouncerIsFreed() async throws {
    weak var released: AsyncDebouncer<String, String>?
    do {
      let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
      released = search
      let caller = Task.immediate { try await search("a") }
      scheduler.advance(by: .milliseconds(300))
      #expect(try await caller.value == "a")
    }
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }
  #endif

  // real-time: a debounce on ContinuousClock; the 5 s bound is only there to fail instead of hanging.
  @Test func debouncesOnARealClock() async throws {
    let clock = ContinuousClock()
    let search = AsyncDebouncer(for: .milliseconds(20), clock: clock) { (query: String) in query.uppercased() }
    let start = clock.now
    async let first = search("swi")
    async let second = search("swift")
    let results = try await [first, second]
    // One burst gives both callers the result of the later call; if the machine is so loaded that
    // the calls are 20 ms apart, each gets its own. Either way the later call gets its own.
    #expect(results.allSatisfy { ["SWI", "SWIFT"].contains($0) })
    #expect(results[0] == "SWI" || results[1] == "SWIFT")
    #expect(start.duration(to: clock.now) >= .milliseconds(20))
  }
}

/// Work that reports its start, waits at a gate the test opens, and reports how it ended.
final class GatedWork: Sendable {
  let gate = Gate()
  let started = Signals<String>()
  let finished = Signals<String>()
  let cancelled = Signals<String>()

  var run: @Sendable (String) async throws -> String {
    { [self] input in
      started.post(input)
      do {
        try await gate.wait()
      } catch {
        cancelled.post(input)
        throw error
      }
      finished.post(input)
      return input.uppercased()
    }
  }
}
