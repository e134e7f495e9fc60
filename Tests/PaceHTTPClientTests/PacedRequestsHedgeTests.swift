import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// Hedged attempts on virtual time: the hedge starts at its delay, the first answer wins and the
/// other attempt is cancelled, the budget pays for it, and no hedge goes where it must not.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsHedgeTests {
  let scheduler = TestScheduler()

  func requests(hedge: Hedge, budget: RetryBudget? = nil) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(random: { $0.upperBound }), budget: budget, hedge: hedge, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  /// A budget of 10 retries whatever the requests.
  func budget(retries: Int) -> RetryBudget {
    RetryBudget(ratio: 0, window: .seconds(10), minimumPerSecond: retries / 10, clock: scheduler)
  }

  /// Sends one request that the server answers at once, so that the key has been answered (a
  /// key never answered lets one request through at a time).
  func prime(_ requests: PacedRequests, _ server: SlowServer, idempotent: Bool = true) async throws {
    _ = try await requests.send(key: "k", idempotent: idempotent) { try await server.attempt() }
  }

  func slowSend(_ requests: PacedRequests, _ server: SlowServer, idempotent: Bool = true) -> Task<Int, any Error> {
    Task { try await requests.send(key: "k", idempotent: idempotent) { try await server.attempt() }.0 }
  }

  /// The attempt at 0 ms takes 10 s; the hedge starts at 300 ms and answers at 400 ms, when the
  /// first attempt is cancelled. The hedge took one retry from the budget.
  @Test func aSlowAttemptIsHedgedAtTheDelayAndTheLoserIsCancelled() async throws {
    let budget = budget(retries: 10)
    let requests = requests(hedge: .after(.milliseconds(300)), budget: budget)
    let server = SlowServer(scheduler: scheduler, latencies: [.zero, .seconds(10), .milliseconds(100)])
    try await prime(requests, server)
    let available = budget.availableRetries
    let task = slowSend(requests, server)
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(300))  // the hedge's delay
    await scheduler.advance(toScheduled: ms(400))  // its answer
    #expect(try await task.value == 3)
    #expect(scheduler.now == ms(400))
    #expect(server.startTimes == [ms(0), ms(0), ms(300)])
    #expect(server.cancelled == [2])
    #expect(server.endTimes == [ms(0), ms(400), ms(400)])
    #expect(budget.availableRetries == available - 1)
    #expect(requests.limiter.inFlightCount(for: "k") == 0)
  }

  /// The first attempt answers at 200 ms, before the 300 ms delay: no hedge, nothing withdrawn.
  @Test func aFastAnswerIsNotHedged() async throws {
    let budget = budget(retries: 10)
    let requests = requests(hedge: .after(.milliseconds(300)), budget: budget)
    let server = SlowServer(scheduler: scheduler, latencies: [.zero, .milliseconds(200)])
    try await prime(requests, server)
    let available = budget.availableRetries
    let task = slowSend(requests, server)
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(200))
    #expect(try await task.value == 2)
    #expect(server.startTimes == [ms(0), ms(0)])
    #expect(budget.availableRetries == available)
    #expect(scheduler.pendingDeadlines.isEmpty)  // the hedge's timer is gone
  }

  /// A budget with no retry left: the slow attempt runs alone to its answer at 1 s.
  @Test func noHedgeWhenTheBudgetRefuses() async throws {
    let requests = requests(hedge: .after(.milliseconds(300)), budget: budget(retries: 0))
    let server = SlowServer(scheduler: scheduler, latencies: [.zero, .seconds(1)])
    try await prime(requests, server)
    let task = slowSend(requests, server)
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(300))
    await scheduler.advance(toScheduled: ms(1000))
    #expect(try await task.value == 2)
    #expect(server.startTimes == [ms(0), ms(0)])
  }

  /// A request that is not idempotent is never hedged.
  @Test func noHedgeForARequestThatIsNotIdempotent() async throws {
    let requests = requests(hedge: .after(.milliseconds(300)), budget: budget(retries: 10))
    let server = SlowServer(scheduler: scheduler, latencies: [.zero, .seconds(1)])
    try await prime(requests, server, idempotent: false)
    let task = slowSend(requests, server, idempotent: false)
    await server.waitForAttempts(2)
    #expect(!scheduler.pendingDeadlines.contains(ms(300)))
    await scheduler.advance(toScheduled: ms(1000))
    #expect(try await task.value == 2)
    #expect(server.startTimes == [ms(0), ms(0)])
  }

  /// A key whose quota is spent (`r=0` after the first request) is being paced: the limiter
  /// would hold the hedge, so none goes, and nothing is withdrawn.
  @Test func noHedgeWhileTheKeyIsPaced() async throws {
    let budget = budget(retries: 10)
    let requests = requests(hedge: .after(.milliseconds(300)), budget: budget)
    let fields = [
      status(200, ("RateLimit-Policy", "\"p\";q=2;w=10"), ("RateLimit", "\"p\";r=1;t=10")),
      status(200, ("RateLimit-Policy", "\"p\";q=2;w=10"), ("RateLimit", "\"p\";r=0;t=10")),
    ]
    let server = SlowServer(scheduler: scheduler, latencies: [.zero, .seconds(1)], answers: fields)
    try await prime(requests, server)
    let available = budget.availableRetries
    let task = slowSend(requests, server)
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(300))
    await scheduler.advance(toScheduled: ms(1000))
    #expect(try await task.value == 2)
    #expect(server.startTimes == [ms(0), ms(0)])
    #expect(budget.availableRetries == available)
  }

  /// Latencies of 100, 200, 300 and 400 ms: the median (nearest rank) is 200 ms, so the next
  /// slow attempt, started at 1000 ms, is hedged at 1200 ms.
  @Test func aPercentileHedgeWaitsForTheKeysLatency() async throws {
    let requests = requests(hedge: .afterLatencyPercentile(50, ofLast: 4, minimumSamples: 4), budget: nil)
    let server = SlowServer(
      scheduler: scheduler,
      latencies: [.milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(400), .seconds(10), .zero])
    for end in [100, 300, 600, 1000] {
      let task = slowSend(requests, server)
      await scheduler.advance(toScheduled: ms(Int64(end)))
      _ = try await task.value
    }
    let task = slowSend(requests, server)
    await server.waitForAttempts(5)
    await scheduler.advance(toScheduled: ms(1200))
    #expect(try await task.value == 6)
    #expect(server.startTimes.suffix(2) == [ms(1000), ms(1200)])
    #expect(server.cancelled == [5])
  }
}
