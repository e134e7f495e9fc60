import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// A fake server whose attempts take virtual time: each answers after its latency, or ends when
/// cancelled; it records when each attempt started and ended.
final class SlowServer: Sendable {
  let scheduler: TestScheduler
  let latencies: LockedState<[Duration]>
  let answers: LockedState<[Result<ResponseHead, any Error>]>
  let started = LockedState<[PaceInstant]>([])
  /// Each attempt's end: its number, and whether it was cancelled.
  let ended = LockedState<[(PaceInstant, Int, cancelled: Bool)]>([])

  init(scheduler: TestScheduler, latencies: [Duration], answers: [Result<ResponseHead, any Error>] = []) {
    self.scheduler = scheduler
    self.latencies = LockedState(latencies)
    self.answers = LockedState(answers)
  }

  func attempt() async throws -> (Int, ResponseHead) {
    let (number, latency) = started.withLock { started in
      started.append(scheduler.now)
      return (started.count, latencies.withLock { $0.isEmpty ? .zero : $0.removeFirst() })
    }
    do {
      try await scheduler.sleep(for: latency)
    } catch {
      ended.withLock { $0.append((scheduler.now, number, true)) }
      throw error
    }
    ended.withLock { $0.append((scheduler.now, number, false)) }
    let answer = answers.withLock { $0.isEmpty ? status(200) : $0.removeFirst() }
    return (number, try answer.get())
  }

  var startTimes: [PaceInstant] { started.withLock { $0 } }

  /// Returns once `count` attempts have started (the attempt runs in a task of the send's, which
  /// may start after the timers that cut it are armed), or records an issue after 30 s.
  func waitForAttempts(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
    await waitUntil(
      "\(count) attempts started (started: \(startTimes.count))", sourceLocation: sourceLocation
    ) { startTimes.count >= count }
  }
  var endTimes: [PaceInstant] { ended.withLock { $0.map(\.0) } }
  var cancelled: [Int] { ended.withLock { $0.filter(\.cancelled).map(\.1) } }
}

