import PaceTestSupport
import Testing

@testable import Pace

/// The concurrency limiter's machine driven directly: exact admissions, refusals and deadlines.
@Suite struct ConcurrencyLimiterStateMachineTests {
  typealias Machine = ConcurrencyLimiterStateMachine
  typealias Action = Machine.Action
  typealias Refused = Machine.Refused

  func machine(
    _ maximumInFlight: Int, queued: Int = .max, order: ConcurrencyQueueOrder = .oldestFirst,
    wait: Duration? = nil, shares: PriorityShares = .unreserved
  ) -> Machine {
    Machine(
      .init(
        maximumInFlight: maximumInFlight, maximumQueued: queued, order: order, maximumWait: wait, shares: shares))
  }

  func full(_ maximumQueued: Int, waited: Duration = .zero) -> Machine.Refusal {
    .error(.queueFull(maximumQueued: maximumQueued, waited: waited))
  }

  @Test func admitsUpToTheLimitThenQueuesAndAdmitsOnRelease() {
    var m = machine(2)
    #expect(m.enqueue(id: 1, priority: .default, now: ms(0)) == Action(admitted: [1]))
    #expect(m.tryAcquire(priority: .default) == true)
    #expect(m.tryAcquire(priority: .critical) == false)
    #expect(m.enqueue(id: 3, priority: .default, now: ms(0)) == Action())
    #expect(m.enqueue(id: 4, priority: .default, now: ms(1)) == Action())
    #expect(m.inFlight == 2)
    #expect(m.waitingCount == 2)
    #expect(m.release(now: ms(5)) == Action(admitted: [3]))
    #expect(m.release(now: ms(6)) == Action(admitted: [4]))
    #expect(m.release(now: ms(7)) == Action())
    #expect(m.release(now: ms(7)) == Action())
    #expect(m.isIdle)
  }

  @Test func newestFirstAdmitsTheLatestWaiter() {
    var m = machine(1, order: .newestFirst)
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    for id in 2...4 { _ = m.enqueue(id: UInt64(id), priority: .default, now: ms(Int64(id))) }
    #expect(m.release(now: ms(10)) == Action(admitted: [4]))
    #expect(m.release(now: ms(11)) == Action(admitted: [3]))
    _ = m.enqueue(id: 5, priority: .default, now: ms(12))
    #expect(m.release(now: ms(13)) == Action(admitted: [5]))
    #expect(m.release(now: ms(14)) == Action(admitted: [2]))
  }

  @Test func aHigherClassIsAdmittedBeforeLowerOnesWhateverTheOrder() {
    for order in [ConcurrencyQueueOrder.oldestFirst, .newestFirst] {
      var m = machine(1, order: order)
      _ = m.tryAcquire(priority: .default)
      _ = m.enqueue(id: 1, priority: .sheddable, now: ms(0))
      _ = m.enqueue(id: 2, priority: .default, now: ms(1))
      _ = m.enqueue(id: 3, priority: .critical, now: ms(2))
      _ = m.enqueue(id: 4, priority: .default, now: ms(3))
      let admitted = (10...13).flatMap { m.release(now: ms(Int64($0))).admitted }
      #expect(admitted == (order == .oldestFirst ? [3, 2, 4, 1] : [3, 4, 2, 1]), "\(order)")
    }
  }

