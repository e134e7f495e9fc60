import PaceTestSupport
import Testing

@testable import Pace

/// `CoalesceStateMachine` driven directly: time in, actions out.
@Suite struct CoalesceMachineTests {
  @Test func firstSignalArmsTheNextTurnAndLaterSignalsOnlyMerge() {
    var machine = CoalesceStateMachine<Int>(window: .zero, merge: .sum)
    #expect(machine.call(1, now: ms(5)) == .schedule(at: ms(5)))
    #expect(machine.call(2, now: ms(5)) == .none)
    #expect(machine.call(3, now: ms(5)) == .none)
    #expect(machine.isPending)
    #expect(machine.timerFired(now: ms(5)) == .invoke(6))
    #expect(!machine.isPending)
    #expect(machine.armedDeadline == nil)
  }

  @Test func windowDelaysTheRunFromTheFirstSignalWithoutExtendingIt() {
    var machine = CoalesceStateMachine<Int>(window: .milliseconds(100), merge: .sum)
    #expect(machine.call(1, now: ms(10)) == .schedule(at: ms(110)))
    // Unlike a debounce, later signals do not push the run back.
    #expect(machine.call(1, now: ms(60)) == .none)
    #expect(machine.call(1, now: ms(109)) == .none)
    #expect(machine.timerFired(now: ms(110)) == .invoke(3))
    #expect(machine.call(1, now: ms(110)) == .schedule(at: ms(210)))
  }

  @Test func aSignalAfterTheTimerFiredArmsExactlyOneMoreRun() {
    // The driver delivers `.invoke` after the lock is released, so a signal from inside the
    // handler reaches the machine after `timerFired`: it must arm a new run.
    var machine = CoalesceStateMachine<[Int]>(window: .zero, merge: .append)
    _ = machine.call([1], now: ms(0))
    #expect(machine.timerFired(now: ms(0)) == .invoke([1]))
    #expect(machine.call([2], now: ms(0)) == .schedule(at: ms(0)))
    #expect(machine.call([3], now: ms(0)) == .none)
    #expect(machine.timerFired(now: ms(0)) == .invoke([2, 3]))
    #expect(machine.timerFired(now: ms(0)) == .none)
  }

  @Test func mergesMatchDispatchUserDataSources() {
    // DispatchSourceUserDataAdd
    var add = CoalesceStateMachine<UInt>(window: .zero, merge: .sum)
    for value: UInt in [1, 1, 5] { _ = add.call(value, now: ms(0)) }
    #expect(add.timerFired(now: ms(0)) == .invoke(7))

    // DispatchSourceUserDataOr
    var or = CoalesceStateMachine<ChangeKinds>(window: .zero, merge: .union)
    for value: ChangeKinds in [.title, .items, .title] { _ = or.call(value, now: ms(0)) }
    #expect(or.timerFired(now: ms(0)) == .invoke([.title, .items]))

    // DispatchSourceUserDataReplace
    var replace = CoalesceStateMachine<Int>(window: .zero, merge: .latest)
    for value in [4, 9, 2] { _ = replace.call(value, now: ms(0)) }
    #expect(replace.timerFired(now: ms(0)) == .invoke(2))

    // No Dispatch counterpart: every value, in order.
    var batch = CoalesceStateMachine<[String]>(window: .zero, merge: .append)
    for value in [["a"], ["b", "c"], ["d"]] { _ = batch.call(value, now: ms(0)) }
    #expect(batch.timerFired(now: ms(0)) == .invoke(["a", "b", "c", "d"]))

    var first = CoalesceStateMachine<Int>(window: .zero, merge: .first)
    for value in [4, 9, 2] { _ = first.call(value, now: ms(0)) }
    #expect(first.timerFired(now: ms(0)) == .invoke(4))
  }

  @Test func flushTakesThePendingValueAndTheArmedTimerThenFindsNothing() {
    var machine = CoalesceStateMachine<Int>(window: .milliseconds(50), merge: .sum)
    _ = machine.call(2, now: ms(0))
    _ = machine.call(3, now: ms(10))
    #expect(machine.flush(now: ms(20)) == 5)
    #expect(machine.flush(now: ms(20)) == nil)
    #expect(!machine.isPending)
    // Nothing is left for the timer to run, so the machine lets it go: the next signal arms anew.
    #expect(!machine.hasTimer)
    #expect(machine.call(7, now: ms(30)) == .schedule(at: ms(80)))
    #expect(machine.timerFired(now: ms(80)) == .invoke(7))
  }

  @Test func cancelDropsThePendingValueAndAsksToCancelOnlyAnArmedTimer() {
    var machine = CoalesceStateMachine<Int>(window: .zero, merge: .sum)
    #expect(machine.cancel() == false)
    _ = machine.call(1, now: ms(0))
    #expect(machine.cancel() == true)
    #expect(!machine.isPending)
    #expect(machine.armedDeadline == nil)
    #expect(machine.call(1, now: ms(3)) == .schedule(at: ms(3)))
  }

  @Test func aStaleTimerInvokesNothing() {
    var machine = CoalesceStateMachine<Int>(window: .zero, merge: .sum)
    #expect(machine.timerFired(now: ms(0)) == .none)
  }
}
