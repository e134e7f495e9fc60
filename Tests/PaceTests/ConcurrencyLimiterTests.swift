import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `ConcurrencyLimiter` and `KeyedConcurrencyLimiter` on virtual time: scopes, waiting, maximum
/// waits at exact instants, cancellation, permits, the limit changed at run time, forgetting keys.
@Suite(.timeLimit(.minutes(2))) struct ConcurrencyLimiterTests {
  let scheduler = TestScheduler()

  struct Failed: Error {}

  @Test func withPermitGivesThePlaceBackOnReturnThrowAndEarlyReturn() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 2, clock: scheduler)
    let seen = try await limiter.withPermit { limiter.inFlightCount }
    #expect(seen == 1)
    #expect(limiter.inFlightCount == 0)
    await #expect(throws: Failed.self) { try await limiter.withPermit { throw Failed() } }
    #expect(limiter.inFlightCount == 0)
    func early(_ stop: Bool) async throws -> Int {
      try await limiter.withPermit {
        if stop { return 1 }
        return 2
      }
    }
    #expect(try await early(true) == 1)
    #expect(limiter.inFlightCount == 0)
  }

  @Test func tryWithPermitRunsOnlyWhenThereIsRoom() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    #expect(await limiter.tryWithPermit { 1 } == nil)
    #expect(limiter.waitingCount == 0)
    held.release()
    #expect(await limiter.tryWithPermit { 2 } == 2)
    #expect(limiter.inFlightCount == 0)
  }

  @MainActor @Test func waitingCallsAreAdmittedInArrivalOrderAsPlacesFree() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    let order = LockedBox<[Int]>([])
    var tasks: [Task<Void, any Error>] = []
    for call in 1...3 {
      tasks.append(Task { @MainActor in try await limiter.withPermit { order.withLock { $0.append(call) } } })
      await scheduler.waitForSuspendedCallers(call)
    }
    #expect(limiter.waitingCount == 3)
    held.release()
    for task in tasks { try await task.value }
    #expect(order.withLock { $0 } == [1, 2, 3])
    #expect(limiter.inFlightCount == 0)
    #expect(scheduler.count(of: .suspendedCallers) == 0)
  }

  @Test func aWaitingCallIsRefusedExactlyAtItsMaximumWait() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, maximumWait: .milliseconds(500), clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    scheduler.advance(to: ms(100))
    let call = Task { try await limiter.withPermit { 1 } }
    await scheduler.waitForSuspendedCallers(1)
    #expect(scheduler.pendingDeadlines == [ms(600)])
    scheduler.advance(to: PaceInstant(nanoseconds: 599_999_999))
    #expect(limiter.waitingCount == 1)
    scheduler.advance(to: ms(600))
    #expect(limiter.waitingCount == 0)
    await #expect(throws: ConcurrencyLimiterError.maximumWaitReached(waited: .milliseconds(500))) {
      try await call.value
    }
    held.release()
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func aCallAdmittedBeforeItsMaximumWaitDisarmsTheTimer() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, maximumWait: .milliseconds(500), clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    let call = Task { try await limiter.withPermit { 7 } }
    await scheduler.waitForSuspendedCallers(1)
    scheduler.advance(to: ms(499))
    held.release()
    #expect(try await call.value == 7)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func aFullQueueRefusesTheLowestClassFirst() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, maximumQueued: 1, clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    let sheddable = Task { try await limiter.withPermit(priority: .sheddable) { "sheddable" } }
    await scheduler.waitForSuspendedCallers(1)
    scheduler.advance(to: ms(100))
    // A default call comes: the sheddable one, which would be admitted last, makes room.
    let standard = Task { try await limiter.withPermit { "default" } }
    await #expect(throws: ConcurrencyLimiterError.queueFull(maximumQueued: 1, waited: .milliseconds(100))) {
      try await sheddable.value
    }
    // Another sheddable one is refused as it comes.
    await #expect(throws: ConcurrencyLimiterError.queueFull(maximumQueued: 1, waited: .zero)) {
      try await limiter.withPermit(priority: .sheddable) { "late" }
    }
    held.release()
    #expect(try await standard.value == "default")
  }

  @Test func aCancelledWaitingCallLeavesTheQueueAtOnce() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, maximumWait: .seconds(1), clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    let ran = Counter()
    let call = Task { try await limiter.withPermit { ran.increment() } }
    await scheduler.waitForSuspendedCallers(1)
    call.cancel()
    await #expect(throws: CancellationError.self) { try await call.value }
    #expect(limiter.waitingCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
    held.release()
    #expect(ran.count == 0)
    #expect(limiter.inFlightCount == 0)
  }

  @Test func aCancelledTaskIsNotAdmittedEvenWithRoom() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    let ran = Counter()
    let call = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await limiter.withPermit { ran.increment() }
    }
    await #expect(throws: CancellationError.self) { try await call.value }
    #expect(ran.count == 0)
    #expect(limiter.inFlightCount == 0)
  }

  @MainActor @Test func aPlaceGrantedAsTheTaskIsCancelledGoesToTheNextCall() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    let ran = LockedBox<[String]>([])
    let first = Task { @MainActor in try await limiter.withPermit { ran.withLock { $0.append("first") } } }
    await scheduler.waitForSuspendedCallers(1)
    let second = Task { @MainActor in try await limiter.withPermit { ran.withLock { $0.append("second") } } }
    await scheduler.waitForSuspendedCallers(2)
    // Both on the main actor, which this test holds: the first is admitted, then cancelled,
    // before it can run.
    held.release()
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    try await second.value
    #expect(ran.withLock { $0 } == ["second"])
    #expect(limiter.inFlightCount == 0)
  }

  @Test func raisingTheLimitAdmitsWaitingCallsAtOnce() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    let held = try #require(limiter.tryAcquire())
    // Each call queues before the next starts: tasks started together may reach the queue in any
    // order, and the awaits below name which calls are admitted.
    var calls: [Task<ConcurrencyPermit, any Error>] = []
    for index in 0..<3 {
      calls.append(Task { try await limiter.acquire() })
      await scheduler.waitForSuspendedCallers(index + 1)
    }
    limiter.maximumInFlight = 3
    #expect(limiter.inFlightCount == 3)
    #expect(limiter.waitingCount == 1)
    var permits = [held]
    for call in calls[..<2] { permits.append(try await call.value) }
    // Lowered: the calls in flight finish, and the waiting one is admitted only below 2.
    limiter.maximumInFlight = 2
    permits.removeFirst().release()
    #expect(limiter.waitingCount == 1)
    permits.removeFirst().release()
    permits.append(try await calls[2].value)
    #expect(limiter.inFlightCount == 2)
    for permit in permits { permit.release() }
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.maximumInFlight == 2)
  }

  @Test func releasingAPermitTwiceIsHarmless() throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 2, clock: scheduler)
    let permit = try #require(limiter.tryAcquire(priority: .critical))
    #expect(permit.priority == .critical)
    permit.release()
    let other = try #require(limiter.tryAcquire())
    permit.release()
    #expect(limiter.inFlightCount == 1)
    other.release()
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.forgottenPermitCount == 0)
  }

  @Test func aForgottenPermitIsReleasedByItsDeinitAndCounted() {
    let limiter = ConcurrencyLimiter(maximumInFlight: 1, clock: scheduler)
    func forget() { _ = limiter.tryAcquire() }
    forget()
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.forgottenPermitCount == 1)
    let released = limiter.tryAcquire()
    released?.release()
    #expect(limiter.forgottenPermitCount == 1)
  }

  @Test func sharesLeaveRoomForTheCriticalClass() throws {
    let limiter = ConcurrencyLimiter(
      maximumInFlight: 4, shares: PriorityShares(defaultPercent: 75, sheddablePercent: 50), clock: scheduler)
    let sheddable = [limiter.tryAcquire(priority: .sheddable), limiter.tryAcquire(priority: .sheddable)]
    #expect(limiter.tryAcquire(priority: .sheddable) == nil)
    let standard = limiter.tryAcquire()
    #expect(limiter.tryAcquire() == nil)
    let critical = limiter.tryAcquire(priority: .critical)
    #expect(limiter.tryAcquire(priority: .critical) == nil)
    for permit in sheddable + [standard, critical] { try #require(permit).release() }
    #expect(limiter.inFlightCount == 0)
  }

  @Test func errorsSayTheBoundAndHowLongTheCallWaited() {
    #expect(
      "\(ConcurrencyLimiterError.queueFull(maximumQueued: 100, waited: .milliseconds(250)))"
        == "refused: the queue was full (maximumQueued 100) after a wait of 0.25 seconds")
    #expect(
      "\(ConcurrencyLimiterError.maximumWaitReached(waited: .seconds(2)))"
        == "refused: not admitted within the maximum wait (waited 2.0 seconds)")
    #expect("\(AdmissionPriority.default)" == "default")
    #expect(AdmissionPriority.allCases.sorted() == [.sheddable, .default, .critical])
  }

  // MARK: Keyed

  @Test func eachKeyHasItsOwnLimit() async throws {
    let limiter = KeyedConcurrencyLimiter<String>(maximumInFlight: 1, clock: scheduler)
    let a = try #require(limiter.tryAcquire("a"))
    #expect(limiter.tryAcquire("a") == nil)
    let b = try #require(limiter.tryAcquire("b"))
    let waiting = Task { try await limiter.withPermit("a") { limiter.inFlightCount(for: "a") } }
    await scheduler.waitForSuspendedCallers(1)
    #expect(limiter.waitingCount(for: "a") == 1)
    #expect(limiter.waitingCount(for: "b") == 0)
    #expect(limiter.inFlightCount == 2)
    b.release()
    #expect(limiter.waitingCount == 1)
    a.release()
    #expect(try await waiting.value == 1)
    #expect(limiter.keyCount == 0)
  }

  @Test func idleKeysAreForgotten() async throws {
    let limiter = KeyedConcurrencyLimiter<Int>(maximumInFlight: 2, maximumWait: .seconds(1), clock: scheduler)
    for key in 0..<10_000 { _ = try await limiter.withPermit(key) { key } }
    #expect(limiter.keyCount == 0)
    let held = (0..<100).compactMap { limiter.tryAcquire($0) }
    #expect(limiter.keyCount == 100)
    for permit in held { permit.release() }
    #expect(limiter.keyCount == 0)
  }

  @Test func theTableGivesBackItsStorageWhenKeysGo() throws {
    let limiter = KeyedConcurrencyLimiter<Int>(maximumInFlight: 1, clock: scheduler)
    let held = (0..<100_000).compactMap { limiter.tryAcquire($0) }
    #expect(limiter.keyCount == 100_000)
    #expect(limiter.tableCapacity >= 100_000)
    for permit in held { permit.release() }
    #expect(limiter.keyCount == 0)
    #expect(limiter.tableCapacity <= 64)
  }

  @Test func aKeyMadeAgainKeepsItsOwnDeadline() async throws {
    // A key forgotten and made again must not take the timer of its earlier self.
    let limiter = KeyedConcurrencyLimiter<String>(maximumInFlight: 1, maximumWait: .seconds(1), clock: scheduler)
    let first = try #require(limiter.tryAcquire("a"))
    let waiting = Task { try await limiter.withPermit("a") { 1 } }
    await scheduler.waitForSuspendedCallers(1)
    waiting.cancel()
    _ = try? await waiting.value
    first.release()
    #expect(limiter.keyCount == 0)
    scheduler.advance(to: ms(500))
    let second = try #require(limiter.tryAcquire("a"))
    let late = Task { try await limiter.withPermit("a") { 2 } }
    await scheduler.waitForSuspendedCallers(1)
    scheduler.advance(to: ms(1000))
    #expect(limiter.waitingCount(for: "a") == 1)
    scheduler.advance(to: ms(1500))
    await #expect(throws: ConcurrencyLimiterError.maximumWaitReached(waited: .seconds(1))) { try await late.value }
    second.release()
  }

  @Test func theKeyedLimitChangesForEveryKey() async throws {
    let limiter = KeyedConcurrencyLimiter<String>(maximumInFlight: 1, clock: scheduler)
    let held = ["a", "b"].compactMap { limiter.tryAcquire($0) }
    let calls = ["a", "b"].map { key in Task { try await limiter.acquire(key) } }
    await scheduler.waitForSuspendedCallers(2)
    limiter.maximumInFlight = 2
    var permits = held
    for call in calls { permits.append(try await call.value) }
    #expect(limiter.inFlightCount == 4)
    #expect(limiter.tryAcquire("c").map { $0.release() } != nil)  // a new key gets the new limit too
    for permit in permits { permit.release() }
    #expect(limiter.keyCount == 0)
  }
}

