import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// The diagrams of ServerPacing.md, run on the limiter's machine against a server limited by
/// Pace's own `KeyedRateLimiter`, answering as its middleware does, with no time on the wire.
/// One character is one second; a letter is a request, shown at the instant it starts.
@Suite struct ServerPacingDocDiagramTests {
  /// What the server tells: all of its fields, or only `Retry-After` on a 429.
  enum Telling { case everything, retryAfterOnly }

  /// Letters at their steps, several at one step in brackets.
  static func render(_ events: [(step: Int, letter: Character)]) -> String {
    var line = ""
    var step = 0
    for group in Dictionary(grouping: events, by: \.step).sorted(by: { $0.key < $1.key }) {
      line += String(repeating: "-", count: group.key - step)
      let letters = String(group.value.map(\.letter))
      line += letters.count == 1 ? letters : "[\(letters)]"
      step = group.key + 1
    }
    return line
  }

  /// Runs `requests` (a letter arrives at its step) through a machine; returns when each
  /// started, and which the server limited.
  func diagram(
    _ requests: String, server limit: RateLimit, telling: Telling = .everything,
    model: RateLimit.Algorithm = .slidingWindow
  ) -> (started: String, limited: String) {
    let scheduler = TestScheduler()
    let server = KeyedRateLimiter<String>(limit: limit, clock: scheduler)
    var machine = ServerPacingMachine(localModel: model, maximumWait: .seconds(60))
    let letters = Array(requests)
    var started: [(step: Int, letter: Character)] = []
    var limited: [(step: Int, letter: Character)] = []
    var wakeAt: PaceInstant?

    func answer(_ granted: [UInt64], at step: Int) {
      var pending = granted
      while !pending.isEmpty {
        let id = pending.removeFirst()
        let letter = letters[Int(id)]
        started.append((step, letter))
        let quota: ServerQuota
        switch server.tryAcquire("client") {
        case .allowed(let remaining):
          let untilWhole =
            remaining >= limit.permits
            ? .zero : min(server.timeUntilWindowEnds(for: "client") ?? limit.interval, limit.interval)
          quota =
            telling == .everything
            ? ServerQuota(quota: limit.permits, window: limit.interval, remaining: remaining, resetsIn: untilWhole)
            : ServerQuota()
        case .limited(let retryAfter):
          limited.append((step, letter))
          let seconds = Duration.seconds(
            (retryAfter.components.seconds) + (retryAfter.components.attoseconds > 0 ? 1 : 0))
          quota =
            telling == .everything
            ? ServerQuota(
              quota: limit.permits, window: limit.interval, remaining: 0, resetsIn: seconds, retryAfter: seconds)
            : ServerQuota(retryAfter: seconds)
        }
        let action = machine.record(quota, now: scheduler.now)
        pending += action.granted
        wakeAt = action.wakeAt
      }
    }

    for step in 0..<40 {
      scheduler.advance(to: PaceInstant(.seconds(step)))
      if let deadline = wakeAt, deadline <= scheduler.now {
        let action = machine.timerFired(now: scheduler.now)
        wakeAt = action.wakeAt
        answer(action.granted, at: step)
      }
      if step < letters.count, letters[step] != "-" {
        let action = machine.enqueue(id: UInt64(step), now: scheduler.now)
        wakeAt = action.wakeAt
        answer(action.granted, at: step)
      }
    }
    return (Self.render(started), Self.render(limited))
  }

  /// A server of 3 per window of 5 s that tells its fields: 3 a window, each held until the model
  /// says the server has room, never a 429.
  @Test func aQuotaPerWindow() {
    let result = diagram("abcdefgh", server: .fixedWindow(permits: 3, per: .seconds(5)))
    #expect(result.started == "abc--def--gh")
    #expect(result.limited == "")
  }

  /// The same requests under a fixed-window model: the whole quota at each window's start.
  @Test func aQuotaPerWindowUnderAFixedModel() {
    let result = diagram("abcdefgh", server: .fixedWindow(permits: 3, per: .seconds(5)), model: .fixedWindow)
    #expect(result.started == "abc--[def]----[gh]")
    #expect(result.limited == "")
  }

