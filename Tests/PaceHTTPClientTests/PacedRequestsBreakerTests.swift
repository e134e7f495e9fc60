import MetricsTestKit
import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// `PacedRequests(breaker:)` on virtual time: an origin that fails is stopped at the instant its
/// breaker opens, and let back through its probe once the cool-down has passed.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsBreakerTests {
  let scheduler = TestScheduler()

  /// Opens on 2 failures of 2 calls, for 5 s; one probe. No retries, to count each send once.
  func requests(metrics: TestMetrics = TestMetrics()) -> (PacedRequests, KeyedCircuitBreaker<String>) {
    let scheduler = scheduler
    let breaker = KeyedCircuitBreaker<String>(
      failureRatio: 0.5, minimumCalls: 2, window: .seconds(10), coolDown: .seconds(5), probes: 1, clock: scheduler)
    let requests = PacedRequests(
      retry: .never, budget: nil, breaker: breaker, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset }, metricsFactory: metrics)
    return (requests, breaker)
  }

  func send(_ requests: PacedRequests, _ server: ScriptedServer) async throws -> Int {
    try await requests.send(key: "k", idempotent: true, isConnectionError: { $0 is ConnectionLost }) {
      try server.attempt()
    }.1.status
  }

  /// A 500 at 0 ms and a connection error at 1 s open the breaker until 6 s: sends at 1 s and at
  /// 5.999 s fail at once, saying until when, and reach nobody; the send at 6 s is the probe,
  /// its 200 closes the breaker, and the next send goes through.
  @Test func theBreakerStopsAFailingOriginAndLetsItBackThroughItsProbe() async throws {
    let metrics = TestMetrics()
    let (requests, breaker) = requests(metrics: metrics)
    let server = ScriptedServer([status(500), .failure(ConnectionLost()), status(200), status(200)], clock: scheduler)
    #expect(try await send(requests, server) == 500)
    scheduler.advance(to: ms(1000))
    await #expect(throws: ConnectionLost()) { try await send(requests, server) }
    #expect(breaker.state(for: "k") == .open(until: ms(6000)))
    await #expect(throws: CircuitBreakerError.open(until: ms(6000), retryAfter: .seconds(5))) {
      try await send(requests, server)
    }
    scheduler.advance(to: ms(5999))
    await #expect(throws: CircuitBreakerError.open(until: ms(6000), retryAfter: .milliseconds(1))) {
      try await send(requests, server)
    }
    scheduler.advance(to: ms(6000))
    #expect(try await send(requests, server) == 200)
    #expect(breaker.state(for: "k") == .closed)
    #expect(try await send(requests, server) == 200)
    #expect(server.attempts.times == [ms(0), ms(1000), ms(6000), ms(6000)])
    // Counted: two sends refused; opened once, one probe, closed by its 200.
    func count(_ label: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
      try metrics.expectCounter(label, dimensions).totalValue
    }
    #expect(try count("pace_http_client_breaker_refusals_total") == 2)
    #expect(try count("pace_http_client_breaker_transitions_total", [("to", "open")]) == 1)
    #expect(try count("pace_http_client_breaker_probes_total") == 1)
    #expect(try count("pace_http_client_breaker_transitions_total", [("to", "closed")]) == 1)
  }

  /// 429s and 503s with `Retry-After` are pacing: they never open the breaker; a 503 without
  /// one is a failure.
  @Test func pacingIsNotFailure() async throws {
    let (requests, breaker) = requests()
    let server = ScriptedServer(
      [status(429, ("Retry-After", "1")), status(503, ("Retry-After", "1")), status(503), status(503)],
      clock: scheduler)
    #expect(try await send(requests, server) == 429)
    scheduler.advance(to: ms(1000))
    #expect(try await send(requests, server) == 503)
    scheduler.advance(to: ms(2000))
    #expect(breaker.state(for: "k") == .closed)
    #expect(try await send(requests, server) == 503)
    #expect(try await send(requests, server) == 503)
    #expect(breaker.state(for: "k") == .open(until: ms(7000)))
  }
}
