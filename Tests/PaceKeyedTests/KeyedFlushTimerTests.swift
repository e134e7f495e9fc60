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