  @Test func sharesReserveCapacityForTheHigherClasses() {
    // 10 places: sheddable while fewer than 5 are in flight, default fewer than 8, critical 10.
    var m = machine(10, shares: PriorityShares(defaultPercent: 80, sheddablePercent: 50))
    #expect(m.ceiling(.sheddable) == 5)
    #expect(m.ceiling(.default) == 8)
    #expect(m.ceiling(.critical) == 10)
    for _ in 0..<5 { #expect(m.tryAcquire(priority: .sheddable) == true) }
    #expect(m.tryAcquire(priority: .sheddable) == false)
    for _ in 0..<3 { #expect(m.tryAcquire(priority: .default) == true) }
    #expect(m.tryAcquire(priority: .default) == false)
    #expect(m.tryAcquire(priority: .critical) == true)
    #expect(m.tryAcquire(priority: .critical) == true)
    #expect(m.tryAcquire(priority: .critical) == false)
    // Waiting: a sheddable call waits until fewer than 5 are in flight, though a place is free at 9.
    _ = m.enqueue(id: 1, priority: .sheddable, now: ms(0))
    _ = m.enqueue(id: 2, priority: .default, now: ms(0))
    #expect(m.release(now: ms(1)) == Action())  // 9 in flight: not below 8
    #expect(m.release(now: ms(2)) == Action())  // 8
    #expect(m.release(now: ms(3)) == Action(admitted: [2]))  // 7 < 8: default, back to 8
    for t in 4...6 { #expect(m.release(now: ms(Int64(t))) == Action()) }  // 7, 6, 5
    #expect(m.release(now: ms(7)) == Action(admitted: [1]))  // 4 < 5
  }

  @Test func aSharePercentRoundsDownAndMayLeaveAClassNoRoom() {
    let shares = PriorityShares(defaultPercent: 80, sheddablePercent: 50)
    #expect(shares.maximumInFlight(for: .sheddable, of: 1) == 0)
    #expect(shares.maximumInFlight(for: .default, of: 1) == 0)
    #expect(shares.maximumInFlight(for: .critical, of: 1) == 1)
    #expect(shares.maximumInFlight(for: .default, of: 9) == 7)
    #expect(shares.maximumInFlight(for: .sheddable, of: Int.max) == Int.max / 2)
    #expect(PriorityShares.unreserved.maximumInFlight(for: .sheddable, of: 3) == 3)
  }

  @Test func aFullQueueRefusesTheNewcomerOfItsClassInOldestFirstOrder() {
    var m = machine(1, queued: 2)
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    _ = m.enqueue(id: 2, priority: .default, now: ms(1))
    _ = m.enqueue(id: 3, priority: .default, now: ms(2))
    #expect(m.enqueue(id: 4, priority: .default, now: ms(3)) == Action(refused: [Refused(4, full(2))]))
    // A lower class is refused as well; a higher one takes the place of the last to be admitted.
    #expect(m.enqueue(id: 5, priority: .sheddable, now: ms(4)) == Action(refused: [Refused(5, full(2))]))
    #expect(
      m.enqueue(id: 6, priority: .critical, now: ms(5))
        == Action(refused: [Refused(3, full(2, waited: .milliseconds(3)))]))
    #expect(m.release(now: ms(6)) == Action(admitted: [6]))
    #expect(m.release(now: ms(7)) == Action(admitted: [2]))
  }

  @Test func aFullQueueInNewestFirstOrderPushesOutTheOldest() {
    var m = machine(1, queued: 2, order: .newestFirst)
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    _ = m.enqueue(id: 2, priority: .default, now: ms(1))
    _ = m.enqueue(id: 3, priority: .default, now: ms(2))
    #expect(
      m.enqueue(id: 4, priority: .default, now: ms(3))
        == Action(refused: [Refused(2, full(2, waited: .milliseconds(2)))]))
    // The lowest class goes first, before any default call.
    _ = m.release(now: ms(4))  // admits 4
    _ = m.enqueue(id: 5, priority: .sheddable, now: ms(5))
    #expect(
      m.enqueue(id: 6, priority: .default, now: ms(6))
        == Action(refused: [Refused(5, full(2, waited: .milliseconds(1)))]))
    #expect(m.waitingCount == 2)
  }

  @Test func aZeroQueueRefusesEveryCallThatCannotBeAdmittedAtOnce() {
    var m = machine(1, queued: 0)
    #expect(m.enqueue(id: 1, priority: .sheddable, now: ms(0)) == Action(admitted: [1]))
    #expect(m.enqueue(id: 2, priority: .critical, now: ms(0)) == Action(refused: [Refused(2, full(0))]))
  }

