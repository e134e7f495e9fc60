import Pace
import PaceTestSupport
import Testing

@testable import PaceHTTPClient

/// The machine on seeded random event sequences, hostile quotas included: requests start in the
/// order they came, each is answered once (started, refused or cancelled), none waits past its
/// deadline, the in-flight count is what was started less what was recorded, and a timer is
/// never asked for in the past.
@Suite struct ServerPacingMachineFuzzTests {
  static let quotas: [ServerQuota] = [
    ServerQuota(), ServerQuota(quota: 5, window: .seconds(2), remaining: 3, resetsIn: .seconds(2)),
    ServerQuota(quota: 5, window: .seconds(2), remaining: 0, resetsIn: .seconds(1)),
    ServerQuota(remaining: 0), ServerQuota(remaining: 2, resetsIn: .milliseconds(500)),
    ServerQuota(retryAfter: .seconds(1)), ServerQuota(retryAfter: .seconds(90)),
    ServerQuota(quota: .max, window: .nanoseconds(1), remaining: .max, resetsIn: .zero),
    ServerQuota(quota: 1, window: .seconds(Int64.max), remaining: 0, resetsIn: ServerQuota.maximumDelay),
    ServerQuota(quota: 3, remaining: 1, resetsIn: .seconds(3), retryAfter: .zero),
  ]

  @Test(arguments: [RateLimit.Algorithm.slidingWindow, .fixedWindow, .tokenBucket])
  func randomEventsKeepTheInvariants(model: RateLimit.Algorithm) {
    var random = SeededGenerator(seed: 3434)
    for _ in 0..<fuzzRuns(200) {
      var machine = ServerPacingMachine(
        localModel: model, maximumWait: .seconds(Int64.random(in: 0...60, using: &random)))
      var now = PaceInstant.zero
      var nextID: UInt64 = 0
      var waiting: [UInt64] = []  // in arrival order
      var deadlines: [UInt64: PaceInstant] = [:]
      var inFlight = 0
      var wakeAt: PaceInstant?

      func apply(_ action: ServerPacingMachine.Action) {
        for id in action.granted {
          // FIFO: a request starts only once every earlier one has left the queue.
          #expect(waiting.first == id)
          #expect(deadlines[id].map { $0 >= now } ?? false)
          waiting.removeFirst()
          inFlight += 1
        }
        for refusal in action.refused {
          #expect(waiting.first == refusal.id)
          waiting.removeFirst()
        }
        if let deadline = action.wakeAt { #expect(deadline > now) }
        wakeAt = action.wakeAt
        #expect(machine.inFlight == inFlight)
        #expect(machine.queue.map(\.id) == waiting)
        // Nobody waits past its deadline: the timer is due by the first waiter's.
        if let first = waiting.first { #expect(wakeAt.map { $0 <= deadlines[first]! } ?? false) }
      }

      for _ in 0..<60 {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3:
          nextID += 1
          waiting.append(nextID)
          deadlines[nextID] = now.advanced(by: .nanoseconds(machine.maximumWaitNanoseconds))
          apply(machine.enqueue(id: nextID, now: now))
        case 3..<5 where inFlight > 0:
          inFlight -= 1
          apply(machine.record(Self.quotas.randomElement(using: &random)!, now: now))
        case 5 where inFlight > 0:
          inFlight -= 1
          apply(machine.recordFailure(now: now))
        case 6 where !waiting.isEmpty:
          let id = waiting.randomElement(using: &random)!
          waiting.removeAll { $0 == id }
          apply(machine.cancel(id: id, now: now))
        default:
          // Time passes: to the timer, or a random step short of it.
          let step = PaceInstant(nanoseconds: now.nanoseconds + Int64.random(in: 1...3_000_000_000, using: &random))
          if let deadline = wakeAt, deadline <= step {
            now = deadline
            apply(machine.timerFired(now: now))
          } else {
            now = step
          }
        }
      }
    }
  }
}
