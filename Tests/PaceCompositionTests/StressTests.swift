import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// Real threads and real queues, run under the thread sanitizer in CI (the suite name matches
/// its `StressTests` filter). Every bound is an exact count, never a time.
@Suite(.offThePool) struct CompositionStressTests {
  @Test func concurrentSignalsOnARealQueueAddUpExactly() {
    // real-time: threads and a real DispatchQueue; the only bound is the exact total.
    let queue = DispatchQueue(label: "pace.coalescer.stress")
    let total = LockedState(0)
    let runs = Counter()
    let isRunning = LockedState(false)
    let overlaps = Counter()
    let count = Coalescer<Int>(merge: .sum, scheduler: .queue(queue)) { value in
      if isRunning.withLock({ running in
        defer { running = true }
        return running
      }) {
        overlaps.increment()
      }
      total.withLock { $0 += value }
      runs.increment()
      isRunning.withLock { $0 = false }
    }

    let threads = 8
    let signalsPerThread = 20_000
    DispatchQueue.concurrentPerform(iterations: threads) { _ in
      for _ in 0..<signalsPerThread { count(1) }
    }
    // Whatever is still pending runs now, on the queue, after any run in progress.
    queue.sync { count.flush() }

    #expect(total.withLock { $0 } == threads * signalsPerThread)
    #expect(runs.count >= 1)
    #expect(runs.count <= threads * signalsPerThread)
    #expect(overlaps.count == 0)
  }

  @Test func concurrentAppendsReachExactlyOneRunEachInOrderPerThread() {
    // real-time: as above, with `.append`: nothing lost, nothing duplicated, and each thread's
    // values stay in the order that thread signalled them.
    let queue = DispatchQueue(label: "pace.coalescer.append")
    let received = LockedState<[Int]>([])
    let batches = Coalescer<[Int]>(merge: .append, scheduler: .queue(queue)) { values in
      received.withLock { $0.append(contentsOf: values) }
    }
    let threads = 6
    let perThread = 5_000
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      for index in 0..<perThread { batches([thread * perThread + index]) }
    }
    queue.sync { batches.flush() }

    let all = received.withLock { $0 }
    #expect(all.count == threads * perThread)
    #expect(Set(all).count == threads * perThread)
    for thread in 0..<threads {
      let mine = all.filter { $0 / perThread == thread }
      #expect(mine == mine.sorted())
    }
  }

  @Test func concurrentDisposeRunsTheTeardownOnce() {
    // real-time: many threads race to dispose; the teardown must run exactly once.
    for _ in 0..<200 {
      let teardowns = Counter()
      let disposable = AnyDisposable { teardowns.increment() }
      DispatchQueue.concurrentPerform(iterations: 8) { _ in disposable.dispose() }
      #expect(teardowns.count == 1)
    }
  }

  @Test func racingAddAndDisposeDisposeEveryMemberExactlyOnce() {
    // real-time: adders race a disposer; whichever wins, each member is disposed once.
    for _ in 0..<50 {
      let group = DisposableGroup()
      let counters = (0..<64).map { _ in Counter() }
      DispatchQueue.concurrentPerform(iterations: counters.count + 1) { index in
        if index == counters.count {
          group.dispose()
        } else {
          group.add(CountingDisposable(counter: counters[index]))
        }
      }
      group.dispose()
      #expect(counters.allSatisfy { $0.count == 1 })
    }
  }

  @Test func aFuserFedFromManyThreadsAndDisposedMidStreamTearsDownOnce() {
    // real-time: sources emit from several threads while another thread disposes. Every source
    // is torn down exactly once, and once dispose has returned and the emitters have stopped,
    // nothing more arrives.
    for _ in 0..<20 {
      let sources = (0..<4).map { _ in ManualSource<Int>() }
      let queue = DispatchQueue(label: "pace.fuser.stress")
      let delivered = Counter()
      let connection = Fuser.fromAll(sources.map(\.fuser))
        .map { [$0] }
        .coalesced(merge: .append, scheduler: .queue(queue))
        .connect { values in
          for _ in values { delivered.increment() }
        }
      DispatchQueue.concurrentPerform(iterations: sources.count + 1) { index in
        if index == sources.count {
          connection.dispose()
        } else {
          for value in 0..<2_000 { sources[index].send(value) }
        }
      }
      queue.sync {}
      let afterDispose = delivered.count
      for source in sources { source.send(-1) }
      queue.sync {}
      #expect(delivered.count == afterDispose)
      #expect(sources.allSatisfy { $0.teardowns.count == 1 })
    }
  }
}
