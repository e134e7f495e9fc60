import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// `PacedRequests(connectivity:)` on virtual time: a retry after a connection error waits for
/// the network path, no later than the deadline.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsConnectivityTests {
  let scheduler = TestScheduler()

  /// Backoff at the top of its range: 100 ms first.
  func requests(_ connectivity: ManualConnectivity) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(baseDelay: .milliseconds(100), maximumDelay: .seconds(1), random: { $0.upperBound }),
      budget: nil, connectivity: connectivity, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  /// Waits until `connectivity` has `count` callers waiting, for 30 s of real time at most (on a busy machine, the send may not have started yet).
  func waitForWaiters(_ connectivity: ManualConnectivity, _ count: Int) async {
    await waitUntil("\(count) wait for the path (waiting: \(connectivity.waitingCount))") {
      connectivity.waitingCount >= count
    }
  }

  /// A connection error at 0 ms while the path is down: the retry waits for it, back at 2 s,
  /// then for its 100 ms of back-off, and goes at 2.1 s.
  @Test func aRetryAfterAConnectionErrorWaitsForThePath() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let requests = requests(connectivity)
    let server = ScriptedServer([.failure(ConnectionLost()), status(200)], clock: scheduler)
    let task = Task {
      try await requests.send(key: "k", idempotent: true, isConnectionError: { $0 is ConnectionLost }) {
        try server.attempt()
      }
    }
    await waitForWaiters(connectivity, 1)
    scheduler.advance(to: ms(2000))
    #expect(server.attempts.count == 1)
    connectivity.setReachable(true)
    await scheduler.advance(toScheduled: ms(2100))
    #expect(try await task.value.1.status == 200)
    #expect(server.attempts.times == [ms(0), ms(2100)])
  }

  /// The path never comes back: the send fails at its deadline, 1 s, and waits no more.
  @Test func theWaitForThePathEndsAtTheDeadline() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let requests = requests(connectivity)
    let server = ScriptedServer([.failure(ConnectionLost())], clock: scheduler)
    let task = Task {
      try await requests.send(
        key: "k", idempotent: true, deadline: .seconds(1), isConnectionError: { $0 is ConnectionLost }
      ) { try server.attempt() }
    }
    await waitForWaiters(connectivity, 1)
    await scheduler.advance(toScheduled: ms(1000))
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)) {
      try await task.value
    }
    #expect(scheduler.now == ms(1000))
    #expect(server.attempts.count == 1)
    await waitForWaiters(connectivity, 0)
    #expect(connectivity.waitingCount == 0)
  }

  /// A 503 is not a connection error: its retry does not wait for the path.
  @Test func aRetryAfterAnAnswerDoesNotWaitForThePath() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let requests = requests(connectivity)
    let server = ScriptedServer([status(503), status(200)], clock: scheduler)
    let task = Task { try await requests.send(key: "k", idempotent: true) { try server.attempt() } }
    await scheduler.advance(toScheduled: ms(100))
    #expect(try await task.value.1.status == 200)
    #expect(server.attempts.times == [ms(0), ms(100)])
  }
}
