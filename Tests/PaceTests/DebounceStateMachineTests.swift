import PaceTestSupport
import Testing

@testable import Pace

/// The debounce machine driven directly: `now` in, actions out.
@Suite struct DebounceStateMachineTests {
  typealias Machine = DebounceStateMachine<String>

  func machine(_ edges: Edges = .trailing, maximumWait: Duration? = nil, merge: Merge<String> = .latest) -> Machine {
    Machine(interval: .milliseconds(100), edges: edges, maximumWait: maximumWait, merge: merge)
  }

  @Test func trailingBurstArmsOnceAndInvokesLatest() {
    var m = machine()
    #expect(m.call("a", now: ms(0)) == .schedule(at: ms(100)))
    #expect(m.call("b", now: ms(30)) == .none)
    #expect(m.call("c", now: ms(60)) == .none)
    #expect(m.isPending)
    // The timer finds a later call and moves on to its quiet deadline.
    #expect(m.timerFired(now: ms(100)) == .schedule(at: ms(160)))
    #expect(m.timerFired(now: ms(160)) == .invoke("c"))
    #expect(!m.isPending)
    #expect(m.armedDeadline == nil)
  }

  @Test func leadingInvokesAtOnceAndALoneCallInvokesOnce() {
    var m = machine(.both)
    #expect(m.call("a", now: ms(0)) == .invoke("a"))  // nothing left to invoke: no timer
    #expect(!m.isPending)
    #expect(!m.hasTimer)
  }

  @Test func bothEdgesWithMoreCallsInvokeTrailingWithTheLaterCallsOnly() {
    var m = machine(.both, merge: .custom { $0 + $1 })
    #expect(m.call("a", now: ms(0)) == .invoke("a"))
    #expect(m.call("b", now: ms(10)) == .schedule(at: ms(110)))  // the first value for the trailing edge
    #expect(m.call("c", now: ms(20)) == .none)
    #expect(m.timerFired(now: ms(110)) == .schedule(at: ms(120)))
    #expect(m.timerFired(now: ms(120)) == .invoke("bc"))
  }

  @Test func leadingOnlyDropsTheRestOfTheBurstAndLeadsAgainAfterQuiet() {
    var m = machine(.leading)
    #expect(m.call("a", now: ms(0)) == .invoke("a"))
    #expect(m.call("b", now: ms(50)) == .none)  // the burst is the last call's time, not a timer
    #expect(!m.isPending)
    #expect(!m.hasTimer)
    #expect(m.call("c", now: ms(149)) == .none)
    #expect(m.call("d", now: ms(249)) == .invoke("d"))
  }

  @Test func maxWaitInvokesWhileCallsContinue() {
    var m = machine(.trailing, maximumWait: .milliseconds(250))
    #expect(m.call("a", now: ms(0)) == .schedule(at: ms(100)))
    #expect(m.call("b", now: ms(90)) == .none)
    #expect(m.timerFired(now: ms(100)) == .schedule(at: ms(190)))
    #expect(m.call("c", now: ms(180)) == .none)
    // Quiet would be at 280, but maximumWait since the burst started (0) is at 250.
    #expect(m.timerFired(now: ms(190)) == .schedule(at: ms(250)))
    #expect(m.timerFired(now: ms(250)) == .invoke("c"))
    // The burst goes on without a leading edge; maximumWait now counts from 250.
    #expect(m.call("d", now: ms(260)) == .schedule(at: ms(360)))
    #expect(m.timerFired(now: ms(360)) == .invoke("d"))
  }

  @Test func maxWaitIsRaisedToTheInterval() {
    var m = machine(.trailing, maximumWait: .milliseconds(10))
    #expect(m.call("a", now: ms(0)) == .schedule(at: ms(100)))
    #expect(m.call("b", now: ms(50)) == .none)
    #expect(m.timerFired(now: ms(100)) == .invoke("b"))
  }

  @Test func aLateTimerPastMaxWaitInvokesInTheCall() {
    var m = machine(.trailing, maximumWait: .milliseconds(150))
    #expect(m.call("a", now: ms(0)) == .schedule(at: ms(100)))
    #expect(m.call("b", now: ms(90)) == .none)
    // The timer for 100 has not run yet (a busy queue); at 160 maximumWait has passed.
    #expect(m.call("c", now: ms(160)) == .invoke("c"))
    #expect(m.timerFired(now: ms(161)) == .none)  // nothing left to invoke: not re-armed
    #expect(m.call("d", now: ms(170)) == .schedule(at: ms(270)))
  }

  @Test func clockReadsOutOfOrderNeverMoveTimeBack() {
    var m = machine()
    #expect(m.call("a", now: ms(50)) == .schedule(at: ms(150)))
    #expect(m.call("b", now: ms(49)) == .none)
    #expect(m.timerFired(now: ms(150)) == .invoke("b"))
  }

  @Test func flushTakesThePendingValueAndKeepsTheBurst() {
    var m = machine()
    #expect(m.flush(now: ms(0)) == nil)
    #expect(m.call("a", now: ms(0)) == .schedule(at: ms(100)))
    #expect(m.flush(now: ms(10)) == "a")
    #expect(!m.hasTimer)  // the driver cancels it
    #expect(m.flush(now: ms(11)) == nil)
    #expect(m.call("b", now: ms(20)) == .schedule(at: ms(120)))
  }

  @Test func flushWithLeadingDoesNotLetTheNextCallLead() {
    var m = machine(.both)
    #expect(m.call("a", now: ms(0)) == .invoke("a"))
    #expect(m.call("b", now: ms(10)) == .schedule(at: ms(110)))
    #expect(m.flush(now: ms(20)) == "b")
    #expect(!m.hasTimer)
    #expect(m.call("c", now: ms(30)) == .schedule(at: ms(130)))  // trailing, not leading
    #expect(m.timerFired(now: ms(130)) == .invoke("c"))
  }

  @Test func cancelResetsSoTheNextCallLeads() {
    var m = machine(.both)
    #expect(m.cancel() == false)
    #expect(m.call("a", now: ms(0)) == .invoke("a"))
    #expect(m.call("b", now: ms(10)) == .schedule(at: ms(110)))
    #expect(m.cancel() == true)
    #expect(!m.isPending)
    #expect(m.call("c", now: ms(20)) == .invoke("c"))
  }

  @Test func zeroIntervalInvokesOnTheNextTurn() {
    var m = Machine(interval: .zero, edges: .trailing, maximumWait: nil, merge: .latest)
    #expect(m.call("a", now: ms(5)) == .schedule(at: ms(5)))
    #expect(m.call("b", now: ms(5)) == .none)
    #expect(m.timerFired(now: ms(5)) == .invoke("b"))
  }
}
