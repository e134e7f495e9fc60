import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// `Coalescer` through the class, on virtual time.
@Suite struct CoalescerTests {
  @Test func signalsOfOneTurnRunTheHandlerOnceOnTheNextTurn() {
    let scheduler = TestScheduler()
    let runs = Recorder<Void>(clock: scheduler)
    let reload = Coalescer(scheduler: scheduler) { runs.record() }

    for _ in 0..<5 { reload.signal() }
    reload()
    #expect(runs.count == 0, "nothing runs inside the signalling turn")
    #expect(reload.isPending)
    #expect(scheduler.pendingDeadlines == [ms(0)], "one run armed, not one per signal")

    scheduler.advance()
    #expect(runs.count == 1)
    #expect(runs.times == [ms(0)])
    #expect(!reload.isPending)
    #expect(scheduler.pendingCount == 0)

    reload.signal()
    scheduler.advance()
    #expect(runs.count == 2)
  }

  @Test func windowRunsOnceAtTheFirstSignalPlusTheWindow() {
    let scheduler = TestScheduler()
    let runs = Recorder<Int>(clock: scheduler)
    let count = Coalescer<Int>(window: .milliseconds(100), merge: .sum, scheduler: scheduler) { runs.record($0) }

    scheduler.advance(to: ms(10))
    count(1)
    scheduler.advance(to: ms(60))
    count(1)
    scheduler.advance(to: ms(109))
    count(1)
    #expect(runs.count == 0)
    scheduler.advance(to: ms(110))
    #expect(runs.values == [3])
    #expect(runs.times == [ms(110)])

    count(4)
    scheduler.advance(to: ms(300))
    #expect(runs.values == [3, 4])
    #expect(runs.times == [ms(110), ms(210)])
  }

  @Test func sumAddsUpLikeDispatchSourceUserDataAdd() {
    let scheduler = TestScheduler()
    let runs = Recorder<UInt>()
    let add = Coalescer<UInt>(merge: .sum, scheduler: scheduler) { runs.record($0) }
    add(1)
    add(1)
    add(3)
    scheduler.advance()
    add(2)
    scheduler.advance()
    #expect(runs.values == [5, 2])
  }

  @Test func unionCombinesMasksLikeDispatchSourceUserDataOr() {
    let scheduler = TestScheduler()
    let runs = Recorder<ChangeKinds>()
    let changes = Coalescer<ChangeKinds>(merge: .union, scheduler: scheduler) { runs.record($0) }
    changes(.title)
    changes(.items)
    changes(.title)
    scheduler.advance()
    changes(.selection)
    scheduler.advance()
    #expect(runs.values == [[.title, .items], [.selection]])
  }

  @Test func latestKeepsTheLastValueLikeDispatchSourceUserDataReplace() {
    let scheduler = TestScheduler()
    let runs = Recorder<Int>()
    let replace = Coalescer<Int>(scheduler: scheduler) { runs.record($0) }
    replace(4)
    replace(9)
    replace(2)
    scheduler.advance()
    #expect(runs.values == [2])
  }

  @Test func appendDeliversEveryValueOnceInSignalOrder() {
    let scheduler = TestScheduler()
    let runs = Recorder<[Int]>()
    let batch = Coalescer<[Int]>(merge: .append, scheduler: scheduler) { runs.record($0) }
    batch([1])
    batch([2, 3])
    scheduler.advance()
    batch([4])
    scheduler.advance()
    #expect(runs.values == [[1, 2, 3], [4]])
  }

  @Test func aSignalDuringTheHandlerSchedulesExactlyOneMoreRunAndLosesNothing() {
    let scheduler = TestScheduler()
    let runs = Recorder<[Int]>(clock: scheduler)
    let reentered = Counter()
    let batch = LockedState<Coalescer<[Int]>?>(nil)
    let coalescer = Coalescer<[Int]>(window: .milliseconds(10), merge: .append, scheduler: scheduler) { values in
      runs.record(values)
      guard reentered.count == 0 else { return }
      reentered.increment()
      // Signals made while the handler runs: one more run, with both values.
      let this = batch.withLock { $0 }
      this?.signal([10])
      this?.signal([11])
    }
    batch.withLock { $0 = coalescer }

    coalescer([1])
    coalescer([2])
    scheduler.advance(to: ms(10))
    #expect(runs.values == [[1, 2]])
    #expect(coalescer.isPending)
    #expect(scheduler.pendingDeadlines == [ms(20)])

    scheduler.advance(to: ms(100))
    #expect(runs.values == [[1, 2], [10, 11]])
    #expect(runs.times == [ms(10), ms(20)])
    #expect(scheduler.pendingCount == 0)
    batch.withLock { $0 = nil }
  }

  @Test func aSignalFromTheHandlerAtWindowZeroRunsOnceMoreInTheSameAdvance() {
    let scheduler = TestScheduler()
    let runs = Counter()
    let box = LockedState<Coalescer<Void>?>(nil)
    let reload = Coalescer(scheduler: scheduler) {
      runs.increment()
      if runs.count == 1 { box.withLock { $0 }?.signal() }
    }
    box.withLock { $0 = reload }
    reload.signal()
    scheduler.advance()
    #expect(runs.count == 2)
    #expect(scheduler.pendingCount == 0)
    box.withLock { $0 = nil }
  }

  @Test func flushRunsNowAndTheScheduledTurnThenFindsNothing() {
    let scheduler = TestScheduler()
    let runs = Recorder<Int>(clock: scheduler)
    let count = Coalescer<Int>(window: .milliseconds(50), merge: .sum, scheduler: scheduler) { runs.record($0) }

    count.flush()
    #expect(runs.count == 0, "flush with nothing pending does nothing")

    count(2)
    count(3)
    scheduler.advance(to: ms(20))
    count.flush()
    #expect(runs.values == [5])
    #expect(runs.times == [ms(20)])
    #expect(!count.isPending)

    scheduler.advance(to: ms(100))
    #expect(runs.values == [5], "the armed turn finds nothing to run")
  }

  @Test func cancelDropsThePendingDataAndTheScheduledRun() {
    let scheduler = TestScheduler()
    let runs = Recorder<Int>()
    let count = Coalescer<Int>(merge: .sum, scheduler: scheduler) { runs.record($0) }
    count(2)
    count(3)
    count.cancel()
    #expect(!count.isPending)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance()
    #expect(runs.count == 0)

    count(4)
    scheduler.advance()
    #expect(runs.values == [4], "a cancelled coalescer works again")
  }

  @Test func aReleasedCoalescerIsFreedAndNeverFires() {
    let scheduler = TestScheduler()
    let runs = Counter()
    weak var weakCoalescer: Coalescer<Int>?
    do {
      let coalescer = Coalescer<Int>(merge: .sum, scheduler: scheduler) { _ in runs.increment() }
      weakCoalescer = coalescer
      coalescer(1)
      #expect(coalescer.isPending)
    }
    #expect(weakCoalescer == nil, "the scheduler must not keep the coalescer alive")
    scheduler.run()
    #expect(runs.count == 0)
  }

  @Test func theMainActorInitialiserRunsTheHandlerOnTheMainActor() async {
    // real-time: the main queue's next turn; no timing is asserted.
    let ran = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      Task { @MainActor in
        let holder = LockedState<Coalescer<Void>?>(nil)
        let reload = Coalescer {
          MainActor.assertIsolated()
          holder.withLock { $0 = nil }
          continuation.resume(returning: true)
        }
        holder.withLock { $0 = reload }
        reload.signal()
        reload.signal()
      }
    }
    #expect(ran)
  }
}
