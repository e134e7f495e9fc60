import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// A connection failure a fake attempt throws.
struct ConnectionLost: Error, Equatable {}

/// An error that is not a connection failure.
struct BadRequestBody: Error, Equatable {}

/// A fake server: answers each attempt with the next scripted response, and records when.
final class ScriptedServer: Sendable {
  let answers: LockedState<[Result<ResponseHead, any Error>]>
  let attempts: LockedRecorder<Int>

  init(_ answers: [Result<ResponseHead, any Error>], clock: TestScheduler) {
    self.answers = LockedState(answers)
    attempts = LockedRecorder(scheduler: clock)
  }

  /// One attempt: the attempt's number as the body, and the next head.
  func attempt() throws -> (Int, ResponseHead) {
    attempts.record(attempts.count + 1)
    let answer = answers.withLock { $0.isEmpty ? .success(head()) : $0.removeFirst() }
    return (attempts.count, try answer.get())
  }
}

func status(_ code: Int, _ fields: (String, String)...) -> Result<ResponseHead, any Error> {
  .success(ResponseHead(status: code, headerFields: fields.map { (name: $0.0, value: $0.1) }))
}

/// `PacedRequests.send`, the loop the glue calls, with a fake attempt on virtual time: exact
/// retry times, what is returned and thrown.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsTests {
  let scheduler = TestScheduler()

  /// Backoff at the top of each range: 100 ms, 200 ms, 400 ms, ….
  func requests(
    attempts: Int = 3, budget: RetryBudget? = nil, maximumWait: Duration = .seconds(60)
  ) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(
        maximumAttempts: attempts, baseDelay: .milliseconds(100), maximumDelay: .seconds(1),
        maximumRetryAfter: .seconds(30), random: { $0.upperBound }),
      budget: budget, maximumWait: maximumWait, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  /// Runs `send` in a task, advancing virtual time through each of its sleeps until it ends.
  func run(
    _ requests: PacedRequests, _ server: ScriptedServer, idempotent: Bool = true, sleeps: Int
  ) async throws -> (Int, ResponseHead) {
    let task = Task {
      try await requests.send(
        key: "https://api.example.com", idempotent: idempotent, isConnectionError: { $0 is ConnectionLost }
      ) {
        try server.attempt()
      }
    }
    for _ in 0..<sleeps {
      await scheduler.waitForSleepers(1)
      scheduler.advance(to: scheduler.pendingDeadlines.min()!)
    }
    return try await task.value
  }

  @Test func aSuccessIsReturnedAtOnce() async throws {
    let server = ScriptedServer([status(200)], clock: scheduler)
    let (body, head) = try await run(requests(), server, sleeps: 0)
    #expect(body == 1 && head.status == 200)
    #expect(server.attempts.times == [ms(0)])
  }

  /// 503, 503, 200: retried after 100 ms, then 200 ms.
  @Test func a503IsRetriedAfterTheBackoff() async throws {
    let server = ScriptedServer([status(503), status(503), status(200)], clock: scheduler)
    let (body, head) = try await run(requests(), server, sleeps: 2)
    #expect(body == 3 && head.status == 200)
    #expect(server.attempts.times == [ms(0), ms(100), ms(300)])
  }

  /// A 429's `Retry-After` is the floor of the delay, and holds the key meanwhile.
  @Test func a429IsRetriedAfterItsRetryAfter() async throws {
    let server = ScriptedServer([status(429, ("Retry-After", "2")), status(200)], clock: scheduler)
    let requests = requests()
    let (_, head) = try await run(requests, server, sleeps: 1)
    #expect(head.status == 200)
    #expect(server.attempts.times == [ms(0), ms(2000)])
  }

  /// When the attempts run out, the last response is returned, not thrown.
  @Test func theLastResponseIsReturnedWhenTheAttemptsRunOut() async throws {
    let server = ScriptedServer([status(503), status(503), status(503)], clock: scheduler)
    let (body, head) = try await run(requests(attempts: 2), server, sleeps: 1)
    #expect(body == 2 && head.status == 503)
    #expect(server.attempts.count == 2)
  }

  @Test func aRequestThatIsNotIdempotentIsNotRetried() async throws {
    let server = ScriptedServer([status(503), status(200)], clock: scheduler)
    let (_, head) = try await run(requests(), server, idempotent: false, sleeps: 0)
    #expect(head.status == 503)
    #expect(server.attempts.count == 1)
  }

  /// Connection errors are retried, and the last one rethrown; any other error at once.
  @Test func connectionErrorsAreRetriedAndTheLastRethrown() async throws {
    let failing = ScriptedServer(
      [.failure(ConnectionLost()), .failure(ConnectionLost()), .failure(ConnectionLost())], clock: scheduler)
    await #expect(throws: ConnectionLost()) { try await run(requests(), failing, sleeps: 2) }
    #expect(failing.attempts.times == [ms(0), ms(100), ms(300)])
    let recovering = ScriptedServer([.failure(ConnectionLost()), status(200)], clock: scheduler)
    #expect(try await run(requests(), recovering, sleeps: 1).1.status == 200)
    let other = ScriptedServer([.failure(BadRequestBody()), status(200)], clock: scheduler)
    await #expect(throws: BadRequestBody()) { try await run(requests(), other, sleeps: 0) }
    #expect(other.attempts.count == 1)
  }

  /// A spent budget returns the failure at once.
  @Test func aSpentBudgetStopsTheRetries() async throws {
    let budget = RetryBudget(ratio: 0, window: .seconds(10), minimumPerSecond: 0, clock: scheduler)
    let server = ScriptedServer([status(503), status(200)], clock: scheduler)
    let (_, head) = try await run(requests(budget: budget), server, sleeps: 0)
    #expect(head.status == 503)
    #expect(server.attempts.count == 1)
  }

  /// A `Retry-After` above the policy's maximum is not waited for: the 429 is returned, and the
  /// key stays held; a request that would wait beyond the maximum wait throws.
  @Test func aRetryAfterBeyondTheMaximumIsNotWaited() async throws {
    let requests = requests(maximumWait: .seconds(60))
    let server = ScriptedServer([status(429, ("Retry-After", "120"))], clock: scheduler)
    #expect(try await run(requests, server, sleeps: 0).1.status == 429)
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: .seconds(120), maximumWait: .seconds(60))) {
      try await run(requests, server, sleeps: 0)
    }
    #expect(server.attempts.count == 1)
  }

  /// Cancelled during its backoff, `send` throws `CancellationError` at once.
  @Test func cancellationDuringTheBackoffThrowsAtOnce() async throws {
    let server = ScriptedServer([status(503), status(200)], clock: scheduler)
    let requests = requests()
    let task = Task { try await requests.send(key: "k", idempotent: true) { try server.attempt() } }
    await scheduler.waitForSleepers(1)
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(server.attempts.count == 1)
    #expect(requests.limiter.inFlightCount(for: "k") == 0)
  }
}
