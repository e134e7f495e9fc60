import Clocks
import Pace
import PaceTesting
import Testing

// swift-clocks' `ImmediateClock` by its bare name, while PaceTesting still has a deprecated
// `ImmediateClock` alias of `ImmediatePaceClock`: a scoped import outranks it.
import class Clocks.ImmediateClock

/// A team that injects swift-clocks' clocks drives every Pace primitive with them: the async ones
/// take the clock as `clock:`, the synchronous ones as `scheduler: .clock(clock)`. This target
/// imports PaceTesting and swift-clocks together and names both libraries' clocks unqualified.
@Suite(.timeLimit(.minutes(3))) struct SwiftClocksInteropTests {
  @Test func aTestClockDrivesADebouncerExactly() async {
    let clock = TestClock()
    let scheduler = ClockScheduler(clock)
    let searched = LockedRecorder<String>(scheduler: scheduler)
    let search = Debouncer<String>(for: .milliseconds(300), scheduler: .clock(clock)) { searched.record($0) }
    search("s")
    await clock.advance(by: .milliseconds(100))
    search("sw")
    await clock.advance(by: .milliseconds(299))
    #expect(searched.values == [])  // its timer sleeps until 400 ms: it cannot have fired
    await clock.advance(by: .milliseconds(1))
    await wakeLateSleepers(clock) { searched.count == 1 }
    #expect(searched.values == ["sw"])
    #expect(searched.times == [.milliseconds(400)])
  }

  @Test func aTestClockDrivesAThrottlerExactly() async {
    let clock = TestClock()
    let scheduler = ClockScheduler(clock)
    let liked = LockedRecorder<Int>(scheduler: scheduler)
    let like = Throttler<Int>(for: .seconds(1), scheduler: .clock(clock)) { liked.record($0) }
    like(1)  // leading: at once
    like(2)
    like(3)  // the trailing call, at 1 s
    #expect(liked.values == [1])
    await clock.advance(by: .milliseconds(999))
    #expect(liked.values == [1])
    await clock.advance(by: .milliseconds(1))
    await wakeLateSleepers(clock) { liked.count == 2 }
    #expect(liked.entries.map(\.time) == [.zero, .seconds(1)])
    #expect(liked.values == [1, 3])
  }

  @Test func aTestClockDrivesARateLimiter() async throws {
    let clock = TestClock()
    let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: clock)
    try await limiter.acquire()
    let second = Task { try await limiter.acquire() }
    await limiter.waitForWaiters(1)
    await clock.advance(by: .milliseconds(99))
    #expect(limiter.waitingCount == 1)
    await clock.advance(by: .milliseconds(1))
    await wakeLateSleepers(clock) { limiter.waitingCount == 0 }
    try await second.value
  }

  @Test func bothImmediateClocksRunAPacerStraightThrough() async throws {
    let theirs = AsyncDebouncer(for: .milliseconds(300), clock: ImmediateClock()) { (query: String) in
      query.uppercased()
    }
    let ours = AsyncDebouncer(for: .milliseconds(300), clock: ImmediatePaceClock()) { (query: String) in
      query.uppercased()
    }
    #expect(try await theirs.submit("swift").value == "SWIFT")
    #expect(try await ours.submit("pace").value == "PACE")
  }

  @Test func aTestSchedulerStaysTheExactClockBesideThem() async throws {
    let scheduler = TestScheduler()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in query }
    let result = search.submit("swift")
    scheduler.advance(by: .milliseconds(300))
    #expect(try await result.value == "swift")
  }
}

/// Advances `clock` by zero until `done`: wakes, without moving time, a timer whose sleep reached
/// swift-clocks' `TestClock` after the advance that was due to wake it.
///
/// `TestClock` wakes only the sleeps registered when it advances, and a Pace timer on a `Clock`
/// sleeps in a task of its own, which may register a moment later (a debouncer re-arms from its
/// timer's task, for instance); its deadline is then already now, and it waits for the next
/// advance. PaceTesting's `TestScheduler` registers timers in line, so it needs no such loop.
private func wakeLateSleepers(_ clock: TestClock<Duration>, until done: () -> Bool) async {
  while !done() { await clock.advance(by: .zero) }
}
