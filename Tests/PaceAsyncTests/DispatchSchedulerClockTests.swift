import Dispatch
import Testing

@testable import Pace

/// `DispatchScheduler` as a `Clock`: one value for the `scheduler:` and `clock:` parameters.
@Suite(.timeLimit(.minutes(3))) struct DispatchSchedulerClockTests {
  let scheduler = DispatchScheduler.queue(DispatchQueue(label: "pace.test.clock"))

  @Test func aSleepEndsNoEarlierThanItsDeadline() async throws {
    let deadline = scheduler.now.advanced(by: .milliseconds(20))
    try await scheduler.sleep(until: deadline)
    #expect(scheduler.now >= deadline)
  }

  @Test func aSleepInThePastReturns() async throws {
    try await scheduler.sleep(until: .zero)
  }

  @Test func aCancelledSleepThrows() async {
    let sleeping = Task { try await scheduler.sleep(for: .seconds(3600)) }
    sleeping.cancel()
    await #expect(throws: CancellationError.self) { try await sleeping.value }
  }

  @Test func oneValueIsTheSchedulerAndTheClock() async throws {
    // real-time: a 10 ms debounce on a real queue, generous bound.
    let search = AsyncDebouncer(for: .milliseconds(10), clock: scheduler) { (query: String) in query.uppercased() }
    let hint = LockedState<[String]>([])
    let hints = Debouncer<String>(for: .milliseconds(10), scheduler: scheduler) { value in
      hint.withLock { $0.append(value) }
    }
    hints("swift")
    #expect(try await search.submit("swift").value == "SWIFT")
    try await scheduler.sleep(for: .milliseconds(20))
    // The debouncer's timer is due before the sleep's, on the same serial queue.
    #expect(hint.withLock { $0 } == ["swift"])
  }
}
