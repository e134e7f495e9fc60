import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// Many threads calling a keyed primitive at once (CI runs this suite under the thread
/// sanitizer): `.append` loses and duplicates nothing, and each key's values arrive in order.
@Suite struct KeyedConcurrencyTests {
  @Test func concurrentCallersLoseAndDuplicateNothing() {
    let scheduler = TestScheduler()
    let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
    let debouncer = KeyedDebouncer<Int, [Int]>(
      for: .milliseconds(10), maximumWait: .milliseconds(50), merge: .append, scheduler: scheduler,
      perform: recorder.record
    )
    let threads = 8
    let callsPerThread = 5_000
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      for call in 0..<callsPerThread {
        // Threads share keys: key = call % 37, values unique per thread and increasing.
        debouncer.call(call % 37, [thread * callsPerThread + call])
        if call % 500 == 0 { scheduler.advance(by: .milliseconds(10)) }
        if call % 1_000 == 0 { debouncer.flush(call % 37) }
      }
    }
    scheduler.run()
    let all = recorder.all
    let delivered = all.values.flatMap { $0.flatMap(\.1) }
    #expect(delivered.count == threads * callsPerThread)
    #expect(Set(delivered).count == threads * callsPerThread)
    for (_, invocations) in all {
      let values = invocations.flatMap(\.1)
      for thread in 0..<threads {
        let own = values.filter { $0 / callsPerThread == thread }
        #expect(own == own.sorted())
      }
    }
    #expect(debouncer.trackedKeyCount == 0)
  }

  @Test func concurrentThrottlersAndDispatchDeliveryLoseNothing() async {
    let queue = DispatchQueue(label: "KeyedConcurrencyTests")
    let total = LockedState(0)
    let throttler = KeyedThrottler<Int, Int>(for: .milliseconds(1), merge: .sum, scheduler: .queue(queue)) { _, value in
      total.withLock { $0 += value }
    }
    // Threads of their own, so that the cooperative pool stays free for the real-clock tests.
    let delivered = await offTheCooperativePool {
      DispatchQueue.concurrentPerform(iterations: 8) { thread in
        for call in 0..<2_000 { throttler.call((thread * 7 + call) % 100, 1) }
      }
      // real-time: the last windows close 1 ms after the last call; wait for them generously.
      let done = DispatchSemaphore(value: 0)
      let deadline = DispatchTime.now() + .seconds(120)
      while total.withLock({ $0 }) < 16_000, DispatchTime.now() < deadline {
        _ = done.wait(timeout: .now() + .milliseconds(10))
      }
      return total.withLock { $0 }
    }
    #expect(delivered == 16_000)
  }

  @Test func concurrentRateLimiterCallersGetExactlyTheBurst() {
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<Int>(permits: 1, per: .seconds(1), burst: 100, clock: scheduler)
    let allowed = LockedState(0)
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for call in 0..<1_000 where limiter.tryAcquire(call % 10).isAllowed {
        allowed.withLock { $0 += 1 }
      }
    }
    #expect(allowed.withLock { $0 } == 1_000)  // 10 keys, burst 100 each, no time passed
  }
}