/// Bad settings stop the process with a message that names the type, the parameter, the rule and
/// the value.
@Suite struct ConcurrencyLimiterPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aZeroLimitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = ConcurrencyLimiter(maximumInFlight: 0, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("ConcurrencyLimiter: maximumInFlight must be positive (got 0)"))
  }

  @Test func aLimitSetToZeroNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      KeyedConcurrencyLimiter<String>(maximumInFlight: 1, clock: TestScheduler()).maximumInFlight = 0
    }
    #expect(Self.message(result).contains("KeyedConcurrencyLimiter: maximumInFlight must be positive (got 0)"))
  }

  @Test func aNegativeQueueNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedConcurrencyLimiter<String>(maximumInFlight: 1, maximumQueued: -1, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedConcurrencyLimiter: maximumQueued must not be negative (got -1)"))
  }

  @Test func aZeroMaximumWaitNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = ConcurrencyLimiter(maximumInFlight: 1, maximumWait: .zero, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("ConcurrencyLimiter: maximumWait must be positive (got 0.0 seconds)"))
  }

  @Test func sharesOutOfOrderNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = PriorityShares(defaultPercent: 50, sheddablePercent: 80)
    }
    #expect(
      Self.message(result).contains("PriorityShares: sheddablePercent must be 0 through defaultPercent, 50 (got 80)"))
  }
}