  @Test func aWaiterIsRefusedExactlyAtItsMaximumWait() {
    var m = machine(1, wait: .milliseconds(500))
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    #expect(m.enqueue(id: 2, priority: .default, now: ms(100)) == Action(wakeAt: ms(600)))
    #expect(m.enqueue(id: 3, priority: .critical, now: ms(300)) == Action(wakeAt: ms(600)))
    #expect(m.timerFired(now: PaceInstant(nanoseconds: 599_999_999)) == Action(wakeAt: ms(600)))
    #expect(
      m.timerFired(now: ms(600))
        == Action(refused: [Refused(2, .error(.maximumWaitReached(waited: .milliseconds(500))))], wakeAt: ms(800)))
    // A release at the instant of the deadline refuses before it admits: the place stays free.
    #expect(
      m.release(now: ms(800))
        == Action(refused: [Refused(3, .error(.maximumWaitReached(waited: .milliseconds(500))))]))
    #expect(m.inFlight == 0)
    #expect(m.isIdle)
  }

  @Test func aLateTimerSaysHowLongTheCallWaited() {
    var m = machine(1, wait: .seconds(1))
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    _ = m.enqueue(id: 2, priority: .default, now: ms(0))
    #expect(
      m.timerFired(now: ms(1_250))
        == Action(refused: [Refused(2, .error(.maximumWaitReached(waited: .milliseconds(1_250))))]))
  }

  @Test func lowerClassesReachTheirMaximumWaitFirstAtOneInstant() {
    var m = machine(1, wait: .seconds(1))
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    _ = m.enqueue(id: 2, priority: .critical, now: ms(0))
    _ = m.enqueue(id: 3, priority: .sheddable, now: ms(0))
    let waited = Machine.Refusal.error(.maximumWaitReached(waited: .seconds(1)))
    #expect(m.timerFired(now: ms(1000)) == Action(refused: [Refused(3, waited), Refused(2, waited)]))
  }

  @Test func cancellationLeavesTheQueueAtOnceAndAnAdmittedCallIsNotCancelled() {
    var m = machine(1, wait: .seconds(1))
    _ = m.enqueue(id: 1, priority: .default, now: ms(0))
    _ = m.enqueue(id: 2, priority: .default, now: ms(10))
    _ = m.enqueue(id: 3, priority: .default, now: ms(20))
    #expect(m.cancel(id: 2, now: ms(30)) == Action(refused: [Refused(2, .cancelled)], wakeAt: ms(1020)))
    #expect(m.waitingCount == 1)
    #expect(m.cancel(id: 2, now: ms(31)) == Action(wakeAt: ms(1020)))  // gone already
    #expect(m.cancel(id: 1, now: ms(32)) == Action(wakeAt: ms(1020)))  // in flight: nothing to cancel
    #expect(m.release(now: ms(40)) == Action(admitted: [3]))
  }

  @Test func raisingTheLimitAdmitsAtOnceAndLoweringItAdmitsNoneUntilBelow() {
    var m = machine(2)
    for id in 1...5 { _ = m.enqueue(id: UInt64(id), priority: .default, now: ms(0)) }
    #expect(m.setMaximumInFlight(4, now: ms(1)) == Action(admitted: [3, 4]))
    #expect(m.setMaximumInFlight(2, now: ms(2)) == Action())
    #expect(m.inFlight == 4)
    #expect(m.release(now: ms(3)) == Action())  // 3 in flight
    #expect(m.release(now: ms(4)) == Action())  // 2
    #expect(m.release(now: ms(5)) == Action(admitted: [5]))  // 1 < 2
  }

  @Test func cancelledSlotsAreCompactedAway() {
    var m = machine(1)
    _ = m.tryAcquire(priority: .default)
    for id in 1...1000 { _ = m.enqueue(id: UInt64(id), priority: .default, now: ms(0)) }
    for id in 1...999 { _ = m.cancel(id: UInt64(id), now: ms(1)) }
    #expect(m.waitingCount == 1)
    #expect(m.release(now: ms(2)) == Action(admitted: [1000]))
    #expect(m.waitingCount == 0)
  }
}
