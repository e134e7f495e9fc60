import Pace
import Testing

@testable import PaceSwiftUI

/// The platform-independent logic of PaceSwiftUI, as the `PaceSwiftUI` product builds it.
@MainActor
@Suite("PaceSwiftUI logic on virtual time")
struct PacingLogicTests {
  let scheduler = TestScheduler()
  var time: Duration { PaceInstant.zero.duration(to: scheduler.now) }

  func advance(to milliseconds: Int) {
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(milliseconds)))
  }

  @Test func debouncingPacerRunsTheLatestActionWithTheLatestValue() {
    var received: [String] = []
    var times: [Duration] = []
    let pacer = ChangePacer<String>(
      .debounce(.milliseconds(300), edges: .trailing, maximumWait: nil), scheduler: scheduler)
    pacer.action = { _ in Issue.record("a superseded action ran") }
    pacer.send("s")
    advance(to: 100)
    pacer.send("sw")
    advance(to: 200)
    pacer.action = { [scheduler] value in
      received.append(value)
      times.append(PaceInstant.zero.duration(to: scheduler.now))
    }
    pacer.send("swi")
    #expect(pacer.isPending)
    advance(to: 1_000)
    #expect(received == ["swi"])
    #expect(times == [.milliseconds(500)])
    #expect(!pacer.isPending)
  }

  @Test func throttlingPacerKeepsACadence() {
    var received: [Int] = []
    var times: [Duration] = []
    let pacer = ChangePacer<Int>(.throttle(.milliseconds(100), edges: .both), scheduler: scheduler)
    pacer.action = { [scheduler] value in
      received.append(value)
      times.append(PaceInstant.zero.duration(to: scheduler.now))
    }
    for step in 0..<6 {
      advance(to: 40 * step)
      pacer.send(step)
    }
    advance(to: 1_000)
    // Calls at 0, 40, 80, 120, 160, 200: leading 0 at 0, then 2 at 100, 4 at 200, 5 at 300.
    #expect(received == [0, 2, 4, 5])
    #expect(times == [.zero, .milliseconds(100), .milliseconds(200), .milliseconds(300)])
  }

  @Test func flushRunsNowAndCancelDropsThePendingValue() {
    var received: [String] = []
    let pacer = ChangePacer<String>(
      .debounce(.milliseconds(300), edges: .trailing, maximumWait: nil), scheduler: scheduler)
    pacer.action = { received.append($0) }
    pacer.send("a")
    advance(to: 50)
    pacer.flush()
    #expect(received == ["a"])
    pacer.send("b")
    pacer.cancel()
    #expect(scheduler.pendingCount == 0)
    advance(to: 1_000)
    #expect(received == ["a"])
  }

  @Test func releasingThePacerWhilePendingLeavesNothingScheduled() {
    var pacer: ChangePacer<String>? = ChangePacer(
      .debounce(.milliseconds(300), edges: .trailing, maximumWait: nil), scheduler: scheduler
    ) { _ in Issue.record("ran after release") }
    pacer?.send("a")
    #expect(scheduler.pendingCount == 1)
    pacer = nil
    #expect(scheduler.pendingCount == 0)
    advance(to: 1_000)
  }

  @Test func controlDrivesItsTargetAndDoesNothingWithout() {
    let control = PacingControl()
    control.flush()
    control.cancel()
    #expect(!control.isPending)

    var received: [Int] = []
    let pacer = ChangePacer<Int>(
      .debounce(.milliseconds(300), edges: .trailing, maximumWait: nil), scheduler: scheduler)
    pacer.action = { received.append($0) }
    control.target = pacer
    pacer.send(1)
    #expect(control.isPending)
    control.flush()
    #expect(received == [1])
    pacer.send(2)
    control.cancel()
    advance(to: 1_000)
    #expect(received == [1])
  }

  @Test func taskRunsSupersedeThenStartNumberedRuns() {
    var runs = TaskRuns()
    #expect(runs.current == 0, "the first run is on appear")
    runs.supersede()
    #expect(runs.current == nil)
    runs.supersede()
    #expect(runs.current == nil)
    runs.start()
    #expect(runs.current == 1)
    runs.start()
    #expect(runs.current == 2, "a flush after a start is a new run")
  }
}
