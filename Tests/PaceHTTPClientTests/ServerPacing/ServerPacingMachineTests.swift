import Pace
import PaceTestSupport
import Testing

@testable import PaceHTTPClient

/// The server-paced limiter's machine driven directly: `now` and what the server said in, grants,
/// refusals and wake times out.
@Suite struct ServerPacingMachineTests {
  typealias Machine = ServerPacingMachine
  typealias Action = ServerPacingMachine.Action

  func machine(_ model: RateLimit.Algorithm = .slidingWindow, maximumWait: Duration = .seconds(60)) -> Machine {
    Machine(localModel: model, maximumWait: maximumWait)
  }

  func grant(_ ids: UInt64..., wakeAt: PaceInstant? = nil) -> Action {
    Action(granted: ids, wakeAt: wakeAt)
  }

  func wake(at deadline: PaceInstant) -> Action {
    Action(wakeAt: deadline)
  }

  func refuse(_ id: UInt64, required: Duration?, wakeAt: PaceInstant? = nil) -> Action {
    Action(refused: [.init(id: id, required: required)], wakeAt: wakeAt)
  }

  /// An answer without a window (no fields at all, or `X-RateLimit-*` only) never replaces the
  /// window the server stated with one learned from its resets, which a server whose resets move
  /// with each request (a sliding window's) makes short: the model would let ten a second through
  /// a quota of ten a minute.
  @Test func anAnswerWithoutAWindowKeepsTheStatedOne() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    let stated = ServerQuota(quota: 10, window: .seconds(60), remaining: 9, resetsIn: .seconds(60))
    #expect(machine.record(stated, now: ms(1000)) == grant())
    #expect(machine.windowNanoseconds == 60_000_000_000)
    for (id, at) in [(2, 1000), (3, 1000)] as [(UInt64, Int64)] {
      #expect(machine.enqueue(id: id, now: ms(at)) == grant(id))
    }
    // A reset two seconds later than the one told: a step of 2 s, learned as a window.
    let noWindow = ServerQuota(quota: 10, remaining: 7, resetsIn: .seconds(61))
    _ = machine.record(noWindow, now: ms(2000))
    #expect(machine.inferredWindowNanoseconds == 2_000_000_000)
    _ = machine.record(ServerQuota(), now: ms(2000))
    #expect(machine.windowNanoseconds == 60_000_000_000)
    #expect(machine.knowledge(now: ms(2000)).window == .seconds(60))
  }

  /// A key the server has told nothing yet: one request probes it; the others wait for its
  /// response (at most the maximum wait), then all go when it says nothing limits them.
  @Test func anUnknownKeyLetsOneRequestProbe() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.enqueue(id: 2, now: ms(0)) == wake(at: ms(60_000)))
    #expect(machine.enqueue(id: 3, now: ms(10)) == wake(at: ms(60_000)))
    #expect(machine.record(ServerQuota(), now: ms(100)) == grant(2, 3))
    #expect(machine.inFlight == 2)
    #expect(machine.enqueue(id: 4, now: ms(100)) == grant(4))
  }

  /// `r` less every other request in flight: "5 left" while 2 others are in flight allows 3 more,
  /// until the quota is whole again at `t`.
  @Test func remainingCountsTheRequestsInFlight() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(), now: ms(0)) == grant())
    for id: UInt64 in 2...4 { #expect(machine.enqueue(id: id, now: ms(0)) == grant(id)) }
    // The response of 2 (r=5), while 3 and 4 are in flight.
    #expect(machine.record(ServerQuota(quota: 10, remaining: 5, resetsIn: .seconds(10)), now: ms(1000)) == grant())
    #expect(machine.serverRemaining == 3)
    for id: UInt64 in 5...7 { #expect(machine.enqueue(id: id, now: ms(1000)) == grant(id)) }
    #expect(machine.enqueue(id: 8, now: ms(1000)) == wake(at: ms(11_000)))
    // At the reset, the whole quota less the 5 in flight (3, 4, 5, 6, 7).
    #expect(machine.timerFired(now: ms(11_000)) == grant(8))
    #expect(machine.serverRemaining == 10 - 5 - 1)
  }

  /// A response overtaken by its window's end (GitHub-style fields: a limit and a reset, no
  /// window) says what the ended window had left: it is not counted again after the reset, which
  /// would hand the old window's remainder out a second time. The step between two resets told
  /// is the window: from then on the local model counts it.
  @Test func aResponseAboutAnEndedWindowIsNotCountedAgainAndTheWindowIsLearned() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(quota: 10, remaining: 9, resetsIn: .seconds(1)), now: ms(10)) == grant())
    for id: UInt64 in 2...10 { #expect(machine.enqueue(id: id, now: ms(10)) == grant(id)) }
    #expect(machine.enqueue(id: 11, now: ms(10)) == wake(at: ms(1010)))
    // At the reset: the quota less the 9 in flight.
    #expect(machine.timerFired(now: ms(1010)) == grant(11))
    #expect(machine.enqueue(id: 12, now: ms(1010)) == wake(at: ms(61_010)))
    // A response of the ended window (its reset passed: 0 s) changes nothing.
    #expect(
      machine.record(ServerQuota(quota: 10, remaining: 0, resetsIn: .zero), now: ms(1020)) == wake(at: ms(61_010)))
    #expect(machine.serverRemaining == 0)
    #expect(machine.inferredWindowNanoseconds == nil)
    // The next window's first response: its reset is one window after the last one told.
    #expect(
      machine.record(ServerQuota(quota: 10, remaining: 8, resetsIn: .milliseconds(980)), now: ms(1030))
        == wake(at: ms(3050)))
    #expect(machine.inferredWindowNanoseconds == 1_000_000_000)
    #expect(machine.windowNanoseconds == 1_000_000_000)
    // 10 counted in a sliding window of 1 s widened by the longest round trip (1,020 ms).
    #expect(machine.timerFired(now: ms(3050)) == grant(12))
  }

  /// A server that tells only `Retry-After`: the requests it answered between the end of one block
  /// and the next refusal (2) are its quota, and the step between the blocks' ends (1,020 ms), to
  /// the nearest second, its window; from then on the local model holds the requests, so the next window meets no 429.
  @Test func retryAfterAloneTeachesTheQuotaBetweenTwoRefusals() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(), now: ms(10)) == grant())
    #expect(machine.enqueue(id: 2, now: ms(10)) == grant(2))
    #expect(machine.record(ServerQuota(retryAfter: .seconds(1)), now: ms(20)) == grant())
    for id: UInt64 in 3...5 { #expect(machine.enqueue(id: id, now: ms(20)) == wake(at: ms(1020))) }
    #expect(machine.timerFired(now: ms(1020)) == grant(3, 4, 5))
    #expect(machine.record(ServerQuota(), now: ms(1030)) == grant())
    #expect(machine.record(ServerQuota(), now: ms(1030)) == grant())
    #expect(machine.limit == nil)
    #expect(machine.record(ServerQuota(retryAfter: .seconds(1)), now: ms(1040)) == grant())
    #expect(machine.limit == 2)
    #expect(machine.inferredWindowNanoseconds == 1_000_000_000)
    for id: UInt64 in 6...8 { #expect(machine.enqueue(id: id, now: ms(1040)) == wake(at: ms(2040))) }
    // Two per second widened by the longest round trip (20 ms).
    #expect(machine.timerFired(now: ms(2040)) == grant(6, 7, wakeAt: ms(3060)))
    #expect(machine.timerFired(now: ms(3060)) == grant(8))
  }

  /// Once the policy is told, a sliding window of `q` per `w` counts what the server counted
  /// (`q - r`, at the response) and every request since: "q=10;w=10, r=2" at 1 s allows 2 more,
  /// then the next when the counted ones have left the window, widened by the longest round trip
  /// (the probe's, 1 s): at 12 s.
  @Test func theLocalSlidingWindowHoldsTheNextRequests() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.enqueue(id: 2, now: ms(0)) == wake(at: ms(60_000)))
    #expect(machine.enqueue(id: 3, now: ms(0)) == wake(at: ms(60_000)))
    let told = ServerQuota(quota: 10, window: .seconds(10), remaining: 2, resetsIn: .seconds(10))
    #expect(machine.record(told, now: ms(1000)) == grant(2, 3))
    #expect(machine.latencyMargin == 1_000_000_000)
    #expect(machine.enqueue(id: 4, now: ms(1000)) == wake(at: ms(12_000)))
    #expect(machine.timerFired(now: ms(12_000)) == grant(4))
  }

  /// The margin is the longest of the last 32 round trips, rounded up to a millisecond, measured
  /// from the oldest request in flight; it widens the sliding model, which keeps the requests it
  /// counts.
  @Test func theMarginFollowsTheRecentRoundTrips() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    let told = ServerQuota(quota: 2, window: .seconds(10), remaining: 1, resetsIn: .seconds(10))
    #expect(machine.record(told, now: PaceInstant(nanoseconds: 1_500_001)) == grant())
    #expect(machine.latencyMargin == 2_000_000)
    #expect(machine.enqueue(id: 2, now: ms(5)) == grant(2))
    #expect(machine.record(ServerQuota(), now: ms(205)) == grant())
    #expect(machine.latencyMargin == 200_000_000)
    // Two counted: the one the server had (at 1.5 ms) and 2 (at 5 ms), for 10.2 s.
    #expect(machine.enqueue(id: 3, now: ms(300)) == wake(at: PaceInstant(nanoseconds: 10_201_500_001)))
    #expect(machine.timerFired(now: PaceInstant(nanoseconds: 10_201_500_001)) == grant(3))
    #expect(machine.inFlight == 1)
  }

  /// A fixed-window model's windows end where the server said its quota is whole again: "r=0,
  /// t=4" allows the whole quota at 4 s, then the next window at 14 s; a sliding model waits
  /// until the counted requests leave its window, at 10 s, then 20 s.
  @Test(arguments: [(RateLimit.Algorithm.fixedWindow, 4_000 as Int64), (.slidingWindow, 10_000)])
  func aFixedWindowModelFollowsTheServersReset(model: RateLimit.Algorithm, firstGrant: Int64) {
    var machine = machine(model)
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    let told = ServerQuota(quota: 3, window: .seconds(10), remaining: 0, resetsIn: .seconds(4))
    #expect(machine.record(told, now: ms(0)) == grant())
    for id: UInt64 in 2...5 { #expect(machine.enqueue(id: id, now: ms(0)) == wake(at: ms(firstGrant))) }
    // The quota whole again, less nothing in flight; then nothing is known until a response.
    #expect(machine.timerFired(now: ms(firstGrant)) == grant(2, 3, 4, wakeAt: ms(60_000)))
    let spent = ServerQuota(quota: 3, window: .seconds(10), remaining: 0, resetsIn: .seconds(10))
    #expect(machine.record(spent, now: ms(firstGrant)) == wake(at: ms(firstGrant + 10_000)))
    #expect(machine.timerFired(now: ms(firstGrant + 10_000)) == grant(5))
  }

  /// `Retry-After` holds every request of the key until then.
  @Test func retryAfterHoldsTheKey() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(retryAfter: .seconds(5)), now: ms(0)) == grant())
    #expect(machine.enqueue(id: 2, now: ms(1000)) == wake(at: ms(5000)))
    #expect(machine.enqueue(id: 3, now: ms(2000)) == wake(at: ms(5000)))
    #expect(machine.timerFired(now: ms(5000)) == grant(2, 3))
  }

  /// A demand beyond the maximum wait is refused at once, with the wait it would need.
  @Test func aDemandBeyondTheMaximumWaitIsRefusedAtOnce() {
    var machine = machine(maximumWait: .seconds(60))
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(retryAfter: .seconds(120)), now: ms(0)) == grant())
    #expect(machine.enqueue(id: 2, now: ms(30_000)) == refuse(2, required: .seconds(90)))
    #expect(machine.enqueue(id: 3, now: ms(60_000)) == wake(at: ms(120_000)))
    #expect(machine.queue.map(\.id) == [3])
  }

  /// A request waiting for a response that does not come is refused at its deadline.
  @Test func aRequestWaitingForAResponseIsRefusedAtItsDeadline() {
    var machine = machine(maximumWait: .seconds(2))
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.enqueue(id: 2, now: ms(0)) == wake(at: ms(2000)))
    #expect(machine.enqueue(id: 3, now: ms(500)) == wake(at: ms(2000)))
    #expect(machine.timerFired(now: ms(2000)) == refuse(2, required: nil, wakeAt: ms(2500)))
    #expect(machine.timerFired(now: ms(2500)) == refuse(3, required: nil))
    // A failed probe: the next request probes again.
    #expect(machine.recordFailure(now: ms(3000)) == grant())
    #expect(machine.enqueue(id: 4, now: ms(3000)) == grant(4))
  }

  /// A cancelled request leaves the queue; the next one is considered at once.
  @Test func aCancelledRequestLeavesTheQueue() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.record(ServerQuota(retryAfter: .seconds(5)), now: ms(0)) == grant())
    #expect(machine.enqueue(id: 2, now: ms(0)) == wake(at: ms(5000)))
    #expect(machine.enqueue(id: 3, now: ms(1000)) == wake(at: ms(5000)))
    #expect(machine.cancel(id: 2, now: ms(2000)) == wake(at: ms(5000)))
    #expect(machine.timerFired(now: ms(5000)) == grant(3))
    #expect(machine.cancel(id: 99, now: ms(5000)) == grant())
  }

  /// A spent quota with no reset known waits for a response in flight; with none in flight,
  /// one request probes.
  @Test func aSpentQuotaWithNoResetWaitsForAResponse() {
    var machine = machine()
    #expect(machine.enqueue(id: 1, now: ms(0)) == grant(1))
    #expect(machine.enqueue(id: 2, now: ms(0)) == wake(at: ms(60_000)))
    #expect(machine.record(ServerQuota(remaining: 1), now: ms(0)) == grant(2))
    #expect(machine.enqueue(id: 3, now: ms(0)) == wake(at: ms(60_000)))
    #expect(machine.recordFailure(now: ms(100)) == grant(3))
  }

  /// Extreme values never trap: a quota of `Int.max`, the longest window and delays, more
  /// responses than requests.
  @Test(arguments: [RateLimit.Algorithm.slidingWindow, .fixedWindow, .tokenBucket])
  func extremeValuesNeverTrap(model: RateLimit.Algorithm) {
    var machine = machine(model, maximumWait: .seconds(Int64.max))
    _ = machine.record(ServerQuota(quota: .max, window: .nanoseconds(1), remaining: .max, resetsIn: .zero), now: .max)
    _ = machine.record(ServerQuota(quota: 1, window: .seconds(Int64.max), remaining: 0), now: ms(0))
    _ = machine.enqueue(id: 1, now: .max)
    _ = machine.enqueue(id: 2, now: ms(0))
    _ = machine.record(
      ServerQuota(quota: .max, window: .seconds(1), remaining: 0, resetsIn: .seconds(86_400)), now: .max)
    _ = machine.timerFired(now: .max)
    _ = machine.record(ServerQuota(retryAfter: .seconds(Int64.max)), now: .max)
    #expect(machine.inFlight >= 0)
  }
}