  /// A server that tells only `Retry-After`, on its 429s: the limiter learns the limit only by
  /// being refused, then holds every request until then: one 429 a window.
  @Test func onlyRetryAfter() {
    let result = diagram("abcdefgh", server: .fixedWindow(permits: 3, per: .seconds(5)), telling: .retryAfterOnly)
    #expect(result.started == "abcd-[ef]gh")
    #expect(result.limited == "---d---h")
  }

  /// Retries: 503, 503, 200 with a backoff from 1 s to 4 s at the top of each range; then a 429
  /// with `Retry-After: 3`, a floor.
  @Test func retries() {
    let policy = RetryStrategy(
      maximumAttempts: 4, baseDelay: .seconds(1), maximumDelay: .seconds(4), random: { $0.upperBound })
    func attempts(_ outcomes: [(RetryStrategy.Outcome, Duration?)]) -> String {
      var events: [(step: Int, letter: Character)] = []
      var now = Duration.zero
      for (index, (outcome, retryAfter)) in outcomes.enumerated() {
        events.append((Int(now.components.seconds), Character(String(index + 1))))
        guard
          case .retry(let delay) = policy.decision(
            afterAttempt: index + 1, outcome: outcome, idempotent: true, retryAfter: retryAfter)
        else { break }
        now += delay
      }
      return Self.render(events)
    }
    #expect(attempts([(.status(503), nil), (.status(503), nil), (.status(200), nil)]) == "12-3")
    #expect(
      attempts([(.connectionError, nil), (.connectionError, nil), (.connectionError, nil), (.connectionError, nil)])
        == "12-3---4")
    #expect(attempts([(.status(429), .seconds(3)), (.status(200), nil)]) == "1--2")
  }

  /// The first diagram again, through `ServerPacedLimiter` itself: each request a task that
  /// acquires, then records the server's answer at the same instant.
  @Test func aQuotaPerWindowThroughTheLimiter() async throws {
    let scheduler = TestScheduler()
    let limit = RateLimit.fixedWindow(permits: 3, per: .seconds(5))
    let server = KeyedRateLimiter<String>(limit: limit, clock: scheduler)
    let limiter = ServerPacedLimiter<String>(clock: scheduler)
    let started = LockedState<[(step: Int, letter: Character)]>([])
    let finished = LockedState(0)
    let limited = LockedState(0)
    var tasks: [Task<Void, any Error>] = []
    for (step, letter) in "abcdefgh".enumerated() {
      scheduler.advance(to: PaceInstant(.seconds(step)))
      tasks.append(
        Task {
          try await limiter.acquire("k")
          started.withLock { $0.append((Int(scheduler.now.nanoseconds / 1_000_000_000), letter)) }
          switch server.tryAcquire("client") {
          case .allowed(let remaining):
            let untilWhole = min(server.timeUntilWindowEnds(for: "client") ?? limit.interval, limit.interval)
            limiter.record(
              ServerQuota(quota: 3, window: limit.interval, remaining: remaining, resetsIn: untilWhole), for: "k")
          case .limited(let retryAfter):
            limited.withLock { $0 += 1 }
            limiter.record(ServerQuota(retryAfter: retryAfter), for: "k")
          }
          finished.withLock { $0 += 1 }
        })
      // Every request has started and been answered, or waits in the limiter.
      await waitUntil("every task finished or waits") {
        finished.withLock({ $0 }) + scheduler.suspendedCallerCount >= tasks.count
      }
    }
    while let next = scheduler.pendingDeadlines.min(), finished.withLock({ $0 }) < tasks.count {
      scheduler.advance(to: next)
      await waitUntil("every task finished or waits") {
        finished.withLock({ $0 }) + scheduler.suspendedCallerCount >= tasks.count
      }
    }
    for task in tasks { try await task.value }
    #expect(Self.render(started.withLock { $0 }) == "abc--def--gh")
    #expect(limited.withLock { $0 } == 0)
  }
}
