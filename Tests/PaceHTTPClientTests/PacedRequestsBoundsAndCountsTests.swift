import MetricsTestKit
import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// How the three bounds on a server's demand meet (`maximumRetryAfter`, `maximumWait`,
/// `probeAfter`; the article's "How long the server can hold a request" states them), and what
/// `PacedRequests` counts.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsBoundsAndCountsTests {
  let scheduler = TestScheduler()

  /// The defaults: `maximumRetryAfter` 60 s, `maximumWait` 60 s, `probeAfter` 5 minutes; backoff
  /// at the top of its range.
  func requests(metrics: TestMetrics = TestMetrics(), budget: RetryBudget? = nil, attempts: Int = 3) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(maximumAttempts: attempts, random: { $0.upperBound }), budget: budget, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset }, metricsFactory: metrics)
  }

  func send(_ requests: PacedRequests, _ server: ScriptedServer) async throws -> ResponseHead {
    try await requests.send(key: "k", idempotent: true) { try server.attempt() }.1
  }

  /// Starts a send that will wait in the limiter, and returns once it waits.
  func waitingSend(_ requests: PacedRequests, _ server: ScriptedServer) async -> Task<ResponseHead, any Error> {
    let task = Task { try await send(requests, server) }
    await scheduler.waitForSuspendedCallers(1)
    return task
  }

  /// `Retry-After: 90`: over `maximumRetryAfter`, so that 429 is the answer; a request that would
  /// wait more than `maximumWait` for 90 s throws at once with the time it needs; one within
  /// 60 s of 90 s waits for it.
  @Test func aRetryAfterOverTheMaximumIsAnsweredAndHoldsTheKeyToItsEnd() async throws {
    let requests = requests()
    let server = ScriptedServer([status(429, ("Retry-After", "90"))], clock: scheduler)
    #expect(try await send(requests, server).status == 429)
    scheduler.advance(to: ms(10_000))
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: .seconds(80), maximumWait: .seconds(60))) {
      try await send(requests, server)
    }
    scheduler.advance(to: ms(30_000))
    let waiting = await waitingSend(requests, server)
    scheduler.advance(to: ms(89_999))
    #expect(server.attempts.count == 1)
    scheduler.advance(to: ms(90_000))
    #expect(try await waiting.value.status == 200)
    #expect(server.attempts.times == [ms(0), ms(90_000)])
  }

  /// An absurd `Retry-After` holds the key no longer than `probeAfter`: a request is refused at
  /// once until the probe is within `maximumWait`, then waits and is sent as the probe at 300 s;
  /// the probe's sane answer frees the key.
  @Test func anAbsurdRetryAfterHoldsTheKeyUntilTheProbe() async throws {
    let requests = requests()
    let server = ScriptedServer(
      [status(429, ("Retry-After", "999999999999")), status(200, ("RateLimit", "\"default\";r=9;t=1"))],
      clock: scheduler)
    #expect(try await send(requests, server).status == 429)
    scheduler.advance(to: ms(10_000))
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: .seconds(290), maximumWait: .seconds(60))) {
      try await send(requests, server)
    }
    scheduler.advance(to: ms(240_000))
    let probe = await waitingSend(requests, server)
    scheduler.advance(to: ms(299_999))
    #expect(server.attempts.count == 1)
    scheduler.advance(to: ms(300_000))
    #expect(try await probe.value.status == 200)
    #expect(try await send(requests, server).status == 200)
    #expect(server.attempts.times == [ms(0), ms(300_000), ms(300_000)])
  }

  /// A 429, a 503 and a connection error, each retried, then a 200: three retries, one of each
  /// reason, and one 429; then a budget that grants nothing: its refusal counted, and the final
  /// 429.
  @Test func retriesWithdrawalsAnd429sAreCounted() async throws {
    let metrics = TestMetrics()
    let budget = RetryBudget(ratio: 0, window: .seconds(10), minimumPerSecond: 0, clock: scheduler)
    let requests = requests(metrics: metrics, attempts: 4)
    let server = ScriptedServer(
      [status(429, ("Retry-After", "1")), status(503), .failure(ConnectionLost()), status(200)], clock: scheduler)
    let task = Task {
      try await requests.send(key: "k", idempotent: true, isConnectionError: { $0 is ConnectionLost }) {
        try server.attempt()
      }
    }
    for _ in 0..<3 {
      await scheduler.waitForSleepers(1)
      scheduler.advance(to: scheduler.pendingDeadlines.min()!)
    }
    #expect(try await task.value.1.status == 200)
    #expect(server.attempts.count == 4)
    func count(_ label: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
      try metrics.expectCounter(label, dimensions).totalValue
    }
    #expect(try count("pace_http_client_rate_limited_total") == 1)
    #expect(try count("pace_http_client_retries_total", [("reason", "rate_limited")]) == 1)
    #expect(try count("pace_http_client_retries_total", [("reason", "unavailable")]) == 1)
    #expect(try count("pace_http_client_retries_total", [("reason", "connection_error")]) == 1)
    #expect(try count("pace_http_client_retries_total", [("reason", "server_error")]) == 0)

    // With a budget that grants nothing: one withdrawal refused, no retry.
    let budgeted = self.requests(metrics: metrics, budget: budget)
    let refused = ScriptedServer([status(429)], clock: scheduler)
    #expect(try await send(budgeted, refused).status == 429)
    #expect(try count("pace_http_client_retry_budget_withdrawals_total", [("result", "refused")]) == 1)
    #expect(try count("pace_http_client_retry_budget_withdrawals_total", [("result", "granted")]) == 0)
    #expect(try count("pace_http_client_rate_limited_total") == 2)
  }
}
