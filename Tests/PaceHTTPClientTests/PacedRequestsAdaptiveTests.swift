import MetricsTestKit
import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// `PacedRequests(concurrency: .adaptive(…))` on virtual time: each attempt holds a place of its
/// key's limit while it runs, gives it back on every path, and reports what it says of the
/// upstream's load; a wait for a place ends at the send's deadline or its cancellation.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsAdaptiveTests {
  let scheduler = TestScheduler()
  let metrics = TestMetrics()

  /// AIMD that halves on a drop and grows only after 4 good samples: one sample moves it down,
  /// never up.
  static func aimd(_ limit: Int, maximum: Int = 10) -> AdaptiveLimit {
    .aimd(initialLimit: limit, minimumLimit: 1, maximumLimit: maximum, timeout: .seconds(5), backoffRatio: 0.5)
  }

  func requests(_ limit: AdaptiveLimit, hedge: Hedge? = nil) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(maximumAttempts: 1), budget: nil, hedge: hedge, concurrency: .adaptive(limit),
      clock: scheduler, unixTime: { .seconds(1_700_000_000) + scheduler.now.offset }, metricsFactory: metrics)
  }

  func limits(_ requests: PacedRequests) -> UpstreamConcurrencyLimits {
    requests.concurrency!
  }

  func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
    (try? metrics.expectCounter(label, dimensions).totalValue) ?? 0
  }

  /// One answered send, so that the key's server pacing lets every request through (a key never
  /// answered has one request in flight at a time) and the waits below are the concurrency limit's.
  func answerOnce(_ requests: PacedRequests) async throws {
    _ = try await requests.send(key: "k", idempotent: true) { (0, ResponseHead(status: 200, headerFields: [])) }
  }

  /// Starts a send whose attempt runs on `server`, and returns once the attempt has started.
  func holder(_ requests: PacedRequests, _ server: SlowServer) async -> Task<(Int, ResponseHead), any Error> {
    let count = server.startTimes.count
    let task = Task { try await requests.send(key: "k", idempotent: true) { try await server.attempt() } }
    await server.waitForAttempts(count + 1)
    return task
  }

  @Test func noConcurrencyLimitByDefault() {
    #expect(PacedRequests(clock: scheduler).concurrency == nil)
  }

  /// With a send in flight (2 in flight, half the limit of 4, so a sample counts), one more is
  /// answered `status`: a 429 and every 5xx halve the limit to 2; any other answer leaves it.
  @Test(arguments: [(200, 4), (404, 4), (429, 2), (500, 2), (503, 2)])
  func a429AndA5xxAreDrops(status: Int, limitAfter: Int) async throws {
    let requests = requests(Self.aimd(4))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(1)])
    let first = await holder(requests, server)
    #expect(limits(requests).limit(for: "k")?.limit == 4)
    let head = try await requests.send(key: "k", idempotent: true) {
      (0, ResponseHead(status: status, headerFields: []))
    }.1
    #expect(head.status == status)
    #expect(limits(requests).limit(for: "k")?.limit == limitAfter)
    #expect(
      counter("pace_http_client_concurrency_limit_changes_total", [("direction", "decreased")])
        == (limitAfter < 4 ? 1 : 0))
    await scheduler.advance(toScheduled: ms(1_000))
    _ = try await first.value
    // Idle, the key is forgotten.
    #expect(limits(requests).keyCount == 0)
    #expect(limits(requests).limit(for: "k") == nil)
  }

  /// A connection error is a drop (8 halved to 4); an error of the caller's is no sample.
  @Test func aConnectionErrorIsADropAndTheCallersErrorNoSample() async throws {
    let requests = requests(Self.aimd(8))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10)])
    let first = await holder(requests, server)
    func send(_ error: any Error) async {
      await #expect(throws: (any Error).self) {
        try await requests.send(key: "k", idempotent: true, isConnectionError: { $0 is ConnectionLost }) {
          () async throws -> (Int, ResponseHead) in throw error
        }
      }
    }
    await send(BadRequestBody())
    #expect(limits(requests).limit(for: "k")?.limit == 8)
    await send(ConnectionLost())
    #expect(limits(requests).limit(for: "k")?.limit == 4)
    #expect(limits(requests).inFlightCount(for: "k") == 1)
    first.cancel()
    _ = try? await first.value
    #expect(limits(requests).keyCount == 0)
  }

  /// A timeout and a deadline each drop a fresh limit of 4 to 2, with a holder in flight.
  @Test(arguments: ["timeout", "deadline"])
  func aCutAttemptIsADrop(cut: String) async throws {
    let requests = requests(Self.aimd(4))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10), .seconds(1)])
    let first = await holder(requests, server)
    let task = Task {
      try await requests.send(
        key: "k", idempotent: true, deadline: cut == "deadline" ? .milliseconds(300) : nil,
        attemptTimeout: cut == "timeout" ? .milliseconds(300) : nil
      ) { try await server.attempt() }
    }
    await server.waitForAttempts(2)
    await scheduler.advance(toScheduled: ms(300))
    let result = await task.result
    #expect(throws: (any Error).self) { try result.get() }
    #expect(scheduler.now == ms(300))
    #expect(server.cancelled == [2])
    #expect(limits(requests).limit(for: "k")?.limit == 2)
    #expect(limits(requests).inFlightCount(for: "k") == 1)
    first.cancel()
    _ = try? await first.value
    #expect(limits(requests).keyCount == 0)
  }

  /// A limit of 1 held by a send of 1 s: a second send waits for the place, and its deadline at
  /// 300 ms ends the wait with `deadlineExceeded`, leaving the queue; the first still holds its
  /// place, and gives it back at 1 s.
  @Test func theDeadlineCutsTheWaitForAPlace() async throws {
    let requests = requests(Self.aimd(1, maximum: 1))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(1)])
    let first = await holder(requests, server)
    let second = Task {
      try await requests.send(key: "k", idempotent: true, deadline: .milliseconds(300)) {
        try await server.attempt()
      }
    }
    await waitUntil("the second send waits for a place") { limits(requests).waitingCount(for: "k") == 1 }
    #expect(counter("pace_http_client_concurrency_waits_total") == 1)
    await scheduler.advance(toScheduled: ms(300))
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)) {
      _ = try await second.value
    }
    #expect(scheduler.now == ms(300))
    #expect(limits(requests).waitingCount(for: "k") == 0)
    #expect(limits(requests).inFlightCount(for: "k") == 1)
    #expect(server.startTimes == [ms(0)])
    await scheduler.advance(toScheduled: ms(1_000))
    #expect(try await first.value.1.status == 200)
    #expect(limits(requests).keyCount == 0)
  }

  /// A send whose deadline has passed when its turn comes does not wait for a place.
  @Test func aDeadlineThatPassedInThePacingQueueDoesNotWaitForAPlace() async throws {
    let requests = requests(Self.aimd(1, maximum: 1))
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(1)])
    // The key never answered: the second send waits in the pacing queue behind the first, and
    // its deadline passes there.
    let first = await holder(requests, server)
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)) {
      let second = Task {
        try await requests.send(key: "k", idempotent: true, deadline: .milliseconds(300)) {
          try await server.attempt()
        }
      }
      await scheduler.advance(toScheduled: ms(300))
      _ = try await second.value
    }
    #expect(limits(requests).waitingCount(for: "k") == 0)
    await scheduler.advance(toScheduled: ms(1_000))
    _ = try await first.value
    #expect(limits(requests).keyCount == 0)
    #expect(counter("pace_http_client_concurrency_waits_total") == 0)
  }

  /// Cancelled while it waits for a place, a send throws `CancellationError` and leaves the
  /// queue; cancelled while its attempt runs, it gives its place back (no sample): the next send
  /// is let through at once.
  @Test func aCancelledSendGivesItsPlaceBack() async throws {
    let requests = requests(Self.aimd(1, maximum: 1))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(10), .seconds(10), .seconds(1)])
    let first = await holder(requests, server)
    let waiting = Task { try await requests.send(key: "k", idempotent: true) { try await server.attempt() } }
    await waitUntil("the second send waits for a place") { limits(requests).waitingCount(for: "k") == 1 }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
    #expect(limits(requests).waitingCount(for: "k") == 0)
    first.cancel()
    _ = try? await first.value
    #expect(limits(requests).keyCount == 0)
    #expect(server.startTimes == [ms(0)])
    // The place is free: the next send runs at once.
    let third = await holder(requests, server)
    #expect(server.startTimes == [ms(0), ms(0)])
    third.cancel()
    _ = try? await third.value
    #expect(limits(requests).keyCount == 0)
    #expect(limits(requests).limit(for: "k") == nil)
  }

  /// A hedge holds a place of its own: with a limit of 2 it goes at 100 ms and both attempts are
  /// in flight; with a limit of 1 it does not go.
  @Test(arguments: [1, 2])
  func aHedgeHoldsAPlaceOfItsOwn(limit: Int) async throws {
    let requests = requests(Self.aimd(limit, maximum: limit), hedge: .after(.milliseconds(100)))
    try await answerOnce(requests)
    let server = SlowServer(scheduler: scheduler, latencies: [.seconds(1), .seconds(1)])
    let task = await holder(requests, server)
    await scheduler.advance(toScheduled: ms(100))
    if limit == 2 {
      await server.waitForAttempts(2)
      #expect(limits(requests).inFlightCount(for: "k") == 2)
    } else {
      await waitUntil("the hedge is held") { counter("pace_http_client_concurrency_hedges_held_total") == 1 }
      #expect(limits(requests).inFlightCount(for: "k") == 1)
    }
    await scheduler.advance(toScheduled: ms(1_000))
    #expect(try await task.value.0 == 1)
    #expect(server.startTimes == (limit == 2 ? [ms(0), ms(100)] : [ms(0)]))
    #expect(limits(requests).keyCount == 0)
  }
}
