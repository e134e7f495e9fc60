import Testing

@testable import Pace

/// The arming rule every driver follows (``TimerSlot``), step by step, including the races it
/// exists for: a cancel, a newer timer or the firing itself arriving between reserving a timer
/// and installing its handle.
@Suite struct TimerSlotTests {
  final class Handle: PaceCancellable, @unchecked Sendable {
    // @unchecked Sendable: each test uses a handle from one thread only.
    var isCancelled = false
    func cancel() { isCancelled = true }
  }

  let t0 = PaceInstant(nanoseconds: 1_000)

  @Test func aReservedTimerIsInstalledAndFiresOnce() {
    var slot = TimerSlot()
    #expect(!slot.isArmed)
    let (ticket, superseded) = slot.reserve(at: t0)
    #expect(superseded == nil)
    #expect(slot.isArmed && slot.deadline == t0)
    let installed = slot.install(Handle(), for: ticket)
    #expect(installed)
    #expect(slot.hasHandle)
    let fired = slot.fire(ticket.generation)
    #expect(fired)
    #expect(!slot.isArmed && !slot.hasHandle)
    let firedAgain = slot.fire(ticket.generation)
    #expect(!firedAgain, "a second firing of the same timer is stale")
  }

  @Test func aNewerReservationMakesTheEarlierTimerStaleAndHandsItsHandleBack() {
    var slot = TimerSlot()
    let first = slot.reserve(at: t0).ticket
    let handle = Handle()
    let installed = slot.install(handle, for: first)
    #expect(installed)
    let (second, superseded) = slot.reserve(at: t0.advanced(by: .milliseconds(5)))
    #expect(superseded as? Handle === handle)
    let staleFired = slot.fire(first.generation)
    #expect(!staleFired)
    #expect(slot.isArmed)
    let currentFired = slot.fire(second.generation)
    #expect(currentFired)
  }

  @Test func aDisarmBetweenReservingAndInstallingRefusesTheHandle() {
    var slot = TimerSlot()
    let ticket = slot.reserve(at: t0).ticket
    let handedBack = slot.disarm()
    #expect(handedBack == nil)
    let installed = slot.install(Handle(), for: ticket)
    #expect(!installed, "the caller cancels it")
    #expect(!slot.isArmed && !slot.hasHandle)
  }

  @Test func aTimerThatFiresBeforeItsHandleIsInstalledLeavesNoHandle() {
    var slot = TimerSlot()
    let ticket = slot.reserve(at: t0).ticket
    let fired = slot.fire(ticket.generation)
    #expect(fired)
    let installed = slot.install(Handle(), for: ticket)
    #expect(!installed)
    #expect(!slot.hasHandle)
  }

  @Test func aNewerReservationBeforeTheOlderIsInstalledRefusesTheOlder() {
    var slot = TimerSlot()
    let first = slot.reserve(at: t0).ticket
    let second = slot.reserve(at: t0.advanced(by: .seconds(1))).ticket
    let olderInstalled = slot.install(Handle(), for: first)
    #expect(!olderInstalled)
    let newerInstalled = slot.install(Handle(), for: second)
    #expect(newerInstalled)
    #expect(slot.deadline == t0.advanced(by: .seconds(1)))
  }

  @Test func disarmReturnsTheInstalledHandle() {
    var slot = TimerSlot()
    let ticket = slot.reserve(at: t0).ticket
    let handle = Handle()
    let installed = slot.install(handle, for: ticket)
    #expect(installed)
    let handedBack = slot.disarm()
    #expect(handedBack as? Handle === handle)
    let fired = slot.fire(ticket.generation)
    #expect(!fired)
  }
}
