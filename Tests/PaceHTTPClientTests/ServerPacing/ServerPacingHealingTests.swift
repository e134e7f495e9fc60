import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// What the limiter has seen refused outweighs what it was told: against a server that advertises
/// more than it enforces, and one that tells only `Retry-After`, the limiter converges on what
/// the server allows and probes upward slowly. A simulated server on virtual time, answering at
/// once; a client that always has one request waiting.
@Suite struct ServerPacingHealingTests {
  struct Run {
    /// Per second of the run: requests the server allowed, and refused.
    var allowed: [Int]
    var refused: [Int]
  }

  /// `seconds` of a client that keeps one request waiting (a new one every 10 ms while none
  /// waits) against a server that allows `enforced` per fixed second and tells `told` (or only
  /// `Retry-After`, with `told` nil). Until `losingAnswersUntil` (seconds), every fifth allowed
  /// answer is lost on the way (the server counted it; the client records a failure), as answers
  /// cut or overtaken make a count between two refusals short.
  func run(enforced: Int, told: Int?, seconds: Int, losingAnswersUntil: Int = 0) -> Run {
    let scheduler = TestScheduler()
    let server = KeyedRateLimiter<String>(limit: .fixedWindow(permits: enforced, per: .seconds(1)), clock: scheduler)
    var machine = ServerPacingMachine(localModel: .slidingWindow, maximumWait: .seconds(600))
    var result = Run(allowed: Array(repeating: 0, count: seconds), refused: Array(repeating: 0, count: seconds))
    var wakeAt: PaceInstant?
    var nextID: UInt64 = 0
    var answered = 0

    func serve(_ granted: [UInt64]) {
      var pending = granted.count
      while pending > 0 {
        pending -= 1
        let second = Int(scheduler.now.nanoseconds / 1_000_000_000)
        let untilWindowEnds = server.timeUntilWindowEnds(for: "client") ?? .seconds(1)
        let quota: ServerQuota
        switch server.tryAcquire("client") {
        case .allowed(let remaining):
          result.allowed[second] += 1
          quota =
            told.map {
              ServerQuota(
                quota: $0, window: .seconds(1), remaining: remaining + $0 - enforced, resetsIn: untilWindowEnds)
            } ?? ServerQuota()
        case .limited(let retryAfter):
          result.refused[second] += 1
          quota =
            told.map {
              ServerQuota(quota: $0, window: .seconds(1), remaining: 0, resetsIn: retryAfter, retryAfter: retryAfter)
            } ?? ServerQuota(retryAfter: retryAfter)
        }
        answered += 1
        let lost = second < losingAnswersUntil && quota.retryAfter == nil && answered % 5 == 0
        let action = lost ? machine.recordFailure(now: scheduler.now) : machine.record(quota, now: scheduler.now)
        pending += action.granted.count
        wakeAt = action.wakeAt
      }
    }

    for tick in 0..<(seconds * 100) {
      scheduler.advance(to: ms(Int64(tick) * 10))
      if let due = wakeAt, due <= scheduler.now {
        let action = machine.timerFired(now: scheduler.now)
        wakeAt = action.wakeAt
        serve(action.granted)
      }
      if machine.queue.isEmpty {
        nextID += 1
        let action = machine.enqueue(id: nextID, now: scheduler.now)
        wakeAt = action.wakeAt
        serve(action.granted)
      }
    }
    return result
  }

  /// Fields that say 40 a second from a server that allows 20: after the first refusal the
  /// limiter keeps to 20, and probes one more every ten seconds at most.
  @Test func aServerThatOverAdvertisesIsBelievedByItsRefusals() {
    let run = run(enforced: 20, told: 40, seconds: 60)
    let settled = 2..<60
    let refusals = settled.reduce(0) { $0 + run.refused[$1] }
    let allowed = settled.reduce(0) { $0 + run.allowed[$1] }
    #expect(refusals <= settled.count / 10 + 1, "refused \(run.refused)")
    #expect(allowed >= settled.count * 20 * 9 / 10, "allowed \(run.allowed)")
  }

  /// A server that tells only `Retry-After`, whose answers were lost while the quota was learned
  /// (16 of 20 counted): the quota learned from refusals is revised by each later one and probed
  /// upward, so the client reaches the server's rate rather than 80 % of it for good.
  @Test func aQuotaLearnedFromRefusalsReachesTheServersRate() {
    let run = run(enforced: 20, told: nil, seconds: 60, losingAnswersUntil: 4)
    #expect(run.allowed[4] < 20)
    let settled = 15..<60
    let refusals = settled.reduce(0) { $0 + run.refused[$1] }
    let allowed = settled.reduce(0) { $0 + run.allowed[$1] }
    #expect(refusals <= settled.count / 10 + 2, "refused \(run.refused)")
    #expect(allowed >= settled.count * 20 * 9 / 10, "allowed \(run.allowed)")
  }
}
