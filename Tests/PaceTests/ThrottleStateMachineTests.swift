import PaceTestSupport
import Testing

@testable import Pace

/// The throttle machine driven directly: `now` in, actions out.
@Suite struct ThrottleStateMachineTests {
  typealias Machine = ThrottleStateMachine<String>

  func machine(_ edges: Edges = .both, merge: Merge<String> = .latest) -> Machine {
    Machine(interval: .milliseconds(100), edges: edges, merge: merge)
  }

  @Test func steadyCadenceWhileCallsContinue() {
    var m = machine()
    #expect(m.call("a", now: ms(0)) == .invokeAndSchedule("a", at: ms(100)))
    #expect(m.call("b", now: ms(40)) == .none)
    #expect(m.call("c", now: ms(90)) == .none)
    #expect(m.timerFired(now: ms(100)) == .invokeAndSchedule("c", at: ms(200)))
    #expect(m.call("d", now: ms(150)) == .none)
    #expect(m.timerFired(now: ms(200)) == .invokeAndSchedule("d", at: ms(300)))
    // No call in the last window: quiet.
    #expect(m.timerFired(now: ms(300)) == .none)
    #expect(m.windowEnd == nil)
    #expect(m.call("e", now: ms(320)) == .invokeAndSchedule("e", at: ms(420)))
  }

  @Test func aCallInAnOpenWindowNeverReadsTheClock() {
    var m = machine()
    _ = m.call("a", now: ms(0))
    var clockReads = 0
    func readClock() -> PaceInstant {
      clockReads += 1
      return ms(50)
    }
    let action = m.call("b", now: readClock())
    #expect(action == .none)
    #expect(clockReads == 0)
  }

  @Test func trailingOnlyInvokesAtTheWindowEndWithTheFirstCallIncluded() {
    var m = machine(.trailing, merge: .custom { $0 + $1 })
    #expect(m.call("a", now: ms(10)) == .schedule(at: ms(110)))
    #expect(m.call("b", now: ms(20)) == .none)
    #expect(m.timerFired(now: ms(110)) == .invokeAndSchedule("ab", at: ms(210)))
    #expect(m.timerFired(now: ms(210)) == .none)
  }

  @Test func leadingOnlyDropsTheWindowsCallsAndGoesQuiet() {
    var m = machine(.leading)
    #expect(m.call("a", now: ms(0)) == .invokeAndSchedule("a", at: ms(100)))
    #expect(m.call("b", now: ms(50)) == .none)
    #expect(!m.isPending)
    #expect(m.timerFired(now: ms(100)) == .none)
    #expect(m.call("c", now: ms(100)) == .invokeAndSchedule("c", at: ms(200)))
  }

  @Test func aTimerLateByMoreThanAWindowRestartsTheCadenceFromNow() {
    var m = machine()
    _ = m.call("a", now: ms(0))
    _ = m.call("b", now: ms(50))
    #expect(m.timerFired(now: ms(250)) == .invokeAndSchedule("b", at: ms(350)))
  }

  @Test func aSlightlyLateTimerKeepsTheCadence() {
    var m = machine()
    _ = m.call("a", now: ms(0))
    _ = m.call("b", now: ms(50))
    #expect(m.timerFired(now: ms(103)) == .invokeAndSchedule("b", at: ms(200)))
  }

  @Test func flushTakesThePendingValueAndKeepsTheWindow() {
    var m = machine()
    _ = m.call("a", now: ms(0))
    _ = m.call("b", now: ms(10))
    #expect(m.flush(now: ms(20)) == "b")
    #expect(m.flush(now: ms(21)) == nil)
    #expect(m.call("c", now: ms(30)) == .none)
    #expect(m.timerFired(now: ms(100)) == .invokeAndSchedule("c", at: ms(200)))
  }

  @Test func cancelClosesTheWindow() {
    var m = machine()
    _ = m.call("a", now: ms(0))
    _ = m.call("b", now: ms(10))
    #expect(m.cancel() == true)
    #expect(!m.isPending)
    #expect(m.call("c", now: ms(20)) == .invokeAndSchedule("c", at: ms(120)))
  }
}

/// The coalesce machine driven directly.
@Suite struct CoalesceStateMachineTests {
  @Test func signalsMergeIntoOneRunPerWindow() {
    var m = CoalesceStateMachine<Int>(window: .zero, merge: .sum)
    #expect(m.call(1, now: ms(0)) == .schedule(at: ms(0)))
    #expect(m.call(2, now: ms(0)) == .none)
    #expect(m.timerFired(now: ms(0)) == .invoke(3))
    #expect(m.call(4, now: ms(1)) == .schedule(at: ms(1)))
  }
}
