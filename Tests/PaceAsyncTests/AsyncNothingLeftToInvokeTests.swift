import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `AsyncDebouncer` and `AsyncThrottler` with nothing left to invoke: no timer, and `isPending`
/// says whether anything will start.
@Suite(.timeLimit(.minutes(3))) struct AsyncNothingLeftToInvokeTests {
  let scheduler = TestScheduler()

  @Test func submitThenFlushLeavesNoTimer() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
    let first = search.submit("s")  // keystroke at 0 ms
    scheduler.advance(by: .milliseconds(100))
    let second = search.submit("sw")
    search.flush()  // the return key at 100 ms
    #expect(try await second.value == "sw")
    #expect(try await first.value == "sw")  // one burst, one result
    #expect(!search.isPending)
    #expect(search.nextInvocation == nil)
    expectNothingScheduled(on: scheduler)
    scheduler.advance(to: .milliseconds(300))
    expectNothingScheduled(on: scheduler)
  }

  @Test func isPendingTurnsFalseWhenTheOnlyCallerCancels() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
    let call = search.submit("swift")
    #expect(search.isPending)
    #expect(search.nextInvocation == .milliseconds(300))
    call.cancel()
    await #expect(throws: CancellationError.self) { try await call.value }
    #expect(!search.isPending)
    #expect(search.nextInvocation == nil)
    expectNothingScheduled(on: scheduler)
  }

  @Test func isPendingStaysTrueWhileAnotherCallerWaits() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), merge: .append, clock: scheduler) { (queries: [String]) in
      queries.count
    }
    let first = search.submit(["s"])
    let second = search.submit(["sw"])
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(search.isPending)
    scheduler.advance(by: .milliseconds(300))
    #expect(try await second.value == 2)
    expectNothingScheduled(on: scheduler)
  }

  @Test func theTrueDeadlineOfABurst() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
    var calls: [Task<String, any Error>] = []
    for (time, query) in [(0, "s"), (100, "sw"), (200, "swi"), (250, "swif")] {
      scheduler.advance(to: .milliseconds(Int64(time)))
      calls.append(search.submit(query))
    }
    #expect(search.nextInvocation == .milliseconds(550))
    scheduler.advance(to: .milliseconds(550))
    for call in calls { #expect(try await call.value == "swif") }
  }

  @Test func aCancelledThrottledCallLeavesNothingPending() async throws {
    let send = AsyncThrottler(for: .milliseconds(300), edges: .trailing, clock: scheduler) { (value: Int) in value }
    let call = send.submit(1)
    #expect(send.isPending)
    #expect(send.nextInvocation == .milliseconds(300))
    call.cancel()
    await #expect(throws: CancellationError.self) { try await call.value }
    #expect(!send.isPending)
    expectNothingScheduled(on: scheduler)
  }
}
