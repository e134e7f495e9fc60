import Pace
import PaceTestSupport
import PaceUIOnStandIns
import Testing

/// The button-bashing guard on virtual time.
@Suite @MainActor struct ControlGateTests {
  @Test func closeDisablesTheTargetsForExactlyTheDuration() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = FakeControl()
    let sibling = FakeControl()
    gate.close([button, sibling], for: .milliseconds(500))
    #expect(!button.isEnabled)
    #expect(!sibling.isEnabled)
    #expect(gate.isClosing(button))
    #expect(gate.pendingClosures == 1)
    scheduler.advance(to: ms(499))
    #expect(!button.isEnabled)
    scheduler.advance(to: ms(500))
    #expect(button.isEnabled)
    #expect(sibling.isEnabled)
    #expect(!gate.isClosing(button))
    #expect(gate.pendingClosures == 0)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func aTargetThatWasAlreadyDisabledStaysDisabled() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = FakeControl()
    let disabledElsewhere = FakeControl(isEnabled: false)
    gate.close([button, disabledElsewhere], for: .milliseconds(100))
    scheduler.advance(by: .milliseconds(100))
    #expect(button.isEnabled)
    #expect(!disabledElsewhere.isEnabled)
  }

  @Test func overlappingClosuresKeepASharedTargetDisabledUntilTheLastEnds() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let a = FakeControl()
    let b = FakeControl()
    let c = FakeControl()
    gate.close([a, b], for: .milliseconds(500))
    scheduler.advance(to: ms(300))
    gate.close([b, c], for: .milliseconds(500))

    scheduler.advance(to: ms(500))
    #expect(a.isEnabled)
    #expect(!b.isEnabled, "the second closure still covers b")
    #expect(!c.isEnabled)

    scheduler.advance(to: ms(800))
    #expect(b.isEnabled)
    #expect(c.isEnabled)
  }

  @Test func duplicatesInOneClosureCountOnce() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = FakeControl()
    gate.close([button, button], for: .milliseconds(100))
    scheduler.advance(by: .milliseconds(100))
    #expect(button.isEnabled)
  }

  @Test func openAllRestoresEverythingNowAndCancelsTheTimers() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let a = FakeControl()
    let b = FakeControl()
    gate.close([a], for: .milliseconds(500))
    gate.close([a, b], for: .milliseconds(900))
    gate.openAll()
    #expect(a.isEnabled)
    #expect(b.isEnabled)
    #expect(gate.pendingClosures == 0)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func aReleasedTargetIsForgotten() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let kept = FakeControl()
    weak var weakReleased: FakeControl?
    do {
      let released = FakeControl()
      weakReleased = released
      gate.close([kept, released], for: .milliseconds(100))
    }
    #expect(weakReleased == nil, "the gate holds targets weakly")
    scheduler.advance(by: .milliseconds(100))
    #expect(kept.isEnabled)
  }

  @Test func aNewObjectAtAReleasedTargetsAddressIsNotConfusedWithIt() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    // Release targets while closed and make new ones, which may reuse the addresses.
    for _ in 0..<50 {
      do { gate.close([FakeControl()], for: .milliseconds(500)) }
    }
    let fresh = (0..<50).map { _ in FakeControl() }
    gate.close(fresh, for: .milliseconds(100))
    scheduler.advance(to: ms(100))
    #expect(fresh.allSatisfy { $0.isEnabled }, "old closures must not hold the new objects")
    scheduler.advance(to: ms(500))
    #expect(fresh.allSatisfy { $0.isEnabled })
  }

  @Test func theGateLivesUntilItsClosuresEnd() {
    let scheduler = TestScheduler()
    let button = FakeControl()
    do {
      let gate = ControlGate(scheduler: scheduler)
      gate.close([button], for: .milliseconds(200))
    }
    scheduler.advance(by: .milliseconds(200))
    #expect(button.isEnabled)
  }

  @Test func aNegativeDurationNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      await MainActor.run {
        ControlGate(scheduler: TestScheduler()).close([], for: .seconds(-1))
      }
    }
    let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(message.contains("ControlGate.close: duration must not be negative"))
  }

  /// The deprecated `InteractionGate.shared` is the same gate: a control closed through either
  /// name is closed for both, and opened by either.
  @Test func theDeprecatedSharedGateIsTheSameGate() {
    let control = FakeControl()
    let old: any DeprecatedSharedGate = OldSharedGate()
    ControlGate.shared.close([control], for: .seconds(3600))
    #expect(old.isClosing(control))
    old.openAll()
    #expect(!ControlGate.shared.isClosing(control))
    #expect(control.isEnabled)
  }
}

/// Reads the deprecated `InteractionGate.shared` without a deprecation warning: the witnesses are
/// deprecated, the requirements are not.
@MainActor protocol DeprecatedSharedGate {
  func isClosing(_ target: any Enablable) -> Bool
  func openAll()
}

struct OldSharedGate: DeprecatedSharedGate {
  @available(*, deprecated)
  func isClosing(_ target: any Enablable) -> Bool { InteractionGate.shared.isClosing(target) }
  @available(*, deprecated)
  func openAll() { InteractionGate.shared.openAll() }
}
