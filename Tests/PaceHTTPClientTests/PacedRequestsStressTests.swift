import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

/// Many tasks at once through one `PacedRequests` and one `ServerPacedLimiter` on real time:
/// sends, records, cancellations and retries race; nothing is lost or counted twice. Run under
/// the thread sanitizer in CI.
@Suite(.timeLimit(.minutes(2))) struct PacedRequestsStressTests {
  /// 400 sends over 8 keys whose server allows everything but answers some 503s: every send
  /// returns, or throws `CancellationError` when its task was cancelled; no request stays in
  /// flight.
  @Test func concurrentSendsAndCancellations() async throws {
    let requests = PacedRequests(
      retry: RetryStrategy(maximumAttempts: 3, baseDelay: .microseconds(50), maximumDelay: .milliseconds(1)),
      budget: RetryBudget(ratio: 0.5, window: .seconds(1), minimumPerSecond: 100))
    let served = LockedState(0)
    let tasks = (0..<400).map { index in
      Task {
        try await requests.send(key: "key \(index % 8)", idempotent: true) {
          let count = served.withLock { count in
            count += 1
            return count
          }
          let fields = [(name: "RateLimit", value: #""a";r=1000;t=1"#)]
          return (count, ResponseHead(status: count % 7 == 0 ? 503 : 200, headerFields: fields))
        }
      }
    }
    for (index, task) in tasks.enumerated() where index % 5 == 0 { task.cancel() }
    for task in tasks {
      switch await task.result {
      case .success(let (_, head)): #expect(head.status == 200 || head.status == 503)
      case .failure(let error): #expect(error is CancellationError)
      }
    }
    for key in 0..<8 {
      #expect(requests.limiter.inFlightCount(for: "key \(key)") == 0)
      #expect(requests.limiter.waitingCount(for: "key \(key)") == 0)
    }
  }

  /// Acquires, records and cancellations on one limiter from many tasks, with a small quota: the
  /// limiter's counts come back to zero.
  @Test func concurrentAcquiresRecordsAndCancellations() async throws {
    let limiter = ServerPacedLimiter<Int>(maximumWait: .seconds(5))
    let tasks = (0..<300).map { index in
      Task {
        try await limiter.acquire(index % 4)
        limiter.record(
          ServerQuota(quota: 50, window: .milliseconds(20), remaining: 10, resetsIn: .milliseconds(5)), for: index % 4)
      }
    }
    for (index, task) in tasks.enumerated() where index % 3 == 0 { task.cancel() }
    for task in tasks {
      if case .failure(let error) = await task.result {
        #expect(error is CancellationError || error is ServerPacingError)
      }
    }
    for key in 0..<4 {
      #expect(limiter.inFlightCount(for: key) == 0)
      #expect(limiter.waitingCount(for: key) == 0)
    }
  }

  /// 300 sends over 6 keys through every part of the send loop at once, on real time: deadlines
  /// and attempt timeouts, hedges, a breaker, a path that goes down and up, a credential that
  /// expires; attempts that answer 200, 500 or 401, throw a connection error, or take too long;
  /// a fifth of the tasks cancelled. Every send ends with its answer or an error of the loop's,
  /// and nothing stays in flight, waiting or held (run under the thread sanitizer in CI).
  @Test func concurrentSendsThroughEveryPartOfTheLoop() async throws {
    struct ConnectionLost: Error {}
    let connectivity = ManualConnectivity()
    let requests = PacedRequests(
      retry: RetryStrategy(maximumAttempts: 3, baseDelay: .microseconds(50), maximumDelay: .milliseconds(1)),
      budget: RetryBudget(ratio: 0.5, window: .seconds(1), minimumPerSecond: 100),
      hedge: .after(.milliseconds(2)),
      breaker: KeyedCircuitBreaker(minimumCalls: 20, window: .seconds(1), coolDown: .milliseconds(5)),
      connectivity: connectivity)
    let tokens = CredentialRefresher<Int>(initial: 0) { old in
      // real-time: a refresh that takes a little while, so that 401s meet it in flight
      try await Task.sleep(for: .microseconds(200))
      return (old ?? 0) + 1
    }
    let attempts = LockedState(0)
    let flapping = Task {
      for round in 0..<40 {
        connectivity.setReachable(round % 4 != 3)
        // real-time: the path goes down for a moment now and then while the sends run
        try? await Task.sleep(for: .milliseconds(1))
      }
      connectivity.setReachable(true)
    }
    let tasks = (0..<300).map { index in
      Task {
        try await requests.send(
          key: "key \(index % 6)", idempotent: index % 3 != 0, credentials: tokens, deadline: .milliseconds(200),
          attemptTimeout: .milliseconds(20), isConnectionError: { $0 is ConnectionLost }
        ) { token in
          let count = attempts.withLock { count in
            count += 1
            return count
          }
          switch count % 11 {
          case 0: throw ConnectionLost()
          case 1:
            // real-time: an attempt slower than its timeout, and than the hedge's delay
            try await Task.sleep(for: .milliseconds(30))
          case 2: return (token, ResponseHead(status: 500, headerFields: []))
          case 3 where token % 2 == 0: return (token, ResponseHead(status: 401, headerFields: []))
          default: break
          }
          return (token, ResponseHead(status: 200, headerFields: [(name: "RateLimit", value: #""a";r=1000;t=1"#)]))
        }
      }
    }
    for (index, task) in tasks.enumerated() where index % 5 == 0 { task.cancel() }
    for task in tasks {
      switch await task.result {
      case .success(let (_, head)): #expect([200, 401, 500].contains(head.status))
      case .failure(let error):
        #expect(
          error is CancellationError || error is PacedRequestsError || error is CircuitBreakerError
            || error is ConnectionLost || error is ServerPacingError || error is AuthenticationError,
          "\(error)")
      }
    }
    await flapping.value
    for key in 0..<6 {
      #expect(requests.limiter.inFlightCount(for: "key \(key)") == 0)
      #expect(requests.limiter.waitingCount(for: "key \(key)") == 0)
    }
    #expect(connectivity.waitingCount == 0)
  }

  /// A budget taken from many tasks never allows more than its allowance.
  @Test func concurrentBudget() async {
    let budget = RetryBudget(ratio: 0.1, window: .seconds(60), minimumPerSecond: 0)
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<1_000 { group.addTask { budget.recordRequest() } }
    }
    let taken = await withTaskGroup(of: Bool.self) { group in
      for _ in 0..<500 { group.addTask { budget.tryWithdraw() } }
      return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
    #expect(taken == 100)
  }
}
