import PaceTestSupport
import Testing

@testable import Pace

/// The keyed debouncer and throttler on virtual time: the API, eviction and the one timer.
@Suite struct KeyedPacingTests {
  let scheduler = TestScheduler()

  @Test func eachKeyDebouncesOnItsOwn() {
    let recorder = KeyedRecorder<String, [Int]>(clock: scheduler)
    let reindex = KeyedDebouncer<String, [Int]>(
      for: .milliseconds(200), maximumWait: .milliseconds(1_000), merge: .append, scheduler: scheduler,
      perform: recorder.record
    )
    reindex.call("a", [1])
    scheduler.advance(to: ms(100))
    reindex.call("b", [2])
    reindex("a", [3])
    #expect(reindex.isPending(for: "a") && reindex.isPending(for: "b") && !reindex.isPending(for: "c"))
    scheduler.advance(to: ms(300))
    #expect(recorder.invocations(of: "a").map(\.0) == [300])
    #expect(recorder.invocations(of: "a").map(\.1) == [[1, 3]])
    #expect(recorder.invocations(of: "b").map(\.0) == [300])
    #expect(reindex.trackedKeyCount == 0)
  }

  @Test func flushCancelAndTheirAllVariants() {
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let debouncer = KeyedDebouncer<Int, Int>(
      for: .seconds(1), merge: .sum, scheduler: scheduler, perform: recorder.record)
    for key in 0..<10 { debouncer.call(key, key) }
    debouncer.flush(3)
    #expect(recorder.invocations(of: 3).map(\.1) == [3])
    debouncer.cancel(4)
    #expect(!debouncer.isPending(for: 4))
    debouncer.flushAll()
    #expect(recorder.all.count == 9)
    for key in 0..<10 { debouncer.call(key, 1) }
    debouncer.cancelAll()
    #expect(debouncer.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
    scheduler.advance(by: .seconds(5))
    #expect(recorder.all.values.map(\.count).reduce(0, +) == 9)
  }

  @Test func aThousandKeysShareOneTimerPerShard() {
    let debouncer = KeyedDebouncer<Int, Int>(for: .seconds(1), scheduler: scheduler) { _, _ in }
    for key in 0..<1_000 { debouncer.call(key, key) }
    // No timer per key: at most one scheduler timer per shard, for its earliest deadline.
    #expect(scheduler.pendingDeadlines.count <= keyedShardCount)
    #expect(debouncer.trackedKeyCount == 1_000)
    scheduler.advance(by: .seconds(1))
    #expect(debouncer.trackedKeyCount == 0)
    #expect(debouncer.pacer.timerEntryCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
    // Quiet keys hold no memory: tables, heaps and outboxes are all given back.
    #expect(debouncer.pacer.heldStorageBytes == 0)
  }

  @Test func aKeyAfterAMaxWaitInvocationIsKeptUntilItsBurstIsOver() {
    // A maximumWait invocation ends the timer but not the burst: a call right after it continues
    // the burst, so the key must not be forgotten before `interval` after its latest call.
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let debouncer = KeyedDebouncer<Int, Int>(
      for: .milliseconds(300), maximumWait: .milliseconds(500), scheduler: scheduler, perform: recorder.record
    )
    for time in stride(from: 0, through: 400, by: 100) {
      scheduler.advance(to: ms(Int64(time)))
      debouncer.call(1, time)
    }
    scheduler.advance(to: ms(500))
    #expect(recorder.invocations(of: 1).map(\.0) == [500])
    #expect(debouncer.trackedKeyCount == 1)
    scheduler.advance(to: ms(700))
    #expect(debouncer.trackedKeyCount == 0)
  }

  @Test func eachKeyThrottlesOnItsOwn() {
    let recorder = KeyedRecorder<Int, String>(clock: scheduler)
    let notify = KeyedThrottler<Int, String>(
      for: .seconds(30), edges: .leading, scheduler: scheduler, perform: recorder.record)
    notify.call(1, "a")
    notify.call(2, "b")
    notify.call(1, "c")
    scheduler.advance(by: .seconds(30))
    notify.call(1, "d")
    #expect(recorder.invocations(of: 1).map(\.1) == ["a", "d"])
    #expect(recorder.invocations(of: 2).map(\.1) == ["b"])
    #expect(notify.trackedKeyCount == 1)
    scheduler.advance(by: .seconds(30))
    #expect(notify.trackedKeyCount == 0)
  }

  @Test func performMayCallTheSameKeyAgain() {
    let scheduler = self.scheduler
    let box = LockedState<KeyedThrottler<Int, Int>?>(nil)
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    let throttler = KeyedThrottler<Int, Int>(for: .milliseconds(100), scheduler: scheduler) { key, value in
      recorder.record(key, value)
      if value < 3 { box.withLock { $0 }?.call(key, value + 1) }
    }
    box.withLock { $0 = throttler }
    throttler.call(7, 0)
    scheduler.advance(by: .seconds(1))
    #expect(recorder.invocations(of: 7).map(\.0) == [0, 100, 200, 300])
    #expect(recorder.invocations(of: 7).map(\.1) == [0, 1, 2, 3])
    box.withLock { $0 = nil }
  }

  @Test func releasingTheDebouncerDropsItsPendingWork() {
    let recorder = KeyedRecorder<Int, Int>(clock: scheduler)
    var debouncer: KeyedDebouncer<Int, Int>? = KeyedDebouncer(
      for: .seconds(1), scheduler: scheduler, perform: recorder.record)
    debouncer?.call(1, 1)
    weak let released = debouncer
    debouncer = nil
    #expect(released == nil)
    scheduler.advance(by: .seconds(2))
    #expect(recorder.all.isEmpty)
  }

  @Test func voidValuesNeedNoArgument() {
    let count = LockedState(0)
    let debouncer = KeyedDebouncer<Int, Void>(for: .seconds(1), scheduler: scheduler) { _, _ in
      count.withLock { $0 += 1 }
    }
    debouncer.call(1)
    debouncer.call(1)
    let throttler = KeyedThrottler<Int, Void>(for: .seconds(1), scheduler: scheduler) { _, _ in
      count.withLock { $0 += 1 }
    }
    throttler.call(1)
    scheduler.advance(by: .seconds(1))
    #expect(count.withLock { $0 } == 2)
  }
}
