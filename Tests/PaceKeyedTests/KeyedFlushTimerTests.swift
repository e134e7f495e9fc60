import PaceTestSupport
import Testing

@testable import Pace

/// A flushed key has nothing left to invoke and holds no deadline; the shard's timer goes with
/// it when that deadline was the one it was armed for.
@Suite struct KeyedFlushTimerTests {
  let scheduler = TestScheduler()

  @Test func aFlushedKeyHoldsNoTimer() {
    let recorder = KeyedRecorder<String, String>(clock: scheduler)
    let search = KeyedDebouncer<String, String>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    search("tab1", "s")
    scheduler.advance(to: ms(100))
    search("tab1", "sw")
    search.flush("tab1")
    #expect(recorder.invocations(of: "tab1").map(\.1) == ["sw"])
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(search.trackedKeyCount == 0)
    #expect(search.pacer.timerEntryCount == 0)
    search("tab1", "swi")  // waits its own interval, as after any flush
    scheduler.advance(to: ms(400))
    #expect(recorder.invocations(of: "tab1").map(\.0) == [100, 400])
  }

  @Test func theShardTimerMovesToTheNextKeysDeadline() {
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let save = KeyedDebouncer<Int, Int>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    // Keys 0...63 spread over the shards; every key's deadline is 300 ms except the flushed one's.
    save(1, 1)
    scheduler.advance(to: ms(100))
    for key in 2..<200 { save(key, key) }
    save.flush(1)
    #expect(!scheduler.pendingDeadlines.contains(ms(300)))
    scheduler.advance(to: ms(400))
    #expect(recorder.all.count == 199)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func aFlushedLeadingDebounceRemembersTheBurstUntilItEnds() {
    let recorder = KeyedRecorder<String, Int>(clock: scheduler)
    let tap = KeyedDebouncer<String, Int>(
      for: .milliseconds(300), edges: .both, scheduler: scheduler, perform: recorder.record)
    tap("a", 1)
    scheduler.advance(to: ms(100))
    tap("a", 2)
    tap.flush("a")
    tap("a", 3)  // inside the burst: does not lead
    scheduler.run()
    #expect(recorder.invocations(of: "a").map(\.1) == [1, 2, 3])
    #expect(recorder.invocations(of: "a").map(\.0) == [0, 100, 400])
    #expect(tap.trackedKeyCount == 0)
  }
}

/// A keyed pacer with nothing left to invoke holds no timer after `cancel(_:)` or `flushAll()`.
@Suite struct KeyedCancelTimerTests {
  let scheduler = TestScheduler()

  @Test func cancellingTheOnlyKeyLeavesNothingScheduled() {
    let recorder = KeyedRecorder<String, String>(clock: scheduler)
    let search = KeyedDebouncer<String, String>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    search("tab1", "s")
    scheduler.advance(to: ms(100))
    search("tab1", "sw")
    search.cancel("tab1")
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(search.pacer.timerEntryCount == 0)
    scheduler.run()
    #expect(scheduler.now == ms(100))
    #expect(recorder.all.isEmpty)
  }

  @Test func cancellingTheEarliestKeyMovesTheTimerToTheNext() {
    let recorder = KeyedRecorder<String, String>(clock: scheduler)
    let search = KeyedDebouncer<String, String>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    search("a", "1")
    scheduler.advance(to: ms(100))
    search("b", "2")
    search.cancel("a")
    #expect(scheduler.pendingDeadlines == [ms(400)])
    scheduler.run()
    #expect(recorder.invocations(of: "b").map(\.0) == [400])
    #expect(recorder.invocations(of: "a").isEmpty)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func aCancelledKeysDeadlineDoesNotReArmTheTimer() {
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let save = KeyedDebouncer<Int, Int>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    // Many keys, so that some share a shard: each later key is cancelled behind an earlier one.
    for key in 0..<200 { save(key, key) }
    scheduler.advance(to: ms(100))
    for key in 200..<400 { save(key, key) }
    for key in 200..<400 { save.cancel(key) }
    scheduler.advance(to: ms(300))
    #expect(recorder.all.count == 200)
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(save.pacer.timerEntryCount == 0)
  }

  @Test func flushAllOfATrailingDebouncerLeavesNothingScheduled() {
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let save = KeyedDebouncer<Int, Int>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    for key in 0..<100 { save(key, key) }
    scheduler.advance(to: ms(100))
    save(7, 70)
    save.flushAll()
    #expect(recorder.all.count == 100)
    #expect(recorder.invocations(of: 7).map(\.1) == [70])
    #expect(recorder.invocations(of: 7).map(\.0) == [100])
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(save.trackedKeyCount == 0)
    #expect(save.pacer.timerEntryCount == 0)
  }

  @Test func flushAllAfterACancelLeavesNothingScheduled() {
    let recorder = KeyedRecorder<String, Int>(clock: scheduler)
    let save = KeyedDebouncer<String, Int>(for: .milliseconds(300), scheduler: scheduler, perform: recorder.record)
    save("a", 1)
    scheduler.advance(to: ms(100))
    save("b", 2)
    save.cancel("b")  // not the earliest if both share a shard: its entry may stay, stale
    save.flushAll()
    #expect(recorder.invocations(of: "a").map(\.0) == [100])
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func aCancelledThrottledKeyHoldsNoTimer() {
    let recorder = KeyedRecorder<String, Int>(clock: scheduler)
    let tap = KeyedThrottler<String, Int>(for: .milliseconds(100), scheduler: scheduler, perform: recorder.record)
    tap("a", 1)  // leads at 0 ms and opens a window to 100 ms
    tap("a", 2)
    tap.cancel("a")
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(recorder.invocations(of: "a").map(\.1) == [1])
  }

  @Test func flushAllOfAThrottlerKeepsOnlyTheWindowsThatStillMatter() {
    let recorder = KeyedRecorder<String, Int>(clock: scheduler)
    let tap = KeyedThrottler<String, Int>(
      for: .milliseconds(100), edges: .trailing, scheduler: scheduler, perform: recorder.record)
    tap("a", 1)
    scheduler.advance(to: ms(30))
    tap("a", 2)
    tap.flushAll()
    #expect(recorder.invocations(of: "a").map(\.1) == [2])
    #expect(recorder.invocations(of: "a").map(\.0) == [30])
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(tap.trackedKeyCount == 0)
  }
}
