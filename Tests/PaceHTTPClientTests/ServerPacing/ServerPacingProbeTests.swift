import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// No single answer holds a key beyond `probeAfter`: a far reset, an absurd `Retry-After` or a
/// window no wait reaches is checked by one probe, whose answer replaces what held the key; and
/// what the limiter believes can be read and forgotten.
@Suite(.timeLimit(.minutes(1))) struct ServerPacingProbeTests {
  typealias Machine = ServerPacingMachine
  typealias Action = ServerPacingMachine.Action

  func machine(maximumWait: Duration = .seconds(60)) -> Machine {
    Machine(localModel: .slidingWindow, maximumWait: maximumWait, probeAfter: .seconds(300))
  }

  static let holds: [ServerQuota] = [
    // One far reset on a 200: `t=999999999999`, clamped to a day.
    ServerQuota(quota: 10, window: .seconds(1), remaining: 0, resetsIn: .seconds(999_999_999_999)),
    // One 429 with an absurd `Retry-After`.
    ServerQuota(retryAfter: .seconds(999_999_999_999)),
    // A window no wait reaches.
    ServerQuota(quota: 1, window: .seconds(Int64.max), remaining: 0),
  ]

  @Test(arguments: holds)
  func oneAnswerHoldsTheKeyNoLongerThanProbeAfterAndTheProbesAnswerFreesIt(_ hold: ServerQuota) {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == Action(granted: [1]))
    #expect(machine.record(hold, now: ms(100)) == Action())
    #expect(machine.probeAt == ms(300_100))
    // Before the probe is within its maximum wait, a request is refused at once, with the wait
    // until the probe.
    #expect(
      machine.enqueue(id: 2, now: ms(10_000)) == Action(refused: [.init(id: 2, required: .milliseconds(290_100))]))
    // One that can wait for the probe waits, and is sent as the probe.
    #expect(machine.enqueue(id: 3, now: ms(250_000)) == Action(wakeAt: ms(300_100)))
    #expect(machine.timerFired(now: ms(300_100)) == Action(granted: [3]))
    #expect(machine.probing)
    // While the probe is out, the others wait for its answer.
    #expect(machine.enqueue(id: 4, now: ms(300_200)) == Action(wakeAt: ms(360_200)))
    // The server answers sanely now: the hold is gone.
    let sane = ServerQuota(quota: 10, window: .seconds(1), remaining: 9, resetsIn: .seconds(1))
    #expect(machine.record(sane, now: ms(300_300)) == Action(granted: [4]))
    #expect(!machine.probing)
    #expect(machine.probeAt == nil)
    #expect(machine.blockedUntil < ms(300_300))
  }

  /// A probe held again schedules the next one `probeAfter` after its answer; a probe that fails
  /// (no response) leaves the key held and the next probe due as before.
  @Test func aProbeHeldAgainSchedulesTheNext() {
    var machine = machine(maximumWait: .seconds(600))
    let absurd = ServerQuota(retryAfter: .seconds(86_400))
    #expect(machine.enqueue(id: 1, now: ms(0)) == Action(granted: [1]))
    #expect(machine.record(absurd, now: ms(0)) == Action())
    #expect(machine.enqueue(id: 2, now: ms(1)) == Action(wakeAt: ms(300_000)))
    #expect(machine.timerFired(now: ms(300_000)) == Action(granted: [2]))
    #expect(machine.enqueue(id: 3, now: ms(300_001)) == Action(wakeAt: ms(900_001)))
    #expect(machine.record(absurd, now: ms(300_500)) == Action(wakeAt: ms(600_500)))
    #expect(machine.timerFired(now: ms(600_500)) == Action(granted: [3]))
    #expect(machine.enqueue(id: 4, now: ms(600_600)) == Action(wakeAt: ms(1_200_600)))
    #expect(machine.recordFailure(now: ms(601_000)) == Action(wakeAt: ms(901_000)))
    #expect(machine.timerFired(now: ms(901_000)) == Action(granted: [4]))
  }

  /// A legitimate hold shorter than `probeAfter` is kept to the instant: no probe.
  @Test func aHoldShorterThanProbeAfterIsNotProbed() {
    var machine = machine(maximumWait: .seconds(600))
    #expect(machine.enqueue(id: 1, now: ms(0)) == Action(granted: [1]))
    #expect(machine.record(ServerQuota(retryAfter: .seconds(299)), now: ms(0)) == Action())
    #expect(machine.probeAt == nil)
    #expect(machine.enqueue(id: 2, now: ms(1)) == Action(wakeAt: ms(299_000)))
    #expect(machine.timerFired(now: ms(299_000)) == Action(granted: [2]))
  }

  /// What the machine believes reads back; forgetting it makes the key a probed one again, the
  /// requests in flight still counted.
  @Test func knowledgeReadsBackAndForgettingProbesAgain() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == Action(granted: [1]))
    let told = ServerQuota(quota: 10, window: .seconds(60), remaining: 0, resetsIn: .seconds(30))
    #expect(machine.record(told, now: ms(1000)) == Action())
    // The sliding model holds it: 60 s widened by the 1 s round trip.
    #expect(machine.enqueue(id: 2, now: ms(2000)) == Action(wakeAt: ms(62_000)))
    #expect(
      machine.knowledge(now: ms(2000))
        == ServerPacingKnowledge(
          hasAnswered: true, quota: 10, window: .seconds(60), remaining: 0, resetsIn: .seconds(29), blockedFor: nil,
          probeIn: nil, isProbing: false, inFlight: 0, waiting: 1))
    // Forgotten: request 2 probes at once; a third waits for its answer.
    #expect(machine.forget(now: ms(3000)) == Action(granted: [2]))
    #expect(machine.enqueue(id: 3, now: ms(3000)) == Action(wakeAt: ms(63_000)))
    #expect(machine.knowledge(now: ms(3000)).hasAnswered == false)
    #expect(machine.knowledge(now: ms(3000)).quota == nil)
    #expect(machine.knowledge(now: ms(3000)).inFlight == 1)
  }

  /// Through the limiter, on virtual time: an absurd `Retry-After` is probed after `probeAfter`,
  /// read back meanwhile, and `forget` frees a key at once.
  @Test func theLimiterProbesAndForgets() async throws {
    let scheduler = TestScheduler()
    let limiter = ServerPacedLimiter<String>(maximumWait: .seconds(600), probeAfter: .seconds(300), clock: scheduler)
    try await limiter.acquire("api")
    limiter.record(ServerQuota(retryAfter: .seconds(86_400)), for: "api")
    #expect(limiter.knowledge(for: "api").blockedFor == .seconds(86_400))
    #expect(limiter.knowledge(for: "api").probeIn == .seconds(300))
    let probe = Task { try await limiter.acquire("api") }
    await scheduler.waitForSuspendedCallers(1)
    scheduler.advance(by: .seconds(299))
    #expect(limiter.inFlightCount(for: "api") == 0)
    scheduler.advance(by: .seconds(1))
    try await probe.value
    #expect(limiter.knowledge(for: "api").isProbing)
    limiter.record(ServerQuota(retryAfter: .seconds(86_400)), for: "api")
    limiter.forget("api")
    #expect(
      limiter.knowledge(for: "api")
        == ServerPacingKnowledge(
          hasAnswered: false, quota: nil, window: nil, remaining: nil, resetsIn: nil, blockedFor: nil, probeIn: nil,
          isProbing: false, inFlight: 0, waiting: 0))
    try await limiter.acquire("api")
    #expect(limiter.inFlightCount(for: "api") == 1)
    #expect(limiter.knowledge(for: "never used").hasAnswered == false)
  }
}