/// `send(deadline:attemptTimeout:)` on virtual time: every wait ends by the deadline, a wait
/// that would pass it fails at once with the time it needed, an attempt is cancelled at its
/// timeout.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsDeadlineTests {
  let scheduler = TestScheduler()

  /// Backoff at the top of each range: 100 ms, 200 ms, 400 ms, ….
  func requests(attempts: Int = 3) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(
        maximumAttempts: attempts, baseDelay: .milliseconds(100), maximumDelay: .seconds(1),
        maximumRetryAfter: .seconds(30), random: { $0.upperBound }),
      budget: nil, clock: scheduler, unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  /// The send's result, and the virtual instant it ended at.
  func ended<T: Sendable>(_ task: Task<T, any Error>) async -> (Result<T, any Error>, PaceInstant) {
    let result = await task.result
    return (result, scheduler.now)
  }

  func deadlineError<T>(_ result: Result<T, any Error>) -> PacedRequestsError? {
    guard case .failure(let error) = result else { return nil }
    return error as? PacedRequestsError
  }

  /// 503 at 0 ms, 503 at 100 ms: the next back-off (200 ms) would end at 300 ms, past the
  /// deadline at 250 ms, so the send fails at 100 ms, saying it needed 200 ms and had 150 ms.
  @Test func aBackoffPastTheDeadlineFailsAtOnce() async throws {
    let server = ScriptedServer([status(503), status(503)], clock: scheduler)
    let requests = requests()
    let task = Task {
      try await requests.send(key: "k", idempotent: true, deadline: .milliseconds(250)) { try server.attempt() }
    }
    await scheduler.advance(toScheduled: ms(100))
    let (result, end) = await ended(task)
    #expect(deadlineError(result) == .deadlineExceeded(needed: .milliseconds(200), remaining: .milliseconds(150)))
    #expect(end == ms(100))
    #expect(server.attempts.times == [ms(0), ms(100)])
  }

  /// A `Retry-After` of 2 s, with 1 s left: the send fails at once, at 0 ms.
  @Test func aRetryAfterPastTheDeadlineFailsAtOnce() async throws {
    let server = ScriptedServer([status(429, ("Retry-After", "2"))], clock: scheduler)
    let requests = requests()
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: .seconds(2), remaining: .seconds(1))) {
      try await requests.send(key: "k", idempotent: true, deadline: .seconds(1)) { try server.attempt() }
    }
    #expect(scheduler.now == ms(0))
    #expect(server.attempts.count == 1)
  }

  /// A key held 30 s by an earlier answer's `Retry-After`: a send with 5 s left fails before it
  /// queues, and takes nothing of the key.
  @Test func aKeyHeldPastTheDeadlineFailsAtOnce() async throws {
    let server = ScriptedServer([status(429, ("Retry-After", "30"))], clock: scheduler)
    let requests = requests(attempts: 1)
    #expect(try await requests.send(key: "k", idempotent: true) { try server.attempt() }.1.status == 429)
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: .seconds(30), remaining: .seconds(5))) {
      try await requests.send(key: "k", idempotent: true, deadline: .seconds(5)) { try server.attempt() }
    }
    #expect(server.attempts.count == 1)
    #expect(requests.limiter.waitingCount(for: "k") == 0)
  }

  /// A key never answered lets one request through at a time: a second send, queued behind a
  /// first that takes 1 s, fails at its deadline, 300 ms, and leaves the queue; the first is
  /// answered at 1 s.
  @Test func aSendQueuedPastItsDeadlineFailsAtTheDeadline() async throws {
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(1)])
    let requests = requests()
    let first = Task { try await requests.send(key: "k", idempotent: true) { try await server.attempt() } }
    await scheduler.waitForSleepers(1)
    let second = Task {
      try await requests.send(key: "k", idempotent: true, deadline: .milliseconds(300)) {
        try await server.attempt()
      }
    }
    await scheduler.waitForSuspendedCallers(1)
    await scheduler.advance(toScheduled: ms(300))
    let (result, end) = await ended(second)
    #expect(deadlineError(result) == .deadlineExceeded(needed: nil, remaining: .zero))
    #expect(end == ms(300))
    #expect(requests.limiter.waitingCount(for: "k") == 0)
    await scheduler.advance(toScheduled: ms(1000))
    #expect(try await first.value.1.status == 200)
    #expect(server.startTimes == [ms(0)])
  }

  /// An attempt that takes 10 s is cancelled at its 500 ms timeout and retried after 100 ms of
  /// back-off; the retry answers at once, at 600 ms.
  @Test func anAttemptIsCancelledAtItsTimeoutAndRetried() async throws {
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10), .zero])
    let requests = requests()
    let task = Task {
      try await requests.send(key: "k", idempotent: true, attemptTimeout: .milliseconds(500)) {
        try await server.attempt()
      }
    }
    await server.waitForAttempts(1)
    await scheduler.advance(toScheduled: ms(500))  // the timeout
    await scheduler.advance(toScheduled: ms(600))  // the back-off
    let (body, head) = try await task.value
    #expect(body == 2 && head.status == 200)
    #expect(server.startTimes == [ms(0), ms(600)])
    #expect(server.endTimes == [ms(500), ms(600)])
    #expect(server.cancelled == [1])
    #expect(requests.limiter.inFlightCount(for: "k") == 0)
  }

  /// A request that is not idempotent is not retried after a timeout: the send throws at 500 ms.
  @Test func aTimeoutOfARequestThatIsNotIdempotentThrows() async throws {
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10)])
    let requests = requests()
    let task = Task {
      try await requests.send(key: "k", idempotent: false, attemptTimeout: .milliseconds(500)) {
        try await server.attempt()
      }
    }
    await server.waitForAttempts(1)
    await scheduler.advance(toScheduled: ms(500))
    let (result, end) = await ended(task)
    #expect(deadlineError(result) == .attemptTimedOut(after: .milliseconds(500)))
    #expect(end == ms(500))
    #expect(server.cancelled == [1])
  }

  /// Attempts that never answer, a timeout of 1 s each and a deadline of 1.5 s: the first is cut
  /// at 1000 ms, the second starts after 100 ms of back-off and is cut by the deadline at
  /// 1500 ms, where the send fails. Nothing runs past the deadline.
  @Test func noAttemptOutlivesTheDeadline() async throws {
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10), .seconds(10), .seconds(10)])
    let requests = requests()
    let task = Task {
      try await requests.send(
        key: "k", idempotent: true, deadline: .milliseconds(1500), attemptTimeout: .seconds(1)
      ) { try await server.attempt() }
    }
    await server.waitForAttempts(1)
    await scheduler.advance(toScheduled: ms(1000))  // the first attempt's timeout
    await scheduler.advance(toScheduled: ms(1100))  // the back-off
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(1500))  // the deadline
    let (result, end) = await ended(task)
    #expect(deadlineError(result) == .deadlineExceeded(needed: nil, remaining: .zero))
    #expect(end == ms(1500))
    #expect(server.startTimes == [ms(0), ms(1100)])
    #expect(server.endTimes == [ms(1000), ms(1500)])
    #expect(server.cancelled == [1, 2])
    #expect(requests.limiter.inFlightCount(for: "k") == 0)
  }

  /// A deadline already passed fails before anything is sent.
  @Test func aPassedDeadlineSendsNothing() async throws {
    let server = ScriptedServer([], clock: scheduler)
    let requests = requests()
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)) {
      try await requests.send(key: "k", idempotent: true, deadline: .zero) { try server.attempt() }
    }
    #expect(server.attempts.count == 0)
  }
}
