import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// Real Dispatch queues and threads. These also run under the thread sanitizer in CI
/// (`swift test --sanitize=thread --filter ConcurrencyTests`).
@Suite struct ConcurrencyTests {
  /// Waits (real time) until `condition` holds or `seconds` pass; returns whether it held.
  func eventually(
    within seconds: Double = 120, isolation: isolated (any Actor)? = #isolation, _ condition: () -> Bool
  ) async -> Bool {
    // 120 s, as the other real-clock tests: while synchronous suites hold the cooperative pool,
    // neither this loop nor a timer's task runs (a full run under load held it for 30 s).
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
      if condition() { return true }
      try? await Task.sleep(for: .milliseconds(5))  // real-time: polling a real queue, generous bound
    }
    // The pool may have been held past the deadline: let a timer that is now runnable run.
    try? await Task.sleep(for: .milliseconds(50))  // real-time: one last turn for a timer on a real queue
    return condition()
  }

  @Test func concurrentCallersLoseAndDuplicateNothingWithAppend() async {
    let queue = DispatchQueue(label: "pace.test.append")
    let log = Recorder<[Int]>()
    let throttler = Throttler<[Int]>(
      for: .milliseconds(1), merge: .append, scheduler: .queue(queue), perform: log.record)
    let debouncer = Debouncer<[Int]>(
      for: .milliseconds(1), edges: .both, maximumWait: .milliseconds(2), merge: .append, scheduler: .queue(queue),
      perform: log.record
    )
    let threads = 4
    let perThread = 5_000
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      for index in 0..<perThread {
        let value = thread * perThread + index
        if value.isMultiple(of: 2) { throttler.call([value]) } else { debouncer.call([value]) }
      }
    }
    let total = threads * perThread
    let everythingDelivered = await eventually { log.values.reduce(0) { $0 + $1.count } >= total }
    #expect(everythingDelivered)
    withExtendedLifetime((throttler, debouncer)) {}
    let delivered = log.values.flatMap { $0 }
    #expect(delivered.count == total)
    #expect(Set(delivered).count == total)
    // Each thread's calls arrive in the order it made them.
    for thread in 0..<threads {
      let mine = delivered.filter { $0 / perThread == thread }
      let evens = mine.filter { $0.isMultiple(of: 2) }
      let odds = mine.filter { !$0.isMultiple(of: 2) }
      #expect(evens == evens.sorted())
      #expect(odds == odds.sorted())
    }
  }

  @Test func invocationsNeverOverlapEvenWhenCallsComeFromManyThreads() async {
    let queue = DispatchQueue(label: "pace.test.overlap", attributes: .concurrent)
    let active = LockedState((now: 0, max: 0, runs: 0))
    let throttler = Throttler<Int>(for: .zero, edges: .leading, scheduler: .queue(queue)) { _ in
      active.withLock {
        $0.now += 1
        $0.max = max($0.max, $0.now)
      }
      for _ in 0..<1_000 { _ = active.withLock { $0.now } }
      active.withLock {
        $0.now -= 1
        $0.runs += 1
      }
    }
    DispatchQueue.concurrentPerform(iterations: 4) { _ in
      for value in 0..<2_000 { throttler.call(value) }
    }
    let ranOnTheQueue = await eventually { active.withLock { $0.runs > 0 && $0.now == 0 } }
    #expect(ranOnTheQueue)
    #expect(active.withLock { $0.max } == 1)
    withExtendedLifetime(throttler) {}
  }

  @Test func flushCancelAndIsPendingRaceSafelyWithCalls() async {
    let queue = DispatchQueue(label: "pace.test.race")
    let log = Recorder<Int>()
    let debouncer = Debouncer<Int>(for: .milliseconds(2), merge: .sum, scheduler: .queue(queue), perform: log.record)
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
      for index in 0..<2_000 {
        switch (thread, index % 50) {
        case (0, 0): debouncer.flush()
        case (1, 0): debouncer.cancel()
        case (2, _): _ = debouncer.isPending
        default: debouncer.call(1)
        }
      }
    }
    debouncer.flush()
    let nothingPending = await eventually { !debouncer.isPending }
    #expect(nothingPending)
    // Threads 0 and 1 call on 49 of every 50 iterations, thread 3 on all; thread 2 only reads.
    // Cancel drops some calls, so the total delivered is at most what was called.
    let calls = 2 * (2_000 - 2_000 / 50) + 2_000
    let delivered = await eventually { log.values.reduce(0, +) > 0 } ? log.values.reduce(0, +) : 0
    #expect(delivered > 0)
    #expect(delivered <= calls)
    withExtendedLifetime(debouncer) {}
  }

  @Test func aTrailingInvocationOnARealQueueFiresNearItsDeadline() async {
    // real-time: one integration check with a generous bound; the benchmarks report p50/p99.
    let queue = DispatchQueue(label: "pace.test.latency")
    let scheduler = DispatchScheduler(queue)
    let fired = LockedState<PaceInstant?>(nil)
    let debouncer = Debouncer<Void>(for: .milliseconds(20), scheduler: scheduler) {
      fired.withLock { $0 = scheduler.now }
    }
    let start = scheduler.now
    debouncer.call()
    let didFire = await eventually { fired.withLock { $0 } != nil }
    #expect(didFire)
    withExtendedLifetime(debouncer) {}
    let elapsed = start.duration(to: fired.withLock { $0 }!)
    #expect(elapsed >= .milliseconds(20))
    #expect(elapsed < .seconds(10), "a bound for a loaded machine, not a latency figure")
  }

  @Test func aLeadingInvocationFromTheQueueItselfRunsInsideCall() {
    let queue = DispatchQueue(label: "pace.test.current")
    let scheduler = DispatchScheduler(queue)
    #expect(!scheduler.isCurrent)
    let ranInline = queue.sync {
      let log = Recorder<Int>()
      let debouncer = Debouncer<Int>(for: .seconds(60), edges: .leading, scheduler: scheduler, perform: log.record)
      debouncer.call(1)
      defer { debouncer.cancel() }
      return scheduler.isCurrent && log.values == [1]
    }
    #expect(ranInline)
  }

  @Test func aLeadingInvocationFromAnotherThreadIsDispatchedToTheQueue() async {
    let queue = DispatchQueue(label: "pace.test.hop")
    let scheduler = DispatchScheduler(queue)
    let onQueue = LockedState<Bool?>(nil)
    let debouncer = Debouncer<Int>(for: .seconds(60), edges: .leading, scheduler: scheduler) { _ in
      onQueue.withLock { $0 = scheduler.isCurrent }
    }
    debouncer.call(1)
    let ranOnTheQueue = await eventually { onQueue.withLock { $0 } != nil }
    #expect(ranOnTheQueue)
    #expect(onQueue.withLock { $0 } == true)
    debouncer.cancel()
  }

  @Test func twoSchedulersOverOneQueueShareItsTag() {
    let queue = DispatchQueue(label: "pace.test.tag")
    let first = DispatchScheduler(queue)
    let second = DispatchScheduler.queue(queue)
    #expect(queue.sync { first.isCurrent && second.isCurrent })
  }

  @Test func aClockSchedulerRunsTrailingWorkOnItsClock() async {
    // real-time: ContinuousClock, generous bound.
    let fired = LockedState(false)
    let debouncer = Debouncer<Void>(for: .milliseconds(10), scheduler: .clock(ContinuousClock())) {
      fired.withLock { $0 = true }
    }
    debouncer.call()
    let didFire = await eventually { fired.withLock { $0 } }
    #expect(didFire)
    withExtendedLifetime(debouncer) {}
  }

  @Test func aClockSchedulerCancelsItsTimer() async {
    let fired = LockedState(false)
    let scheduler = ClockScheduler(ContinuousClock())
    let work = scheduler.schedule(after: .milliseconds(5)) { fired.withLock { $0 = true } }
    work.cancel()
    try? await Task.sleep(for: .milliseconds(50))  // real-time: nothing must happen in this window
    #expect(!fired.withLock { $0 })
    #expect(scheduler.now > .zero)
  }

  @MainActor @Test func aMainActorDebouncerRunsOnTheMainActor() async {
    let view = FakeViewController()
    view.setUp()
    view.search?.call("swift")
    let settled7 = await eventually { view.label.text == "swift" }
    #expect(settled7)
    view.reload?.signal()
    let settled8 = await eventually { view.label.text == "" }
    #expect(settled8)
  }
}

@MainActor final class FakeLabel {
  var text = ""
}

/// The shape of UI code the `@MainActor` initialisers exist for: it must compile without warnings.
@MainActor final class FakeViewController {
  let label = FakeLabel()
  var search: Debouncer<String>?
  var scroll: Throttler<Int>?
  var reload: Coalescer<Void>?

  func setUp() {
    search = Debouncer(for: .milliseconds(10)) { self.label.text = $0 }
    scroll = Throttler(for: .milliseconds(16)) { [weak self] in self?.label.text = "\($0)" }
    reload = Coalescer { self.label.text = "" }
  }
}
