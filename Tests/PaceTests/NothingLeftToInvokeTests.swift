import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// A pacer with nothing left to invoke holds no timer; ``nextInvocation`` tells when the pending
/// invocation comes, which the scheduler's armed timer does not during a burst.
@Suite struct NothingLeftToInvokeTests {
  let scheduler = TestScheduler()

  @Test func aFlushedDebouncerHoldsNoTimer() {
    let searched = Recorder<String>(clock: scheduler)
    let search = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { searched.record($0) }
    search("s")
    scheduler.advance(by: .milliseconds(100))
    search("sw")
    search.flush()
    #expect(searched.values == ["sw"])
    expectNothingScheduled(on: scheduler)
    #expect(search.nextInvocation == nil)
    scheduler.advance(to: .milliseconds(300))
    expectNothingScheduled(on: scheduler)
    // The burst goes on after the flush: a call inside it waits for its own quiet interval.
    search("swi")
    #expect(search.nextInvocation == .milliseconds(600))
    scheduler.advance(to: .milliseconds(600))
    #expect(searched.entriesWithTimes.map(\.time) == [ms(100), ms(600)])
    expectNothingScheduled(on: scheduler)
  }

  @Test func aLeadingDebounceHoldsNoTimerAndDoesNotLeadAgainInsideTheBurst() {
    let tapped = Recorder<Int>(clock: scheduler)
    let tap = Debouncer<Int>(for: .milliseconds(300), edges: .leading, scheduler: scheduler) { tapped.record($0) }
    tap(1)
    expectNothingScheduled(on: scheduler)
    scheduler.advance(by: .milliseconds(200))
    tap(2)  // inside the burst: dropped, and the burst lasts until 500 ms
    expectNothingScheduled(on: scheduler)
    scheduler.advance(by: .milliseconds(299))
    tap(3)  // 499 ms: still inside
    scheduler.advance(to: .milliseconds(799))
    tap(4)  // 799 ms: 300 ms after the last call, a new burst
    #expect(tapped.values == [1, 4])
    #expect(tapped.times == [ms(0), ms(799)])
    expectNothingScheduled(on: scheduler)
  }

  @Test func bothEdgesArmATimerOnlyForTheTrailingValue() {
    let saved = Recorder<Int>(clock: scheduler)
    let save = Debouncer<Int>(for: .milliseconds(300), edges: [.leading, .trailing], scheduler: scheduler) {
      saved.record($0)
    }
    save(1)
    expectNothingScheduled(on: scheduler)  // a single call: leading only, as lodash
    scheduler.advance(by: .milliseconds(100))
    save(2)
    #expect(scheduler.pendingDeadlines == [ms(400)])
    scheduler.run()
    #expect(saved.values == [1, 2])
    #expect(saved.times == [ms(0), ms(400)])
  }

  @Test func nextInvocationShowsTheTrueDeadlineDuringABurst() {
    let search = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { _ in }
    for (time, query) in [(0, "s"), (100, "sw"), (200, "swi"), (250, "swif")] {
      scheduler.advance(to: ms(Int64(time)))
      search(query)
    }
    #expect(scheduler.pendingDeadlines == [ms(300)])  // the timer the burst started with
    #expect(search.nextInvocation == ms(550))
    scheduler.advance(to: ms(300))
    #expect(scheduler.pendingDeadlines == [ms(550)])  // re-armed when it fired
    scheduler.advance(to: ms(550))
    #expect(search.nextInvocation == nil)
  }

  @Test func nextInvocationWithMaxWait() {
    let save = Debouncer<Int>(for: .milliseconds(300), maximumWait: .milliseconds(500), scheduler: scheduler) { _ in }
    for time in stride(from: 0, through: 400, by: 100) {
      scheduler.advance(to: ms(Int64(time)))
      save(time)
    }
    #expect(save.nextInvocation == ms(500))
  }

  @Test func aFlushedTrailingThrottlerClosesItsWindow() {
    let sent = Recorder<Int>(clock: scheduler)
    let send = Throttler<Int>(for: .milliseconds(300), edges: .trailing, scheduler: scheduler) { sent.record($0) }
    send(1)
    #expect(send.nextInvocation == ms(300))
    scheduler.advance(by: .milliseconds(100))
    send.flush()
    expectNothingScheduled(on: scheduler)
    send(2)  // opens a new window
    #expect(send.nextInvocation == ms(400))
    scheduler.run()
    #expect(sent.times == [ms(100), ms(400)])
  }

  /// Throttler.md's diagram: calls `abc-----`, flush at 100 ms, invocations `ab-c----`.
  @Test func aFlushedLeadingThrottlerKeepsItsWindowSoTheNextCallDoesNotLead() {
    let sent = Recorder<String>(clock: scheduler)
    let send = Throttler<String>(for: .milliseconds(300), scheduler: scheduler) { sent.record($0) }
    send("a")
    scheduler.advance(by: .milliseconds(100))
    send("b")
    send.flush()
    #expect(send.nextInvocation == nil)
    #expect(scheduler.pendingDeadlines == [ms(300)])  // the window still guards the leading edge
    scheduler.advance(by: .milliseconds(100))
    send("c")
    scheduler.advance(to: ms(800))
    #expect(sent.values == ["a", "b", "c"])
    #expect(sent.times == [ms(0), ms(100), ms(300)])
  }

  @Test func aFlushedCoalescerHoldsNoTimer() {
    let ran = Recorder<Int>(clock: scheduler)
    let coalescer = Coalescer<Int>(window: .milliseconds(50), scheduler: scheduler) { ran.record($0) }
    coalescer(1)
    #expect(coalescer.nextInvocation == ms(50))
    coalescer.flush()
    expectNothingScheduled(on: scheduler)
    #expect(ran.values == [1])
  }

  @Test func machinesSayWhenTheyNeedTheirTimer() {
    var machine = DebounceStateMachine<Int>(
      interval: .milliseconds(300), edges: .trailing, maximumWait: nil, merge: .latest)
    #expect(machine.call(1, now: ms(0)) == .schedule(at: ms(300)))
    #expect(machine.hasTimer)
    #expect(machine.flush(now: ms(100)) == 1)
    #expect(!machine.hasTimer)
    #expect(machine.call(2, now: ms(200)) == .schedule(at: ms(500)))
    #expect(machine.timerFired(now: ms(500)) == .invoke(2))
    #expect(!machine.hasTimer)

    var leading = DebounceStateMachine<Int>(
      interval: .milliseconds(300), edges: .leading, maximumWait: nil, merge: .latest)
    #expect(leading.call(1, now: ms(0)) == .invoke(1))
    #expect(leading.call(2, now: ms(100)) == .none)
    #expect(leading.call(3, now: ms(399)) == .none)
    #expect(leading.call(4, now: ms(700)) == .invoke(4))
    #expect(!leading.hasTimer)
  }
}
